package asyncsteps_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Compile-time check: *Root is usable as AsyncSteps.
var _ asyncsteps.AsyncSteps = (*asyncsteps.Root)(nil)

// docs/DESIGN.md#execute-only-schedules: Execute and Promise only schedule; nothing runs until the
// test drives the tool.
func TestExecuteOnlySchedules(t *testing.T) {
	for _, viaPromise := range []bool{false, true} {
		name := "Execute"
		if viaPromise {
			name = "Promise"
		}
		t.Run(name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(tr.step("1"))
			r.Add(tr.step("2"))

			var ch <-chan asyncsteps.Result
			if viaPromise {
				ch = r.Promise()
				noResult(t, ch)
			} else {
				r.Execute()
			}
			wantTrace(t, &tr, "")
			if !tt.HasEvents() {
				t.Fatal("HasEvents() = false after starting the flow")
			}
			drive(t, tt)

			wantTrace(t, &tr, "1,2")
			if viaPromise {
				wantSuccess(t, result(t, ch))
			}
		})
	}
}

// docs/DESIGN.md#execute-only-schedules: executing a new instance from inside a step runs nothing
// before the step returns.
func TestExecuteInsideStepOnlySchedules(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		n := as.NewInstance()
		n.Add(tr.step("instance"))
		n.Execute()
		tr.add("executed")
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,executed,instance")
	wantSuccess(t, res)
}

// API: Execute panics when the flow is already running, whether it is only
// scheduled or waiting in a step.
func TestExecuteOnRunningFlowPanics(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("wait")
		as.SetCancel(tr.cancel("cancel"))
	})

	r.Execute()
	expectPanic(t, "Execute on a scheduled flow", r.Execute)
	drive(t, tt)
	expectPanic(t, "Execute on a waiting flow", r.Execute)
	r.Cancel()
	drive(t, tt)

	wantTrace(t, &tr, "wait,cancel")
}

// API: a root whose flow has ended, however it ended, may be given new steps
// and executed again; only the new steps run.
func TestRootRunsAgainAfterFlowEnded(t *testing.T) {
	cases := []struct {
		name  string
		first asyncsteps.StepFunc
		end   func(r *asyncsteps.Root, tt *asyncsteps.TestTool)
	}{
		{"success", func(as asyncsteps.AsyncSteps, args ...any) { as.Success("x") },
			nil},
		{"error", func(as asyncsteps.AsyncSteps, args ...any) { as.Error("E") },
			nil},
		{"cancel", func(as asyncsteps.AsyncSteps, args ...any) { as.WaitExternal() },
			func(r *asyncsteps.Root, tt *asyncsteps.TestTool) { r.Cancel() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("first")
				c.first(as, args...)
			})
			ch := r.Promise()
			drive(t, tt)
			if c.end != nil {
				c.end(r, tt)
				drive(t, tt)
			}
			result(t, ch)

			r.Add(tr.stepArgs("second"))
			res := run(t, r, tt)

			wantTrace(t, &tr, "first,second[]")
			wantSuccess(t, res)
		})
	}
}

// docs/DESIGN.md#new-instances: a Root run again keeps its State, the
// last error's ErrorInfo and LastException included, and its first run's
// steps that an error kept from running are gone.
func TestRootRunAgainKeepsItsState(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.State().Set("v", 1)
		as.Error("E1", "first run")
	})
	r.Add(tr.step("unreached"))
	wantError(t, run(t, r, tt).Err, "E1", "first run")

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		st := as.State()
		tr.addf("v=%v info=%q last=%v", st.Get("v"), st.ErrorInfo, st.LastException)
	})
	wantSuccess(t, run(t, r, tt))

	wantTrace(t, &tr, `v=1 info="first run" last=E1: first run`)
}

// Spec 1.5 and 2.2.1: Clone copies the steps (with their handlers and
// parallels) and the state; the clone is not started, runs on its own
// state, and the model stays intact.
func TestCloneCopiesStepsAndStateNotStarted(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.State().Set("v", 1)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("1 v=%v", as.State().Get("v"))
		as.State().Set("v", as.State().Get("v").(int)+10)
		as.Error("E")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("1e:%s", code)
		as.Success("a")
	})
	r.Parallel().Add(tr.step("p1")).Add(tr.step("p2"))
	r.Add(tr.stepArgs("2"))

	c := r.Clone()
	if tt.HasEvents() {
		t.Fatal("Clone started something")
	}
	wantTrace(t, &tr, "")
	if c.Tool() != asyncsteps.Tool(tt) {
		t.Error("the clone runs on another tool")
	}

	wantSuccess(t, run(t, c, tt))
	wantTrace(t, &tr, "1 v=1,1e:E,p1,p2,2[]")
	if got := c.State().Get("v"); got != 11 {
		t.Errorf("clone state v = %v, want 11", got)
	}
	if got := r.State().Get("v"); got != 1 {
		t.Errorf("model state v = %v after running the clone, want 1", got)
	}

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "1 v=1,1e:E,p1,p2,2[],1 v=1,1e:E,p1,p2,2[]")
}

// Spec 2.2.1: CopyFrom copies the model's steps at the point of the call and
// only the state variables not already present; the model is unchanged.
func TestCopyFromCopiesStepsAndMissingStateVariables(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	model.State().Set("a", "model a")
	model.State().Set("b", "model b")
	model.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("m1")
		as.Error("M")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("m1e:%s", code)
		as.Success("m")
	})
	model.Add(tr.stepArgs("m2"))
	model.Repeat(2, func(as asyncsteps.AsyncSteps, i int) { tr.addf("m3.%d", i) })

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.State().Set("a", "own a")
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.Add(tr.step("x"))
		as.CopyFrom(model).Add(tr.stepArgs("y"))
	})
	r.Add(tr.step("2"))

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "1,x,m1,m1e:M,m2[m],m3.0,m3.1,y[],2")
	if a, b := r.State().Get("a"), r.State().Get("b"); a != "own a" || b != "model b" {
		t.Errorf("state a = %v, b = %v; want own a, model b", a, b)
	}

	wantSuccess(t, run(t, model, tt))
	wantTrace(t, &tr, "1,x,m1,m1e:M,m2[m],m3.0,m3.1,y[],2,m1,m1e:M,m2[m],m3.0,m3.1")
}

// Spec 1.5: CopyFrom on a root adds the model's steps at root level.
func TestCopyFromOnRoot(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	model := r.NewInstance()
	model.Add(tr.step("m1")).Add(tr.step("m2"))
	model.State().Set("k", "model")

	r.Add(tr.step("1"))
	r.CopyFrom(model).Add(tr.step("2"))

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "1,m1,m2,2")
	if got := r.State().Get("k"); got != "model" {
		t.Errorf("state k = %v, want model", got)
	}
}

// docs/DESIGN.md#new-instances: NewInstance returns a new, empty root on the same tool, from a
// root and from inside a step.
func TestNewInstanceIsEmptyOnSameTool(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.State().Set("x", 1)
	var fromStep *asyncsteps.Root
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		fromStep = as.NewInstance()
	})
	fromRoot := r.NewInstance()

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "step")

	for name, n := range map[string]*asyncsteps.Root{"from root": fromRoot, "from step": fromStep} {
		if n == nil {
			t.Errorf("%s: NewInstance returned nil", name)
			continue
		}
		if n == r {
			t.Errorf("%s: NewInstance returned the same root", name)
		}
		if n.State().Exists("x") {
			t.Errorf("%s: the new instance has the state of its origin", name)
		}
		if n.Tool() != asyncsteps.Tool(tt) {
			t.Errorf("%s: the new instance runs on another tool", name)
		}
		wantSuccess(t, run(t, n, tt))
		wantTrace(t, &tr, "step")
	}
}

// Spec 2.2.1: the get/set/exists/unset accessors of the state.
func TestStateVariables(t *testing.T) {
	r, _ := newFlow()
	st := r.State()
	if st.Get("k") != nil || st.Exists("k") {
		t.Fatalf("new state has k: Get = %v, Exists = %v", st.Get("k"), st.Exists("k"))
	}
	st.Set("k", 42)
	if st.Get("k") != 42 || !st.Exists("k") {
		t.Errorf("after Set: Get = %v, Exists = %v", st.Get("k"), st.Exists("k"))
	}
	st.Set("k", "replaced")
	if st.Get("k") != "replaced" {
		t.Errorf("after second Set: Get = %v", st.Get("k"))
	}
	st.Unset("k")
	if st.Get("k") != nil || st.Exists("k") {
		t.Errorf("after Unset: Get = %v, Exists = %v", st.Get("k"), st.Exists("k"))
	}
	st.Unset("never set")
	if st != r.State() {
		t.Error("State() returns a different State on each call")
	}
}

// API: the State a step sees is the root's State.
func TestStepsShareRootState(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.State().Set("in", "from root")
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("sees %v", as.State().Get("in"))
		as.State().Set("out", "from step")
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "sees from root")
	if got := r.State().Get("out"); got != "from step" {
		t.Errorf("root state out = %v", got)
	}
}

func addLogin(as asyncsteps.AsyncSteps, tr *tracer, user string) {
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("login " + user)
		as.Success(user)
	})
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("welcome %v", args...)
	})
}

// API: *Root implements AsyncSteps, so a helper works on a root and inside
// a step alike.
func TestRootUsableAsAsyncStepsInHelpers(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	addLogin(r, &tr, "root")
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		addLogin(as, &tr, "sub")
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "login root,welcome root,step,login sub,welcome sub")
	if !r.IsValid() {
		t.Error("IsValid() = false on a root")
	}
	if r.Tool() != asyncsteps.Tool(tt) {
		t.Error("Tool() is not the tool given with WithTool")
	}
}

// driveUntil drives tt on the calling goroutine until done is closed.
func driveUntil(t *testing.T, tt *asyncsteps.TestTool, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return
		default:
		}
		if !tt.NextEvent() {
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not return")
		}
	}
}

// API: Run executes the flow and returns its result once it has stopped.
func TestRunReturnsResult(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("done", 1) })

	var args []any
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		args, err = r.Run(context.Background())
	}()
	driveUntil(t, tt, done)

	if err != nil {
		t.Errorf("Run error = %v", err)
	}
	wantArgs(t, "Run args", args, "done", 1)
}

// API: when Run's context ends, the flow is cancelled (cancel handlers run,
// error handlers do not) and the error matches ctx.Err().
func TestRunCancelsFlowWhenContextEnds(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	waiting := make(chan struct{})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("wait")
		as.SetCancel(tr.cancel("cancel"))
		close(waiting)
	}, tr.handler("e"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err = r.Run(ctx)
	}()
	go func() {
		<-waiting
		cancel()
	}()
	driveUntil(t, tt, done)

	wantTrace(t, &tr, "wait,cancel")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error = %v, want one matching context.Canceled", err)
	}
}

// Spec 1.5: Clone and CopyFrom copy the model's steps as they are at the
// call: branches added afterwards to a Parallel of the model, through the
// value Parallel returned, are the model's only.
func TestCopiesKeepTheirParallelsBranches(t *testing.T) {
	var tr tracer
	model, tt := newFlow()
	p := model.Parallel()
	p.Add(tr.step("A"))
	clone := model.Clone()
	onRoot := model.NewInstance()
	onRoot.CopyFrom(model)
	inStep := model.NewInstance()
	inStep.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
	p.Add(tr.step("B")) // after every copy

	for _, r := range []*asyncsteps.Root{clone, onRoot, inStep} {
		wantSuccess(t, run(t, r, tt))
	}
	wantSuccess(t, run(t, model, tt))
	wantTrace(t, &tr, "A,A,A,B,A,B") // clone, onRoot; inStep copied when its step ran, after B; model
}

// CopyFrom with a nil model is a misuse, reported as an InternalError: on a
// Root when it runs, inside a step at once. A misuse recorded on a model
// is copied by Clone with its steps.
func TestCopyFromNilModelIsMisuse(t *testing.T) {
	r, tt := newFlow()
	r.CopyFrom(nil)
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "CopyFrom: nil model")

	r, tt = newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(nil) })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "CopyFrom: nil model")

	r, tt = newFlow()
	r.CopyFrom(nil)
	wantError(t, run(t, r.Clone(), tt).Err, asyncsteps.InternalError, "CopyFrom: nil model")
}

// ExecuteWith reports the error that ends this execution to its own
// function, not to the Root's, and only for this execution; a nil function
// is the Root's own. On a Loop closed before the flow begins, the closed
// loop's error goes to it too.
func TestExecuteWithReportsToItsOwnFunction(t *testing.T) {
	var reports []string
	r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		reports = append(reports, "root's "+err.Code)
	}))
	failWith := func(code string) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(code) })
	}
	failWith("First")
	r.ExecuteWith(func(err *asyncsteps.Error) { reports = append(reports, "first's "+err.Code) })
	tt.Run()
	failWith("Second")
	r.Execute()
	tt.Run()
	failWith("Third")
	r.ExecuteWith(nil)
	tt.Run()
	if got, want := strings.Join(reports, ", "), "first's First, root's Second, root's Third"; got != want {
		t.Errorf("reports %q, want %q", got, want)
	}

	loop := asyncsteps.NewLoop()
	loop.Close()
	closed := make(chan *asyncsteps.Error, 1)
	late := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {
		t.Error("the Root's own function got the closed loop's error")
	}))
	late.ExecuteWith(func(err *asyncsteps.Error) { closed <- err })
	select {
	case err := <-closed:
		wantError(t, err, asyncsteps.InternalError, "the flow's loop is closed")
	case <-time.After(10 * time.Second):
		t.Fatal("ExecuteWith's function got no error on a closed loop")
	}
}

// An execution takes the steps queued at level 0 as it starts them, and
// drops those left when it ends early: run again, the Root runs only the
// steps added since, and a clone made from the flow's own callback gets
// the steps not started yet.
func TestAnExecutionTakesTheRootsSteps(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	var clone *asyncsteps.Root
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A")
		clone = r.Clone()
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("B")
		as.Error("X")
	})
	r.Add(tr.step("C"))
	wantError(t, run(t, r, tt).Err, "X", "")
	r.Add(tr.step("D"))
	wantSuccess(t, run(t, r, tt))
	wantError(t, run(t, clone, tt).Err, "X", "")
	wantSuccess(t, run(t, r.Clone(), tt))
	wantTrace(t, &tr, "A,B,D,B")
}

// User variables are apart from the State's fields: a variable named like
// a field is a variable, the empty name is a name, and nil is a value.
func TestStateVariablesNamedLikeItsFields(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		s := as.State()
		s.Set("ErrorInfo", "variable")
		s.Set("LastException", 1)
		s.Set("", nil)
		as.Error("E", "field")
	}, func(as asyncsteps.AsyncSteps, code string) {
		s := as.State()
		as.Success(s.Get("ErrorInfo"), s.Get("LastException"), s.Exists(""), s.Get(""), s.ErrorInfo, code)
	})
	wantSuccess(t, run(t, r, tt), "variable", 1, true, nil, "field", "E")
}

// Clone copies the model's variables shallowly: a map in the model's State
// is the map each clone, and a clone of a clone, sees and changes.
func TestClonesShareTheValuesOfTheModelsVariables(t *testing.T) {
	model, tt := newFlow()
	counts := map[string]int{}
	model.State().Set("counts", counts)
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.State().Get("counts").(map[string]int)["runs"]++
	})
	c1 := model.Clone()
	for _, c := range []*asyncsteps.Root{c1, model.Clone(), c1.Clone()} {
		wantSuccess(t, run(t, c, tt))
	}
	if counts["runs"] != 3 {
		t.Errorf("the model's map counts %d runs, want 3", counts["runs"])
	}
}
