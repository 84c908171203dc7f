package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// What the workers do to one flow of the stress test.
type stressKind int

const (
	stressSuccess    stressKind = iota // one worker: Success(id)
	stressError                        // one worker: Error(code, info)
	stressDouble                       // two workers: Success(id, "a") and Success(id, "b")
	stressConflict                     // two workers: Success(id, "a") and Error("Conflict")
	stressCancel                       // one worker: Root.Cancel; nobody completes the step
	stressCancelRace                   // two workers: Success(id) and Root.Cancel
	stressKinds
)

var stressKindNames = [stressKinds]string{"success", "error", "double", "conflict", "cancel", "cancel-race"}

// stressWeights is how often each kind occurs, out of their sum.
var stressWeights = [stressKinds]int{30, 20, 15, 10, 15, 10}

var stressCodes = []string{asyncsteps.CommError, asyncsteps.Unauthorized, asyncsteps.InvalidRequest}

// stressAction is one call a worker makes on a flow.
type stressAction int

const (
	actSuccess stressAction = iota
	actSuccessA
	actSuccessB
	actError
	actConflict
	actCancel
)

// stressFlow is one flow of the stress test and everything observed of it.
// Every random choice is made up front, on the test goroutine, so that the
// flow's callbacks and the workers read it without synchronization.
type stressFlow struct {
	id      int
	kind    stressKind
	loop    int
	jobs    []stressJob
	spin    int // runtime.Gosched calls in the step after handing it out
	root    *asyncsteps.Root
	promise <-chan asyncsteps.Result

	handle  chan asyncsteps.AsyncSteps // the waiting step's handle, once
	step2   atomic.Int32               // runs of the step after the waiting one
	cancels atomic.Int32               // runs of the waiting step's cancel handler
}

// stressJob is what a worker receives: the flow, the call to make, and how
// long to dawdle before it, so that completions land at random moments
// (before the step's callback returned, right after, or much later).
type stressJob struct {
	fl     *stressFlow
	as     asyncsteps.AsyncSteps
	worker int
	act    stressAction
	delay  int // <0: none; 0..9: that many Gosched; >=10: sleep that many µs
}

func (j stressJob) do() {
	switch {
	case j.delay >= 10:
		time.Sleep(time.Duration(j.delay) * time.Microsecond)
	case j.delay >= 0:
		for range j.delay {
			runtime.Gosched()
		}
	}
	fl := j.fl
	switch j.act {
	case actSuccess:
		j.as.Success(fl.id)
	case actSuccessA:
		j.as.Success(fl.id, "a")
	case actSuccessB:
		j.as.Success(fl.id, "b")
	case actError:
		j.as.Error(stressCodes[fl.id%len(stressCodes)], fmt.Sprint(fl.id))
	case actConflict:
		j.as.Error("Conflict")
	case actCancel:
		fl.root.Cancel()
	}
}

func newStressFlow(id int, rng *rand.Rand, loops, workers int) *stressFlow {
	fl := &stressFlow{id: id, loop: rng.IntN(loops), handle: make(chan asyncsteps.AsyncSteps, 1)}
	pick := rng.IntN(100)
	for k, w := range stressWeights {
		if pick < w {
			fl.kind = stressKind(k)
			break
		}
		pick -= w
	}
	var acts []stressAction
	switch fl.kind {
	case stressSuccess:
		acts = []stressAction{actSuccess}
	case stressError:
		acts = []stressAction{actError}
	case stressDouble:
		acts = []stressAction{actSuccessA, actSuccessB}
	case stressConflict:
		acts = []stressAction{actSuccessA, actConflict}
	case stressCancel:
		acts = []stressAction{actCancel}
	case stressCancelRace:
		acts = []stressAction{actSuccess, actCancel}
	}
	first := rng.IntN(workers)
	for i, act := range acts {
		w := first
		if i > 0 { // a different worker, so that the two calls race
			w = (first + 1 + rng.IntN(workers-1)) % workers
		}
		delay := -1
		switch rng.IntN(4) {
		case 1:
			delay = rng.IntN(10)
		case 2:
			delay = 10 + rng.IntN(40)
		}
		fl.jobs = append(fl.jobs, stressJob{fl: fl, worker: w, act: act, delay: delay})
	}
	if rng.IntN(4) == 0 {
		fl.spin = 1 + rng.IntN(3)
	}
	return fl
}

// build adds the flow's steps: one that waits and hands itself to the
// workers, then one that counts its runs and passes the args on.
func (fl *stressFlow) build(r *asyncsteps.Root, queues []chan stressJob) {
	fl.root = r
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.SetCancel(func(asyncsteps.AsyncSteps) { fl.cancels.Add(1) })
		fl.handle <- as
		for _, j := range fl.jobs {
			j.as = as
			queues[j.worker] <- j
		}
		for range fl.spin { // let a worker complete the step before the callback returns
			runtime.Gosched()
		}
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fl.step2.Add(1)
		as.Success(args...)
	})
}

// check verifies the one Result of the flow and what ran. It returns the
// outcome's name, for the statistics of kinds whose outcome is a race.
func (fl *stressFlow) check(res asyncsteps.Result) (string, error) {
	step2, cancels := fl.step2.Load(), fl.cancels.Load()
	completed := func(args ...any) error {
		if res.Err != nil || !sameArgs(res.Args, args) {
			return fmt.Errorf("Result = %v %v, want %v", res.Args, res.Err, args)
		}
		if step2 != 1 || cancels != 0 {
			return fmt.Errorf("step 2 ran %d times, cancel handler %d times; want 1 and 0", step2, cancels)
		}
		return nil
	}
	failed := func(code, info string) error {
		var e *asyncsteps.Error
		if !errors.As(res.Err, &e) || e.Code != code || e.Info != info || res.Args != nil {
			return fmt.Errorf("Result = %v %v, want error %s: %s", res.Args, res.Err, code, info)
		}
		// docs/DESIGN.md#cancel-handlers: the failing step's own cancel handler runs as the
		// error unwinds.
		if step2 != 0 || cancels != 1 {
			return fmt.Errorf("step 2 ran %d times, cancel handler %d times; want 0 and 1", step2, cancels)
		}
		return nil
	}
	cancelled := func() bool { return errors.Is(res.Err, context.Canceled) }

	switch fl.kind {
	case stressSuccess:
		return "success", completed(fl.id)
	case stressError:
		return "error", failed(stressCodes[fl.id%len(stressCodes)], fmt.Sprint(fl.id))
	case stressDouble:
		if len(res.Args) == 2 && res.Args[1] == "b" {
			return "b won", completed(fl.id, "b")
		}
		return "a won", completed(fl.id, "a")
	case stressConflict:
		if res.Err != nil {
			return "error won", failed("Conflict", "")
		}
		return "success won", completed(fl.id, "a")
	case stressCancel:
		if !cancelled() || res.Args != nil || step2 != 0 || cancels != 1 {
			return "", fmt.Errorf("Result = %v %v, step 2 ran %d times, cancel handler %d times; want context.Canceled, 0, 1",
				res.Args, res.Err, step2, cancels)
		}
		return "cancelled", nil
	case stressCancelRace:
		if !cancelled() {
			return "success won", completed(fl.id)
		}
		// The cancel may land before the completion is applied (the cancel
		// handler runs), between the two steps, or after step 2 ran.
		switch {
		case res.Args != nil || step2+cancels > 1:
			return "", fmt.Errorf("Result = %v %v, step 2 ran %d times, cancel handler %d times; want at most one of them",
				res.Args, res.Err, step2, cancels)
		case cancels == 1:
			return "cancel won before the completion", nil
		case step2 == 0:
			return "cancel won between the steps", nil
		}
		return "cancel won after step 2", nil
	}
	return "", fmt.Errorf("unknown kind %d", fl.kind)
}

// The proof of the concurrency model: 10,000 flows spread over 2 real loops,
// started from 4 goroutines, each completed by Success or Error from a random
// one of 8 worker goroutines at a random moment (some while the step's
// callback still runs), some by two workers at once, some cancelled midway
// with Root.Cancel from a worker. Every flow reports exactly one Result with
// the expected outcome; the step after the waiting one runs once when the
// step was completed and never twice; calls on the stale handles afterwards
// change nothing; no goroutine is left.
func TestStressExternalCompletionFromManyGoroutines(t *testing.T) {
	const (
		flows   = 10000
		loops   = 2
		workers = 8
		starter = 4
	)
	before := goroutineBaseline()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	begin := time.Now()

	ls := make([]*asyncsteps.Loop, loops)
	for i := range ls {
		ls[i] = asyncsteps.NewLoop()
	}
	queues := make([]chan stressJob, workers)
	var wg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan stressJob, 1024)
		wg.Go(func() {
			for j := range queues[i] {
				j.do()
			}
		})
	}
	all := make([]*stressFlow, flows)
	for i := range all {
		all[i] = newStressFlow(i, rng, loops, workers)
	}

	var starters sync.WaitGroup
	for s := range starter {
		starters.Go(func() {
			for i := s; i < flows; i += starter {
				fl := all[i]
				r := asyncsteps.New(asyncsteps.WithTool(ls[fl.loop]))
				fl.build(r, queues)
				fl.promise = r.Promise()
			}
		})
	}
	starters.Wait()

	var stats [stressKinds]map[string]int
	for k := range stats {
		stats[k] = map[string]int{}
	}
	deadline := time.After(60 * time.Second)
	failures := 0
	for _, fl := range all {
		var res asyncsteps.Result
		select {
		case res = <-fl.promise:
		case <-deadline:
			t.Fatalf("flow %d (%s) reported no Result", fl.id, stressKindNames[fl.kind])
		}
		outcome, err := fl.check(res)
		if err != nil {
			if failures++; failures <= 20 {
				t.Errorf("flow %d (%s): %v", fl.id, stressKindNames[fl.kind], err)
			}
		}
		stats[fl.kind][outcome]++
	}
	reported := time.Since(begin)

	// Every worker is done; now every handle is stale: calls on it are
	// ignored, and no flow reports again or runs a step again.
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	var steps, cancels [flows]int32
	for i, fl := range all {
		steps[i], cancels[i] = fl.step2.Load(), fl.cancels.Load()
		as := <-fl.handle
		if as.IsValid() {
			t.Errorf("flow %d: the handle is still valid after the end", fl.id)
		}
		as.Success("late")
		as.Error("Late")
	}
	for _, l := range ls {
		fence(t, l)
	}
	for i, fl := range all {
		select {
		case res := <-fl.promise:
			t.Errorf("flow %d (%s): a second Result %v %v", fl.id, stressKindNames[fl.kind], res.Args, res.Err)
		default:
		}
		if fl.step2.Load() != steps[i] || fl.cancels.Load() != cancels[i] {
			t.Errorf("flow %d: a callback ran after the flow ended", fl.id)
		}
	}
	for _, l := range ls {
		l.Close()
	}
	after := settleGoroutines(t, before)
	for k, s := range stats {
		t.Logf("%-11s %v", stressKindNames[k], s)
	}
	t.Logf("%d flows reported in %v (%v in all); goroutines %d before, %d after",
		flows, reported.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), before, after)
}

// docs/DESIGN.md#stale-steps, under contention: when four goroutines call Success or Error
// on one waiting step at the same instant, exactly one call counts, the
// others have no effect, and the flow goes on once.
func TestConcurrentCompletionsCountOnce(t *testing.T) {
	const (
		flows       = 2000
		batch       = 250 // bounds the goroutines alive at once (the race detector allows 8128)
		contestants = 4
	)
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	before := goroutineBaseline()
	winners := make([]int, contestants)
	for start := 0; start < flows; start += batch {
		var wg sync.WaitGroup
		type run struct {
			promise <-chan asyncsteps.Result
			next    atomic.Int32
		}
		runs := make([]*run, batch)
		for i := range runs {
			rn := &run{}
			runs[i] = rn
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				var ready atomic.Int32
				for c := range contestants {
					wg.Go(func() {
						ready.Add(1)
						for ready.Load() < contestants { // start together
							runtime.Gosched()
						}
						if c%2 == 0 {
							as.Success(c)
						} else {
							as.Error(fmt.Sprint(c))
						}
					})
				}
				if i%2 == 0 { // sometimes still in the callback when they call
					runtime.Gosched()
				}
			}, func(as asyncsteps.AsyncSteps, code string) {
				c, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("error code %q is no contestant's", code)
				}
				as.Success(c)
			})
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				rn.next.Add(1)
				as.Success(args...)
			})
			rn.promise = r.Promise()
		}
		for i, rn := range runs {
			var res asyncsteps.Result
			select {
			case res = <-rn.promise:
			case <-time.After(10 * time.Second):
				t.Fatalf("flow %d reported no Result", start+i)
			}
			c, ok := asyncsteps.Arg[int](res.Args, 0)
			if res.Err != nil || len(res.Args) != 1 || !ok || c < 0 || c >= contestants {
				t.Fatalf("flow %d: Result = %v %v, want one contestant's number", start+i, res.Args, res.Err)
			}
			winners[c]++
		}
		wg.Wait()
		fence(t, loop)
		for i, rn := range runs {
			if n := rn.next.Load(); n != 1 {
				t.Errorf("flow %d: the next step ran %d times", start+i, n)
			}
			noResult(t, rn.promise)
		}
	}
	settleGoroutines(t, before)
	t.Logf("wins per contestant: %v", winners)
}

// The handles of deferred callbacks may be cancelled from any goroutine
// while the tool fires or drops their timers (Loop and TestTool docs): run
// with -race, a read of the timer's task outside the heap's lock is
// reported. A cancelled handle is invalid either way.
func TestDeferredHandlesCancelRacingTheirTimers(t *testing.T) {
	const timers = 100
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	tt := asyncsteps.NewTestTool()
	var wg sync.WaitGroup
	for i := range timers {
		for _, h := range []asyncsteps.Handle{loop.Deferred(0, func() {}), tt.Deferred(0, func() {})} {
			wg.Go(func() {
				h.Cancel()
				if h.IsValid() {
					t.Error("a cancelled handle is still valid")
				}
			})
		}
		if i%2 == 0 {
			tt.Run()
		} else {
			tt.ResetEvents()
		}
	}
	wg.Wait()
	fence(t, loop)
}
