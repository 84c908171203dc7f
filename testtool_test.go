package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// trace records events as "a b c" to compare whole execution orders.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	tr.events = append(tr.events, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

func (tr *trace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.events, " ")
}

// offset is the virtual time of tool as a duration since TestToolEpoch.
func offset(tool Tool) time.Duration { return tool.Now().Sub(TestToolEpoch) }

var _ scheduler = (*TestTool)(nil)

func TestTestToolRunsNothingUntilDriven(t *testing.T) {
	tt := NewTestTool()
	ran := false
	tt.Immediate(func() { ran = true })
	tt.Deferred(0, func() { ran = true })
	if ran {
		t.Fatal("a callback ran before the tool was driven")
	}
	if !tt.Now().Equal(TestToolEpoch) {
		t.Fatalf("clock starts at %v, want %v", tt.Now(), TestToolEpoch)
	}
	if got := tt.Pending(); got != 2 {
		t.Fatalf("Pending() = %d, want 2", got)
	}
}

func TestTestToolImmediatesRunInFIFOOrder(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	for i := range 5 {
		tt.Immediate(func() { tr.add("i%d", i) })
	}
	tt.Run()
	if got, want := tr.String(), "i0 i1 i2 i3 i4"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestTestToolImmediatesBeforeDeferred(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	tt.Deferred(0, func() { tr.add("d0@%v", offset(tt)) })
	tt.Deferred(-time.Second, func() { tr.add("dneg@%v", offset(tt)) })
	tt.Immediate(func() { tr.add("i") })
	tt.Run()
	if got, want := tr.String(), "i d0@0s dneg@0s"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestTestToolDeferredByDueTimeTiesInSchedulingOrder(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"c", 3 * time.Second}, {"a", time.Second}, {"b1", 2 * time.Second}, {"b2", 2 * time.Second}, {"b3", 2 * time.Second}} {
		tt.Deferred(c.d, func() { tr.add("%s@%v", c.name, offset(tt)) })
	}
	tt.Run()
	if got, want := tr.String(), "a@1s b1@2s b2@2s b3@2s c@3s"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if offset(tt) != 3*time.Second {
		t.Fatalf("clock after Run = %v, want 3s", offset(tt))
	}
}

func TestTestToolNextEvent(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	tt.Deferred(time.Second, func() { tr.add("d@%v", offset(tt)) })
	tt.Immediate(func() { tr.add("i@%v", offset(tt)) })
	for _, want := range []string{"i@0s", "i@0s d@1s"} {
		if !tt.NextEvent() {
			t.Fatal("NextEvent() = false with events left")
		}
		if got := tr.String(); got != want {
			t.Fatalf("trace = %q, want %q", got, want)
		}
	}
	if tt.NextEvent() {
		t.Fatal("NextEvent() = true with no event left")
	}
}

func TestTestToolCancelBeforeRun(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	hi := tt.Immediate(func() { tr.add("i") })
	hd := tt.Deferred(time.Second, func() { tr.add("d") })
	hi.Cancel()
	hd.Cancel()
	if hi.IsValid() || hd.IsValid() {
		t.Fatal("a cancelled handle is still valid")
	}
	if tt.HasEvents() || tt.Pending() != 0 {
		t.Fatalf("HasEvents() = %v, Pending() = %d with only cancelled events", tt.HasEvents(), tt.Pending())
	}
	tt.Run()
	if got := tr.String(); got != "" {
		t.Fatalf("trace = %q, want nothing", got)
	}
	if offset(tt) != 0 {
		t.Fatalf("a cancelled timer moved the clock to %v", offset(tt))
	}
}

func TestTestToolCancelOneAmongMany(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	var hs []Handle
	for i := range 6 {
		hs = append(hs, tt.Deferred(time.Duration(i%3)*time.Second, func() { tr.add("d%d", i) }))
		hs = append(hs, tt.Immediate(func() { tr.add("i%d", i) }))
	}
	for _, i := range []int{0, 5, 6, 9} {
		hs[i].Cancel()
	}
	if got := tt.Pending(); got != 8 {
		t.Fatalf("Pending() = %d, want 8", got)
	}
	tt.Run()
	if got, want := tr.String(), "i0 i1 i3 i5 d1 d4 d2 d5"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestTestToolCancelAfterRunIsHarmless(t *testing.T) {
	tt := NewTestTool()
	hi := tt.Immediate(func() {})
	hd := tt.Deferred(time.Second, func() {})
	tt.Run()
	if hi.IsValid() || hd.IsValid() {
		t.Fatal("a handle is valid after its callback ran")
	}
	hi.Cancel()
	hd.Cancel()
	hi.Cancel()
	if tt.HasEvents() || tt.Pending() != 0 {
		t.Fatal("a late Cancel changed the event count")
	}
}

func TestTestToolHandleValidUntilRun(t *testing.T) {
	tt := NewTestTool()
	var during []bool
	var hi, hd Handle
	hi = tt.Immediate(func() { during = append(during, hi.IsValid()) })
	hd = tt.Deferred(time.Second, func() { during = append(during, hd.IsValid()); hd.Cancel() })
	if !hi.IsValid() || !hd.IsValid() {
		t.Fatal("a scheduled handle is not valid")
	}
	tt.Run()
	if fmt.Sprint(during) != "[false false]" {
		t.Fatalf("IsValid inside own callback = %v, want [false false]", during)
	}
}

func TestTestToolAdvanceRunsExactlyWhatFallsDue(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		tt.Deferred(d, func() { tr.add("%v@%v", d, offset(tt)) })
	}
	tt.Immediate(func() { tr.add("i@%v", offset(tt)) })

	tt.Advance(1500 * time.Millisecond)
	if got, want := tr.String(), "i@0s 1s@1s"; got != want {
		t.Fatalf("after 1.5s: trace = %q, want %q", got, want)
	}
	if offset(tt) != 1500*time.Millisecond {
		t.Fatalf("clock = %v, want 1.5s", offset(tt))
	}
	tt.Advance(500 * time.Millisecond) // lands exactly on a due time
	if got, want := tr.String(), "i@0s 1s@1s 2s@2s"; got != want {
		t.Fatalf("after 2s: trace = %q, want %q", got, want)
	}
	tt.Advance(0)
	if got := tt.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want 1", got)
	}
	tt.Advance(time.Hour)
	if got, want := tr.String(), "i@0s 1s@1s 2s@2s 3s@3s"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if offset(tt) != time.Hour+2*time.Second {
		t.Fatalf("clock = %v, want 1h0m2s", offset(tt))
	}
}

func TestTestToolAdvanceRunsWhatCallbacksScheduleOnTheWay(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	var tick func()
	tick = func() {
		tr.add("tick@%v", offset(tt))
		tt.Immediate(func() { tr.add("after@%v", offset(tt)) })
		tt.Deferred(time.Second, tick)
	}
	tt.Deferred(time.Second, tick)
	tt.Advance(2 * time.Second)
	if got, want := tr.String(), "tick@1s after@1s tick@2s after@2s"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if got := tt.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want the re-armed tick only", got)
	}
}

func TestTestToolNestedSchedulingFromCallbacks(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	tt.Immediate(func() {
		tr.add("a")
		tt.Immediate(func() { tr.add("c") })
		tt.post(taskFunc(func() { tr.add("d") }))
		tt.Deferred(0, func() { tr.add("e") })
	})
	tt.Immediate(func() { tr.add("b") })
	tt.Run()
	if got, want := tr.String(), "a b c d e"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

// taskFunc adapts a function to task, for tests.
type taskFunc func()

func (f taskFunc) run() { f() }

func TestTestToolPostAndBusy(t *testing.T) {
	tt := NewTestTool()
	var busy []bool
	tt.Immediate(func() {
		busy = append(busy, tt.busy())
		tt.post(taskFunc(func() { busy = append(busy, tt.busy()) }))
		busy = append(busy, tt.busy())
	})
	tt.Run()
	if fmt.Sprint(busy) != "[false true false]" {
		t.Fatalf("busy() = %v, want [false true false]", busy)
	}
}

func TestTestToolIsSameThread(t *testing.T) {
	tt := NewTestTool()
	if tt.IsSameThread() {
		t.Fatal("IsSameThread() = true outside the tool")
	}
	var got []bool
	other := make(chan bool)
	tt.Immediate(func() {
		got = append(got, tt.IsSameThread())
		go func() { other <- tt.IsSameThread() }()
		got = append(got, <-other)
		tt.Immediate(func() { got = append(got, tt.IsSameThread()) })
		tt.NextEvent() // nested drive
		got = append(got, tt.IsSameThread())
	})
	tt.Deferred(time.Second, func() { got = append(got, tt.IsSameThread()) })
	tt.Advance(time.Second)
	if fmt.Sprint(got) != "[true false true true true]" {
		t.Fatalf("IsSameThread() = %v, want [true false true true true]", got)
	}
	if tt.IsSameThread() {
		t.Fatal("IsSameThread() = true after Advance returned")
	}
}

func TestTestToolResetEvents(t *testing.T) {
	tt := NewTestTool()
	ran := false
	tt.Immediate(func() { ran = true })
	hd := tt.Deferred(time.Second, func() { ran = true })
	tt.post(taskFunc(func() { ran = true }))
	tt.Advance(time.Millisecond / 2)
	if !ran {
		t.Fatal("Advance did not run the immediates")
	}
	ran = false
	hi := tt.Immediate(func() { ran = true })
	tt.ResetEvents()
	if hi.IsValid() || hd.IsValid() || tt.HasEvents() {
		t.Fatal("events survived ResetEvents")
	}
	tt.Run()
	if ran {
		t.Fatal("a dropped callback ran")
	}
	if offset(tt) != time.Millisecond/2 {
		t.Fatalf("ResetEvents or Run moved the clock to %v", offset(tt))
	}
	tt.Immediate(func() { ran = true })
	tt.Run()
	if !ran {
		t.Fatal("the tool does not work after ResetEvents")
	}
}

func TestTestToolAcceptsEventsFromOtherGoroutines(t *testing.T) {
	tt := NewTestTool()
	const n, per = 8, 200
	var wg sync.WaitGroup
	count := 0 // touched only by callbacks, on this goroutine
	for range n {
		wg.Go(func() {
			for i := range per {
				tt.Immediate(func() { count++ })
				tt.Deferred(time.Duration(i), func() { count++ })
				// Far beyond what the 1ms steps below can reach: the
				// Cancel cannot lose a race with the callback.
				h := tt.Deferred(1000*time.Hour, func() { count += 1000 })
				h.Cancel()
				_ = tt.Now()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			tt.Advance(time.Millisecond)
		}
	}
	tt.Run()
	if want := 2 * n * per; count != want {
		t.Fatalf("%d callbacks ran, want %d", count, want)
	}
}

func TestTestToolHugeDelayDoesNotOverflow(t *testing.T) {
	tt := NewTestTool()
	tt.Advance(time.Hour)
	var tr trace
	tt.Deferred(time.Duration(1<<63-1), func() { tr.add("late") })
	tt.Deferred(time.Second, func() { tr.add("soon") })
	tt.Advance(time.Minute)
	if got := tr.String(); got != "soon" {
		t.Fatalf("trace = %q, want %q", got, "soon")
	}
}

// ResetEvents keeps a Root.Cancel, which the flow sees before its next
// step already: the flow, waiting, is cancelled, once, when the tool runs
// next. Before, ResetEvents dropped the callback that applies it, and the
// flow ran on until something else woke it or Cancel was called again. A
// Cancel that finds its callback still queued queues none of its own.
func TestTestToolResetEventsKeepsARootCancel(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
	})
	ch := r.Promise()
	tt.Run()
	r.Cancel()
	tt.ResetEvents()
	if n := tt.Pending(); n != 1 {
		t.Fatalf("Pending() = %d after ResetEvents, want 1: the cancel", n)
	}
	r.Cancel() // its callback is queued: nothing more
	if n := tt.Pending(); n != 1 {
		t.Fatalf("Pending() = %d after a second Cancel, want 1", n)
	}
	tt.Run()
	if res := <-ch; !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	if got, want := tr.String(), "cancelled"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// A cancel requested while a callback of the flow drives its own TestTool
// is deferred until the callback returns, not applied under it. The flow
// sees the request before the deferred task runs, at the next step or
// unwind, whatever the callback did (the reentry fails its step, and
// the request wins over that error, or over the callback's own; a loop
// that takes the callback's Break goes on at a next step): here the
// flow ends cancelled, no error handler runs. The deferred task is a
// stop of the flow, dropped by the flow's end as its other continuations
// are: the tool counts nothing for it once the flow has ended, and a
// ResetEvents then has nothing of the flow's to keep. Queued as a plain
// task, it stayed counted in Pending after the end, until run.
func TestTestToolACancelDeferredByReentryEndsWithItsFlow(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		tr.add("step")
		r.Cancel()
		tt.NextEvent() // the cancel's task: deferred
		tt.Immediate(func() { tr.add("pending %d", tt.Pending()); tt.ResetEvents() })
		as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
	}, func(as AsyncSteps, code string) {
		tr.add("handler:%s", code)
		as.SetCancel(func(AsyncSteps) { tr.add("hcancelled") })
	})
	ch := r.Promise()
	tt.Run()
	select {
	case res := <-ch:
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
		}
	default:
		t.Fatalf("no Result (trace %q, Pending %d)", tr.String(), tt.Pending())
	}
	if got, want := tr.String(), "step cancelled pending 0"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the flow ended, want 0", n)
	}
}

// A cancel that ResetEvents kept is dropped when its flow ends first, as
// any continuation of the flow: Pending counts it no more, and the Root's
// next execution is not cancelled by it. Here the error raised after the
// cancel ends the flow at once, cancelled (the cancel wins), before the
// kept task runs.
func TestTestToolResetEventsKeepsNoCancelOfAnEndedFlow(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		r.Cancel()
		tt.ResetEvents()
		as.Error("Boom") // the flow ends before its next step
	})
	_, err := r.Run(context.Background())
	if !errors.Is(err, context.Canceled) || tt.Pending() != 0 {
		t.Fatalf("Run err = %#v, Pending() = %d; want context.Canceled, 0", err, tt.Pending())
	}
	r.Add(func(as AsyncSteps, _ ...any) {
		tr.add("again")
		as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
	})
	ch := r.Promise()
	tt.Run()
	if !r.Running() || tt.Pending() != 0 {
		t.Fatalf("next execution: running %v, Pending() = %d; want true, 0", r.Running(), tt.Pending())
	}
	r.Cancel()
	tt.Run()
	if res := <-ch; !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	if got, want := tr.String(), "again cancelled"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}
