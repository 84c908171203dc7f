package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A typed Await: fn returns an int, the continuation receives it as an int,
// and the error handler of fn's step recovers with a fallback int.
func ExampleAwaitThen() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	parse := func(s string) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return strconv.Atoi(s) }
	}
	show := func(as asyncsteps.AsyncSteps, n int) { fmt.Println("got", n) }

	asyncsteps.AwaitThen(r, parse("42"), show)
	asyncsteps.AwaitThen(r, parse("forty-one"), show, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println(code, as.State().ErrorInfo)
		as.Success(-1) // the fallback, which show receives
	})

	_, err := r.Run(context.Background())
	fmt.Println("err:", err)
	// Output:
	// got 42
	// InternalError strconv.Atoi: parsing "forty-one": invalid syntax
	// got -1
	// err: <nil>
}

// Then reads the result of the previous step as a T: here the result of a
// critical section, which passes its body's result on.
func ExampleThen() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	m := asyncsteps.NewMutex(1)

	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("inside") })
	asyncsteps.Then(r, func(as asyncsteps.AsyncSteps, s string) { fmt.Println("after the section:", s) })
	r.SuccessStep(3.5)
	asyncsteps.Then(r, func(as asyncsteps.AsyncSteps, n int) { fmt.Println("not reached") })

	_, err := r.Run(context.Background())
	fmt.Println("err:", err)
	// Output:
	// after the section: inside
	// err: InternalError: Then: the step's result is float64, want int
}

// Gather fans out to branches that run in parallel and collects their
// results in order, whatever order they complete in; a branch's error
// handler may recover with a fallback result.
func ExampleGather() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	m := asyncsteps.NewMutex(1)

	asyncsteps.Gather(r, func(as asyncsteps.AsyncSteps, vs []string) {
		fmt.Printf("%q\n", vs)
	}, func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Error(asyncsteps.CommError, "upstream down")
		}, func(as asyncsteps.AsyncSteps, code string) {
			as.Success("fallback after " + code)
		})
	}, func(as asyncsteps.AsyncSteps) {
		as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.AwaitThen(as, func(context.Context) (string, error) { return "awaited", nil }, nil)
		})
	}, func(as asyncsteps.AsyncSteps) {
		as.Success("direct")
	})

	if _, err := r.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// ["fallback after CommError" "awaited" "direct"]
}

// The first failed branch of a Gather cancels the others (their cancel
// handlers run) and fails the whole step, whose handler sees the error.
func ExampleGather_failure() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Gather(as, func(as asyncsteps.AsyncSteps, vs []int) {
			fmt.Println("not reached", vs)
		}, func(as asyncsteps.AsyncSteps) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { fmt.Println("branch 0 cancelled") })
		}, func(as asyncsteps.AsyncSteps) {
			as.Error(asyncsteps.NotImplemented, "branch 1 failed")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("handler:", code, as.State().ErrorInfo)
		as.Success(7)
	})

	n, err := asyncsteps.Run[int](context.Background(), r)
	fmt.Println(n, err)
	// Output:
	// branch 0 cancelled
	// handler: NotImplemented branch 1 failed
	// 7 <nil>
}

// Branches makes one branch per item of a slice. The branches run at once
// and end in any order; Gather gives their results in the slice's order.
func ExampleBranches() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	waits := []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}

	call := func(as asyncsteps.AsyncSteps, d time.Duration) { // a call that answers after d
		asyncsteps.Sleep(as, d).SuccessStep("after " + d.String())
	}
	asyncsteps.Gather[string](r, nil, asyncsteps.Branches(waits, call)...)
	vs, err := asyncsteps.Run[[]string](context.Background(), r)

	fmt.Println(vs, err, "at", tt.Now().Sub(asyncsteps.TestToolEpoch))
	// Output: [after 30ms after 10ms after 20ms] <nil> at 30ms
}

// Settle runs every branch to its end and hands then each one's outcome
// in the order of the branches: its result, or the error that ended it,
// which cancelled none of the others.
func ExampleSettle() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	asyncsteps.Settle(r, func(as asyncsteps.AsyncSteps, rs []asyncsteps.Settled[int]) {
		for i, o := range rs {
			fmt.Println(i, o.Value, o.Err)
		}
	}, func(as asyncsteps.AsyncSteps) {
		as.SetTimeout(time.Second) // and nothing completes the branch
	}, func(as asyncsteps.AsyncSteps) {
		as.Error(asyncsteps.CommError, "upstream down")
	}, func(as asyncsteps.AsyncSteps) {
		asyncsteps.AwaitThen(as, func(context.Context) (int, error) { return strconv.Atoi("42") }, nil)
	}, func(as asyncsteps.AsyncSteps) {
		asyncsteps.AwaitThen(as, func(context.Context) (int, error) { return strconv.Atoi("x") }, nil)
	})

	_, err := r.Run(context.Background())
	fmt.Println("err:", err)
	// Output:
	// 0 0 Timeout
	// 1 0 CommError: upstream down
	// 2 42 <nil>
	// 3 0 InternalError: strconv.Atoi: parsing "x": invalid syntax
	// err: <nil>
}

// Once the deadline of Run's context has passed, a step that waits fails
// with Timeout at once. A Settle that an error handler starts then, as a
// fallback, still hands then the outcome of every branch: Timeout for a
// branch that waits, the result of one that does not.
func ExampleSettle_afterRunsDeadline() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal() // a call that does not answer before the deadline
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("call:", code)
		asyncsteps.Settle(as, func(as asyncsteps.AsyncSteps, rs []asyncsteps.Settled[string]) {
			for i, o := range rs {
				fmt.Printf("%d %q %v\n", i, o.Value, o.Err)
			}
			as.Success("partial")
		}, func(as asyncsteps.AsyncSteps) {
			as.Success("cached")
		}, func(as asyncsteps.AsyncSteps) {
			as.SetTimeout(time.Minute) // it waits: it fails at once
		})
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	args, err := r.Run(ctx)
	fmt.Println(args, err)
	// Output:
	// call: Timeout
	// 0 "cached" <nil>
	// 1 "" Timeout: the flow's context deadline passed
	// [partial] <nil>
}

// Run returns the flow's result typed; an error is returned as by
// Root.Run, and a result of another type is an InternalError.
func ExampleRun() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.SuccessStep("done")

	s, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Printf("%q %v\n", s, err)

	r.SuccessStep("again") // a Root whose flow has ended runs again with new steps
	n, err := asyncsteps.Run[int](context.Background(), r)
	fmt.Println(n, errors.Is(err, &asyncsteps.Error{Code: asyncsteps.InternalError}), err)

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.Unauthorized) })
	n, err = asyncsteps.Run[int](context.Background(), r)
	fmt.Println(n, err)
	// Output:
	// "done" <nil>
	// 0 true InternalError: Run: the flow's result is string, want int
	// 0 Unauthorized
}
