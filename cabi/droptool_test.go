//go:build cgo

package cabi_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// resettableTool is a Tool of another package that a test resets, as
// ResetEvents resets a TestTool: run runs its callbacks on the calling
// goroutine; reset drops them, calling the fallback of each callback
// posted with ImmediateOrDropped (see droppingTool), in order.
type resettableTool struct {
	mu      sync.Mutex
	queue   []queued
	timers  []queued
	now     time.Duration
	driving bool
}

type queued struct {
	h            *queuedHandle
	run, dropped func()
	due          time.Duration
}

type queuedHandle struct {
	mu             sync.Mutex
	ran, cancelled bool
}

func (h *queuedHandle) Cancel() {
	h.mu.Lock()
	h.cancelled = true
	h.mu.Unlock()
}

func (h *queuedHandle) IsValid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ran && !h.cancelled
}

// claim marks the callback as run; false if it was cancelled.
func (h *queuedHandle) claim() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ran || h.cancelled {
		return false
	}
	h.ran = true
	return true
}

func (t *resettableTool) push(list *[]queued, q queued) asyncsteps.Handle {
	q.h = &queuedHandle{}
	t.mu.Lock()
	*list = append(*list, q)
	t.mu.Unlock()
	return q.h
}

func (t *resettableTool) Immediate(f func()) asyncsteps.Handle {
	return t.push(&t.queue, queued{run: f})
}

func (t *resettableTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	t.mu.Lock()
	due := t.now + max(d, 0)
	t.mu.Unlock()
	return t.push(&t.timers, queued{run: f, due: due})
}

func (t *resettableTool) IsSameThread() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.driving
}

func (t *resettableTool) Now() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return asyncsteps.TestToolEpoch.Add(t.now)
}

// run runs the queued callbacks, then the earliest timer, until nothing
// is left.
func (t *resettableTool) run() {
	t.mu.Lock()
	t.driving = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.driving = false
		t.mu.Unlock()
	}()
	for {
		t.mu.Lock()
		var q queued
		switch {
		case len(t.queue) > 0:
			q, t.queue = t.queue[0], t.queue[1:]
		default:
			t.timers = slices.DeleteFunc(t.timers, func(q queued) bool { return !q.h.IsValid() })
			if len(t.timers) == 0 {
				t.mu.Unlock()
				return
			}
			slices.SortStableFunc(t.timers, func(a, b queued) int { return int(a.due - b.due) })
			q, t.timers = t.timers[0], t.timers[1:]
			t.now = max(t.now, q.due)
		}
		t.mu.Unlock()
		if q.h.claim() {
			q.run()
		}
	}
}

// reset drops every callback and timer, then calls the fallbacks of those
// posted with ImmediateOrDropped, in order.
func (t *resettableTool) reset() {
	t.mu.Lock()
	dropped := append(t.queue, t.timers...)
	t.queue, t.timers = nil, nil
	t.mu.Unlock()
	for _, q := range dropped {
		if q.h.claim() && q.dropped != nil {
			q.dropped()
		}
	}
}

// droppingTool is a resettableTool that reports what it drops.
type droppingTool struct{ resettableTool }

func (t *droppingTool) ImmediateOrDropped(run, dropped func()) {
	t.push(&t.queue, queued{run: run, dropped: dropped})
}

var _ cabi.DropReporter = (*droppingTool)(nil)

// A Tool of another package that implements DropReporter gets back what
// it drops of a C flow: the free of a root made by C that it drops runs,
// as ResetEvents runs it on a TestTool, the cancel handler of the waiting
// C step and the cleanup of the state variable, and cancels the flow when
// the tool runs next. Before, cabi only called its Immediate, and the
// drop lost that C memory.
func TestDropReporterToolGetsTheFallbackOfAFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		runtime.LockOSThread() // the C steps check that they run on one thread
		defer runtime.UnlockOSThread()
		ctest.Reset()
		tool := &droppingTool{}
		owned := cabi.New(tool)
		r := cabi.Wrap(owned).(*asyncsteps.Root)
		ctest.State(owned)
		ctest.HeldWithCancel(owned) // waits until SucceedHeld
		ctest.ExecuteOnly(owned, "x", 1)
		tool.run()
		ctest.Free(owned)
		tool.reset() // drops the free
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\nheld cancel\ncleanup counter=2\n"
		if got := ctest.Trace(); got != want {
			t.Errorf("trace:\n%s\nwant:\n%s", got, want)
		}
		if cabi.Wrap(owned) != nil {
			t.Error("the root is still valid after its free was dropped")
		}
		tool.run()
		if r.Running() {
			t.Error("the freed root's flow still runs")
		}
		if got := ctest.Trace(); got != want {
			t.Errorf("trace once the tool ran:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A success or handle_error from another thread on a waiting C step,
// whose task a DropReporter tool drops, applies when the tool runs next,
// as the reset TestTool does with it: the flow goes on after a success
// (the step's cancel handler not run), and ends with the error after a
// handle_error (the cancel handler run once). Before, the fallback only
// released the pointer: the step stayed claimed and the flow halted.
func TestDropReporterToolAppliesADroppedCompletion(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "success", true: "handle_error"}[fail], func(t *testing.T) {
			eachCaller(t, func(t *testing.T, ri bool) {
				runtime.LockOSThread() // the C steps check that they run on one thread
				defer runtime.UnlockOSThread()
				ctest.Reset()
				alive := ctest.StrictAlive()
				tool := &droppingTool{}
				owned := cabi.New(tool)
				r := cabi.Wrap(owned).(*asyncsteps.Root)
				ctest.HeldWithCancel(owned) // waits until SucceedHeld
				ranNext := false
				r.Add(func(asyncsteps.AsyncSteps, ...any) { ranNext = true })
				dropLastResult(r, ri)
				ctest.ExecuteOnly(owned, "x", 1)
				tool.run()
				want := "held\n"
				if fail {
					ctest.FailHeld() // not driving: from outside the step
					want = "held\nheld cancel\nunhandled Boom data=x root=1\n"
				} else {
					ctest.SucceedHeld()
				}
				tool.reset() // drops the completion's task
				tool.run()
				if got := ctest.Trace(); got != want {
					t.Errorf("trace:\n%s\nwant:\n%s", got, want)
				}
				if ranNext == fail {
					t.Errorf("the step after ran %v, want %v", ranNext, !fail)
				}
				if r.Running() {
					t.Error("the flow still runs")
				}
				ctest.Free(owned)
				tool.run()
				if ri {
					for deadline := time.Now().Add(5 * time.Second); ctest.StrictAlive() > alive && time.Now().Before(deadline); {
						runtime.GC()
						time.Sleep(time.Millisecond)
						tool.run()
					}
				}
			})
		})
	}
}
