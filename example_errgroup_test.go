package asyncsteps_test

// The examples of docs/FROM-ERRGROUP.md, the cookbook for a team that
// writes request handling with goroutines, errgroup, contexts and
// semaphores: each page snippet is a block of one Example's body, kept
// identical to it by TestCookbookSnippetsAreExamples.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// quote stands for a blocking upstream call that honours its context,
// as an Await function is written.
func quote(symbol string) func(context.Context) (float64, error) {
	prices := map[string]float64{"AAPL": 919.55, "MSFT": 756.83, "GOOG": 561.53}
	return func(ctx context.Context) (float64, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		price, ok := prices[symbol]
		if !ok {
			return 0, fmt.Errorf("no quote for %s", symbol)
		}
		return price, nil
	}
}

// upstream stands for an upstream call in the examples on virtual time:
// it completes the calling step after d of the flow's clock, with v, or
// with the error code if one is given. (A TestTool does not wait for the
// goroutine of an Await before it moves its clock to the next timer.)
func upstream(as asyncsteps.AsyncSteps, d time.Duration, v string, code ...string) {
	asyncsteps.Sleep(as, d) // a timeout or a cancel stops the call
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if len(code) > 0 {
			as.Error(code[0], "upstream failed")
			return
		}
		as.Success(v)
	})
}

// elapsed is the virtual time a TestTool has run.
func elapsed(tt *asyncsteps.TestTool) time.Duration { return tt.Now().Sub(asyncsteps.TestToolEpoch) }

// Fan out one call per symbol and collect the results in order.
func ExampleGather_fanOut() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	symbols := []string{"AAPL", "MSFT", "GOOG"}

	fetch := func(as asyncsteps.AsyncSteps, s string) { asyncsteps.AwaitThen(as, quote(s), nil) }
	asyncsteps.Gather[float64](r, nil, asyncsteps.Branches(symbols, fetch)...)
	prices, err := asyncsteps.Run[[]float64](context.Background(), r)

	fmt.Println(prices, err)
	// Output: [919.55 756.83 561.53] <nil>
}

// Fan out one call per symbol and collect each one's result or error in
// order: a failed call cancels none of the others.
func ExampleSettle_fanOut() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	symbols := []string{"AAPL", "XYZ", "GOOG"}

	fetch := func(as asyncsteps.AsyncSteps, s string) { asyncsteps.AwaitThen(as, quote(s), nil) }
	asyncsteps.Settle(r, func(as asyncsteps.AsyncSteps, rs []asyncsteps.Settled[float64]) {
		for i, o := range rs {
			fmt.Println(symbols[i], o.Value, o.Err)
		}
	}, asyncsteps.Branches(symbols, fetch)...)
	_, err := r.Run(context.Background())

	fmt.Println(err)
	// Output:
	// AAPL 919.55 <nil>
	// XYZ 0 InternalError: no quote for XYZ
	// GOOG 561.53 <nil>
	// <nil>
}

// Fan out with Parallel and keep each result in the flow's State, which
// the continuations write on the loop, without a lock.
func ExampleAsyncSteps_Parallel_state() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	symbols := []string{"AAPL", "MSFT", "GOOG"}

	p := r.Parallel()
	for _, s := range symbols {
		asyncsteps.AwaitThen(p, quote(s), func(as asyncsteps.AsyncSteps, price float64) {
			as.State().Set(s, price) // on the loop: no lock, no race
		})
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(as.State().Get("MSFT")) })

	price, err := asyncsteps.Run[float64](context.Background(), r)
	fmt.Println(price, err)
	// Output: 756.83 <nil>
}

// The first failed branch cancels the others: the context of a sibling's
// Await function is cancelled, and the flow ends with the first error.
func ExampleAsyncSteps_Parallel_firstError() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	stopped := make(chan error, 1)

	p := r.Parallel()
	p.Await(func(ctx context.Context) (any, error) {
		<-ctx.Done() // cancelled when the other branch fails
		stopped <- ctx.Err()
		return nil, ctx.Err()
	})
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "upstream down") })
	_, err := r.Run(context.Background())

	fmt.Println(err)
	fmt.Println("sibling:", <-stopped)
	// Output:
	// CommError: upstream down
	// sibling: context canceled
}

// A timeout for one call: the step fails with Timeout, which its error
// handler may recover from, and the Await function's context ends with
// context.DeadlineExceeded.
func ExampleAsyncSteps_SetTimeout_perCall() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	saw := make(chan error, 1)

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(20 * time.Millisecond) // bounds this step and all it adds
		as.Await(func(ctx context.Context) (any, error) {
			<-ctx.Done() // an upstream that does not answer in time
			saw <- ctx.Err()
			return nil, ctx.Err()
		})
	}, func(as asyncsteps.AsyncSteps, code string) { as.Success("fallback after " + code) })
	out, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(out, err)
	fmt.Println("the call saw:", <-saw)
	// Output:
	// fallback after Timeout <nil>
	// the call saw: context deadline exceeded
}

// The deadline of Run's context is a timeout of the whole flow: the error
// is a Timeout that matches context.DeadlineExceeded.
func ExampleRoot_Run_deadline() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r.Await(func(ctx context.Context) (any, error) {
		<-ctx.Done() // carries Run's deadline
		return nil, ctx.Err()
	})
	_, err := r.Run(ctx)
	fmt.Println(err, errors.Is(err, context.DeadlineExceeded))
	fmt.Println(errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout}))
	// Output:
	// Timeout: the flow's context deadline passed true
	// true
}

// errRequestBudget is the cause a gateway gives the deadline of a
// request's context: the whole request's budget is spent.
var errRequestBudget = errors.New("request budget spent")

// The request's budget and a call's own limit are both a Timeout: the
// deadline's says so in its info, and has the context's cause as Cause,
// so that an error handler tells giving up from going on without the
// call. The TestTool runs the step timeouts on virtual time; the
// deadline is on the wall clock.
func ExampleRoot_Run_deadlineCause() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errRequestBudget)
	defer cancel()
	onTimeout := func(as asyncsteps.AsyncSteps, code string) {
		if errors.Is(as.State().LastException, errRequestBudget) {
			fmt.Println("budget spent:", as.State().ErrorInfo)
			return // the request is over: give up
		}
		fmt.Printf("call timed out: %q\n", as.State().ErrorInfo)
		as.Success() // the call's own limit: go on without it
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Millisecond) // the call's own limit
		as.WaitExternal()                    // an upstream that does not answer
	}, onTimeout)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal() // no limit of its own: the request's budget bounds it
	}, onTimeout)
	_, err := r.Run(ctx)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errRequestBudget), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// call timed out: ""
	// budget spent: the flow's context deadline passed
	// Timeout: the flow's context deadline passed
	// true true
}

// A request's budget: the backends that answered by then are the answer,
// the others are cancelled, and a backend's failure is its own.
func ExampleAsyncSteps_SetTimeout_partial() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	backends := []string{"web", "images", "video"}
	call := func(as asyncsteps.AsyncSteps, b string) {
		switch b {
		case "images":
			upstream(as, 10*time.Millisecond, "", asyncsteps.CommError)
		case "video":
			upstream(as, time.Second, "v1")
		default:
			upstream(as, 30*time.Millisecond, "w1")
		}
	}

	results := map[string]string{} // written on the loop only
	answered := 0
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(200 * time.Millisecond) // the budget
		p := as.Parallel()
		for _, b := range backends {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { call(as, b) })
				asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, v string) { results[b], answered = v, answered+1 })
			}, func(as asyncsteps.AsyncSteps, code string) {
				results[b] = code // the backend's failure, not the request's
				as.Success()
			})
		}
	}, func(as asyncsteps.AsyncSteps, code string) {
		if code == asyncsteps.Timeout && answered > 0 {
			as.Success() // answer with what arrived; the calls still running are cancelled
		}
	})
	_, err := r.Run(context.Background())

	fmt.Println("done at", elapsed(tt), err)
	for _, b := range backends {
		fmt.Printf("%s %q\n", b, results[b])
	}
	// Output:
	// done at 200ms <nil>
	// web "w1"
	// images "CommError"
	// video ""
}

// The first answer of any replica, the calls still running cancelled; a
// replica that fails leaves the others to answer.
func ExampleFirst_replicas() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	replicas := []string{"a", "b", "c"}
	call := func(as asyncsteps.AsyncSteps, rep string) {
		switch rep {
		case "a":
			upstream(as, 10*time.Millisecond, "", asyncsteps.CommError)
		case "b":
			upstream(as, 30*time.Millisecond, "from b")
		default:
			upstream(as, time.Second, "from c")
		}
	}

	asyncsteps.First[string](r, nil, asyncsteps.Branches(replicas, call)...)
	v, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(v, err, "at", elapsed(tt))
	fmt.Println("calls left running:", tt.HasEvents()) // c's was cancelled
	// Output:
	// from b <nil> at 30ms
	// calls left running: false
}

// A write that k of n replicas must acknowledge: the first k
// acknowledgements, in the order they came, the others cancelled; it
// fails as soon as too many replicas have failed for k to acknowledge.
func ExampleQuorum_acks() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	replicas := []string{"a", "b", "c", "d", "e"}
	write := func(as asyncsteps.AsyncSteps, rep string) {
		d := map[string]time.Duration{"a": 40, "b": 10, "c": 20, "d": 30, "e": 1000}[rep] * time.Millisecond
		if rep == "c" {
			upstream(as, d, "", asyncsteps.CommError)
			return
		}
		upstream(as, d, rep)
	}

	asyncsteps.Quorum[string](r, 3, nil, asyncsteps.Branches(replicas, write)...)
	acks, err := asyncsteps.Run[[]string](context.Background(), r)

	fmt.Println(acks, err, "at", elapsed(tt))
	fmt.Println("calls left running:", tt.HasEvents()) // e's was cancelled
	// Output:
	// [b d a] <nil> at 40ms
	// calls left running: false
}

// The first answer that k replicas agree on, the calls still running
// cancelled. The first answer of any, a hedged request, is First's
// (ExampleFirst_replicas), which raises no error to end the race.
func ExampleAsyncSteps_Parallel_quorum() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	replicas := []string{"a", "b", "c", "d", "e"}
	call := func(as asyncsteps.AsyncSteps, rep string) {
		switch rep {
		case "b":
			upstream(as, 20*time.Millisecond, "", asyncsteps.CommError)
		case "c":
			upstream(as, 30*time.Millisecond, "y")
		default:
			upstream(as, map[string]time.Duration{"a": 10, "d": 40, "e": 1000}[rep]*time.Millisecond, "x")
		}
	}
	const k = 2

	votes := map[string]int{} // written on the loop only
	var agreed string
	p := r.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		if code == "Quorum" {
			as.Success(agreed)
		}
	})
	for _, rep := range replicas {
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { call(as, rep) }, func(as asyncsteps.AsyncSteps, code string) {
				as.Success() // a replica that fails has no vote
			})
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				if v, ok := asyncsteps.Arg[string](args, 0); ok {
					if votes[v]++; votes[v] == k {
						agreed = v
						as.Error("Quorum") // ends the Parallel: the other calls are cancelled
					}
				}
			})
		})
	}
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		if len(args) == 0 {
			as.Error("NoQuorum", "the replicas failed or disagree")
		}
		as.Success(args...)
	})
	v, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(v, err, "at", elapsed(tt))
	fmt.Println("calls left running:", tt.HasEvents()) // e's was cancelled
	// Output:
	// x <nil> at 40ms
	// calls left running: false
}

// A Mutex of 2 slots lets two calls run at once; the others wait in its
// queue, which is unlimited for NewMutex without a maxQueue. Four calls
// of 100ms take 200ms of virtual time.
func ExampleMutex_limit() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	symbols := []string{"AAPL", "MSFT", "GOOG", "AMZN"}

	limit := asyncsteps.NewMutex(2) // one Mutex shared by all requests
	p := r.Parallel()
	for _, s := range symbols {
		p.Sync(limit, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(s, "starts at", elapsed(tt))
			upstream(as, 100*time.Millisecond, s)
		})
	}
	_, err := r.Run(context.Background())

	fmt.Println("done at", elapsed(tt), err)
	// Output:
	// AAPL starts at 0s
	// MSFT starts at 0s
	// GOOG starts at 100ms
	// AMZN starts at 100ms
	// done at 200ms <nil>
}

// A batch: many items, K at a time, each item's outcome kept, and what is
// done answered when the job's time is up.
func ExampleForEachLimit_batch() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	items := []string{"a", "b", "bad", "c", "slow", "d"}
	call := func(as asyncsteps.AsyncSteps, item string) {
		switch item {
		case "bad":
			upstream(as, 100*time.Millisecond, "", asyncsteps.CommError)
		case "slow":
			upstream(as, time.Second, "ok")
		default:
			upstream(as, 100*time.Millisecond, "ok")
		}
	}

	outcomes := make([]string, len(items)) // written on the loop only
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(350 * time.Millisecond) // the whole job
		asyncsteps.ForEachLimit(as, slices.All(items), 2, func(as asyncsteps.AsyncSteps, i int, item string) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { call(as, item) },
				func(as asyncsteps.AsyncSteps, code string) {
					as.Success(code + ": " + as.State().ErrorInfo) // the item's failure, not the job's
				})
			asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, outcome string) { outcomes[i] = outcome })
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		as.Success() // the job's Timeout: the items running are cancelled, the outcomes kept
	})
	_, err := r.Run(context.Background())

	fmt.Println("done at", elapsed(tt), err)
	for i, o := range outcomes {
		if o == "" {
			o = "not done"
		}
		fmt.Println(items[i], o)
	}
	// Output:
	// done at 350ms <nil>
	// a ok
	// b ok
	// bad CommError: upstream failed
	// c ok
	// slow not done
	// d ok
}

// A worker over a queue's channel: each job as it arrives, 2 at a time,
// until the producer closes the channel; a job's failure is its own.
func ExampleForEachChan_worker() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	jobs := make(chan string)
	go func() { // the producer: a queue's consumer, a listener
		for _, job := range []string{"a", "b", "bad", "c"} {
			jobs <- job
		}
		close(jobs)
	}()
	process := func(job string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			if job == "bad" {
				return "", fmt.Errorf("cannot process %s", job)
			}
			return "done", ctx.Err()
		}
	}

	outcomes := map[string]string{} // written on the loop only
	asyncsteps.ForEachChan(r, jobs, 2, func(as asyncsteps.AsyncSteps, job string) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second) // the job's own
			asyncsteps.AwaitThen(as, process(job), func(as asyncsteps.AsyncSteps, out string) { outcomes[job] = out })
		}, func(as asyncsteps.AsyncSteps, code string) {
			outcomes[job] = code + ": " + as.State().ErrorInfo // the job's failure, not the worker's
			as.Success()
		})
	})
	_, err := r.Run(context.Background())

	for _, job := range slices.Sorted(maps.Keys(outcomes)) {
		fmt.Println(job, outcomes[job])
	}
	fmt.Println(err)
	// Output:
	// a done
	// b done
	// bad InternalError: cannot process bad
	// c done
	// <nil>
}

// The zero MaxQueue of LimiterOptions lets no flow wait: a flow that finds
// every slot taken is refused at once. Unlimited lets it wait.
func ExampleLimiterOptions_maxQueue() {
	tt := asyncsteps.NewTestTool()
	run := func(lim *asyncsteps.Limiter) error {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		p := r.Parallel()
		for _, s := range []string{"AAPL", "MSFT", "GOOG"} {
			p.Sync(lim, func(as asyncsteps.AsyncSteps, _ ...any) { upstream(as, 100*time.Millisecond, s) })
		}
		_, err := r.Run(context.Background())
		return err
	}

	fmt.Println(run(asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 2})))
	fmt.Println(run(asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 2, MaxQueue: asyncsteps.Unlimited})))
	// Output:
	// DefenseRejected: Mutex queue limit
	// <nil>
}

// Retry with a timeout per attempt and a backoff, on virtual time: the
// first attempt is too slow, the second fails, the third answers.
func ExampleRetry_backoff() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	slowThenFailThenOK := func(as asyncsteps.AsyncSteps, attempt int) {
		fmt.Println("attempt", attempt, "at", elapsed(tt))
		switch attempt {
		case 0:
			upstream(as, time.Second, "late")
		case 1:
			upstream(as, 50*time.Millisecond, "", asyncsteps.CommError)
		default:
			upstream(as, 30*time.Millisecond, "919.55")
		}
	}

	asyncsteps.Retry(r, asyncsteps.RetryOptions{
		Attempts: 3,
		Timeout:  200 * time.Millisecond, // each attempt
		Backoff:  func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond },
	}, slowThenFailThenOK)
	price, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(price, err, "at", elapsed(tt))
	// Output:
	// attempt 0 at 0s
	// attempt 1 at 210ms
	// attempt 2 at 280ms
	// 919.55 <nil> at 310ms
}

// A pause between two calls waits on the flow's clock, and hands the
// first call's result on to the second.
func ExampleSleep_pause() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	submit := func(as asyncsteps.AsyncSteps, _ ...any) { upstream(as, 10*time.Millisecond, "job-7") }
	fetch := func(as asyncsteps.AsyncSteps, job string) { upstream(as, 30*time.Millisecond, "result of "+job) }

	r.Add(submit)
	asyncsteps.Sleep(r, 2*time.Second) // the job is done 2s after it was submitted
	asyncsteps.Then(r, fetch)
	result, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(result, err, "at", elapsed(tt), "timers left", tt.Pending())
	// Output: result of job-7 <nil> at 2.04s timers left 0
}

// Cancel handlers release what the cancelled steps hold, innermost first,
// once; no error handler runs on a cancel.
func ExampleAsyncSteps_SetCancel_cleanup() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	ctx, cancel := context.WithCancel(context.Background())
	tt.Deferred(time.Second, cancel) // the client goes away after 1s

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { fmt.Println("outer: release the lease") })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { fmt.Println("inner: close the connection") })
		})
	}, func(as asyncsteps.AsyncSteps, code string) { fmt.Println("not called on a cancel") })
	_, err := r.Run(ctx)

	fmt.Println(err, "at", elapsed(tt))
	// Output:
	// inner: close the connection
	// outer: release the lease
	// context canceled at 1s
}

// A blocking call goes in an Await function, never in a step; a LoopLag
// hook tells when a step blocks its loop all the same.
func ExampleAsyncSteps_Await_blocking() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))

	loop.SetHooks(&asyncsteps.Hooks{LoopLag: func(l *asyncsteps.Loop, lag time.Duration) {
		if lag > 100*time.Millisecond {
			slog.Warn("a callback blocked the loop", "lag", lag)
		}
	}})
	r.Await(func(ctx context.Context) (any, error) {
		time.Sleep(10 * time.Millisecond) // blocks this goroutine, not the loop
		return "row", nil
	})
	row, err := asyncsteps.Run[string](context.Background(), r)

	fmt.Println(row, err)
	// Output: row <nil>
}

// Typed results: AwaitThen hands fn's value to its continuation as a
// float64, and Run[T] reads the flow's result as a string.
func ExampleRun_typedResult() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))

	asyncsteps.AwaitThen(r, quote("AAPL"), func(as asyncsteps.AsyncSteps, price float64) {
		as.Success(fmt.Sprintf("AAPL %.2f", price))
	})
	line, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Println(line, err)
	// Output: AAPL 919.55 <nil>
}

// A Go error becomes a code in the flow; handlers see the code, ErrorInfo
// and the original error in LastException; the flow's error is an *Error
// that keeps the Go error as its cause.
func ExampleError_codes() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	errNoSymbol := errors.New("no such symbol")

	r.Await(func(context.Context) (any, error) { return nil, errNoSymbol }, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println(code, as.State().ErrorInfo, errors.Is(as.State().LastException, errNoSymbol))
		as.Error(asyncsteps.InvalidRequest, "unknown symbol")
	})
	_, err := r.Run(context.Background())
	var e *asyncsteps.Error
	fmt.Println(errors.As(err, &e), e.Code, e.Info)
	fmt.Println(errors.Is(err, &asyncsteps.Error{Code: asyncsteps.InvalidRequest}), errors.Is(err, errNoSymbol))
	// Output:
	// InternalError no such symbol true
	// true InvalidRequest unknown symbol
	// true true
}

// A step waits for another flow with AwaitFlow; Run called in a step
// fails at once instead of blocking the loop.
func ExampleAwaitFlow_subFlow() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	sub := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.AwaitThen(sub, quote("MSFT"), nil)

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		_, err := sub.Run(context.Background()) // wrong: would block the loop
		fmt.Println(err)
		asyncsteps.AwaitFlow(as, sub) // right
	})
	price, err := asyncsteps.Run[float64](context.Background(), r)

	fmt.Println(price, err)
	// Output:
	// InternalError: Run called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow
	// 756.83 <nil>
}

// A TestTool runs a flow on virtual time: a 30 second timeout falls due
// at once, at exactly 30s of the tool's clock.
func ExampleTestTool_virtualTime() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(30 * time.Second) // and nothing completes the step
	})
	_, err := r.Run(context.Background())
	fmt.Println(err, "at", elapsed(tt))
	// Output: Timeout at 30s
}
