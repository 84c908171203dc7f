package asyncsteps_test

// This file is long on purpose: Await and its typed helpers share one bridge
// to goroutines, whose every way of ending is tested here.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// goroutineBaseline returns the number of goroutines now, for
// settleGoroutines to compare with at the end of a test.
func goroutineBaseline() int { return runtime.NumGoroutine() }

// settleGoroutines waits until no more goroutines run than before (those a
// test started take a moment to exit) and fails the test, with every stack,
// if they do not. It returns the final count.
func settleGoroutines(t *testing.T, before int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return n
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines still running, %d before the test:\n%s", n, before, buf)
		}
		time.Sleep(time.Millisecond)
	}
}

// runCtx runs r to its end with a generous deadline, so that a flow that
// never ends fails the test instead of hanging it.
func runCtx(t *testing.T, r *asyncsteps.Root) ([]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args, err := r.Run(ctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatal("the flow did not end within 10s")
	}
	return args, err
}

// API: the value of the awaited function becomes the single success argument
// of the step, whatever it is: nil and slices are not spread.
func TestAwaitValueIsSingleSuccessArg(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  string
	}{
		{"int", 42, "next[42]"},
		{"string", "hello", "next[hello]"},
		{"nil", nil, "next[<nil>]"},
		{"slice", []any{1, 2}, "next[[1 2]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracer
			r, _ := newFlow()
			r.Await(func(ctx context.Context) (any, error) { return tc.value, nil })
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.addf("next%v", args)
				as.Success(len(args))
			})

			args, err := runCtx(t, r)

			wantTrace(t, &tr, tc.want)
			if err != nil {
				t.Fatalf("Run error = %v", err)
			}
			wantArgs(t, "Run args", args, 1)
		})
	}
}

// API: an error that is (or wraps) *Error raises its code and info; a
// deadline raises Timeout; any other plain error raises InternalError with
// err.Error() as info (errmap_test.go has the other mappings). LastException holds the
// original error either way, and the flow's error unwraps to it.
func TestAwaitErrorMapping(t *testing.T) {
	denied := &asyncsteps.Error{Code: asyncsteps.Unauthorized, Info: "bad token"}
	wrapped := fmt.Errorf("login: %w", denied)
	plain := errors.New("disk full")
	noCode := &asyncsteps.Error{Info: "half made"}
	for _, tc := range []struct {
		name      string
		err       error
		code      string
		info      string
		exception error // nil: checked separately
	}{
		{"*Error", denied, asyncsteps.Unauthorized, "bad token", denied},
		{"wrapped *Error", wrapped, asyncsteps.Unauthorized, "bad token", wrapped},
		{"plain error", plain, asyncsteps.InternalError, "disk full", plain},
		{"context deadline", context.DeadlineExceeded, asyncsteps.Timeout, "context deadline exceeded", context.DeadlineExceeded},
		{"*Error without a code", noCode, asyncsteps.InternalError, "*Error: empty error code; info: half made", noCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracer
			r, _ := newFlow()
			r.Await(func(ctx context.Context) (any, error) {
				return "ignored", tc.err
			}, func(as asyncsteps.AsyncSteps, code string) {
				st := as.State()
				tr.addf("onerror:%s:%s", code, st.ErrorInfo)
				if st.LastException != tc.exception {
					t.Errorf("LastException = %#v, want %#v", st.LastException, tc.exception)
				}
			})
			r.Add(tr.step("not reached"))

			_, err := runCtx(t, r)

			wantTrace(t, &tr, "onerror:"+tc.code+":"+tc.info)
			wantError(t, err, tc.code, tc.info)
			if !errors.Is(err, &asyncsteps.Error{Code: tc.code}) {
				t.Errorf("errors.Is(%v, code %s) = false", err, tc.code)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("errors.Is(%v, original %v) = false", err, tc.err)
			}
		})
	}
}

// API: a panic in the awaited function does not crash the process: the step
// fails with InternalError and LastException is the recovered panic.
func TestAwaitPanicBecomesInternalError(t *testing.T) {
	var tr tracer
	r, _ := newFlow()
	r.Await(func(ctx context.Context) (any, error) {
		panic("oops")
	}, func(as asyncsteps.AsyncSteps, code string) {
		var p *asyncsteps.PanicError
		if !errors.As(as.State().LastException, &p) || p.Value != "oops" {
			t.Errorf("LastException = %#v, want a *PanicError of oops", as.State().LastException)
		}
		tr.addf("onerror:%s:%s", code, as.State().ErrorInfo)
	})

	_, err := runCtx(t, r)

	wantTrace(t, &tr, "onerror:InternalError:panic: oops")
	wantCode(t, err, asyncsteps.InternalError)
}

// awaitCancelCase is a way to cancel a running Await step, seen from inside
// the awaited function.
type awaitCancelCase struct {
	name string
	// build adds to r the steps around await; started is closed once the
	// awaited function runs.
	build func(r *asyncsteps.Root, await asyncsteps.AwaitFunc, started <-chan struct{})
	// ctx returns the context for Run; trigger, if not nil, runs on its own
	// goroutine once the awaited function runs.
	ctx     func() (context.Context, context.CancelFunc)
	trigger func(r *asyncsteps.Root, cancelRun context.CancelFunc)
	check   func(t *testing.T, err error)
	// deadline: a deadline caused the cancel, so the awaited function's
	// ctx.Err() is context.DeadlineExceeded rather than context.Canceled.
	deadline bool
}

func awaitCancelCases(timeout time.Duration) []awaitCancelCase {
	background := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}
	plain := func(r *asyncsteps.Root, await asyncsteps.AwaitFunc, _ <-chan struct{}) {
		r.Await(await)
	}
	return []awaitCancelCase{{
		name: "step timeout",
		build: func(r *asyncsteps.Root, await asyncsteps.AwaitFunc, _ <-chan struct{}) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(timeout)
				as.Await(await)
			})
		},
		ctx:      background,
		deadline: true,
		check: func(t *testing.T, err error) {
			wantError(t, err, asyncsteps.Timeout, "")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
			}
		},
	}, {
		name: "parallel sibling failure",
		build: func(r *asyncsteps.Root, await asyncsteps.AwaitFunc, started <-chan struct{}) {
			p := r.Parallel()
			p.Await(await)
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.AwaitChan(as, started)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Error("SiblingFailed", "boom")
				})
			})
		},
		ctx:   background,
		check: func(t *testing.T, err error) { wantError(t, err, "SiblingFailed", "boom") },
	}, {
		name:    "Root.Cancel",
		build:   plain,
		ctx:     background,
		trigger: func(r *asyncsteps.Root, _ context.CancelFunc) { r.Cancel() },
		check: func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run error = %v, want context.Canceled", err)
			}
		},
	}, {
		name:    "Run context cancelled",
		build:   plain,
		ctx:     background,
		trigger: func(_ *asyncsteps.Root, cancelRun context.CancelFunc) { cancelRun() },
		check: func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run error = %v, want context.Canceled", err)
			}
		},
	}, {
		name:  "Run context deadline",
		build: plain,
		ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		},
		deadline: true,
		check: func(t *testing.T, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run error = %v, want context.DeadlineExceeded", err)
			}
		},
	}}
}

// API: the awaited function's context is cancelled as soon as its step is
// cancelled: by a timeout, a failed parallel sibling, Root.Cancel or the end
// of Run's context. The function sees it from inside, on a virtual-time
// TestTool and on a real Loop alike, with context.DeadlineExceeded when a
// deadline caused it, and no goroutine is left behind.
func TestAwaitContextCancelledWithStep(t *testing.T) {
	before := goroutineBaseline()
	tools := []struct {
		name    string
		timeout time.Duration
		tool    func() (asyncsteps.Tool, func())
	}{
		{"TestTool", time.Second, func() (asyncsteps.Tool, func()) { return asyncsteps.NewTestTool(), func() {} }},
		{"Loop", 20 * time.Millisecond, func() (asyncsteps.Tool, func()) {
			l := asyncsteps.NewLoop()
			return l, l.Close
		}},
	}
	for _, tool := range tools {
		for _, tc := range awaitCancelCases(tool.timeout) {
			t.Run(tool.name+"/"+tc.name, func(t *testing.T) {
				tl, closeTool := tool.tool()
				defer closeTool()
				started := make(chan struct{})
				seen := make(chan error, 1)
				r := asyncsteps.New(asyncsteps.WithTool(tl))
				tc.build(r, func(ctx context.Context) (any, error) {
					close(started)
					<-ctx.Done()
					seen <- ctx.Err()
					return "too late", nil
				}, started)
				ctx, cancelRun := tc.ctx()
				defer cancelRun()
				if tc.trigger != nil {
					go func() {
						<-started
						tc.trigger(r, cancelRun)
					}()
				}

				_, err := r.Run(ctx)

				tc.check(t, err)
				select {
				case got := <-seen:
					want := context.Canceled
					if tc.deadline {
						want = context.DeadlineExceeded
					}
					if got != want {
						t.Errorf("ctx.Err() inside the awaited function = %v, want %v", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the awaited function's context was not cancelled")
				}
			})
		}
	}
	n := settleGoroutines(t, before)
	t.Logf("goroutines: %d before, %d after", before, n)
}

// API and docs/DESIGN.md#stale-steps: a result that the awaited function returns after its
// step was cancelled is dropped: no step runs for it, nothing is scheduled
// on the tool, and the flow's one Result stands. The awaited goroutine does
// not block on the flow: it exits.
func TestAwaitLateResultAfterCancelIsDropped(t *testing.T) {
	outcomes := map[string]func() (any, error){
		"value": func() (any, error) { return "late", nil },
		"error": func() (any, error) { return nil, &asyncsteps.Error{Code: "Late", Info: "late"} },
		"panic": func() (any, error) { panic("late") },
	}
	for name, outcome := range outcomes {
		t.Run("timeout/"+name, func(t *testing.T) {
			before := goroutineBaseline()
			var tr tracer
			r, tt := newFlow()
			started, release := make(chan struct{}), make(chan struct{})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.Await(func(ctx context.Context) (any, error) {
					close(started)
					<-release // ignores ctx on purpose
					return outcome()
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("onerror:%s", code)
				as.Success("recovered")
			})
			r.Add(tr.stepArgs("next"))
			ch := r.Promise()
			tt.Advance(0)
			<-started
			tt.Advance(time.Second)
			drive(t, tt)
			wantSuccess(t, result(t, ch))

			close(release)
			settleGoroutines(t, before)

			if tt.HasEvents() {
				t.Error("the late result scheduled an event")
			}
			drive(t, tt)
			noResult(t, ch)
			wantTrace(t, &tr, "onerror:Timeout,next[recovered]")
		})
		t.Run("Root.Cancel/"+name, func(t *testing.T) {
			before := goroutineBaseline()
			var tr tracer
			r, tt := newFlow()
			started, release := make(chan struct{}), make(chan struct{})
			r.Await(func(ctx context.Context) (any, error) {
				close(started)
				<-release
				return outcome()
			}, tr.handler("onerror"))
			r.Add(tr.stepArgs("next"))
			ch := r.Promise()
			tt.Advance(0)
			<-started
			r.Cancel()
			drive(t, tt)
			if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
				t.Fatalf("Result.Err = %v, want context.Canceled", res.Err)
			}

			close(release)
			settleGoroutines(t, before)

			if tt.HasEvents() {
				t.Error("the late result scheduled an event")
			}
			drive(t, tt)
			noResult(t, ch)
			wantTrace(t, &tr, "")
		})
	}
}

// AwaitChan takes a value that already waits inside the step's callback: the
// flow ends while the tool is driven, with no goroutine to wait for.
func TestAwaitChanTakesReadyValueAtOnce(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	ch := make(chan int, 1)
	ch <- 7
	asyncsteps.AwaitChan(r, ch)
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantSuccess(t, res)
	wantTrace(t, &tr, "next[7]")
}

// AwaitChan succeeds with a value sent later from another goroutine, typed
// as the channel's element type; a closed channel gives the zero value.
func TestAwaitChanWaitsForValueOrClose(t *testing.T) {
	var tr tracer
	r, _ := newFlow()
	values := make(chan string)
	closed := make(chan int)
	asyncsteps.AwaitChan(r, values)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		s, ok := asyncsteps.Arg[string](args, 0)
		tr.addf("value:%q:%v", s, ok)
	})
	asyncsteps.AwaitChan(r, closed)
	r.Add(tr.stepArgs("closed"))
	go func() {
		values <- "hello"
		close(closed)
	}()

	_, err := runCtx(t, r)

	if err != nil {
		t.Fatal(err)
	}
	wantTrace(t, &tr, `value:"hello":true,closed[0]`)
}

// A cancelled AwaitChan stops waiting: its goroutine exits and takes no value
// from the channel afterwards.
func TestAwaitChanCancelledStopsReceiving(t *testing.T) {
	before := goroutineBaseline()
	var tr tracer
	r, tt := newFlow()
	ch := make(chan int, 1)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second)
		asyncsteps.AwaitChan(as, ch)
	})
	r.Add(tr.stepArgs("not reached"))

	res := run(t, r, tt)

	wantError(t, res.Err, asyncsteps.Timeout, "")
	settleGoroutines(t, before)
	ch <- 1
	if len(ch) != 1 {
		t.Error("a value sent after the cancel was received")
	}
	wantTrace(t, &tr, "")
}

// A nil channel never delivers, as a receive from it blocks: only the step's
// cancellation ends it, and no goroutine waits meanwhile.
func TestAwaitChanNilWaitsForCancel(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second)
		asyncsteps.AwaitChan[int](as, nil)
	})
	ch := r.Promise()
	before := goroutineBaseline()
	tt.Advance(0)
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines while waiting on a nil channel, %d before", n, before)
	}
	drive(t, tt)
	wantError(t, result(t, ch).Err, asyncsteps.Timeout, "")
}

// AwaitChan on the value Parallel returns adds a branch.
func TestAwaitChanAsParallelBranch(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	a, b := make(chan int, 1), make(chan int, 1)
	a <- 1
	b <- 2
	p := r.Parallel()
	asyncsteps.AwaitChan(p, a)
	asyncsteps.AwaitChan(p, b)
	p.Add(tr.step("third"))
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantSuccess(t, res)
	wantTrace(t, &tr, "third,after[]")
}

// AwaitFlow runs another flow, possibly on another loop, as a step: its
// success args become the step's; its error is the step's error, with the
// other flow's error as LastException.
func TestAwaitFlowCompletesLikeOtherFlow(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	t.Run("success", func(t *testing.T) {
		var tr tracer
		other := asyncsteps.New(asyncsteps.WithTool(loop))
		other.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("x", 1) })
		r, _ := newFlow()
		asyncsteps.AwaitFlow(r, other)
		r.Add(tr.stepArgs("next"))

		_, err := runCtx(t, r)

		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, &tr, "next[x 1]")
	})
	t.Run("error", func(t *testing.T) {
		var tr tracer
		other := asyncsteps.New(asyncsteps.WithTool(loop))
		other.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.Unauthorized, "no") })
		r, _ := newFlow()
		asyncsteps.AwaitFlow(r, other, func(as asyncsteps.AsyncSteps, code string) {
			var e *asyncsteps.Error
			if !errors.As(as.State().LastException, &e) || e.Info != "no" {
				t.Errorf("LastException = %#v, want the other flow's error", as.State().LastException)
			}
			tr.addf("onerror:%s:%s", code, as.State().ErrorInfo)
		})

		_, err := runCtx(t, r)

		wantError(t, err, asyncsteps.Unauthorized, "no")
		wantTrace(t, &tr, "onerror:Unauthorized:no")
	})
	t.Run("nil Root", func(t *testing.T) {
		r, tt := newFlow()
		asyncsteps.AwaitFlow(r, nil)
		wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "AwaitFlow: nil Root")
	})
	t.Run("running Root", func(t *testing.T) {
		other := asyncsteps.New(asyncsteps.WithTool(loop))
		other.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		otherDone := other.Promise()
		r, tt := newFlow()
		asyncsteps.AwaitFlow(r, other)
		wantCode(t, run(t, r, tt).Err, asyncsteps.InternalError)
		other.Cancel()
		<-otherDone
	})
}

// Cancelling an AwaitFlow step cancels the other flow: its cancel handlers
// run, and no goroutine is left.
func TestAwaitFlowCancelCancelsOtherFlow(t *testing.T) {
	before := goroutineBaseline()
	loop := asyncsteps.NewLoop()
	otherStarted := make(chan struct{})
	otherCancelled := make(chan struct{})
	other := asyncsteps.New(asyncsteps.WithTool(loop))
	other.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { close(otherCancelled) })
		close(otherStarted)
	})
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		// A sibling fails once the other flow waits, so that the cancel
		// cannot win the race with the other flow's first step.
		p := as.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, other) })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.AwaitChan(as, otherStarted)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.Timeout) })
		})
	})

	_, err := runCtx(t, r)

	wantError(t, err, asyncsteps.Timeout, "")
	waitFor(t, otherCancelled)
	drive(t, tt)
	loop.Close()
	settleGoroutines(t, before)
}

// AwaitResult takes the Result of a flow that has already ended at once, and
// maps a cancelled flow's Result to an InternalError that still matches
// context.Canceled through LastException.
func TestAwaitResult(t *testing.T) {
	var tr tracer
	ready := make(chan asyncsteps.Result, 1)
	ready <- asyncsteps.Result{Args: []any{"a", "b"}}
	cancelled := make(chan asyncsteps.Result, 1)
	cancelled <- asyncsteps.Result{Err: context.Canceled}
	r, tt := newFlow()
	asyncsteps.AwaitResult(r, ready)
	r.Add(tr.stepArgs("next"))
	asyncsteps.AwaitResult(r, cancelled, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("onerror:%s:%s:%v", code, as.State().ErrorInfo,
			errors.Is(as.State().LastException, context.Canceled))
	})

	res := run(t, r, tt)

	wantError(t, res.Err, asyncsteps.InternalError, "context canceled")
	wantTrace(t, &tr, "next[a b],onerror:InternalError:context canceled:true")
}

// Arg reads a typed argument: out of range or of another type gives false,
// an untyped nil counts for types that can be nil.
func TestArg(t *testing.T) {
	args := []any{"s", 3, nil, &tracer{}, errors.New("e")}
	check := func(name string, got, want bool) {
		t.Helper()
		if got != want {
			t.Errorf("%s: ok = %v, want %v", name, got, want)
		}
	}
	s, ok := asyncsteps.Arg[string](args, 0)
	check("string", ok && s == "s", true)
	n, ok := asyncsteps.Arg[int](args, 1)
	check("int", ok && n == 3, true)
	_, ok = asyncsteps.Arg[string](args, 1)
	check("int as string", ok, false)
	_, ok = asyncsteps.Arg[int64](args, 1)
	check("int as int64", ok, false)
	_, ok = asyncsteps.Arg[int](args, 2)
	check("nil as int", ok, false)
	p, ok := asyncsteps.Arg[*tracer](args, 2)
	check("nil as pointer", ok && p == nil, true)
	e, ok := asyncsteps.Arg[error](args, 2)
	check("nil as error", ok && e == nil, true)
	up, ok := asyncsteps.Arg[unsafe.Pointer](args, 2)
	check("nil as unsafe.Pointer", ok && up == nil, true)
	m, ok := asyncsteps.Arg[map[string]int](args, 2)
	check("nil as map", ok && m == nil, true)
	_, ok = asyncsteps.Arg[struct{}](args, 2)
	check("nil as struct", ok, false)
	_, ok = asyncsteps.Arg[*tracer](args, 3)
	check("pointer", ok, true)
	e, ok = asyncsteps.Arg[error](args, 4)
	check("error", ok && e.Error() == "e", true)
	v, ok := asyncsteps.Arg[any](args, 1)
	check("any", ok && v == 3, true)
	_, ok = asyncsteps.Arg[int](args, 5)
	check("out of range", ok, false)
	_, ok = asyncsteps.Arg[int](args, -1)
	check("negative", ok, false)
	_, ok = asyncsteps.Arg[int](nil, 0)
	check("no args", ok, false)
}

// A nil pointer given as a non-nil error (a typed nil) by an Await function
// or through AwaitResult fails the step with an InternalError that says so.
// Such an error's methods panic, on a goroutine nobody recovers: reading
// it must not end the process.
func TestAwaitTypedNilErrorIsInternalError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		info string
	}{
		{"*Error", (*asyncsteps.Error)(nil), "a nil *asyncsteps.Error was given as an error"},
		{"*fs.PathError", (*fs.PathError)(nil), "a nil *fs.PathError was given as an error"},
		{"wrapping a nil *fs.PathError", fmt.Errorf("open: %w", (*fs.PathError)(nil)),
			"reading the *fmt.wrapError given as an error panicked: runtime error: invalid memory address or nil pointer dereference"},
	} {
		t.Run("Await "+tc.name, func(t *testing.T) {
			r, _ := newFlow()
			r.Await(func(ctx context.Context) (any, error) { return nil, tc.err })
			_, err := runCtx(t, r)
			wantError(t, err, asyncsteps.InternalError, tc.info)
		})
		t.Run("AwaitResult "+tc.name, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			ch := make(chan asyncsteps.Result, 1)
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			asyncsteps.AwaitResult(r, ch)
			res := r.Promise()
			waitStacks(t, true, "asyncsteps.AwaitResult.") // the step waits on a goroutine
			ch <- asyncsteps.Result{Err: tc.err}
			wantError(t, receive(t, res, "the flow").Err, asyncsteps.InternalError, tc.info)
		})
	}
}

// nilSafeError is an error whose nil pointer is a valid error.
type nilSafeError struct{}

func (*nilSafeError) Error() string { return "nil-safe error" }

// A nil pointer whose Error method works is an error like any other: its
// text is the info, and it is the LastException (API: Await).
func TestAwaitNilSafeErrorKeepsItsInfo(t *testing.T) {
	var nilSafe *nilSafeError
	r, _ := newFlow()
	r.Await(func(ctx context.Context) (any, error) { return nil, nilSafe },
		func(as asyncsteps.AsyncSteps, code string) {
			if as.State().LastException != error(nilSafe) {
				t.Errorf("LastException = %#v, want the nil *nilSafeError", as.State().LastException)
			}
		})
	_, err := runCtx(t, r)
	wantError(t, err, asyncsteps.InternalError, "nil-safe error")
}
