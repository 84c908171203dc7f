package asyncsteps_test

// This file is long on purpose: it holds the hostile-user suite, every
// kind of callback crossed with every misdeed (panic, Goexit, unprintable
// panic values, blocking, closing its own loop) on every Tool, in one
// table so that a missing case shows.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A hostile or careless user: every callback kind, on every Tool, panics,
// calls runtime.Goexit (t.FailNow does), or panics with a value that
// panics when printed. The callback's step fails with InternalError, its
// handlers see it, and the loop goes on serving other flows. Each case
// runs in a child process (inChild), so that a crash or a hang fails it.

// goexitInfo is the info of the InternalError of a Goexit in a callback.
const goexitInfo = "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"

// evil is a value whose String method panics with the value itself: fmt
// cannot print it, and a runtime printing it as a panic value crashes.
type evil struct{}

func (e evil) String() string { panic(e) }

// evilErr is an error whose Error method panics with the error itself.
type evilErr struct{}

func (e evilErr) Error() string { panic(e) }

const evilInfo = "a asyncsteps_test.evil that panics when printed"

// misdeed is what a hostile callback does.
type misdeed struct {
	name string
	do   func()
	info string // the info of the InternalError the callback's step fails with
}

var misdeeds = []misdeed{
	{"panic", func() { panic("boom") }, "boom"},
	{"Goexit", runtime.Goexit, goexitInfo},
	{"unprintable panic", func() { panic(evil{}) }, evilInfo},
}

// hostileTool is a Tool under test, with the way to run a flow on it to
// its end. run fails the test, rather than hang, if the flow does not end.
type hostileTool struct {
	name string
	// open returns the tool and a function that releases it.
	open func(t *testing.T) (asyncsteps.Tool, func())
}

var hostileTools = []hostileTool{
	{"Loop", func(*testing.T) (asyncsteps.Tool, func()) {
		l := asyncsteps.NewLoop()
		return l, l.Close
	}},
	{"LoopGroup", func(*testing.T) (asyncsteps.Tool, func()) {
		g := asyncsteps.NewLoopGroup(2)
		return g.Loops()[1], g.Close
	}},
	{"DefaultTool", func(*testing.T) (asyncsteps.Tool, func()) {
		return asyncsteps.DefaultTool(), func() {}
	}},
	{"TestTool", func(*testing.T) (asyncsteps.Tool, func()) {
		return asyncsteps.NewTestTool(), func() {}
	}},
}

// finish waits for the Result of ch. A TestTool is driven meanwhile, each
// time from a goroutine of its own: a Goexit in a callback ends the
// goroutine that drives the tool (on a TestTool, the caller's), and the
// flow goes on when the tool is driven again.
func finish(t *testing.T, tool asyncsteps.Tool, ch <-chan asyncsteps.Result) asyncsteps.Result {
	t.Helper()
	tt, _ := tool.(*asyncsteps.TestTool)
	deadline := time.After(20 * time.Second)
	for {
		if tt != nil {
			driven := make(chan struct{})
			go func() {
				defer close(driven)
				tt.Run()
			}()
			<-driven
		}
		select {
		case res := <-ch:
			return res
		case <-deadline:
			t.Fatal("the flow did not end")
		case <-time.After(time.Millisecond):
		}
	}
}

// wantServing checks that tool still runs flows and callbacks.
func wantServing(t *testing.T, tool asyncsteps.Tool) {
	t.Helper()
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.SuccessStep("alive")
	ran := make(chan any, 1)
	tool.Immediate(func() { ran <- "immediate" })
	wantSuccess(t, finish(t, tool, r.Promise()), "alive")
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("an Immediate callback never ran")
	}
}

// callbackKind builds a flow on tool whose callback of one kind does act.
// want is what the flow's outer handler records ("code: info"), given the
// info of the misdeed; an empty want means the flow ends with a cancel.
type callbackKind struct {
	name  string
	build func(r *asyncsteps.Root, act func())
	want  func(info string) string
}

func caught(info string) string { return "InternalError: " + info }

var callbackKinds = []callbackKind{
	{"step", func(r *asyncsteps.Root, act func()) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { act() })
	}, caught},
	{"error handler", func(r *asyncsteps.Root, act func()) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") },
			func(as asyncsteps.AsyncSteps, code string) { act() })
	}, caught},
	{"cancel handler of a timed out step", func(r *asyncsteps.Root, act func()) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { act() })
			as.SetTimeout(time.Millisecond)
		})
	}, caught},
	{"cancel handler under a timed out step", func(r *asyncsteps.Root, act func()) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Millisecond)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { act() })
			})
		})
	}, func(string) string { return "Timeout: " }},
	{"cancel handler on Root.Cancel", func(r *asyncsteps.Root, act func()) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { act() })
			r.Cancel()
		})
	}, nil},
	{"Loop body", func(r *asyncsteps.Root, act func()) {
		r.Loop(func(as asyncsteps.AsyncSteps) { act() })
	}, caught},
	{"Repeat body", func(r *asyncsteps.Root, act func()) {
		r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) { act() })
	}, caught},
	{"ForEach body over an iter.Seq2", func(r *asyncsteps.Root, act func()) {
		r.ForEach(countTo(3), func(as asyncsteps.AsyncSteps, k, v any) { act() })
	}, caught},
	{"iter.Seq2 of a ForEach", func(r *asyncsteps.Root, act func()) {
		var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
			if yield(0, 0) {
				act()
			}
		}
		r.ForEach(seq, func(as asyncsteps.AsyncSteps, k, v any) {})
	}, caught},
	{"ForEachLimit item", func(r *asyncsteps.Root, act func()) {
		asyncsteps.ForEachLimit(r, countTo(3), 2, func(as asyncsteps.AsyncSteps, _, _ int) { act() })
	}, caught},
	{"iter.Seq2 of a ForEachLimit, as it starts", func(r *asyncsteps.Root, act func()) {
		var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
			if yield(0, 0) {
				act()
			}
		}
		asyncsteps.ForEachLimit(r, seq, 2, func(asyncsteps.AsyncSteps, int, int) {})
	}, caught},
	{"iter.Seq2 of a ForEachLimit, as an item ends", func(r *asyncsteps.Root, act func()) {
		var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
			if yield(0, 0) {
				act()
			}
		}
		asyncsteps.ForEachLimit(r, seq, 1, func(asyncsteps.AsyncSteps, int, int) {})
	}, caught},
	{"cleanup of a ForEachLimit's iter.Seq2 at a Break", func(r *asyncsteps.Root, act func()) {
		var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
			defer act()
			for i := 0; yield(i, i); i++ {
			}
		}
		asyncsteps.ForEachLimit(r, seq, 2, func(as asyncsteps.AsyncSteps, i, _ int) {
			if i == 1 {
				as.Break()
			}
		})
	}, caught},
	{"Sync section", func(r *asyncsteps.Root, act func()) {
		r.Sync(asyncsteps.NewMutex(1), func(as asyncsteps.AsyncSteps, _ ...any) { act() })
	}, caught},
	{"Await function", func(r *asyncsteps.Root, act func()) {
		r.Await(func(context.Context) (any, error) {
			act()
			return nil, nil
		})
	}, caught},
}

// countTo is an iter.Seq2 of the pairs (i, i) for i below n.
func countTo(n int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for i := range n {
			if !yield(i, i) {
				return
			}
		}
	}
}

// One child process per tool and misdeed runs every callback kind, one
// subtest each: a crash or a hang shows which one was running.
func TestHostileCallbacks(t *testing.T) {
	for _, tool := range hostileTools {
		for _, m := range misdeeds {
			t.Run(tool.name+"/"+m.name, func(t *testing.T) {
				inChild(t, func(t *testing.T) {
					for _, kind := range callbackKinds {
						t.Run(kind.name, func(t *testing.T) { hostileCallback(t, tool, m, kind) })
					}
				})
			})
		}
	}
}

func hostileCallback(t *testing.T, ht hostileTool, m misdeed, kind callbackKind) {
	tool, release := ht.open(t)
	defer release()
	outer := asyncsteps.New(asyncsteps.WithTool(tool))
	var got string
	inner := asyncsteps.New(asyncsteps.WithTool(tool))
	kind.build(inner, m.do)
	outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.CopyFrom(inner)
	}, func(as asyncsteps.AsyncSteps, code string) {
		got = code + ": " + as.State().ErrorInfo
		as.Success("caught")
	})
	if kind.want == nil {
		// The flow cancels itself from the step, so it is the Root that
		// the step cancels: build it there.
		outer = asyncsteps.New(asyncsteps.WithTool(tool))
		kind.build(outer, m.do)
		res := finish(t, tool, outer.Promise())
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("Result = %+v, want an error matching context.Canceled", res)
		}
		wantServing(t, tool)
		return
	}
	res := finish(t, tool, outer.Promise())
	wantSuccess(t, res, "caught")
	want := kind.want(m.info)
	if kind.name == "Await function" && m.name != "Goexit" {
		// A panic in an Await function is an error of the function: its
		// mapping to the step's error names the panic.
		if !strings.HasPrefix(got, "InternalError: ") || !strings.Contains(got, m.info) {
			t.Errorf("the handler saw %q, want an InternalError whose info holds %q", got, m.info)
		}
	} else if got != want {
		t.Errorf("the handler saw %q, want %q", got, want)
	}
	wantServing(t, tool)
}

// Callbacks that the loop runs outside any step: the unhandled-error
// function and a callback given to Immediate. Nothing can fail; the loop
// goes on.
func TestHostileLoopCallbacks(t *testing.T) {
	for _, tool := range hostileTools {
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) { hostileLoopCallbacks(t, tool) })
		})
	}
}

func hostileLoopCallbacks(t *testing.T, tool hostileTool) {
	for _, m := range misdeeds {
		t.Run(m.name+"/unhandled-error function", func(t *testing.T) {
			func(t *testing.T) {
				tl, release := tool.open(t)
				defer release()
				called := make(chan struct{})
				r := asyncsteps.New(asyncsteps.WithTool(tl), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {
					close(called)
					m.do()
				}))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
				r.Execute()
				if tt, ok := tl.(*asyncsteps.TestTool); ok {
					driveAway(tt)
				}
				waitFor(t, called)
				wantServing(t, tl)
			}(t)
		})
		t.Run(m.name+"/Immediate callback", func(t *testing.T) {
			func(t *testing.T) {
				tl, release := tool.open(t)
				defer release()
				called := make(chan struct{})
				tl.Immediate(func() {
					close(called)
					m.do()
				})
				if tt, ok := tl.(*asyncsteps.TestTool); ok {
					driveAway(tt)
				}
				waitFor(t, called)
				wantServing(t, tl)
			}(t)
		})
	}
}

// driveAway runs tt on a goroutine of its own and waits for it: a Goexit
// ends that goroutine, not the test's.
func driveAway(tt *asyncsteps.TestTool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tt.Run()
	}()
	<-done
}

// A Goexit kills no flow but its own: the other flows of the loop, started
// before it and waiting meanwhile, end normally.
func TestHostileGoexitLeavesOtherFlowsRunning(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		release := make(chan struct{})
		var others []<-chan asyncsteps.Result
		for i := range 10 {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				go func() {
					<-release
					as.Success(i)
				}()
			})
			others = append(others, r.Promise())
		}
		bad := asyncsteps.New(asyncsteps.WithTool(l))
		bad.Add(func(as asyncsteps.AsyncSteps, _ ...any) { runtime.Goexit() })
		res := finish(t, l, bad.Promise())
		wantError(t, res.Err, asyncsteps.InternalError, goexitInfo)
		close(release)
		for i, ch := range others {
			wantSuccess(t, finish(t, l, ch), i)
		}
		if !l.IsSameThread() {
			same := make(chan bool, 1)
			l.Immediate(func() { same <- l.IsSameThread() })
			if !<-same {
				t.Error("IsSameThread is false in a callback of the loop after a Goexit")
			}
		}
	})
}

// A Goexit in a test's step is what t.FailNow does: on a Loop the test's
// flow fails with InternalError, and the loop goes on.
func TestHostileFailNowInAStep(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			// A test's SkipNow would mark the test skipped: use Goexit,
			// which both call.
			runtime.Goexit()
		})
		_, err := r.Run(context.Background())
		wantError(t, err, asyncsteps.InternalError, goexitInfo)
		wantServing(t, l)
	})
}

// Values that panic when printed: a step panicking with one (above), an
// Await function returning one as its error, and a ForEach over a map
// whose keys' String method panics so.
func TestHostileUnprintableValues(t *testing.T) {
	t.Run("Await error", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			r, tt := newFlow()
			r.Await(func(context.Context) (any, error) { return nil, evilErr{} })
			res := finish(t, tt, r.Promise())
			e := asError(t, res.Err)
			if e == nil || e.Code != asyncsteps.InternalError || !strings.Contains(e.Info, "asyncsteps_test.evilErr that panics when printed") {
				t.Errorf("Result = %+v, want an InternalError naming the evilErr", res)
			}
		})
	})
	t.Run("ForEach over a map with unprintable keys", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			r, tt := newFlow()
			ran := false
			r.ForEach(map[evilKey]int{{1}: 1, {2}: 2}, func(as asyncsteps.AsyncSteps, k, v any) { ran = true })
			res := run(t, r, tt)
			wantError(t, res.Err, asyncsteps.InternalError, "a asyncsteps_test.evilKey that panics when printed")
			if ran {
				t.Error("the body ran")
			}
		})
	})
	t.Run("PanicError.Error", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic(evil{}) })
			res := run(t, r, tt)
			var p *asyncsteps.PanicError
			if !errors.As(res.Err, &p) {
				t.Fatalf("Result = %+v, want a PanicError cause", res)
			}
			if got, want := p.Error(), "panic: "+evilInfo; got != want {
				t.Errorf("PanicError.Error() = %q, want %q", got, want)
			}
			if got, want := fmt.Sprint(res.Err), "InternalError: "+evilInfo; got != want {
				t.Errorf("the error prints %q, want %q", got, want)
			}
		})
	})
}

// evilKey is a comparable map key whose String method panics with itself.
type evilKey struct{ n int }

func (k evilKey) String() string { panic(k) }

// A callback that blocks forever blocks its own loop, and only it: flows
// on other loops go on, and an Await function that ignores its context
// does not hold its flow past the step's timeout.
func TestHostileBlockingCallbacks(t *testing.T) {
	t.Run("step", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			g := asyncsteps.NewLoopGroup(2)
			blocked := asyncsteps.New(asyncsteps.WithTool(g.Loops()[0]))
			entered := make(chan struct{})
			blocked.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				close(entered)
				select {} // for ever; the child process ends with it
			})
			blocked.Execute()
			waitFor(t, entered)
			wantServing(t, g.Loops()[1])
			wantServing(t, asyncsteps.DefaultTool())
		})
	})
	t.Run("Await function", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			for _, tool := range []asyncsteps.Tool{asyncsteps.NewLoop(), asyncsteps.NewTestTool()} {
				r := asyncsteps.New(asyncsteps.WithTool(tool))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(10 * time.Millisecond)
					as.Await(func(context.Context) (any, error) { select {} })
				})
				res := finish(t, tool, r.Promise())
				wantError(t, res.Err, asyncsteps.Timeout, "")
				wantServing(t, tool)
			}
		})
	})
}

// A step that closes its own loop: the flow ends with "the flow's loop is
// closed", and so does every other flow on the loop; Close returns. On
// DefaultTool, Close does nothing, from its own loop or from outside: the
// flow goes on, and the loop's Done stays open.
func TestHostileCloseOwnLoop(t *testing.T) {
	closed := "the flow's loop is closed"
	t.Run("Loop", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			l := asyncsteps.NewLoop()
			parked := asyncsteps.New(asyncsteps.WithTool(l))
			parked.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
			parkedCh := parked.Promise()
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { l.Close() })
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("a step ran after Close") })
			wantError(t, finish(t, l, r.Promise()).Err, asyncsteps.InternalError, closed)
			wantError(t, finish(t, l, parkedCh).Err, asyncsteps.InternalError, closed)
		})
	})
	t.Run("LoopGroup", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			g := asyncsteps.NewLoopGroup(3)
			var chans []<-chan asyncsteps.Result
			for _, l := range g.Loops() {
				r := asyncsteps.New(asyncsteps.WithTool(l))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
				chans = append(chans, r.Promise())
			}
			r := asyncsteps.New(asyncsteps.WithTool(g.Loops()[1]))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { g.Close() })
			wantError(t, finish(t, nil, r.Promise()).Err, asyncsteps.InternalError, closed)
			for _, ch := range chans {
				wantError(t, finish(t, nil, ch).Err, asyncsteps.InternalError, closed)
			}
		})
	})
	t.Run("DefaultTool", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			r := asyncsteps.New()
			def := asyncsteps.DefaultTool().(*asyncsteps.Loop)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { def.Close() })
			r.SuccessStep("on")
			wantSuccess(t, finish(t, nil, r.Promise()), "on")
			def.Close() // from outside the loop: returns at once, does nothing
			select {
			case <-def.Done():
				t.Error("the Done of DefaultTool's loop is closed")
			default:
			}
			wantServing(t, def)
		})
	})
	t.Run("TestTool reset", func(t *testing.T) {
		inChild(t, func(t *testing.T) {
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				tt.ResetEvents() // drops the timeout: the step waits for ever
			})
			ch := r.Promise()
			drive(t, tt)
			noResult(t, ch)
			r.Cancel()
			drive(t, tt)
			if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result = %+v, want Canceled", res)
			}
		})
	})
}

// Point 5: Close from another loop's callback returns, however the loops
// close each other; the closing completes once the callbacks return.
func TestHostileLoopsCloseEachOther(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for range 20 {
			a, b := asyncsteps.NewLoop(), asyncsteps.NewLoop()
			var entered, returned sync.WaitGroup
			entered.Add(2)
			returned.Add(2)
			start := make(chan struct{})
			closeFrom := func(other *asyncsteps.Loop) func() {
				return func() {
					entered.Done()
					<-start
					other.Close()
					returned.Done()
				}
			}
			a.Immediate(closeFrom(b))
			b.Immediate(closeFrom(a))
			entered.Wait()
			close(start)
			returned.Wait()
			a.Close()
			b.Close()
		}
	})
}

// Point 6: a flow started with Execute that waits when its loop closes
// ends once, through its unhandled-error function, and its Root can run
// again.
func TestHostileParkedExecuteFlowEndsOnClose(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		var mu sync.Mutex
		var got []string
		reported := make(chan struct{}, 2)
		r := asyncsteps.New(asyncsteps.WithTool(l), asyncsteps.WithUnhandledError(func(e *asyncsteps.Error) {
			mu.Lock()
			got = append(got, e.Error())
			mu.Unlock()
			reported <- struct{}{}
		}))
		entered := make(chan struct{})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			close(entered)
		})
		r.Execute()
		waitFor(t, entered)
		l.Close()
		select {
		case <-reported:
		case <-time.After(10 * time.Second):
			t.Fatal("the parked flow was never reported")
		}
		mu.Lock()
		if want := "InternalError: the flow's loop is closed"; len(got) != 1 || got[0] != want {
			t.Errorf("reports %q, want one %q", got, want)
		}
		mu.Unlock()
		res := finish(t, nil, r.Promise()) // not "Execute called on a running flow"
		wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
	})
}

// Point 4: a TestTool driven from inside one of its own steps does not run
// the step's own events under it: the step fails with a clear
// InternalError, and nothing panics out of the tool. After the step's own
// Cancel, the cancel requested before that error wins: no handler sees
// it, the flow ends cancelled, with the error in the State.
func TestHostileTestToolDrivenFromItsOwnStep(t *testing.T) {
	const info = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	cases := []struct {
		name      string
		drive     func(r *asyncsteps.Root, tt *asyncsteps.TestTool, as asyncsteps.AsyncSteps)
		want      string // the handler's record
		cancelled bool   // the flow ends cancelled
	}{
		{"Advance past the step's own timeout", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, as asyncsteps.AsyncSteps) {
			as.SetTimeout(time.Second)
			tt.Advance(2 * time.Second)
		}, "InternalError: " + info, false},
		{"NextEvent after the step's own Cancel", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, as asyncsteps.AsyncSteps) {
			as.SetCancel(func(asyncsteps.AsyncSteps) {})
			r.Cancel()
			tt.NextEvent()
		}, "", true},
		{"Run from a step with a timeout", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, as asyncsteps.AsyncSteps) {
			as.SetTimeout(time.Second)
			tt.Run()
		}, "InternalError: " + info, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				r, tt := newFlow()
				var got string
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.drive(r, tt, as) })
				}, func(as asyncsteps.AsyncSteps, code string) {
					got = code + ": " + as.State().ErrorInfo
				})
				ch := r.Promise()
				drive(t, tt)
				res := result(t, ch)
				if got != c.want {
					t.Errorf("the handler saw %q, want %q", got, c.want)
				}
				if c.cancelled {
					if !errors.Is(res.Err, context.Canceled) {
						t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
					}
					if st := r.State(); st.ErrorInfo != info {
						t.Errorf("State().ErrorInfo = %q, want the step's InternalError's", st.ErrorInfo)
					}
					return
				}
				// The handler lets the error go on: it ends the flow.
				wantError(t, res.Err, asyncsteps.InternalError, info)
			})
		})
	}
}

// A TestTool driven from a step that meets no event of the step's own flow
// runs the other events and fails nothing: only an event of the flow that
// had to wait for the callback makes the step fail.
func TestHostileTestToolDrivenFromAStepMeetingNoEventOfItsFlow(t *testing.T) {
	r, tt := newFlow()
	var got []string
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) { got = append(got, "sub-step") })
		tt.Deferred(time.Second, func() { got = append(got, "other event") })
		tt.Run()
		got = append(got, "after Run")
	})
	ch := r.Promise()
	drive(t, tt)
	if res := result(t, ch); res.Err != nil {
		t.Fatalf("the flow failed: %v", res.Err)
	}
	if want := "other event, after Run, sub-step"; strings.Join(got, ", ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, ", "), want)
	}
}

// Point 10 (spec section 1): a sub-step that calls Success or Error on its
// parent's AsyncSteps while the parent waits for it raises InternalError,
// which the parent's error handler sees; the call has no other effect.
// So does a step of a Parallel branch the sub-step added.
func TestHostileSubstepCompletesItsParent(t *testing.T) {
	cases := []struct {
		name string
		call func(parent asyncsteps.AsyncSteps)
		info string
	}{
		{"Success", func(p asyncsteps.AsyncSteps) { p.Success("parent") }, "Success called on the AsyncSteps of a step that waits for its sub-steps"},
		{"Error", func(p asyncsteps.AsyncSteps) { p.Error("Lost") }, "Error(Lost) called on the AsyncSteps of a step that waits for its sub-steps"},
	}
	for _, c := range cases {
		for _, where := range []string{"sub-step", "branch"} {
			t.Run(c.name+"/"+where, func(t *testing.T) {
				inChild(t, func(t *testing.T) {
					r, tt := newFlow()
					var tr tracer
					r.Add(func(parent asyncsteps.AsyncSteps, _ ...any) {
						sub := func(as asyncsteps.AsyncSteps, _ ...any) {
							c.call(parent)
							tr.add("not aborted")
						}
						if where == "sub-step" {
							parent.Add(sub)
						} else {
							parent.Parallel().Add(tr.step("sibling")).Add(sub)
						}
						parent.Add(tr.step("next sub-step"))
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("handler %s: %s", code, as.State().ErrorInfo)
					})
					res := run(t, r, tt)
					want := "handler InternalError: " + c.info
					if where == "branch" {
						want = "sibling," + want
					}
					wantError(t, res.Err, asyncsteps.InternalError, c.info)
					wantTrace(t, &tr, want)
				})
			})
		}
	}
}

// Spec section 1: only a step's own callback adds sub-steps or makes the
// step wait. A sub-step that does either on the AsyncSteps of its
// parent, which waits for it, raises InternalError, named after the call,
// in its own callback, from its callback or from a branch of a Parallel
// it added; the parent's error handler sees it, and nothing is added.
func TestHostileSubstepAddsToItsParent(t *testing.T) {
	for _, c := range stepCalls() {
		for _, where := range []string{"sub-step", "branch"} {
			t.Run(c.name+"/"+where, func(t *testing.T) {
				inChild(t, func(t *testing.T) {
					info := c.name + " called on the AsyncSteps of a step that waits for its sub-steps"
					r, tt := newFlow()
					var tr tracer
					r.Add(func(parent asyncsteps.AsyncSteps, _ ...any) {
						sub := func(as asyncsteps.AsyncSteps, _ ...any) {
							c.call(parent, &tr)
							tr.add("not aborted")
						}
						if where == "sub-step" {
							parent.Add(sub)
						} else {
							parent.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
								as.Parallel().Add(tr.step("sibling")).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
									as.Add(sub)
								})
							})
						}
						parent.Add(tr.step("next sub-step"))
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("handler %s: %s", code, as.State().ErrorInfo)
					})
					res := run(t, r, tt)
					want := "handler InternalError: " + info
					if where == "branch" {
						want = "sibling," + want
					}
					wantError(t, res.Err, asyncsteps.InternalError, info)
					wantTrace(t, &tr, want)
				})
			})
		}
	}
}

// Spec section 1 and Break and Continue: a sub-step that calls Break or
// Continue on the AsyncSteps of a loop's iteration, which waits for it,
// raises InternalError in its own callback, as Success and Error do; it
// does not end the loop, nor go on with it as if nothing was called.
func TestHostileSubstepBreaksItsIteration(t *testing.T) {
	cases := []struct {
		name string
		call func(body asyncsteps.AsyncSteps)
		info string
	}{
		{"Break", func(b asyncsteps.AsyncSteps) { b.Break() }, "Break"},
		{"Break(outer)", func(b asyncsteps.AsyncSteps) { b.Break("outer") }, "Break(outer)"},
		{"Continue", func(b asyncsteps.AsyncSteps) { b.Continue() }, "Continue"},
		{"Continue(outer)", func(b asyncsteps.AsyncSteps) { b.Continue("outer") }, "Continue(outer)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				info := c.info + " called on the AsyncSteps of a step that waits for its sub-steps"
				r, tt := newFlow()
				var tr tracer
				r.Repeat(3, func(body asyncsteps.AsyncSteps, i int) {
					tr.addf("iteration %d", i)
					body.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						c.call(body)
						tr.add("not aborted")
					})
				}, "outer")
				r.Add(tr.step("after the loop"))
				res := run(t, r, tt)
				wantError(t, res.Err, asyncsteps.InternalError, info)
				wantTrace(t, &tr, "iteration 0")
			})
		})
	}
}
