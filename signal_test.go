package asyncsteps

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A Break that its loop catches costs the flow no allocation of its own:
// its error and its AsyncStack are the ones the loop recorded for the
// flows before. The flow allocates what the same flow ending its
// loop by the count allocates, plus the label's variadic slice that the
// call Break("retry") makes through the interface.
func TestCaughtBreakAllocatesNoErrorNorStack(t *testing.T) {
	tt := NewTestTool()
	set := func(as AsyncSteps, _ ...any) { as.State().Set("x", 1) }
	leave := func(as AsyncSteps, _ ...any) { as.Break("retry") }
	succeed := func(as AsyncSteps, _ ...any) { as.Success() }
	loopBody := func(as AsyncSteps) { as.Add(leave) }
	repeatBody := func(as AsyncSteps, _ int) { as.Add(succeed) }
	flow := func(loop func(r *Root)) func() {
		return func() {
			r := New(WithTool(tt))
			r.Add(set)
			loop(r)
			r.Execute()
			tt.Run()
		}
	}
	broken := testing.AllocsPerRun(200, flow(func(r *Root) { r.Loop(loopBody, "retry") }))
	counted := testing.AllocsPerRun(200, flow(func(r *Root) { r.Repeat(1, repeatBody, "retry") }))
	if broken != counted+1 {
		t.Errorf("a flow whose loop ends with Break allocates %v objects, one ending its Repeat %v: want %v", broken, counted, counted+1)
	}
}

// Flows of one loop that fail at the same place share one AsyncStack, and
// each still sees its own error's variables.
func TestFlowsOfALoopShareTheirAsyncStack(t *testing.T) {
	tt := NewTestTool()
	type seen struct {
		stack []string
		info  string
		exc   error
	}
	var got []seen
	breakingFlows(tt, 2, func(as AsyncSteps, _ ...any) {
		st := as.State()
		got = append(got, seen{st.AsyncStack, st.ErrorInfo, st.LastException})
	})
	if len(got) != 2 {
		t.Fatalf("%d flows went on after their loop, want 2", len(got))
	}
	for i, s := range got {
		e, ok := s.exc.(*Error)
		if !ok || *e != (Error{Code: LoopBreak, Info: "retry"}) || s.info != "retry" {
			t.Errorf("flow %d: LastException %#v, ErrorInfo %q; want the Break(\"retry\")", i, s.exc, s.info)
		}
		if len(s.stack) != 2 || !strings.Contains(s.stack[0], "breakingFlows") || cap(s.stack) != len(s.stack) {
			t.Errorf("flow %d: AsyncStack %q (cap %d), want the loop's body and its step, full", i, s.stack, cap(s.stack))
		}
	}
	if &got[0].stack[0] != &got[1].stack[0] {
		t.Errorf("the flows recorded two AsyncStacks %q and %q, want one shared", got[0].stack, got[1].stack)
	}
	if got[0].exc != got[1].exc {
		t.Errorf("the flows' Breaks made two errors, want one shared")
	}
}

// A shared error of a Break that a user changed is not given to the next
// flow: that one gets an error of its own Break.
func TestChangedSignalErrorIsNotShared(t *testing.T) {
	tt := NewTestTool()
	var excs []Error
	breakingFlows(tt, 2, func(as AsyncSteps, _ ...any) {
		e := as.State().LastException.(*Error)
		excs = append(excs, *e)
		e.Info = "changed"
	})
	want := []Error{{Code: LoopBreak, Info: "retry"}, {Code: LoopBreak, Info: "retry"}}
	if !slices.Equal(excs, want) {
		t.Errorf("LastException after each flow's loop = %+v, want %+v", excs, want)
	}
}

// An AsyncStack that an error handler's rethrow shortened leaves no room
// past its end: an append to it cannot write into the stack that the next
// flow failing at the deeper place shares.
func TestAppendToAShortenedAsyncStackLeavesOtherFlows(t *testing.T) {
	tt := NewTestTool()
	var deep, shortened [][]string
	inner := func(as AsyncSteps, _ ...any) { as.Error("E") }
	middle := func(as AsyncSteps, _ ...any) { as.Add(inner) }
	rethrow := func(as AsyncSteps, _ string) {
		deep = append(deep, slices.Clone(as.State().AsyncStack))
		as.Error("F")
	}
	outer := func(as AsyncSteps, _ ...any) { as.Add(middle, rethrow) }
	keep := func(as AsyncSteps, _ string) {
		st := as.State()
		shortened = append(shortened, slices.Clone(st.AsyncStack))
		_ = append(st.AsyncStack, "appended")
		as.Success()
	}
	for range 2 {
		r := New(WithTool(tt))
		r.Add(outer, keep)
		r.Execute()
		tt.Run()
	}
	if len(deep) != 2 || len(shortened) != 2 {
		t.Fatalf("the handlers ran %d and %d times, want 2 each", len(deep), len(shortened))
	}
	for i := range 2 {
		if len(deep[i]) != 3 || slices.Contains(deep[i], "appended") {
			t.Errorf("flow %d: AsyncStack at E %q, want outer, middle, inner", i, deep[i])
		}
		if len(shortened[i]) != 2 || !slices.Equal(shortened[i], deep[i][:2]) {
			t.Errorf("flow %d: AsyncStack at F %q, want outer, middle", i, shortened[i])
		}
	}
}

// The errors of a flow's Break and Continue hold their own code and label,
// also when the flow raises several: one kept from an earlier signal keeps
// its values.
func TestSignalErrorsKeepTheirValues(t *testing.T) {
	tt := NewTestTool()
	var excs []error
	n := 0
	step := func(as AsyncSteps, _ ...any) {
		if n++; n > 1 {
			excs = append(excs, as.State().LastException)
		}
		if n < 3 {
			as.Continue("again")
		}
		as.Break("again")
	}
	body := func(as AsyncSteps) { as.Add(step) }
	note := func(as AsyncSteps, _ ...any) { excs = append(excs, as.State().LastException) }
	r := New(WithTool(tt))
	r.Loop(body, "again")
	r.Add(note)
	r.Execute()
	tt.Run()
	cont, brk := Error{Code: LoopCont, Info: "again"}, Error{Code: LoopBreak, Info: "again"}
	want := []Error{cont, cont, brk}
	if len(excs) != len(want) {
		t.Fatalf("%d notes, want %d", len(excs), len(want))
	}
	for i, exc := range excs {
		if e, ok := exc.(*Error); !ok || *e != want[i] {
			t.Errorf("LastException %d = %#v, want %+v", i, exc, want[i])
		}
	}
}

// A Break that finds no loop leaves the loop in the error Run returns, as
// its Cause: each caller gets a Cause of its own, not the Error the loop
// keeps for the Breaks of its flows, which a caller that changes its error
// (on its own goroutine) would change under the loop's feet.
func TestBreakOutsideALoopGivesRunAnErrorOfItsOwn(t *testing.T) {
	l := newTestLoop(t)
	var causes []*Error
	for range 2 {
		r := New(WithTool(l))
		r.Add(func(as AsyncSteps, _ ...any) { as.Break("x") })
		_, err := r.Run(context.Background())
		e, ok := err.(*Error)
		if !ok || e.Code != InternalError {
			t.Fatalf("Run: %v, want InternalError", err)
		}
		cause, ok := e.Cause.(*Error)
		if !ok || cause.Code != LoopBreak || cause.Info != "x" {
			t.Fatalf("Cause %#v, want LoopBreak x", e.Cause)
		}
		causes = append(causes, cause)
	}
	if causes[0] == causes[1] {
		t.Error("two Runs got the same *Error as Cause")
	}
}

// breakingFlows runs n flows on tt, one after the other, each a loop
// labelled "retry" whose step calls Break("retry"), then after.
func breakingFlows(tt *TestTool, n int, after StepFunc) {
	leave := func(as AsyncSteps, _ ...any) { as.Break("retry") }
	body := func(as AsyncSteps) { as.Add(leave) }
	for range n {
		r := New(WithTool(tt))
		r.Loop(body, "retry")
		r.Add(after)
		r.Execute()
		tt.Run()
	}
}
