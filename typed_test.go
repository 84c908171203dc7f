package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

type steps = asyncsteps.AsyncSteps

// after returns a Gather branch that succeeds with v once d has passed on
// the flow's tool, noting its completion in trace.
func after(trace *[]string, d time.Duration, v string) func(as steps) {
	return func(as steps) {
		as.SetTimeout(time.Hour)
		as.Tool().Deferred(d, func() {
			*trace = append(*trace, "done "+v)
			as.Success(v)
		})
	}
}

func TestGatherKeepsBranchOrderNotCompletionOrder(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	var trace []string
	asyncsteps.Gather(r, func(as steps, vs []string) {
		trace = append(trace, "then "+strings.Join(vs, ","))
	}, after(&trace, 30*time.Millisecond, "a"), after(&trace, 10*time.Millisecond, "b"), after(&trace, 20*time.Millisecond, "c"))
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "done b|done c|done a|then a,b,c"
	if got := strings.Join(trace, "|"); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// A Root that runs again, and its Clone, collect into a slice of their own:
// the results of one execution never show in another.
func TestGatherCollectsPerExecution(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	n := 0
	var got [][]int
	asyncsteps.Gather(model, func(as steps, vs []int) { got = append(got, vs) },
		func(as steps) { n++; as.Success(n) },
		func(as steps) { n++; as.Success(n) })
	for range 2 {
		if _, err := model.Clone().Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[[1 2] [3 4]]" {
		t.Errorf("results %v, want [[1 2] [3 4]]", got)
	}
	got[0][0] = 99 // the first execution's slice is not the second's
	if got[1][0] != 3 {
		t.Errorf("the executions share one slice: %v", got)
	}
}

func TestGatherErrors(t *testing.T) {
	cases := []struct {
		name     string
		branches []func(as steps)
		want     string
	}{
		{"wrong type", []func(as steps){func(as steps) { as.Success(1) }, func(as steps) { as.Success("x") }},
			"InternalError: Gather: the result of branch 1 is string, want int"},
		{"nil branch", []func(as steps){func(as steps) { as.Success(1) }, nil},
			"InternalError: Gather: nil branch 1"},
		{"branch error", []func(as steps){func(as steps) { as.Error(asyncsteps.CommError, "down") }},
			"CommError: down"},
		{"panic", []func(as steps){func(as steps) { panic("boom") }},
			"InternalError: boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			asyncsteps.Gather(r, func(as steps, vs []int) { t.Errorf("then ran with %v", vs) }, c.branches...)
			_, err := r.Run(context.Background())
			if err == nil || err.Error() != c.want {
				t.Errorf("err %v, want %s", err, c.want)
			}
		})
	}
}

func TestGatherWithoutBranchesThenGetsEmptySlice(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.Gather(r, func(as steps, vs []string) { as.Success(fmt.Sprintf("%d %v", len(vs), vs == nil)) })
	s, err := asyncsteps.Run[string](context.Background(), r)
	if s != "0 false" || err != nil {
		t.Errorf("got %q, %v; want \"0 false\", nil", s, err)
	}
}

// On the value Parallel returns, AwaitThen adds one branch: fn's step and
// then's step stay together in it.
func TestAwaitThenIsOneParallelBranch(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	results := make(chan string, 2)
	r.Add(func(as steps, _ ...any) {
		p := as.Parallel()
		for _, s := range []string{"x", "y"} {
			asyncsteps.AwaitThen(p, func(context.Context) (string, error) { return s, nil },
				func(as steps, v string) { results <- v })
		}
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(results)
	var got []string
	for v := range results {
		got = append(got, v)
	}
	if len(got) != 2 || got[0]+got[1] != "xy" && got[0]+got[1] != "yx" {
		t.Errorf("continuations got %q, want x and y", got)
	}
}

// onerror guards fn's step only: an error raised by then goes to the
// handlers around the added step.
func TestAwaitThenHandlerDoesNotCatchThen(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	var trace []string
	r.Add(func(as steps, _ ...any) {
		asyncsteps.AwaitThen(as, func(context.Context) (int, error) { return 1, nil },
			func(as steps, v int) { trace = append(trace, fmt.Sprint("then ", v)); as.Error("Bad") },
			func(as steps, code string) { trace = append(trace, "inner "+code) })
	}, func(as steps, code string) {
		trace = append(trace, "outer "+code)
		as.Success()
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trace, "|"); got != "then 1|outer Bad" {
		t.Errorf("trace %q, want %q", got, "then 1|outer Bad")
	}
}

// A timeout around the step ends fn's context with DeadlineExceeded (the
// context carries the step's deadline); neither onerror nor then runs (the
// sub-steps of a step that times out are cancelled, not failed).
func TestAwaitThenTimeoutCancelsFn(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	var trace []string
	cancelled := make(chan error, 1)
	r.Add(func(as steps, _ ...any) {
		as.SetTimeout(time.Second)
		asyncsteps.AwaitThen(as, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			cancelled <- ctx.Err()
			return 0, ctx.Err()
		}, func(as steps, v int) { trace = append(trace, "then") },
			func(as steps, code string) { trace = append(trace, "onerror "+code) })
	})
	_, err := r.Run(context.Background())
	trace = append(trace, fmt.Sprint(err), fmt.Sprint(<-cancelled))
	want := "Timeout|context deadline exceeded"
	if got := strings.Join(trace, "|"); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// A recovery with a value of another type than fn's is an InternalError.
func TestAwaitThenFallbackOfWrongType(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.AwaitThen(r, func(context.Context) (int, error) { return 0, errors.New("no") },
		func(as steps, v int) { t.Errorf("then ran with %d", v) },
		func(as steps, code string) { as.Success("not an int") })
	_, err := r.Run(context.Background())
	want := "InternalError: AwaitThen: the step's result is string, want int"
	if err == nil || err.Error() != want {
		t.Errorf("err %v, want %s", err, want)
	}
}

// A nil function given to AwaitThen or Then, or a nil branch given to
// Gather or Settle, is a misuse recorded
// up front, as one given to Await or Retry: in a step, the callback is
// aborted and its step fails at once; on a Root, the next execution fails
// before any step runs. The info names the helper and the argument.
func TestTypedHelpersRejectNilFunctions(t *testing.T) {
	gatherThen := func(steps, []int) {}
	settleThen := func(steps, []asyncsteps.Settled[int]) {}
	cases := []struct {
		name string
		call func(as steps)
		info string
	}{
		{"AwaitThen", func(as steps) { asyncsteps.AwaitThen[int](as, nil, nil) }, "AwaitThen: nil function"},
		{"Then", func(as steps) { asyncsteps.Then[int](as, nil) }, "Then: nil function"},
		{"Gather branch", func(as steps) {
			asyncsteps.Gather(as, gatherThen, func(steps) {}, nil)
		}, "Gather: nil branch 1"},
		{"Settle branch", func(as steps) {
			asyncsteps.Settle(as, settleThen, func(steps) {}, nil)
		}, "Settle: nil branch 1"},
	}
	for _, c := range cases {
		checkMisuse(t, c.name, c.call, c.info)
		checkMisuse(t, c.name+" through a decorator", func(as steps) { c.call(decoratedSteps{as}) }, c.info)
		t.Run(c.name+" on a decorated Parallel", func(t *testing.T) {
			r, tt := newFlow()
			c.call(decoratedSteps{r.Parallel()})
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
		})
	}
}

// A nil then passes the result on, as AwaitThen's does: the added step
// succeeds with Gather's slice, Settle's outcomes, First's value or
// Quorum's slice as its one success arg, which the flow's result (Run[T])
// or a Then[T] after it reads. Without branches, Gather's and Settle's is
// an empty slice, not nil.
func TestFanOutNilThenPassesTheResultOn(t *testing.T) {
	type fanOut func(as steps, tr *tracer, tt *asyncsteps.TestTool)
	abcd := func(tr *tracer, tt *asyncsteps.TestTool) []func(as steps) {
		return []func(as steps){succeedAfter(tr, tt, 30*time.Millisecond, "a"),
			failAfter(tr, tt, 5*time.Millisecond, "b", asyncsteps.CommError),
			succeedAfter(tr, tt, 10*time.Millisecond, "c"), succeedAfter(tr, tt, 20*time.Millisecond, "d")}
	}
	strs := func(as steps) { asyncsteps.Then(as, func(as steps, vs []string) { as.Success(vs) }) }
	cases := []struct {
		name   string
		add    fanOut
		result func(r *asyncsteps.Root) (any, error) // Run[T] of the flow
		then   func(as steps)                        // a Then[T] that succeeds with what result gives
		want   any
		trace  string
	}{
		{"Gather", func(as steps, tr *tracer, tt *asyncsteps.TestTool) {
			asyncsteps.Gather[string](as, nil, succeedAfter(tr, tt, 20*time.Millisecond, "a"), func(as steps) { as.Success("b") })
		}, runAs[[]string], strs, []string{"a", "b"}, "done a@20ms"},
		{"Gather without branches", func(as steps, _ *tracer, _ *asyncsteps.TestTool) {
			asyncsteps.Gather[string](as, nil)
		}, runAs[[]string], strs, []string{}, ""},
		{"Settle", func(as steps, tr *tracer, tt *asyncsteps.TestTool) {
			asyncsteps.Settle[string](as, nil, abcd(tr, tt)...)
		}, func(r *asyncsteps.Root) (any, error) {
			rs, err := asyncsteps.Run[[]settled](context.Background(), r)
			return outcomes(rs), err
		}, func(as steps) { asyncsteps.Then(as, func(as steps, rs []settled) { as.Success(outcomes(rs)) }) },
			`"a"|CommError: b|"c"|"d"`, "fail b@5ms,cancel b@5ms,done c@10ms,done d@20ms,done a@30ms"},
		{"Settle without branches", func(as steps, _ *tracer, _ *asyncsteps.TestTool) {
			asyncsteps.Settle[string](as, nil)
		}, runAs[[]settled], func(as steps) { asyncsteps.Then(as, func(as steps, rs []settled) { as.Success(rs) }) },
			[]settled{}, ""},
		{"First", func(as steps, tr *tracer, tt *asyncsteps.TestTool) {
			asyncsteps.First[string](as, nil, abcd(tr, tt)...)
		}, runAs[string], func(as steps) { asyncsteps.Then(as, func(as steps, v string) { as.Success(v) }) },
			"c", "fail b@5ms,cancel b@5ms,done c@10ms,cancel a@10ms,cancel d@10ms"},
		{"Quorum", func(as steps, tr *tracer, tt *asyncsteps.TestTool) {
			asyncsteps.Quorum[string](as, 2, nil, abcd(tr, tt)...)
		}, runAs[[]string], strs, []string{"c", "d"}, "fail b@5ms,cancel b@5ms,done c@10ms,done d@20ms,cancel a@20ms"},
	}
	for _, c := range cases {
		t.Run(c.name+" read by Run", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			c.add(r, &tr, tt)
			v, err := c.result(r)
			if err != nil || fmt.Sprintf("%#v", v) != fmt.Sprintf("%#v", c.want) {
				t.Errorf("Run = %#v, %v; want %#v, nil", v, err, c.want)
			}
			wantTrace(t, &tr, c.trace)
		})
		t.Run(c.name+" read by a Then", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as steps, _ ...any) {
				c.add(as, &tr, tt)
				c.then(as)
			})
			wantSuccess(t, run(t, r, tt), c.want)
			wantTrace(t, &tr, c.trace)
		})
	}
}

// runAs is Run[T] of r, under no deadline, with its value as an any.
func runAs[T any](r *asyncsteps.Root) (any, error) {
	return asyncsteps.Run[T](context.Background(), r)
}

// Run reads an untyped nil as the nil of an interface or pointer type, as
// Arg does, and a cancel comes back as Root.Run returns it.
func TestRunTypedNilAndCancel(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.SuccessStep(nil)
	e, err := asyncsteps.Run[error](context.Background(), r)
	if e != nil || err != nil {
		t.Errorf("Run[error] = %v, %v; want nil, nil", e, err)
	}
	r.Add(func(as steps, _ ...any) { as.WaitExternal() })
	ctx, cancel := context.WithCancel(context.Background())
	tt.Immediate(cancel)
	n, err := asyncsteps.Run[int](ctx, r)
	if n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("Run[int] = %v, %v; want 0, context.Canceled", n, err)
	}
}

// Before Branches, a fan-out over a slice built its branches in a loop;
// Branches builds the same, for Gather and Settle alike, in the slice's
// order whatever order the branches end in.
func TestBranchesBuildsWhatTheLoopBuilt(t *testing.T) {
	items := []time.Duration{30 * msec, 10 * msec, 20 * msec}
	item := func(as steps, d time.Duration) {
		h := as.Tool().Deferred(d, func() { as.Success(d.String()) })
		as.SetCancel(func(steps) { h.Cancel() })
	}
	loop := make([]func(as steps), len(items)) // before
	for i, d := range items {
		loop[i] = func(as steps) { item(as, d) }
	}
	for name, branches := range map[string][]func(as steps){"loop": loop, "Branches": asyncsteps.Branches(items, item)} {
		t.Run(name, func(t *testing.T) {
			r, tt := newFlow()
			asyncsteps.Gather(r, func(as steps, vs []string) { as.Success(strings.Join(vs, " ")) }, branches...)
			wantSuccess(t, run(t, r, tt), "30ms 10ms 20ms")
			r, tt = newFlow()
			asyncsteps.Settle(r, func(as steps, rs []asyncsteps.Settled[string]) { as.Success(fmt.Sprint(rs)) }, branches...)
			wantSuccess(t, run(t, r, tt), "[{30ms <nil>} {10ms <nil>} {20ms <nil>}]")
		})
	}
}

// A nil function gives nil branches, which Gather reports; no items give
// no branch.
func TestBranchesNilFunctionAndNoItems(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.Gather(r, func(steps, []int) {}, asyncsteps.Branches[int]([]int{1, 2}, nil)...)
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "Gather: nil branch 0")
	if n := len(asyncsteps.Branches(nil, func(steps, int) {})); n != 0 {
		t.Errorf("%d branches for no items, want 0", n)
	}
}

// Gather and Settle keep the branches they were given, not the caller's
// slice: a step that builds its fan-outs in one buffer, reused after each
// call, runs each with its own branches, though they run after the step
// returns; and a branch set to nil in the buffer afterwards, which the
// call did not see, is not called.
func TestGatherAndSettleKeepTheirBranchesNotTheSlice(t *testing.T) {
	r, tt := newFlow()
	var trace []string
	value := func(v int) func(as steps) { return func(as steps) { as.Success(v) } }
	r.Add(func(as steps, _ ...any) {
		buf := []func(as steps){value(1), value(2)}
		asyncsteps.Gather(as, func(as steps, vs []int) { trace = append(trace, fmt.Sprint("gather ", vs)) }, buf...)
		buf[0], buf[1] = value(3), nil
		asyncsteps.Settle(as, func(as steps, rs []asyncsteps.Settled[int]) {
			trace = append(trace, fmt.Sprint("settle ", rs[0].Value, " ", rs[0].Err))
		}, buf[:1]...)
		buf[0] = value(4)
	})
	wantSuccess(t, run(t, r, tt))
	want := "gather [1 2]|settle 3 <nil>"
	if got := strings.Join(trace, "|"); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}
