package asyncsteps

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var _ scheduler = (*Loop)(nil)

// guard is how long a test waits for the loop before it calls the loop
// stuck; it never paces a test.
const guard = 10 * time.Second

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// drain waits until every callback l already has in its inbox has run.
func drain(t *testing.T, l *Loop) {
	t.Helper()
	done := make(chan struct{})
	l.Immediate(func() { close(done) })
	wait(t, done, "the loop to drain")
}

// onLoop runs f on l's goroutine and waits for it.
func onLoop(t *testing.T, l *Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	l.Immediate(func() { defer close(done); f() })
	wait(t, done, "a loop callback")
}

func newTestLoop(t *testing.T) *Loop {
	l := NewLoop()
	t.Cleanup(l.Close)
	return l
}

func TestLoopImmediatesRunInFIFOOrder(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	for i := range 10 {
		l.Immediate(func() { tr.add("i%d", i) })
	}
	drain(t, l)
	if got, want := tr.String(), "i0 i1 i2 i3 i4 i5 i6 i7 i8 i9"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestLoopNestedSchedulingFromCallbacks(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	done := make(chan struct{})
	onLoop(t, l, func() {
		// Both reach the inbox while the loop is busy here.
		l.Immediate(func() {
			tr.add("a")
			l.post(taskFunc(func() { tr.add("c") }))
			l.Immediate(func() { tr.add("d"); close(done) })
		})
		l.Immediate(func() { tr.add("b") })
	})
	// Not drain: its own callback could run before c and d.
	wait(t, done, "the last callback")
	// Posted tasks go straight to the loop's own queue; Immediate goes
	// through the inbox, which joins it on the next pass.
	if got, want := tr.String(), "a b c d"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestLoopDeferredRunsByDueTime(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	done := make(chan struct{})
	start := time.Now()
	onLoop(t, l, func() {
		// Scheduled in one callback, microseconds apart: the gaps
		// between delays dwarf the gaps between the calls.
		l.Deferred(100*time.Millisecond, func() { tr.add("c"); close(done) })
		l.Deferred(0, func() { tr.add("a") })
		l.Deferred(50*time.Millisecond, func() {
			tr.add("b")
			if e := time.Since(start); e < 50*time.Millisecond {
				t.Errorf("a 50ms timer ran after %v", e)
			}
		})
	})
	wait(t, done, "the timers")
	if got, want := tr.String(), "a b c"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestLoopDeferredTiesRunInSchedulingOrder(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	done := make(chan struct{})
	onLoop(t, l, func() {
		for i := range 5 {
			l.Deferred(time.Millisecond, func() { tr.add("d%d", i) })
		}
		l.Deferred(time.Millisecond, func() { close(done) })
	})
	wait(t, done, "the timers")
	if got, want := tr.String(), "d0 d1 d2 d3 d4"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestLoopCancelBeforeRun(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var hi, hd Handle
	onLoop(t, l, func() {
		// The loop is busy with this callback, so neither can run yet.
		hi = l.Immediate(func() { tr.add("i") })
		hd = l.Deferred(0, func() { tr.add("d") })
		hi.Cancel()
		hd.Cancel()
	})
	if hi.IsValid() || hd.IsValid() {
		t.Fatal("a cancelled handle is still valid")
	}
	far := l.Deferred(time.Hour, func() { tr.add("far") })
	if !far.IsValid() {
		t.Fatal("a scheduled timer is not valid")
	}
	far.Cancel()
	drain(t, l)
	if far.IsValid() {
		t.Fatal("a cancelled timer is still valid")
	}
	onLoop(t, l, func() {
		if n := l.timers.len(); n != 0 {
			t.Errorf("%d cancelled timers left in the heap", n)
		}
	})
	if got := tr.String(); got != "" {
		t.Fatalf("trace = %q, want nothing", got)
	}
}

func TestLoopCancelAfterRunIsHarmless(t *testing.T) {
	l := newTestLoop(t)
	ran := make(chan struct{})
	hi := l.Immediate(func() {})
	hd := l.Deferred(0, func() { close(ran) })
	wait(t, ran, "the timer")
	drain(t, l)
	if hi.IsValid() || hd.IsValid() {
		t.Fatal("a handle is valid after its callback ran")
	}
	hi.Cancel()
	hd.Cancel()
	hd.Cancel()
	drain(t, l)
}

func TestLoopIsSameThread(t *testing.T) {
	l := newTestLoop(t)
	if l.IsSameThread() {
		t.Fatal("IsSameThread() = true on the test goroutine")
	}
	var inside, other bool
	onLoop(t, l, func() {
		inside = l.IsSameThread()
		ch := make(chan bool)
		go func() { ch <- l.IsSameThread() }()
		other = <-ch
	})
	if !inside || other {
		t.Fatalf("IsSameThread() = %v inside, %v on another goroutine; want true, false", inside, other)
	}
}

// TestLoopIsSameThreadAtAnyDepth checks IsSameThread where the stack
// check in front of goid answers, and where it leaves the answer to goid:
// in a callback of the loop at depths below and beyond the frames that
// check reads, and on another goroutine, shallow and deep, while the loop
// runs a callback (not waiting, so the check is reached).
func TestLoopIsSameThreadAtAnyDepth(t *testing.T) {
	if want := "github.com/asyncsteps/asyncsteps.(*Loop).run"; loopRunName != want {
		t.Fatalf("loopRunName = %q, want %q", loopRunName, want)
	}
	l := newTestLoop(t)
	var deep func(n int, f func() bool) bool
	deep = func(n int, f func() bool) bool {
		if n > 0 {
			return deep(n-1, f)
		}
		return f()
	}
	for _, depth := range []int{0, 10, 63, 64, 200} {
		var inside, other bool
		onLoop(t, l, func() {
			inside = deep(depth, l.IsSameThread)
			ch := make(chan bool)
			go func() { ch <- deep(depth, l.IsSameThread) }()
			other = <-ch
		})
		if !inside || other {
			t.Errorf("%d calls deep: IsSameThread() = %v inside, %v on another goroutine; want true, false", depth, inside, other)
		}
	}
}

// TestLoopIsSameThreadAcrossSleeps checks the shortcut IsSameThread takes
// while the loop's goroutine is blocked waiting for work: false from any
// other goroutine, and true again in the callbacks that wake the loop.
func TestLoopIsSameThreadAcrossSleeps(t *testing.T) {
	l := newTestLoop(t)
	for round := range 3 {
		deadline := time.Now().Add(guard)
		for !l.waiting.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the idle loop is not waiting", round)
			}
			time.Sleep(time.Millisecond)
		}
		if l.IsSameThread() {
			t.Fatalf("round %d: IsSameThread() = true on the test goroutine while the loop waits", round)
		}
		var inside, waiting bool
		onLoop(t, l, func() { inside, waiting = l.IsSameThread(), l.waiting.Load() })
		if !inside || waiting {
			t.Fatalf("round %d: in a callback, IsSameThread() = %v and waiting = %v; want true, false", round, inside, waiting)
		}
	}
}

func TestLoopAcceptsImmediatesFromManyGoroutines(t *testing.T) {
	l := newTestLoop(t)
	const producers, per = 8, 2000
	last := make([]int, producers) // touched only on the loop
	for i := range last {
		last[i] = -1
	}
	count := 0
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				l.Immediate(func() {
					if i != last[p]+1 {
						t.Errorf("producer %d: callback %d ran after %d", p, i, last[p])
					}
					last[p] = i
					count++
				})
			}
		})
	}
	wg.Wait()
	drain(t, l)
	if count != producers*per {
		t.Fatalf("%d callbacks ran, want %d", count, producers*per)
	}
}

func TestLoopBusy(t *testing.T) {
	l := newTestLoop(t)
	var busy []bool
	done := make(chan struct{})
	l.Immediate(func() {
		busy = append(busy, l.busy())
		l.post(taskFunc(func() {
			busy = append(busy, l.busy())
			close(done)
		}))
		busy = append(busy, l.busy())
	})
	// Nothing else is posted until done: drain would make the loop busy.
	wait(t, done, "the posted task")
	if fmt.Sprint(busy) != "[false true false]" {
		t.Fatalf("busy() = %v, want [false true false]", busy)
	}
}

func TestLoopMillionPostsStayLinear(t *testing.T) {
	l := newTestLoop(t)
	const n = 1_000_000
	count := 0
	done := make(chan struct{})
	var chain taskFunc
	chain = func() {
		// Each of the n queued tasks queues one more: the ring holds a
		// million tasks and its head wraps around it.
		if count++; count <= n {
			l.post(chain)
		} else if count == 2*n {
			close(done)
		}
	}
	l.Immediate(func() {
		for range n {
			l.post(chain)
		}
	})
	// Linear, this takes a second (under the race detector); quadratic,
	// hours. The bound is wide so that a loaded machine does not fail it.
	select {
	case <-done:
	case <-time.After(6 * guard):
		t.Fatal("timed out waiting for a million posts")
	}
}

func TestLoopPanicDoesNotStopTheLoop(t *testing.T) {
	buf := captureLog(t)
	l := newTestLoop(t)
	var tr trace
	l.Immediate(func() { tr.add("a") })
	l.Immediate(func() { panic("boom") })
	l.Immediate(func() { tr.add("b") })
	timerDone := make(chan struct{})
	l.Deferred(0, func() { panic("timer boom") })
	l.Deferred(0, func() { close(timerDone) })
	drain(t, l)
	wait(t, timerDone, "the timer after a panicking one")
	if got, want := tr.String(), "a b"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	out := buf.String()
	for _, want := range []string{"asyncsteps: panic in loop callback", "boom", "timer boom"} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// captureLog sends the default slog logger's output to the returned
// buffer until the test ends.
func captureLog(t *testing.T) *syncBuffer {
	buf := new(syncBuffer)
	old, oldOut, oldFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() {
		// SetDefault redirected package log too; put both back.
		slog.SetDefault(old)
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
	})
	return buf
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLoopCloseDropsPendingWork(t *testing.T) {
	l := NewLoop()
	var tr trace
	var hs []Handle
	onLoop(t, l, func() {
		hs = append(hs,
			l.Immediate(func() { tr.add("immediate") }),
			l.Deferred(0, func() { tr.add("deferred") }))
		l.post(taskFunc(func() { tr.add("posted") }))
		l.Close() // on the loop: only signals
	})
	outside := l.Deferred(time.Hour, func() { tr.add("late") })
	l.Close()
	hs = append(hs, outside)
	for i, h := range hs {
		if h.IsValid() {
			t.Errorf("handle %d is valid after Close", i)
		}
	}
	if got := tr.String(); got != "" {
		t.Fatalf("trace = %q, want nothing", got)
	}
}

func TestLoopCloseFromOutsideDropsTimers(t *testing.T) {
	l := NewLoop()
	h := l.Deferred(time.Hour, func() { t.Error("a dropped timer ran") })
	drain(t, l) // the loop now sleeps with its timer armed
	l.Close()
	if h.IsValid() {
		t.Fatal("a timer is valid after Close")
	}
	if l.timer != nil && l.timer.Stop() {
		t.Fatal("Close left the loop's timer running")
	}
}

func TestLoopCloseIsIdempotentAndFinal(t *testing.T) {
	l := NewLoop()
	l.Close()
	l.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(l.Close)
	}
	wg.Wait()
	hi := l.Immediate(func() { t.Error("Immediate after Close ran") })
	hd := l.Deferred(0, func() { t.Error("Deferred after Close ran") })
	if hi.IsValid() || hd.IsValid() {
		t.Fatal("a handle from a closed loop is valid")
	}
	hi.Cancel()
	hd.Cancel()
	if l.IsSameThread() {
		t.Fatal("IsSameThread() = true on a closed loop")
	}
}

func TestLoopCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	loops := make([]*Loop, 10)
	for i := range loops {
		loops[i] = NewLoop()
		loops[i].Deferred(time.Hour, func() {})
		loops[i].Immediate(func() {})
	}
	for _, l := range loops {
		drain(t, l)
		l.Close()
	}
	deadline := time.Now().Add(guard)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func TestDefaultToolIsOneRunningLoop(t *testing.T) {
	a, b := DefaultTool(), DefaultTool()
	if a != b {
		t.Fatal("DefaultTool returned two loops")
	}
	done := make(chan struct{})
	a.Immediate(func() {
		if !a.IsSameThread() {
			t.Error("DefaultTool callback not on its loop")
		}
		close(done)
	})
	wait(t, done, "the default loop")
}

func TestFIFOWrapsAndGrows(t *testing.T) {
	var q fifo[int]
	next, want := 0, 0
	for round := range 200 {
		for range round % 37 {
			q.push(next)
			next++
		}
		for range round % 23 {
			v, ok := q.pop()
			if !ok {
				break
			}
			if v != want {
				t.Fatalf("pop() = %d, want %d", v, want)
			}
			want++
		}
	}
	for v, ok := q.pop(); ok; v, ok = q.pop() {
		if v != want {
			t.Fatalf("pop() = %d, want %d", v, want)
		}
		want++
	}
	if want != next || q.len() != 0 {
		t.Fatalf("popped %d of %d, len %d", want, next, q.len())
	}
}

func TestTimerHeapOrderAndRemove(t *testing.T) {
	var mu sync.Mutex
	h := timerHeap{mu: &mu, seq: new(atomic.Uint64)}
	var tr trace
	var es []*timerEntry
	for i, due := range []int64{5, 3, 5, 1, 3, 9, 1} {
		e := &timerEntry{t: funcTask(func() { tr.add("%d@%d", i, due) })}
		h.push(e, due)
		es = append(es, e)
	}
	es[2].Cancel()
	es[3].Cancel()
	for e := h.popDue(8); e != nil; e = h.popDue(8) {
		e.fire()
	}
	if got, want := tr.String(), "6@1 1@3 4@3 0@5"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if h.len() != 1 || es[5].index != 0 {
		t.Fatalf("heap left %d entries, want the one due at 9", h.len())
	}
}

// TestLoopNeverMissesAWakeUp hands work to a loop that keeps falling asleep,
// from several goroutines at once: a lost wake-up would hang a round trip.
func TestLoopNeverMissesAWakeUp(t *testing.T) {
	l := newTestLoop(t)
	roundTrips(t, func(i int, reply chan<- struct{}) {
		if i%2 == 0 {
			l.Immediate(func() { reply <- struct{}{} })
		} else {
			l.Deferred(0, func() { reply <- struct{}{} })
		}
	})
}

// roundTrips has 4 goroutines make 5,000 round trips each: send schedules
// something that answers on reply, and the goroutine waits for the answer
// before the next one, so that the loop sleeps between most of them. A
// wake-up lost by the loop fails the test.
func roundTrips(t *testing.T, send func(i int, reply chan<- struct{})) {
	const producers, trips = 4, 5000
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			reply := make(chan struct{})
			for i := range trips {
				send(i, reply)
				select {
				case <-reply:
				case <-time.After(guard):
					t.Errorf("round trip %d lost", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDefaultToolCannotBeClosed(t *testing.T) {
	l := DefaultTool().(*Loop)
	l.Close()
	done := make(chan struct{})
	l.Immediate(func() { close(done) })
	wait(t, done, "a callback on the default loop after Close")
}

// A burst grows the loop's queues; once the loop is idle again they give
// their memory back (the local queue's at the next collection), so a
// server keeps no high-water mark of its worst burst for ever.
func TestLoopGivesBackQueuesAfterABurst(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	const burst = 20 * keptQueue
	done := make(chan struct{})
	var ran atomic.Int64
	for range burst {
		l.Immediate(func() {
			if ran.Add(1) == burst {
				close(done)
			}
		})
	}
	wait(t, done, "the burst")
	deadline := time.Now().Add(guard)
	for {
		l.mu.Lock()
		idle := l.sleeping.Load()
		inbox := cap(l.inbox)
		l.mu.Unlock()
		if idle {
			// The loop trims before it sleeps: what it owns is stable now.
			// The local queue's buffer is held weakly until a collection.
			runtime.GC()
			l.Immediate(func() {
				if n := len(l.local.buf); n > keptQueue {
					t.Errorf("local queue keeps %d slots, want at most %d", n, keptQueue)
				}
				if n := cap(l.drained); n > keptQueue {
					t.Errorf("drained inbox keeps %d slots, want at most %d", n, keptQueue)
				}
			})
			if inbox > keptQueue {
				t.Errorf("inbox keeps %d slots, want at most %d", inbox, keptQueue)
			}
			drain(t, l)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop never went idle")
		}
		runtime.Gosched()
	}
}

// A trimmed queue takes its old buffer back at the next push, unless a
// collection freed it meanwhile.
func TestFifoTakesBackItsBufferUntilACollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	var q fifo[int]
	for i := range 4 * keptQueue {
		q.push(i)
	}
	for range 4 * keptQueue {
		q.pop()
	}
	old := &q.buf[0]
	q.trim()
	if q.buf != nil {
		t.Fatalf("trim kept %d slots", len(q.buf))
	}
	q.push(1)
	if len(q.buf) != 4*keptQueue || &q.buf[0] != old {
		t.Errorf("after trim and push: %d slots, same buffer %v; want the %d-slot buffer back",
			len(q.buf), &q.buf[0] == old, 4*keptQueue)
	}
	if v, ok := q.pop(); !ok || v != 1 {
		t.Errorf("pop = %d, %v; want 1, true", v, ok)
	}
	q.trim()
	runtime.GC()
	q.push(2)
	if len(q.buf) != 16 {
		t.Errorf("after a collection: %d slots, want a new buffer of 16", len(q.buf))
	}
}

// A Loop notes weakly, to end it on Close, a flow started by Execute that
// waits for another goroutine with nothing of the loop's holding it, once
// however often it waits; not a flow that waits with a step timeout, in an
// Await, or for a Promise: the loop holds those already.
func TestLoopNotesOnlyTheParkedFlowsItHoldsNothingOf(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	noted := func() int {
		got := make(chan int)
		l.Immediate(func() { got <- len(l.engine.parked) })
		return <-got
	}
	parked := make(chan AsyncSteps, 1)
	wait := func(as AsyncSteps, _ ...any) { as.WaitExternal(); parked <- as }
	twice := New(WithTool(l))
	twice.Add(wait).Add(wait)
	twice.Execute()
	(<-parked).Success()
	(<-parked).Success()
	timed := New(WithTool(l))
	timed.Add(func(as AsyncSteps, _ ...any) { as.SetTimeout(time.Hour); parked <- as })
	timed.Execute()
	(<-parked).Success()
	awaiting := New(WithTool(l))
	release := make(chan struct{})
	awaiting.Await(func(context.Context) (any, error) { <-release; return nil, nil })
	awaiting.Execute()
	promised := New(WithTool(l))
	promised.Add(wait)
	p := promised.Promise()
	(<-parked).Success()
	<-p
	if n := noted(); n != 1 {
		t.Errorf("the loop notes %d parked flows, want 1: the flow that waited twice with nothing holding it", n)
	}
	close(release)
}

// The loop of DefaultTool never closes, so it notes none of the flows that
// park on it: a Loop notes them only to end them on Close.
func TestDefaultToolNotesNoParkedFlows(t *testing.T) {
	l := DefaultTool().(*Loop)
	parked := make(chan AsyncSteps, 40)
	for range cap(parked) {
		r := New()
		r.Add(func(as AsyncSteps, _ ...any) { as.WaitExternal(); parked <- as })
		r.Execute()
	}
	for range cap(parked) {
		(<-parked).Success()
	}
	got := make(chan int)
	l.Immediate(func() { got <- len(l.engine.parked) })
	if n := <-got; n != 0 {
		t.Errorf("the loop of DefaultTool notes %d parked flows, want 0", n)
	}
}
