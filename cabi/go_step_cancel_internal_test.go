//go:build cgo

package cabi

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The tests here give C a Go step (Binary) on which C takes stack memory
// and sets a cancel handler (ctest.Guard), then stop the step's loop with
// the step completed by Go or still waiting, and release the flow: by the
// free of the root pointer C holds, before or after the loop's stop, or
// by the stop alone where C holds none. The C cancel handler runs once
// for a step the stop left waiting, as for a C step, and never for one
// that Go completed: C frees its data on completion, and a cancel handler
// after it would free it again. Before, the free called it for a completed
// step whose pointer was not yet swept, and a step left waiting got it or
// not depending on whether the free came before the stop.

// goStepRoot is how the flow is held.
type goStepRoot int

const (
	ownedRoot  goStepRoot = iota // a root made by C (New)
	heldGoRoot                   // a Go Root whose pointer (Binary) C holds
	goFlow                       // a Go Root for which C holds no root pointer
)

func (k goStepRoot) String() string {
	return [...]string{"root made by C", "Go root given to C", "Go flow"}[k]
}

func TestCancelHandlerOfAGoStepReleasedAfterTheLoopStopped(t *testing.T) {
	const (
		cancelled = "guard cancel\nguard cleanup\n"
		completed = "guard cleanup\n"
	)
	for _, c := range []struct {
		root      goStepRoot
		complete  bool // Go completes the step before the stop
		freeFirst bool // the free is posted before the stop, which drops it
		want      string
	}{
		{root: ownedRoot, complete: true, freeFirst: true, want: completed},
		{root: ownedRoot, complete: true, want: completed},
		{root: ownedRoot, freeFirst: true, want: cancelled},
		{root: ownedRoot, want: cancelled},
		{root: heldGoRoot, complete: true, freeFirst: true, want: completed},
		{root: heldGoRoot, complete: true, want: completed},
		{root: heldGoRoot, freeFirst: true, want: cancelled},
		{root: heldGoRoot, want: cancelled},
		{root: goFlow, complete: true, want: completed},
		{root: goFlow, want: cancelled},
	} {
		name := c.root.String()
		if c.complete {
			name += "/completed"
		} else {
			name += "/waiting"
		}
		if c.root != goFlow {
			name += map[bool]string{false: "/stop then free", true: "/free then stop"}[c.freeFirst]
		}
		t.Run(name, func(t *testing.T) {
			ctest.Reset()
			registered := registrySize()
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			r, ptr := newGoStepRoot(c.root, loop) // ptr: the root pointer C holds
			reached := make(chan struct{})
			var last asyncsteps.AsyncSteps // the step the flow waits in: the stop finds it
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctest.Guard(Binary(as))
				if c.complete {
					go as.Success()
					return
				}
				last = as
				close(reached)
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal() // no C step and no Binary: nothing sweeps
				last = as
				close(reached)
			})
			st := r.State()
			r.ExecuteWith(func(*asyncsteps.Error) {}) // the closed loop's error
			<-reached
			lp := loopFor(loop)
			if c.freeFirst {
				loop.Immediate(func() {
					ctest.Free(ptr) // posted to the loop, which the close then drops
					loop.Close()
				})
				<-loop.Done()
			} else {
				loop.Close()
				if ptr != nil {
					ctest.Free(ptr)
				}
			}
			afterFallbacks(lp)
			if got := ctest.Trace(); got != c.want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, c.want)
			}
			if n := nodesOf(st); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
			if n := registrySize() - registered; n != 0 {
				t.Errorf("the registry holds %d more entries than before the flow, want 0", n)
			}
			runtime.KeepAlive(last)
		})
	}
}

// On a TestTool whose ResetEvents drops the free of a root made by C, the
// free cancels the flow, which the tool runs on: the C cancel handler of
// the Go step runs once if the step waits, when the free is dropped, and
// not again as the cancel applies; never if Go completed the step.
func TestCancelHandlerOfAGoStepOfAFreeDroppedByResetEvents(t *testing.T) {
	for _, c := range []struct {
		name     string
		complete bool
		want     string
	}{
		{"completed", true, "guard cleanup\n"},
		{"waiting", false, "guard cancel\nguard cleanup\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			ptr := New(tt)
			r := Wrap(ptr).(*asyncsteps.Root)
			var step asyncsteps.AsyncSteps
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctest.Guard(Binary(as))
				step = as
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
			st := r.State()
			r.Execute()
			tt.Run()
			if c.complete {
				step.Success()
				tt.Run()
			}
			ctest.Free(ptr)
			tt.ResetEvents()
			if got := ctest.Trace(); got != c.want {
				t.Errorf("trace once the free was dropped:\n%s\nwant:\n%s", got, c.want)
			}
			tt.Run()
			if got := ctest.Trace(); got != c.want {
				t.Errorf("trace once the flow was cancelled:\n%s\nwant:\n%s", got, c.want)
			}
			if n := nodesOf(st); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
			if r.Running() {
				t.Error("the flow of the freed root still runs")
			}
		})
	}
}

// A Go step given to C with a C sub-step, added through its pointer, that
// waits when the loop stops: both go innermost first, each after its C
// cancel handler, and the Go step's stack memory outlives the sub-step's
// cancel handler, which may read it. Where a free is to come, the stop
// leaves both to it; before, the stop released the Go step at once, and
// the free cancelled the sub-step after its parent's memory was gone.
func TestGoStepLeftWithACSubStepGoesAfterIt(t *testing.T) {
	const want = "held\nheld cancel\nguard cancel\nguard cleanup\n"
	for _, root := range []goStepRoot{ownedRoot, heldGoRoot, goFlow} {
		t.Run(root.String(), func(t *testing.T) {
			ctest.Reset()
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			r, ptr := newGoStepRoot(root, loop)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := Binary(as)
				ctest.Guard(p)
				ctest.HeldWithCancel(p)
			})
			st := r.State()
			r.ExecuteWith(func(*asyncsteps.Error) {})
			if !ctest.WaitFor("held", 5*time.Second) {
				t.Fatalf("the C sub-step did not run: %q", ctest.Trace())
			}
			lp := loopFor(loop)
			loop.Close()
			afterFallbacks(lp)
			if ptr != nil {
				if got := ctest.Trace(); got != "held\n" {
					t.Errorf("trace before the free:\n%s\nwant:\nheld", got)
				}
				ctest.Free(ptr)
				afterFallbacks(lp)
			}
			if got := ctest.Trace(); got != want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, want)
			}
			if n := nodesOf(st); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
		})
	}
}

// opaqueStep is a decorator without Unwrap: the engine cannot follow it
// to its step, and cabi knows the step's state by its IsValid alone.
type opaqueStep struct{ asyncsteps.AsyncSteps }

// A Go step given to C through a decorator without Unwrap, which the stop
// left waiting, gets its C cancel handler from the free, as one the
// engine can follow does; one that Go completed before the stop does not.
// Only IsValid tells the two apart, and it is false after the stop for a
// step left waiting: cabi goes by what it said as the loop stopped.
func TestCancelHandlerOfAnOpaqueGoStepLeftByAStoppedLoop(t *testing.T) {
	for _, root := range []goStepRoot{ownedRoot, heldGoRoot} {
		for _, complete := range []bool{false, true} {
			want, name := "guard cancel\nguard cleanup\n", root.String()+"/waiting"
			if complete {
				want, name = "guard cleanup\n", root.String()+"/completed"
			}
			t.Run(name, func(t *testing.T) {
				ctest.Reset()
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				r, ptr := newGoStepRoot(root, loop)
				reached := make(chan struct{})
				var last asyncsteps.AsyncSteps
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					ctest.Guard(Binary(opaqueStep{as}))
					last = as
					if complete {
						go as.Success()
						return
					}
					close(reached)
				})
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					close(reached)
				})
				r.ExecuteWith(func(*asyncsteps.Error) {}) // the closed loop's error
				<-reached
				lp := loopFor(loop)
				loop.Close()
				ctest.Free(ptr)
				afterFallbacks(lp)
				if got := ctest.Trace(); got != want {
					t.Errorf("trace:\n%s\nwant:\n%s", got, want)
				}
				runtime.KeepAlive(last)
			})
		}
	}
}

// goexitStep is a decorator without Unwrap whose IsValid, once armed,
// calls runtime.Goexit the first time it is asked, as user code may.
type goexitStep struct {
	asyncsteps.AsyncSteps
	armed *atomic.Bool
}

func (s goexitStep) IsValid() bool {
	if s.armed.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return s.AsyncSteps.IsValid()
}

// A decorator's IsValid that calls runtime.Goexit as the loop stops ends
// the loop's goroutine (the loop goes on with another), not the records
// of the other steps given to C: one left waiting after it still gets its
// C cancel handler from the free. Before, the records stopped at the
// Goexit, and the step after it read as completed by Go.
func TestIsValidGoexitAtTheStopKeepsTheOtherRecords(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	ptr := New(loop)
	r := Wrap(ptr).(*asyncsteps.Root)
	var armed atomic.Bool
	reached := make(chan asyncsteps.AsyncSteps, 2)
	r.Parallel().
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			Binary(goexitStep{as, &armed}) // first in the flow's list
			reached <- as
		}).
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			ctest.Guard(Binary(opaqueStep{as}))
			reached <- as
		})
	r.ExecuteWith(func(*asyncsteps.Error) {})
	held := [...]asyncsteps.AsyncSteps{<-reached, <-reached}
	lp := loopFor(loop)
	armed.Store(true)
	loop.Close()
	if armed.Load() {
		t.Fatal("the stop did not ask the decorator's IsValid")
	}
	ctest.Free(ptr)
	afterFallbacks(lp)
	const want = "guard cancel\nguard cleanup\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	runtime.KeepAlive(held)
}

// On a loop that ran C flows, the AsyncSteps of a step the stop left
// waiting reports IsValid false, as on any other loop: a plain Go flow's,
// and those of Go steps given to C, through a decorator without Unwrap
// too, whose C cancel handlers the stop's cleanup still runs once. Before,
// package cabi marked such a loop, and its steps kept reporting true.
func TestIsValidFalseOnceALoopThatRanCFlowsStopped(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	waiting := make(chan asyncsteps.AsyncSteps, 3)
	plain := asyncsteps.New(asyncsteps.WithTool(loop))
	plain.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	given := asyncsteps.New(asyncsteps.WithTool(loop))
	given.Parallel().
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			ctest.Guard(Binary(as))
			waiting <- as
		}).
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			opaque := opaqueStep{as}
			ctest.Guard(Binary(opaque))
			waiting <- opaque
		})
	plain.ExecuteWith(func(*asyncsteps.Error) {})
	given.ExecuteWith(func(*asyncsteps.Error) {})
	names := []string{"first", "second", "third"}
	held := make([]asyncsteps.AsyncSteps, len(names))
	for i := range held {
		held[i] = <-waiting
	}
	lp := loopFor(loop)
	loop.Close()
	for i, as := range held {
		if as.IsValid() {
			t.Errorf("the %s waiting step is valid once its loop, which ran C flows, stopped", names[i])
		}
	}
	afterFallbacks(lp)
	const want = "guard cancel\nguard cleanup\nguard cancel\nguard cleanup\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if n := nodesOf(given.State()); n != 0 {
		t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
	}
}

// A Go step given to C through a decorator without Unwrap, whose callback
// closes the loop: the loop stops as the callback returns, before the
// sweep that Binary posted for the pointer can run, and the fallback
// sweeps after the stop, where IsValid is false for the step the stop
// left waiting. The sweep keeps it, for the free to run its C cancel
// handler; so does the end of the flow, which takes the pointer when
// Binary of the step itself lets the engine watch it.
func TestCancelHandlerOfAnOpaqueGoStepWhoseCallbackClosedTheLoop(t *testing.T) {
	const want = "guard cancel\nguard cleanup\n"
	for _, watched := range []bool{false, true} {
		roots := []goStepRoot{ownedRoot, heldGoRoot}
		if watched {
			roots = append(roots, goFlow) // unwatched, no release is to come
		}
		for _, root := range roots {
			name := root.String() + map[bool]string{false: "/swept", true: "/flow's end"}[watched]
			t.Run(name, func(t *testing.T) {
				ctest.Reset()
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				r, ptr := newGoStepRoot(root, loop)
				var last asyncsteps.AsyncSteps
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					if watched {
						Binary(as)
					}
					ctest.Guard(Binary(opaqueStep{as}))
					last = as
					loop.Close() // the loop stops as the callback returns
				})
				st := r.State()
				lp := loopFor(loop) // before the loop stops and forgets it
				r.ExecuteWith(func(*asyncsteps.Error) {})
				afterFallbacks(lp)
				if ptr != nil {
					ctest.Free(ptr)
					afterFallbacks(lp)
				}
				if got := ctest.Trace(); got != want {
					t.Errorf("trace:\n%s\nwant:\n%s", got, want)
				}
				if n := nodesOf(st); n != 0 {
					t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
				}
				runtime.KeepAlive(last)
			})
		}
	}
}

// newGoStepRoot returns a root of kind on loop and the root pointer C
// holds for it: nil for a flow of Go's that C holds no pointer of.
func newGoStepRoot(kind goStepRoot, loop *asyncsteps.Loop) (*asyncsteps.Root, unsafe.Pointer) {
	switch kind {
	case ownedRoot:
		ptr := New(loop)
		return Wrap(ptr).(*asyncsteps.Root), ptr
	case heldGoRoot:
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		return r, Binary(r)
	default:
		return asyncsteps.New(asyncsteps.WithTool(loop)), nil
	}
}

// A Go step given to C, whose Success from another goroutine was claimed
// before the loop applied a cancel of the flow, has completed: the C
// cancel handler is not called (C frees its data on completion, and the
// handler would free it again), and the step is released as completed.
// An Error claimed so still gets it, as the error would have called it.
func TestCancelHandlerOfAGoStepWhoseCompletionWasClaimed(t *testing.T) {
	for _, c := range []struct {
		name     string
		complete func(as asyncsteps.AsyncSteps)
		want     string
	}{
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success() }, "guard cleanup\n"},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Late") }, "guard cancel\nguard cleanup\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			var step asyncsteps.AsyncSteps
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctest.Guard(Binary(as))
				step = as
			})
			st := r.State()
			ch := r.Promise()
			tt.Run()

			r.Cancel() // queued first: the loop applies it before the completion
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.complete(step)
			}()
			<-done
			tt.Run()

			if res := <-ch; !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
			}
			if got := ctest.Trace(); got != c.want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, c.want)
			}
			if n := nodesOf(st); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
		})
	}
}
