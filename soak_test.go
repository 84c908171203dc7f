package asyncsteps_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

var soakFor = flag.Duration("soak", 2*time.Second, "how long TestSoak runs flows (go test -run Soak -soak=5m .)")

// Soak parameters: flows in flight per loop, loops, completer goroutines.
const (
	soakLoops      = 4
	soakInFlight   = 64
	soakCompleters = 4
	soakLostAfter  = 30 * time.Second // a flow with no Result by then is lost
)

// soakStats counts what the soak test saw; every field is atomic.
type soakStats struct {
	flows, ok, failed, canceled atomic.Int64
	lateCallbacks, doubleCancel atomic.Int64
	wrongResult                 atomic.Int64
	firstWrong                  atomic.Pointer[string]
}

func (s *soakStats) wrong(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.firstWrong.CompareAndSwap(nil, &msg)
	s.wrongResult.Add(1)
}

// TestSoak runs many flows on several real loops for a fixed time (-soak,
// 2 s by default), with external completions from other goroutines, random
// timeouts and root cancels, and checks that every flow reports exactly one
// plausible Result, that no callback runs after it, that no cancel handler
// runs twice, and that goroutines and heap come back to their baseline.
func TestSoak(t *testing.T) {
	d := *soakFor
	if testing.Short() {
		d = min(d, 500*time.Millisecond)
	}
	goroutines0, heap0 := soakBaseline()

	loops := make([]*asyncsteps.Loop, soakLoops)
	for i := range loops {
		loops[i] = asyncsteps.NewLoop()
	}
	mutex := asyncsteps.NewMutex(2)

	// Completers finish waiting steps from other goroutines, sometimes with
	// an error, sometimes twice (the second call must have no effect).
	work := make(chan soakJob, soakLoops*soakInFlight*4)
	stop := make(chan struct{})
	var completers sync.WaitGroup
	for range soakCompleters {
		completers.Go(func() {
			for {
				var j soakJob
				select {
				case j = <-work:
				case <-stop:
					return
				}
				if j.delay > 0 {
					time.Sleep(j.delay)
				}
				if j.fail {
					j.as.Error("E1", "soak")
				} else {
					j.as.Success(j.arg)
				}
				if j.twice {
					j.as.Success("late")
				}
			}
		})
	}

	var st soakStats
	deadline := time.Now().Add(d)
	var drivers sync.WaitGroup
	var heapMid uint64
	var heapMidOnce sync.Once
	for li, loop := range loops {
		drivers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(li), 42))
			sem := make(chan struct{}, soakInFlight)
			var inflight sync.WaitGroup
			for time.Now().Before(deadline) {
				sem <- struct{}{}
				if li == 0 && time.Now().After(deadline.Add(-d/2)) {
					heapMidOnce.Do(func() { heapMid = soakHeap() })
				}
				seed := rng.Uint64()
				inflight.Go(func() {
					defer func() { <-sem }()
					soakFlow(loop, mutex, seed, work, stop, &st)
				})
			}
			inflight.Wait()
		})
	}
	drivers.Wait()
	close(stop)
	completers.Wait()
	for _, l := range loops {
		l.Close()
	}

	goroutines1 := soakWaitGoroutines(goroutines0)
	heap1 := soakHeap()
	t.Logf("soak %v: %d flows completed (%d ok, %d failed, %d canceled); heap %d KiB before, %d KiB midway, %d KiB after; goroutines %d before, %d after",
		d, st.flows.Load(), st.ok.Load(), st.failed.Load(), st.canceled.Load(),
		heap0>>10, heapMid>>10, heap1>>10, goroutines0, goroutines1)

	if n := st.lateCallbacks.Load(); n > 0 {
		t.Errorf("%d callbacks ran after their flow's Result", n)
	}
	if n := st.doubleCancel.Load(); n > 0 {
		t.Errorf("%d cancel handlers ran twice", n)
	}
	if n := st.wrongResult.Load(); n > 0 {
		t.Errorf("%d flows ended wrongly; first: %s", n, *st.firstWrong.Load())
	}
	if goroutines1 > goroutines0 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left, %d before:\n%s", goroutines1, goroutines0, buf[:runtime.Stack(buf, true)])
	}
	// The flows, loops and Mutex are garbage now: the heap is back where it
	// was, up to the noise of the runtime and the testing package.
	if heap1 > heap0+4<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB", heap0>>10, heap1>>10)
	}
}

type soakJob struct {
	as    asyncsteps.AsyncSteps
	arg   any
	fail  bool
	twice bool
	delay time.Duration
}

// soakFlow runs one random flow to its end and checks its Result.
//
//	step A: waits for a completer (maybe an error, recovered by its handler),
//	        maybe with a timeout and a cancel handler
//	parallel: 2 or 3 branches, each waiting, some inside the Mutex
//	repeat 3: a waiting step each time
//	successStep(id)
//
// With no error, timeout or cancel planned, the Result must be [id].
func soakFlow(loop *asyncsteps.Loop, mutex *asyncsteps.Mutex, seed uint64, work chan<- soakJob, stop <-chan struct{}, st *soakStats) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var ended atomic.Bool
	id := int(seed % 1000000)
	failAt := -1 // which wait fails, if any
	if rng.IntN(4) == 0 {
		failAt = rng.IntN(8)
	}
	useTimeout := rng.IntN(6) == 0
	useCancel := rng.IntN(8) == 0
	cancelAfter := time.Duration(rng.IntN(1000)) * time.Microsecond
	waits := 0

	wait := func(as asyncsteps.AsyncSteps) {
		if ended.Load() {
			st.lateCallbacks.Add(1)
		}
		if useTimeout && rng.IntN(3) == 0 {
			as.SetTimeout(time.Duration(50+rng.IntN(500)) * time.Microsecond)
		}
		var cancelled atomic.Bool
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			if cancelled.Swap(true) {
				st.doubleCancel.Add(1)
			}
			if ended.Load() {
				st.lateCallbacks.Add(1)
			}
		})
		j := soakJob{as: as, arg: waits, fail: waits == failAt, twice: rng.IntN(8) == 0}
		if rng.IntN(4) == 0 {
			j.delay = time.Duration(rng.IntN(200)) * time.Microsecond
		}
		waits++
		select {
		case work <- j:
		default:
			// Never block the loop; a job left when the test stops is
			// dropped (its flow has ended).
			go func() {
				select {
				case work <- j:
				case <-stop:
				}
			}()
		}
	}
	step := func(as asyncsteps.AsyncSteps, _ ...any) { wait(as) }

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(step, func(as asyncsteps.AsyncSteps, code string) {
		if code == "E1" && rng.IntN(2) == 0 {
			as.Success()
		}
	})
	p := r.Parallel()
	for b := range 2 + rng.IntN(2) {
		if b%2 == 0 {
			p.Sync(mutex, step)
		} else {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(step).Add(step)
			})
		}
	}
	r.Repeat(3, func(as asyncsteps.AsyncSteps, _ int) { as.Add(step) })
	r.SuccessStep(id)

	ch := r.Promise()
	if useCancel {
		time.AfterFunc(cancelAfter, r.Cancel)
	}
	var res asyncsteps.Result
	select {
	case res = <-ch:
	case <-time.After(soakLostAfter):
		st.wrong("flow %d lost: no Result after %v", id, soakLostAfter)
		return
	}
	ended.Store(true)
	st.flows.Add(1)
	var e *asyncsteps.Error
	switch {
	case res.Err == nil:
		st.ok.Add(1)
		if len(res.Args) != 1 || res.Args[0] != id {
			st.wrong("flow %d: Result.Args %v, want [%d]", id, res.Args, id)
		}
	case errors.As(res.Err, &e) && (e.Code == "E1" || e.Code == asyncsteps.Timeout):
		st.failed.Add(1)
		if failAt < 0 && e.Code == "E1" || !useTimeout && e.Code == asyncsteps.Timeout {
			st.wrong("flow %d: unplanned error %v", id, res.Err)
		}
	case useCancel && errors.Is(res.Err, context.Canceled):
		st.canceled.Add(1)
	default:
		st.wrong("flow %d: unexpected Result.Err %v", id, res.Err)
	}
	select {
	case extra := <-ch:
		st.wrong("flow %d: a second Result %+v", id, extra)
	default:
	}
}

func soakHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func soakBaseline() (goroutines int, heap uint64) {
	heap = soakHeap()
	return runtime.NumGoroutine(), heap
}

// soakWaitGoroutines waits up to 10 s for the goroutine count to come back
// to want (exiting goroutines take a moment) and returns the count.
func soakWaitGoroutines(want int) int {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}
