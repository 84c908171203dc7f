package asyncsteps_test

// This file is long on purpose: one Example per example of the spec and of
// the JavaScript reference's README, in the spec's order, so that a reader
// finds each one in one place.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The examples run on a TestTool: nothing runs until the example drives the
// tool with Run or Advance, and time is virtual, so the output is exact.

func ExampleNew() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Success("Hello", "World")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		// The success args of a step are the input of the next one.
		fmt.Printf("%s, %s!\n", args[0], args[1])
	})

	r.Execute() // only schedules the flow
	tt.Run()    // runs it
	// Output:
	// Hello, World!
}

// A flow that nobody waits for is started with Execute: an error that ends
// it goes to the function set by WithUnhandledError (by default, a log
// line). When Run or Promise waits for the flow, its error goes to them
// instead.
func ExampleWithUnhandledError() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		fmt.Println("unhandled:", err)
	}))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "mail server down") })
	r.Execute()
	tt.Run()

	// The flow has ended: the Root takes new steps and runs again.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "still down") })
	_, err := r.Run(context.Background())
	fmt.Println("Run:", err)
	// Output:
	// unhandled: CommError: mail server down
	// Run: CommError: still down
}

func ExampleRoot_Promise() {
	tt := asyncsteps.NewTestTool()

	ok := asyncsteps.New(asyncsteps.WithTool(tt))
	ok.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Success(1, 2)
	})
	ok.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Success(args[0].(int) + args[1].(int))
	})

	failed := asyncsteps.New(asyncsteps.WithTool(tt))
	failed.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error(asyncsteps.Unauthorized, "bad token")
	})

	okResult, failedResult := ok.Promise(), failed.Promise()
	tt.Run()

	res := <-okResult
	fmt.Println("args:", res.Args, "err:", res.Err)

	res = <-failedResult
	fmt.Println("err:", res.Err)
	fmt.Println("Unauthorized:", errors.Is(res.Err, &asyncsteps.Error{Code: asyncsteps.Unauthorized}))
	// Output:
	// args: [3] err: <nil>
	// err: Unauthorized: bad token
	// Unauthorized: true
}

// A job worker settles each job once, whichever way its flow ends: done
// gets the success, the error (the lease's Timeout included) or the
// cancel of a drain, once the flow has stopped.
func ExampleRoot_ExecuteThen() {
	tt := asyncsteps.NewTestTool()
	settle := func(job string) func(asyncsteps.Result) {
		return func(res asyncsteps.Result) {
			switch {
			case res.Err == nil:
				fmt.Println(job, "ack", res.Args)
			case errors.Is(res.Err, context.Canceled):
				fmt.Println(job, "release")
			default:
				fmt.Println(job, "nack:", res.Err)
			}
		}
	}
	start := func(job string, work asyncsteps.StepFunc) *asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second) // the job's lease
			as.Add(work)
		})
		r.ExecuteThen(settle(job))
		return r
	}
	start("j1", func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("sent") })
	start("j2", func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }) // never answers
	j3 := start("j3", func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	tt.Advance(100 * time.Millisecond)
	j3.Cancel() // a drain
	tt.Run()
	// Output:
	// j1 ack [sent]
	// j3 release
	// j2 nack: Timeout
}

func ExampleRoot_Run() {
	// Run blocks until the flow stops, so the flow needs a loop that runs
	// on its own goroutine.
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		// A fake service that answers after 10ms.
		as.Tool().Deferred(10*time.Millisecond, func() {
			as.Success("reply")
		})
		as.SetTimeout(5 * time.Second)
	})
	args, err := r.Run(ctx)
	fmt.Println(args, err)

	// When ctx's deadline passes first, the flow times out, as if its own
	// SetTimeout had expired: the waiting step fails with Timeout, its
	// cancel handler runs, and, with no error handler to recover, Run
	// returns that Timeout, which matches context.DeadlineExceeded too. (A
	// ctx cancelled without a deadline cancels the flow, as Root.Cancel.)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()

	r = asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			fmt.Println("step cancelled")
		})
	})
	_, err = r.Run(ctx)
	fmt.Println("Timeout:", errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout}),
		"deadline exceeded:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// [reply] <nil>
	// step cancelled
	// Timeout: true deadline exceeded: true
}

func ExampleAsyncSteps_Parallel() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	start := tt.Now()

	// Each Add on the object Parallel returns adds a branch. The branches
	// run interleaved and share the State of the flow.
	p := r.Parallel()
	for _, job := range []struct {
		name  string
		delay time.Duration
	}{{"a", 300 * time.Millisecond}, {"b", 100 * time.Millisecond}, {"c", 200 * time.Millisecond}} {
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("start", job.name)
			as.Tool().Deferred(job.delay, func() {
				fmt.Println("done", job.name)
				as.State().Set(job.name, job.delay)
				as.Success()
			})
			as.WaitExternal()
		})
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("a:", as.State().Get("a"), "b:", as.State().Get("b"), "c:", as.State().Get("c"))
		fmt.Println("all done after", tt.Now().Sub(start))
	})

	r.Execute()
	tt.Run()
	// Output:
	// start a
	// start b
	// start c
	// done b
	// done c
	// done a
	// a: 300ms b: 100ms c: 200ms
	// all done after 300ms
}

func ExampleAsyncSteps_SetTimeout() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	start := tt.Now()

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		// A slow service: it would answer after a minute.
		request := as.Tool().Deferred(time.Minute, func() {
			as.Success("reply")
		})
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			fmt.Println("request cancelled")
			request.Cancel()
		})
		as.SetTimeout(time.Second)
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println(code, "after", tt.Now().Sub(start))
		as.Success("fallback")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("result:", args[0])
	})

	r.Execute()
	tt.Run()
	// Output:
	// request cancelled
	// Timeout after 1s
	// result: fallback
}

func ExampleRoot_Cancel() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("waiting")
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			fmt.Println("cancel handler")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("error handlers do not run on Cancel:", code)
	})

	result := r.Promise()
	tt.Advance(time.Second)
	r.Cancel()
	tt.Run()

	res := <-result
	fmt.Println("canceled:", errors.Is(res.Err, context.Canceled))
	// Output:
	// waiting
	// cancel handler
	// canceled: true
}

func ExampleRoot_Clone() {
	tt := asyncsteps.NewTestTool()

	// Build the flow once...
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	model.State().Set("name", "model")
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("hello from", as.State().Get("name"))
	})

	// ...and run copies of it, each with its own state.
	a := model.Clone()
	a.State().Set("name", "a")
	b := model.Clone()
	b.State().Set("name", "b")

	a.Execute()
	b.Execute()
	tt.Run()
	fmt.Println("the model keeps", model.State().Get("name"))
	// Output:
	// hello from a
	// hello from b
	// the model keeps model
}

func ExampleTestTool() {
	tt := asyncsteps.NewTestTool()
	start := tt.Now()
	since := func() time.Duration { return tt.Now().Sub(start) }

	tt.Deferred(2*time.Second, func() { fmt.Println("2s timer at", since()) })
	tt.Deferred(time.Second, func() { fmt.Println("1s timer at", since()) })
	tt.Immediate(func() { fmt.Println("immediate at", since()) })

	// Advance moves the virtual clock, running what falls due on the way.
	tt.Advance(1500 * time.Millisecond)
	fmt.Println("now", since(), "pending:", tt.HasEvents())

	// Run jumps the clock to each remaining event.
	tt.Run()
	fmt.Println("now", since(), "pending:", tt.HasEvents())
	// Output:
	// immediate at 0s
	// 1s timer at 1s
	// now 1.5s pending: true
	// 2s timer at 2s
	// now 2s pending: false
}

// Spec 1.1: sub-steps run before the next step of their parent's level.
func Example_levels() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	say := func(text string) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) { fmt.Println(text) }
	}

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("Level 0 add #1")
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("Level 1 add #1")
			as.Add(say("Level 2 add #1"))
			as.Parallel().Add(say("Level 2 parallel #2"))
			as.Add(say("Level 2 add #3"))
		})
		as.Parallel().Add(say("Level 1 parallel #2"))
		as.Add(say("Level 1 add #3"))
	})
	r.Parallel().Add(say("Level 0 parallel #2"))
	r.Add(say("Level 0 add #3"))

	r.Execute()
	tt.Run()
	// Output:
	// Level 0 add #1
	// Level 1 add #1
	// Level 2 add #1
	// Level 2 parallel #2
	// Level 2 add #3
	// Level 1 parallel #2
	// Level 1 add #3
	// Level 0 parallel #2
	// Level 0 add #3
}

// Spec 1.2: an error unwinds through the error handlers of the enclosing
// levels, like nested try/catch blocks.
func Example_errorHandling() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("Level 0 func")
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("Level 1 func")
			as.Error("myerror")
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println("Level 1 onerror: " + code)
			as.Error("newerror")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("Level 0 onerror: " + code)
		as.Success("Prm")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		param := args[0]
		fmt.Println("Level 0 func2:", param)
		as.Success()
	})

	r.Execute()
	tt.Run()
	// Output:
	// Level 0 func
	// Level 1 func
	// Level 1 onerror: myerror
	// Level 0 onerror: newerror
	// Level 0 func2: Prm
}

// Spec 1.2.1: steps added by an error handler run in place of the failed
// step; if they fail, unwinding goes on outward and the same handler does
// not run again.
func Example_stepsInErrorHandler() {
	tt := asyncsteps.NewTestTool()
	// Nothing handles "second" at Level 0, so the flow ends with it; this
	// example keeps the unhandled error quiet to print only the spec's lines.
	r := asyncsteps.New(asyncsteps.WithTool(tt),
		asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("Level 0 func")
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("Level 1 func")
			as.Error("first")
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println("Level 1 onerror: " + code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				fmt.Println("Level 2 func")
				as.Error("second")
			}, func(as asyncsteps.AsyncSteps, code string) {
				fmt.Println("Level 2 onerror: " + code)
			})
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("Level 0 onerror: " + code)
	})

	r.Execute()
	tt.Run()
	// Output:
	// Level 0 func
	// Level 1 func
	// Level 1 onerror: first
	// Level 2 func
	// Level 2 onerror: second
	// Level 0 onerror: second
}

// Spec 1.3: a step waits for an external event (here a fake socket on the
// loop's virtual clock) under a timeout, with a cancel handler that stops
// the pending read. The first read completes in time, the second times out.
func Example_waitExternal() {
	tt := asyncsteps.NewTestTool()

	// socketRead is a fake socket: it delivers data after delay and returns
	// a function that cancels the pending read.
	socketRead := func(as asyncsteps.AsyncSteps, delay time.Duration, done func(data string)) (cancelRead func()) {
		return as.Tool().Deferred(delay, func() { done("hello") }).Cancel
	}

	for _, delay := range []time.Duration{time.Second, time.Minute} {
		start := tt.Now()
		r := asyncsteps.New(asyncsteps.WithTool(tt),
			asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				fmt.Println("unhandled:", err)
			}))

		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			cancelRead := socketRead(as, delay, func(data string) {
				as.Success(data)
			})
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				fmt.Println("socket.cancel_read()")
				cancelRead()
			})
			as.SetTimeout(30 * time.Second)
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.Timeout {
				fmt.Println("Timeout")
			} else {
				fmt.Println("Read Error")
			}
		})
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			fmt.Println("data:", args[0], "after", tt.Now().Sub(start))
		})

		r.Execute()
		tt.Run()
	}
	// Output:
	// data: hello after 1s
	// socket.cancel_read()
	// Timeout
	// unhandled: Timeout
}

// Spec 1.4: the first failing branch of a Parallel cancels the others. The
// flow runs once with two jobs that succeed, then again with a third branch
// that fails at once.
func Example_parallelAbort() {
	tt := asyncsteps.NewTestTool()

	// job stores result in the shared state after delay; its cancel handler
	// stops the pending work.
	job := func(name string, result int, delay time.Duration) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			work := as.Tool().Deferred(delay, func() {
				as.State().Set(name, result)
				as.Success()
			})
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				fmt.Println("cancel", name)
				work.Cancel()
			})
		}
	}

	for _, fail := range []bool{false, true} {
		fmt.Println("-- with failing branch:", fail)
		r := asyncsteps.New(asyncsteps.WithTool(tt),
			asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				fmt.Println("unhandled:", err)
			}))

		p := r.Parallel()
		p.Add(job("result1", 1, time.Second)).
			Add(job("result2", 2, 2*time.Second))
		if fail {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Error("Some Error")
			})
		}
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(as.State().Get("result1").(int) + as.State().Get("result2").(int))
			as.Success()
		})

		r.Execute()
		tt.Run()
	}
	// Output:
	// -- with failing branch: false
	// 3
	// -- with failing branch: true
	// cancel result1
	// cancel result2
	// unhandled: Some Error
}

// Spec 1.8: Loop with Break, nested loops with a label, Repeat and ForEach.
func Example_loops() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))

	// callSomeLibrary stands for a library entry point that adds its own
	// step: the step yields the next number of a fake source, 0 meaning
	// "no result".
	source := []int{1, 2, 0, 3, 4, 0}
	callSomeLibrary := func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			next := source[0]
			source = source[1:]
			as.Success(next)
		})
	}

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		// Basic principles.
		as.Loop(func(as asyncsteps.AsyncSteps) {
			callSomeLibrary(as)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				result := args[0].(int)
				if result == 0 {
					fmt.Println("break")
					as.Break() // exit loop
				}
				fmt.Println("result:", result)
			})
		})

		// Inner loops and labels.
		as.Loop(func(as asyncsteps.AsyncSteps) {
			if len(source) == 0 {
				as.Break("OUTER")
			}
			fmt.Println("OUTER iteration")
			as.Loop(func(as asyncsteps.AsyncSteps) {
				callSomeLibrary(as)
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					result := args[0].(int)
					if result == 0 {
						fmt.Println("continue OUTER")
						as.Continue("OUTER") // exit the inner loop
					}
					fmt.Println("inner result:", result)
					as.Success(result)
				})
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				// The inner loop only ends by Continue("OUTER"), which skips
				// the rest of the OUTER iteration.
				fmt.Println("not reached")
			})
		}, "OUTER")

		// Loop n times.
		as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
			fmt.Println("Iteration:", i)
		})

		// Traverse through list or map.
		as.ForEach([]string{"apple", "banana"}, func(as asyncsteps.AsyncSteps, k, v any) {
			fmt.Println(k, "=", v)
		})
	})

	r.Execute()
	tt.Run()
	// Output:
	// result: 1
	// result: 2
	// break
	// OUTER iteration
	// inner result: 3
	// inner result: 4
	// continue OUTER
	// Iteration: 0
	// Iteration: 1
	// Iteration: 2
	// 0 = apple
	// 1 = banana
}

// Spec 3.1: single-level steps. The pseudo-code's "something" is true in the
// first run and false in the second; externalSuccess and externalError print.
func Example_singleLevelSteps() {
	tt := asyncsteps.NewTestTool()
	externalSuccess := func(res1, res2 any) { fmt.Println("success:", res1, res2) }
	externalError := func(code string) { fmt.Println("error:", code) }

	for _, something := range []bool{true, false} {
		r := asyncsteps.New(asyncsteps.WithTool(tt),
			asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				fmt.Println("unhandled:", err)
			}))

		r.Add(
			func(innerAs asyncsteps.AsyncSteps, _ ...any) {
				if something {
					innerAs.Success(1, 2)
				} else {
					innerAs.Error(asyncsteps.NotImplemented)
				}
			},
			func(innerAs asyncsteps.AsyncSteps, code string) {
				externalError(code)
			},
		).Add(
			func(innerAs asyncsteps.AsyncSteps, args ...any) {
				externalSuccess(args[0], args[1])
			},
		)

		r.Execute()
		tt.Run()
	}
	// Output:
	// success: 1 2
	// error: NotImplemented
	// unhandled: NotImplemented
}

// Spec 3.2: the last sub-step's success args become the result of its parent
// step. "something" is true in the first run and false in the second.
func Example_subSteps() {
	tt := asyncsteps.NewTestTool()
	externalSuccess := func(res1, res2 any) { fmt.Println("success:", res1, res2) }
	externalError := func(code string) { fmt.Println("error:", code) }

	for _, something := range []bool{true, false} {
		r := asyncsteps.New(asyncsteps.WithTool(tt),
			asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				fmt.Println("unhandled:", err)
			}))

		r.Add(
			func(innerAs asyncsteps.AsyncSteps, _ ...any) {
				innerAs.Add(
					func(inner2As asyncsteps.AsyncSteps, _ ...any) {
						if something {
							inner2As.Success(1)
						} else {
							inner2As.Error(asyncsteps.NotImplemented)
						}
					},
					func(inner2As asyncsteps.AsyncSteps, code string) {
						fmt.Println("Spotted error " + code)
						// continue with higher level error handlers
					},
				)
				innerAs.Add(
					func(inner2As asyncsteps.AsyncSteps, args ...any) {
						inner2As.Success(args[0], 2)
					},
				)
			},
			func(innerAs asyncsteps.AsyncSteps, code string) {
				externalError(code)
			},
		).Add(
			func(innerAs asyncsteps.AsyncSteps, args ...any) {
				externalSuccess(args[0], args[1])
			},
		)

		r.Execute()
		tt.Run()
	}
	// Output:
	// success: 1 2
	// Spotted error NotImplemented
	// error: NotImplemented
	// unhandled: NotImplemented
}

// Spec 3.3: parallel branches share the State of the flow. The step after a
// Parallel gets no args, so the results travel through the State.
func Example_parallelAndState() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	externalSuccess := func(res1, res2 any) { fmt.Println("success:", res1, res2) }
	externalError := func(code string) { fmt.Println("error:", code) }

	r.Add(
		func(innerAs asyncsteps.AsyncSteps, _ ...any) {
			innerAs.Parallel().Add(
				func(inner2As asyncsteps.AsyncSteps, _ ...any) {
					inner2As.State().Set("parallel_1", 1)
				},
				func(inner2As asyncsteps.AsyncSteps, code string) {
					fmt.Println("Spotted error " + code)
					// continue with higher level error handlers
				},
			).Add(
				func(inner2As asyncsteps.AsyncSteps, _ ...any) {
					inner2As.State().Set("parallel_2", 2)
				},
				func(inner2As asyncsteps.AsyncSteps, code string) {
					inner2As.State().Set("parallel_2", 0)
					// a plain return goes on unwinding
				},
			)
		},
		func(innerAs asyncsteps.AsyncSteps, code string) {
			externalError(code)
		},
	).Add(
		func(innerAs asyncsteps.AsyncSteps, _ ...any) {
			externalSuccess(
				r.State().Get("parallel_1"),
				r.State().Get("parallel_2"),
			)
		},
	)

	r.Execute()
	tt.Run()
	// Output:
	// success: 1 2
}

// Spec 3.4: Repeat, ForEach over a slice, and ForEach over the State (its
// user variables in name order).
func ExampleAsyncSteps_Repeat() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.State().Set("fruit", "apple")
	r.State().Set("count", 2)

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
			fmt.Println(i)
		})

		as.ForEach([]int{1, 3, 3}, func(as asyncsteps.AsyncSteps, k, v any) {
			fmt.Printf("%v=%v\n", k, v)
		})

		as.ForEach(as.State(), func(as asyncsteps.AsyncSteps, k, v any) {
			fmt.Printf("%v=%v\n", k, v)
		})
	})

	r.Execute()
	tt.Run()
	// Output:
	// 0
	// 1
	// 2
	// 0=1
	// 1=3
	// 2=3
	// count=2
	// fruit=apple
}

// Spec 3.5: WaitExternal makes a step wait for Success or Error from outside
// without a timeout or cancel handler. callSomeExternal is a fake service on
// the loop's clock: it succeeds in the first run and fails in the second.
func ExampleAsyncSteps_WaitExternal() {
	tt := asyncsteps.NewTestTool()

	callSomeExternal := func(tool asyncsteps.Tool, fail bool, done func(err error)) {
		tool.Deferred(10*time.Millisecond, func() {
			if fail {
				done(errors.New("connection reset"))
			} else {
				done(nil)
			}
		})
	}

	for _, fail := range []bool{false, true} {
		r := asyncsteps.New(asyncsteps.WithTool(tt),
			asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				fmt.Println("unhandled:", err)
			}))

		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()

			callSomeExternal(as.Tool(), fail, func(err error) {
				if err != nil {
					// Outside of a running callback Error does not panic,
					// so the spec's try/catch is not needed.
					as.Error(asyncsteps.CommError, err.Error())
				} else {
					as.Success()
				}
			})
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("external call succeeded")
		})

		r.Execute()
		tt.Run()
	}
	// Output:
	// external call succeeded
	// unhandled: CommError: connection reset
}

// The "Simple steps" example of the JavaScript reference implementation; the
// output is the same.
func Example_simpleSteps() {
	tt := asyncsteps.NewTestTool()
	rootAs := asyncsteps.New(asyncsteps.WithTool(tt))

	rootAs.Add(
		func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("MyValue")
		},
	).Add(
		func(as asyncsteps.AsyncSteps, args ...any) {
			if args[0] == "MyValue" {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Error("MyError", "Something bad has happened")
				})
			}

			as.SuccessStep()
		},
		func(as asyncsteps.AsyncSteps, code string) {
			if code == "MyError" {
				as.Success("NotSoBad")
			}
		},
	)

	rootAs.Add(
		func(as asyncsteps.AsyncSteps, args ...any) {
			if args[0] == "NotSoBad" {
				fmt.Println("MyError was ignored: " + as.State().ErrorInfo)
			}

			as.State().Set("p1arg", "abc")
			as.State().Set("p2arg", "xyz")

			p := as.Parallel()

			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				fmt.Println("Parallel Step 1")

				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					fmt.Println("Parallel Step 1.1")
					as.State().Set("p1", as.State().Get("p1arg").(string)+"1")
					as.Success()
				})
			}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				fmt.Println("Parallel Step 2")

				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					fmt.Println("Parallel Step 2.1")
					as.State().Set("p2", as.State().Get("p2arg").(string)+"2")
					as.Success()
				})
			})
		},
	).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("Parallel 1 result:", as.State().Get("p1"))
		fmt.Println("Parallel 2 result:", as.State().Get("p2"))
	})

	rootAs.Execute()
	tt.Run()
	// Output:
	// MyError was ignored: Something bad has happened
	// Parallel Step 1
	// Parallel Step 2
	// Parallel Step 1.1
	// Parallel Step 2.1
	// Parallel 1 result: abc1
	// Parallel 2 result: xyz2
}

// The "External event wait" example of the JavaScript reference
// implementation; the output is the same. The dummy service would answer
// after 5 seconds, so the 1 second timeout of the second step expires.
func Example_externalEventWait() {
	tt := asyncsteps.NewTestTool()

	// dummyServiceRead calls success when data is available and error if an
	// error occurs; it returns a request handle.
	dummyServiceRead := func(tool asyncsteps.Tool, success func(data string), _ func(err string)) asyncsteps.Handle {
		return tool.Deferred(5*time.Second, func() { success("data") })
	}
	// dummyServiceCancel cancels a request made by dummyServiceRead.
	dummyServiceCancel := func(reqhandle asyncsteps.Handle) {
		reqhandle.Cancel()
	}

	// The flow ends with the Timeout, which the JavaScript example does not
	// print either.
	rootAs := asyncsteps.New(asyncsteps.WithTool(tt),
		asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))

	rootAs.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Tool().Immediate(func() {
			as.Success("async success()")
		})

		as.SetTimeout(10 * time.Millisecond)
	}).Add(
		func(as asyncsteps.AsyncSteps, args ...any) {
			fmt.Println(args[0])

			reqhandle := dummyServiceRead(as.Tool(),
				func(data string) {
					as.Success(data)
				},
				func(err string) {
					if err != "SomeSpecificCancelCode" {
						as.Error(err)
					}
				},
			)

			as.SetCancel(func(as asyncsteps.AsyncSteps) {
				dummyServiceCancel(reqhandle)
			})

			// OPTIONAL. Set timeout of 1s
			as.SetTimeout(time.Second)
		},
		func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println(code + ": " + as.State().ErrorInfo)
		},
	)

	rootAs.Execute()
	tt.Run()
	// Output:
	// async success()
	// Timeout:
}

// The "Model steps" example of the JavaScript reference implementation: the
// steps and state of a model root are copied into new roots, so their
// closures are created only once.
//
// Unlike JavaScript, Execute runs nothing itself: it only schedules the flow.
// The output is still the same, because the loop runs the scheduled flows in
// FIFO order and a flow yields after every step while other work is queued:
// each root runs its first step in turn, then its second, and so on. State
// "var" is "Dirty" in the second run of the model step because CopyFrom
// copies only the state variables that are not yet defined.
func Example_modelSteps() {
	tt := asyncsteps.NewTestTool()

	modelAs := asyncsteps.New(asyncsteps.WithTool(tt))
	modelAs.State().Set("var", "Vanilla")

	modelAs.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("-----")
		fmt.Println("Hi! I am from model_as")
		fmt.Println("State.var:", as.State().Get("var"))
		as.State().Set("var", "Dirty")
		as.Success()
	})

	for i := 0; i < 3; i++ {
		rootAs := asyncsteps.New(asyncsteps.WithTool(tt))
		rootAs.CopyFrom(modelAs)
		rootAs.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				fmt.Println(">> The first inner step")
				as.Success()
			})
			as.CopyFrom(modelAs)
			as.SuccessStep()
		})
		rootAs.Execute()
	}

	tt.Run()
	// Output:
	// -----
	// Hi! I am from model_as
	// State.var: Vanilla
	// -----
	// Hi! I am from model_as
	// State.var: Vanilla
	// -----
	// Hi! I am from model_as
	// State.var: Vanilla
	// >> The first inner step
	// >> The first inner step
	// >> The first inner step
	// -----
	// Hi! I am from model_as
	// State.var: Dirty
	// -----
	// Hi! I am from model_as
	// State.var: Dirty
	// -----
	// Hi! I am from model_as
	// State.var: Dirty
}

// The "Async Loops" example of the JavaScript reference implementation; the
// output is the same. A map is traversed in sorted key order.
func ExampleAsyncSteps_ForEach() {
	tt := asyncsteps.NewTestTool()
	rootAs := asyncsteps.New(asyncsteps.WithTool(tt))

	rootAs.Add(
		func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
				fmt.Println("> Repeat:", i)
			})

			as.ForEach([]int{1, 2, 3}, func(as asyncsteps.AsyncSteps, k, v any) {
				fmt.Println("> forEach:", k, "=", v)
			})

			as.ForEach(map[string]int{"a": 1, "b": 2, "c": 3}, func(as asyncsteps.AsyncSteps, k, v any) {
				fmt.Println("> forEach:", k, "=", v)
			})
		},
	)

	rootAs.Execute()
	tt.Run()
	// Output:
	// > Repeat: 0
	// > Repeat: 1
	// > Repeat: 2
	// > forEach: 0 = 1
	// > forEach: 1 = 2
	// > forEach: 2 = 3
	// > forEach: a = 1
	// > forEach: b = 2
	// > forEach: c = 3
}

// Spec 1.5, AsyncSteps cloning: a request flow is built once as a model and
// copied per request; its business logic, another model, is chosen per
// request through a state variable and copied in with CopyFrom while the
// request runs.
func Example_cloning() {
	tt := asyncsteps.NewTestTool()

	reqRepoCommon := asyncsteps.New(asyncsteps.WithTool(tt))
	reqRepoCommon.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { fmt.Println("parse request") })
		as.CopyFrom(as.State().Get("business_logic").(*asyncsteps.Root))
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { fmt.Println("write response", args) })
	})

	reqRepoBuslog1 := asyncsteps.New(asyncsteps.WithTool(tt))
	reqRepoBuslog1.
		Add(func(as asyncsteps.AsyncSteps, _ ...any) { fmt.Println("business logic 1, step 1") }).
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println("business logic 1, step 2")
			as.Success("result")
		})

	actualExec := reqRepoCommon.Clone()
	actualExec.State().Set("business_logic", reqRepoBuslog1)
	actualExec.Execute()
	tt.Run()
	// Output:
	// parse request
	// business logic 1, step 1
	// business logic 1, step 2
	// write response [result]
}

// Spec 1.12, success step and result injection: a value is returned after
// the inner steps have run.
func ExampleAsyncSteps_SuccessStep() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		value := 123
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { fmt.Println("sub-step") })
		as.SuccessStep(value)
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("next step got", args)
	})
	r.Execute()
	tt.Run()
	// Output:
	// sub-step
	// next step got [123]
}
