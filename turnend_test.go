package asyncsteps_test

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// turnCase builds flows on tool that record in tr; the roots it returns
// start together.
type turnCase func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root

// turnOnLoop runs the flows of c on a Loop, started in one of its callbacks,
// and returns the trace once the loop is idle (in a testing/synctest
// bubble: when every goroutine of it is blocked).
func turnOnLoop(t *testing.T, c turnCase) string {
	tr := &tracer{}
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		roots := c(loop, tr)
		loop.Immediate(func() {
			for _, r := range roots {
				r.Execute()
			}
		})
		synctest.Wait()
	})
	return tr.String()
}

// turnOnTestTool runs the flows of c on a TestTool, started together, and
// returns the trace once no event is left.
func turnOnTestTool(t *testing.T, c turnCase) string {
	tr := &tracer{}
	tt := asyncsteps.NewTestTool()
	for _, r := range c(tt, tr) {
		r.Execute()
	}
	tt.Run()
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left", n)
	}
	return tr.String()
}

// wantOnBothTools fails the test unless c traces want on a Loop and on a
// TestTool.
func wantOnBothTools(t *testing.T, c turnCase, want string) {
	t.Helper()
	if got := turnOnLoop(t, c); got != want {
		t.Errorf("Loop trace\n got: %s\nwant: %s", got, want)
	}
	if got := turnOnTestTool(t, c); got != want {
		t.Errorf("TestTool trace\n got: %s\nwant: %s", got, want)
	}
}

// The callback runs once the steps ready and those they make ready have
// run, a sub-step and the next step of its own flow included, and before
// a timer due at once.
func TestAtTurnEndRunsAfterTheStepsTheTurnMakesReady(t *testing.T) {
	wantOnBothTools(t, func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
		a := asyncsteps.New(asyncsteps.WithTool(tool))
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("a1")
			tool.Deferred(0, func() { tr.add("timer") })
			asyncsteps.AtTurnEnd(tool, func() { tr.add("end") })
			as.Add(tr.step("a2"))
		}).Add(tr.step("a3"))
		b := asyncsteps.New(asyncsteps.WithTool(tool))
		b.Add(tr.step("b1")).Add(tr.step("b2")).Add(tr.step("b3")).Add(tr.step("b4"))
		return []*asyncsteps.Root{a, b}
	}, "a1,b1,a2,b2,b3,a3,b4,end,timer")
}

// Callbacks of one turn run in the order they were scheduled; one that a
// callback at the turn's end schedules waits for the end of the next
// turn, after the flow that callback started.
func TestAtTurnEndFromTheTurnsEndWaitsForTheNextTurn(t *testing.T) {
	wantOnBothTools(t, func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
		c := asyncsteps.New(asyncsteps.WithTool(tool))
		c.Add(tr.step("c1")).Add(tr.step("c2"))
		a := asyncsteps.New(asyncsteps.WithTool(tool))
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("a1")
			asyncsteps.AtTurnEnd(tool, func() {
				tr.add("end 1")
				asyncsteps.AtTurnEnd(tool, func() { tr.add("end 3") })
				c.Execute()
			})
			asyncsteps.AtTurnEnd(tool, func() { tr.add("end 2") })
		}).Add(tr.step("a2"))
		return []*asyncsteps.Root{a}
	}, "a1,a2,end 1,end 2,c1,c2,end 3")
}

// A cancelled callback does not run, and its handle is invalid; one that
// panics is logged, and the next one runs.
func TestAtTurnEndCancelledAndPanicking(t *testing.T) {
	log := &lockedBuffer{}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(log, nil)))
	wantOnBothTools(t, func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			h := asyncsteps.AtTurnEnd(tool, func() { tr.add("cancelled") })
			tr.addf("valid %v", h.IsValid())
			h.Cancel()
			tr.addf("valid %v", h.IsValid())
			asyncsteps.AtTurnEnd(tool, func() { panic("end") })
			h = asyncsteps.AtTurnEnd(tool, func() { tr.add("end") })
			asyncsteps.AtTurnEnd(tool, func() { tr.addf("valid %v", h.IsValid()) })
		})
		return []*asyncsteps.Root{r}
	}, "valid true,valid false,end,valid false")
	if got := strings.Count(log.String(), "panic=end"); got != 2 {
		t.Errorf("%d panics logged, want 2:\n%s", got, log)
	}
}

// On a Loop, an Immediate called on the loop's goroutine waits for the
// next pass, after the turn's end; on a TestTool it runs before it, as
// every immediate does.
func TestAtTurnEndAndAnImmediateOfTheTurn(t *testing.T) {
	c := func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tool.Immediate(func() { tr.add("immediate") })
			asyncsteps.AtTurnEnd(tool, func() { tr.add("end") })
		}).Add(tr.step("s2"))
		return []*asyncsteps.Root{r}
	}
	if got, want := turnOnLoop(t, c), "s2,end,immediate"; got != want {
		t.Errorf("Loop trace\n got: %s\nwant: %s", got, want)
	}
	if got, want := turnOnTestTool(t, c), "immediate,s2,end"; got != want {
		t.Errorf("TestTool trace\n got: %s\nwant: %s", got, want)
	}
}

// Where else the tools differ: a completion of a waiting step from
// outside its callback and a Root.Cancel, both from a step of another
// flow on the tool's goroutine, go through the Loop's inbox, and run
// after the turn's end there; and a turn longer than the rest of the
// Loop's pass ends with that pass there, where a TestTool runs it all
// (three flows of 200 iterations: the first one's first schedules the
// callback).
func TestAtTurnEndWhereTheToolsDiffer(t *testing.T) {
	for _, c := range []struct {
		name           string
		flows          turnCase
		onLoop, onTool string
	}{{
		name: "Success from another flow",
		flows: func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
			var waiting asyncsteps.AsyncSteps
			a := asyncsteps.New(asyncsteps.WithTool(tool))
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				waiting = as
				as.WaitExternal()
			}).Add(tr.step("a2"))
			b := asyncsteps.New(asyncsteps.WithTool(tool))
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.AtTurnEnd(tool, func() { tr.add("end") })
				waiting.Success()
			}).Add(tr.step("b2"))
			return []*asyncsteps.Root{a, b}
		},
		onLoop: "b2,end,a2",
		onTool: "a2,b2,end",
	}, {
		name: "Root.Cancel from another flow",
		flows: func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
			a := asyncsteps.New(asyncsteps.WithTool(tool))
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("a cancelled") })
				as.WaitExternal()
			})
			b := asyncsteps.New(asyncsteps.WithTool(tool))
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.AtTurnEnd(tool, func() { tr.add("end") })
				a.Cancel()
			}).Add(tr.step("b2"))
			return []*asyncsteps.Root{a, b}
		},
		onLoop: "b2,end,a cancelled",
		onTool: "a cancelled,b2,end",
	}, {
		name: "a turn longer than the pass",
		flows: func(tool asyncsteps.Tool, tr *tracer) []*asyncsteps.Root {
			steps := 0
			var roots []*asyncsteps.Root
			for i := range 3 {
				r := asyncsteps.New(asyncsteps.WithTool(tool))
				r.Repeat(200, func(as asyncsteps.AsyncSteps, j int) {
					if steps++; i == 0 && j == 0 {
						asyncsteps.AtTurnEnd(tool, func() { tr.addf("end after %d steps", steps) })
					}
				})
				roots = append(roots, r)
			}
			return roots
		},
		onLoop: "end after 126 steps",
		onTool: "end after 600 steps",
	}} {
		if got := turnOnLoop(t, c.flows); got != c.onLoop {
			t.Errorf("%s: Loop trace\n got: %s\nwant: %s", c.name, got, c.onLoop)
		}
		if got := turnOnTestTool(t, c.flows); got != c.onTool {
			t.Errorf("%s: TestTool trace\n got: %s\nwant: %s", c.name, got, c.onTool)
		}
	}
}

// Called off the tool's goroutine, AtTurnEnd is Immediate: the callback
// runs before the flow started after it.
func TestAtTurnEndOffTheToolsGoroutineIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{}
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		done := make(chan struct{})
		loop.Immediate(func() { <-done }) // the loop is busy: both wait
		h := asyncsteps.AtTurnEnd(loop, func() { tr.add("end") })
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(tr.step("s1"))
		r.Execute()
		if !h.IsValid() {
			t.Error("handle invalid before the callback ran")
		}
		close(done)
		synctest.Wait()
		wantTrace(t, tr, "end,s1")
	})

	tr := &tracer{}
	tt := asyncsteps.NewTestTool()
	h := asyncsteps.AtTurnEnd(tt, func() { tr.add("end") })
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(tr.step("s1"))
	r.Execute()
	if n := tt.Pending(); n != 2 {
		t.Errorf("Pending %d, want 2", n)
	}
	tt.NextEvent()
	wantTrace(t, tr, "end")
	if h.IsValid() {
		t.Error("handle valid after the callback ran")
	}
	tt.Run()
	wantTrace(t, tr, "end,s1")
}

// A TestTool counts a callback waiting for the turn's end as an event, runs
// the callbacks of a turn as one event, and ResetEvents drops them.
func TestAtTurnEndOnATestToolEventsAndReset(t *testing.T) {
	tr := &tracer{}
	tt := asyncsteps.NewTestTool()
	var h asyncsteps.Handle
	tt.Immediate(func() {
		asyncsteps.AtTurnEnd(tt, func() { tr.add("end 1") })
		asyncsteps.AtTurnEnd(tt, func() { tr.add("end 2") })
		tt.Deferred(0, func() { tr.add("timer") })
		tt.Immediate(func() { tr.add("immediate") })
	})
	tt.NextEvent()
	if n := tt.Pending(); n != 4 {
		t.Errorf("Pending %d, want 4", n)
	}
	tt.NextEvent()
	wantTrace(t, tr, "immediate")
	tt.NextEvent()
	wantTrace(t, tr, "immediate,end 1,end 2")
	if n := tt.Pending(); n != 1 {
		t.Errorf("Pending %d, want 1", n)
	}
	tt.NextEvent()
	wantTrace(t, tr, "immediate,end 1,end 2,timer")

	tt.Immediate(func() { h = asyncsteps.AtTurnEnd(tt, func() { tr.add("dropped") }) })
	tt.NextEvent()
	tt.ResetEvents()
	if h.IsValid() || tt.HasEvents() || tt.NextEvent() {
		t.Errorf("after ResetEvents: valid %v, events %v", h.IsValid(), tt.HasEvents())
	}
	wantTrace(t, tr, "immediate,end 1,end 2,timer")
}

// On a TestTool, the event that ends a turn runs the callbacks queued
// for that turn only: one that they schedule waits for the next turn, and
// for the immediates scheduled before it, also once ResetEvents, or a
// NextEvent called from one of them, has run the rest of the turn's.
func TestAtTurnEndOnATestToolRunsTheTurnsCallbacksOnly(t *testing.T) {
	for name, next := range map[string]func(tt *asyncsteps.TestTool){
		"ResetEvents": func(tt *asyncsteps.TestTool) { tt.ResetEvents() },
		"NextEvent":   func(tt *asyncsteps.TestTool) { tt.NextEvent() },
	} {
		tr := &tracer{}
		tt := asyncsteps.NewTestTool()
		tt.Immediate(func() {
			asyncsteps.AtTurnEnd(tt, func() {
				tr.add("end 1")
				next(tt)
				tt.Immediate(func() { tr.add("immediate") })
				asyncsteps.AtTurnEnd(tt, func() { tr.add("end 3") })
			})
			asyncsteps.AtTurnEnd(tt, func() { tr.add("end 2") })
		})
		tt.Run()
		want := "end 1,end 2,immediate,end 3"
		if name == "ResetEvents" {
			want = "end 1,immediate,end 3"
		}
		if got := tr.String(); got != want {
			t.Errorf("%s: trace\n got: %s\nwant: %s", name, got, want)
		}
	}
}

// A loop that stays busy still ends the turn: at the end of the pass in
// which the callbacks queued when AtTurnEnd was called have run, before
// the pass's timers. Here a flow repeats steps alone: it yields to the
// callback's mark, then runs on for the rest of the pass (up to 256
// callbacks of up to 256 steps each), and the callback runs at the end of
// the pass it was scheduled in.
func TestAtTurnEndOnABusyLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{}
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		pass, called, i, endStep := 0, 0, 0, 0
		loop.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) { pass++ }})
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Repeat(1000000, func(as asyncsteps.AsyncSteps, _ int) {
			if i++; i == 10 {
				called = pass
				loop.Deferred(0, func() { tr.addf("timer in pass +%d", pass-called) })
				asyncsteps.AtTurnEnd(loop, func() {
					tr.addf("end in pass +%d", pass-called)
					endStep = i
				})
			}
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("done in pass +%d", min(pass-called, 1)) })
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantTrace(t, tr, "end in pass +0,timer in pass +0,done in pass +1")
		// The rest of the pass: up to 256 callbacks of up to 256 steps.
		if endStep <= 10 || endStep > 10+256*256 {
			t.Errorf("the callback ran after step %d", endStep)
		}
	})
}

// A Loop closed before the turn's end drops the callback: its handle
// becomes invalid. On a closed Loop, a zero Loop, a nil Loop or TestTool,
// or with a nil tool or f, AtTurnEnd returns an invalid handle.
func TestAtTurnEndOnAClosedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{}
		loop := asyncsteps.NewLoop()
		hc := make(chan asyncsteps.Handle, 1)
		loop.Immediate(func() {
			hc <- asyncsteps.AtTurnEnd(loop, func() { tr.add("end") })
			loop.Close()
		})
		<-loop.Done()
		if h := <-hc; h.IsValid() {
			t.Error("handle still valid after Close")
		}
		wantTrace(t, tr, "")
		for name, tool := range map[string]asyncsteps.Tool{
			"closed":    loop,
			"zero":      &asyncsteps.Loop{},
			"nil Loop":  (*asyncsteps.Loop)(nil),
			"nil Tool":  nil,
			"nil tTool": (*asyncsteps.TestTool)(nil),
		} {
			if h := asyncsteps.AtTurnEnd(tool, func() { tr.add(name) }); h.IsValid() {
				t.Errorf("%s: valid handle", name)
			}
		}
		if h := asyncsteps.AtTurnEnd(asyncsteps.NewTestTool(), nil); h.IsValid() {
			t.Error("nil f: valid handle")
		}
		wantTrace(t, tr, "")
	})
}

// A callback that calls runtime.Goexit ends the goroutine that runs it:
// on a Loop, the next one runs the callbacks left of that turn first, as
// the rest of the work the goroutine was doing, before what the callback
// scheduled; a TestTool runs them first when it is driven again.
func TestAtTurnEndGoexitRunsTheRestFirst(t *testing.T) {
	endThenExit := func(tool asyncsteps.Tool, tr *tracer) {
		asyncsteps.AtTurnEnd(tool, func() {
			tr.add("end 1")
			tool.Immediate(func() { tr.add("immediate") })
			runtime.Goexit()
		})
		asyncsteps.AtTurnEnd(tool, func() { tr.addf("end 2 %v", tool.IsSameThread()) })
	}
	want := "end 1,end 2 true,immediate"
	tr := &tracer{}
	tt := asyncsteps.NewTestTool()
	tt.Immediate(func() { endThenExit(tt, tr) })
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tt.Run()
	}()
	<-exited
	tt.Run()
	if got := tr.String(); got != want {
		t.Errorf("TestTool trace\n got: %s\nwant: %s", got, want)
	}

	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{}
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.Immediate(func() { endThenExit(loop, tr) })
		synctest.Wait()
		if got := tr.String(); got != want {
			t.Errorf("Loop trace\n got: %s\nwant: %s", got, want)
		}
	})
}

// recordingTool is a Tool of another package: it records its Immediate
// calls.
type recordingTool struct {
	asyncsteps.Tool
	tr *tracer
}

func (r recordingTool) Immediate(f func()) asyncsteps.Handle {
	r.tr.add("Immediate")
	return r.Tool.Immediate(f)
}

// On a Tool of another package, AtTurnEnd is the tool's Immediate.
func TestAtTurnEndOnAForeignToolIsItsImmediate(t *testing.T) {
	tr := &tracer{}
	tt := asyncsteps.NewTestTool()
	h := asyncsteps.AtTurnEnd(recordingTool{tt, tr}, func() { tr.add("end") })
	if !h.IsValid() {
		t.Error("invalid handle")
	}
	tt.Run()
	wantTrace(t, tr, "Immediate,end")
}

// LoopPass does not count the mark of a callback given to AtTurnEnd as
// a callback ready to run.
func TestAtTurnEndMarkIsNoCallbackForLoopPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{}
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.SetHooks(&asyncsteps.Hooks{LoopPass: func(_ *asyncsteps.Loop, queued int) { tr.addf("pass %d", queued) }})
		loop.Deferred(time.Millisecond, func() {
			tr.add("timer")
			asyncsteps.AtTurnEnd(loop, func() { tr.add("end") })
		})
		synctest.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		wantTrace(t, tr, "pass 0,timer,pass 0,end")
	})
}

// lockedBuffer is a bytes.Buffer that goroutines may write and read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
