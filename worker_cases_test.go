package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The hard cases of Example_worker's worker, on virtual time.

type workerRig struct {
	tt    *asyncsteps.TestTool
	q     *queue
	w     *worker
	trace []string
}

// newWorkerRig makes Example_worker's worker on a TestTool, its
// downstreams traced fakes that answer after 30ms with the scripted codes
// ("" a success, "hang" never, "panic" a panic in the call's step).
func newWorkerRig(billing, email map[string][]string, jobs ...queuedJob) *workerRig {
	rig := &workerRig{tt: asyncsteps.NewTestTool(), q: newQueue(2, jobs...)}
	logf := func(format string, args ...any) {
		at := rig.tt.Now().Sub(asyncsteps.TestToolEpoch)
		rig.trace = append(rig.trace, fmt.Sprintf("%v: "+format, append([]any{at}, args...)...))
	}
	rig.w = newWorker(rig.tt, rig.q, tracedFake("billing", billing, logf), tracedFake("email", email, logf), logf)
	return rig
}

func tracedFake(service string, script map[string][]string, logf func(string, ...any)) call {
	return func(as asyncsteps.AsyncSteps, j queuedJob) {
		var code string
		if s := script[j.ID]; len(s) > 0 {
			code, script[j.ID] = s[0], s[1:]
		}
		logf("%s %s %s", j.ID, service, strings.TrimSpace("call "+code))
		switch code {
		case "hang":
			as.SetCancel(func(asyncsteps.AsyncSteps) { logf("%s %s cancelled", j.ID, service) })
			return
		case "panic":
			panic("unexpected tax rate for " + j.ID) // a bug of the job's code
		}
		h := as.Tool().Deferred(30*time.Millisecond, func() {
			if code == "" {
				as.Success()
			} else {
				as.Error(code, "failed")
			}
		})
		// A failing step's own cancel handler runs too: h has run then.
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			if h.IsValid() {
				h.Cancel()
				logf("%s %s cancelled", j.ID, service)
			}
		})
	}
}

// check compares the trace and asserts that every job is settled once:
// in done, dead or ready, none leased, no tenant lock held.
func (rig *workerRig) check(t *testing.T, want []string, done, dead, ready string) {
	t.Helper()
	wantLines(t, rig.trace, want)
	if got := fmt.Sprint(rig.q.done, rig.q.dead, rig.q.ready); got != fmt.Sprint(done, " ", dead, " ", ready) {
		t.Errorf("done, dead, ready = %s, want %s %s %s", got, done, dead, ready)
	}
	if len(rig.q.leased) != 0 || len(rig.w.flows) != 0 || rig.w.tenants.Len() != 0 {
		t.Errorf("left: %d leased, %d flows, %d tenant locks", len(rig.q.leased), len(rig.w.flows), rig.w.tenants.Len())
	}
	if rig.tt.HasEvents() {
		t.Errorf("%d events left on the tool", rig.tt.Pending())
	}
}

// The lease runs out while billing is retried: the attempt in progress,
// or the wait before the next one, is cancelled, no other attempt starts,
// the job is nacked with Timeout and the tenant's next job begins at once.
func TestWorkerLeaseExpiresMidRetry(t *testing.T) {
	for _, c := range []struct {
		name  string
		lease time.Duration
		trace []string
	}{{
		name:  "in an attempt",
		lease: 150 * time.Millisecond,
		trace: []string{
			"50ms: x1 billing call hang",
			"100ms: x1 billing cancelled", // the attempt's timeout
			"140ms: x1 billing call hang", // after 40ms of backoff
			"150ms: x1 billing cancelled",
			"150ms: x1 nack: Timeout",
			"150ms: x2 begins, delivery 1",
			"150ms: x2 billing call",
			"180ms: x2 email call",
			"210ms: x2 ack",
		},
	}, {
		name:  "in the backoff",
		lease: 120 * time.Millisecond,
		trace: []string{
			"50ms: x1 billing call hang",
			"100ms: x1 billing cancelled",
			"120ms: x1 nack: Timeout",
			"120ms: x2 begins, delivery 1",
			"120ms: x2 billing call",
			"150ms: x2 email call",
			"180ms: x2 ack",
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			rig := newWorkerRig(map[string][]string{"x1": {"CommError", "hang", "hang"}}, nil,
				queuedJob{"x1", "X", 0}, queuedJob{"x2", "X", 0})
			rig.w.lease = c.lease
			rig.w.take(1)
			rig.tt.Advance(100 * time.Millisecond) // x2's lease starts later
			rig.w.take(2)
			rig.tt.Run()
			want := append([]string{"0s: x1 begins, delivery 1", "0s: x1 billing call CommError"}, c.trace...)
			rig.check(t, want, "[x2]", "[]", "[{x1 X 1}]")
		})
	}
}

// The drain finds jobs waiting behind their tenant's lock and in the
// Limiter's queue: they go back at once, as they came, and none of them
// begins when the jobs in flight end within the grace period.
func TestWorkerDrainReleasesJobsQueuedBehindTenant(t *testing.T) {
	rig := newWorkerRig(nil, nil, queuedJob{"a1", "A", 0}, queuedJob{"b1", "B", 0},
		queuedJob{"a2", "A", 0}, queuedJob{"c1", "C", 0}, queuedJob{"a3", "A", 0})
	rig.w.take(5)
	rig.tt.Advance(10 * time.Millisecond)
	rig.w.drain(time.Second)
	rig.tt.Run()
	rig.check(t, []string{
		"0s: a1 begins, delivery 1",
		"0s: b1 begins, delivery 1",
		"0s: a1 billing call",
		"0s: b1 billing call",
		"10ms: draining 5 jobs",
		"10ms: a2 release: drained", // behind a1, on tenant A's lock
		"10ms: a3 release: drained",
		"10ms: c1 release: drained", // in the Limiter's queue
		"30ms: a1 email call",
		"30ms: b1 email call",
		"60ms: a1 ack",
		"60ms: b1 ack",
		"60ms: drained",
	}, "[a1 b1]", "[]", "[{a2 A 0} {a3 A 0} {c1 C 0}]")
}

// Past the grace period the jobs still in flight are cancelled: the call
// in progress is, and the job counts as delivered.
func TestWorkerDrainGraceOver(t *testing.T) {
	rig := newWorkerRig(nil, map[string][]string{"a1": {"hang"}}, queuedJob{"a1", "A", 0}, queuedJob{"a2", "A", 0})
	rig.w.take(2)
	rig.tt.Advance(40 * time.Millisecond)
	rig.w.drain(20 * time.Millisecond)
	rig.tt.Run()
	rig.check(t, []string{
		"0s: a1 begins, delivery 1",
		"0s: a1 billing call",
		"30ms: a1 email call hang",
		"40ms: draining 2 jobs",
		"40ms: a2 release: drained",
		"60ms: a1 email cancelled",
		"60ms: a1 nack: drained",
		"60ms: drained",
	}, "[]", "[]", "[{a2 A 0} {a1 A 1}]")
}

// A downstream that never answers: each attempt times out, the job is
// nacked once the attempts are used up, delivered again at the next poll,
// then dead-lettered; the other tenant's job is not held up.
func TestWorkerDownstreamHangs(t *testing.T) {
	hang := []string{"hang", "hang", "hang", "hang", "hang", "hang"}
	rig := newWorkerRig(map[string][]string{"h1": hang}, nil, queuedJob{"h1", "H", 0}, queuedJob{"b1", "B", 0})
	rig.w.poll(2, 100*time.Millisecond)
	rig.tt.Deferred(time.Second, func() { rig.w.drain(time.Second) })
	rig.tt.Run()
	want := []string{"0s: h1 begins, delivery 1", "0s: b1 begins, delivery 1",
		"0s: h1 billing call hang", "0s: b1 billing call", "30ms: b1 email call"}
	for _, at := range []time.Duration{0, 300 * time.Millisecond} {
		if at > 0 {
			want = append(want, fmt.Sprintf("%v: h1 begins, delivery 2", at), fmt.Sprintf("%v: h1 billing call hang", at))
		}
		ms := func(d int) time.Duration { return at + time.Duration(d)*time.Millisecond }
		want = append(want, fmt.Sprintf("%v: h1 billing cancelled", ms(50))) // each attempt's timeout
		if at == 0 {
			want = append(want, "60ms: b1 ack")
		}
		want = append(want,
			fmt.Sprintf("%v: h1 billing call hang", ms(70)), fmt.Sprintf("%v: h1 billing cancelled", ms(120)),
			fmt.Sprintf("%v: h1 billing call hang", ms(160)), fmt.Sprintf("%v: h1 billing cancelled", ms(210)),
			fmt.Sprintf("%v: h1 nack: Timeout billing", ms(210)))
	}
	want = append(want, "1s: draining 0 jobs", "1s: drained")
	rig.check(t, want, "[b1]", "[h1]", "[]")
}

// A panic in a job's call fails that job alone, with the panic as the
// info: its tenant's lock and its Limiter slot come back, and the job is
// dead-lettered after its second delivery.
func TestWorkerPanicInJob(t *testing.T) {
	rig := newWorkerRig(map[string][]string{"p1": {"panic", "panic"}}, nil,
		queuedJob{"p1", "P", 0}, queuedJob{"p2", "P", 0})
	rig.w.poll(2, 100*time.Millisecond)
	rig.tt.Deferred(time.Second, func() { rig.w.drain(time.Second) })
	rig.tt.Run()
	rig.check(t, []string{
		"0s: p1 begins, delivery 1",
		"0s: p1 billing call panic",
		"0s: p1 nack: InternalError billing: unexpected tax rate for p1",
		"0s: p2 begins, delivery 1",
		"0s: p2 billing call",
		"30ms: p2 email call",
		"60ms: p2 ack",
		"100ms: p1 begins, delivery 2",
		"100ms: p1 billing call panic",
		"100ms: p1 nack: InternalError billing: unexpected tax rate for p1",
		"1s: draining 0 jobs",
		"1s: drained",
	}, "[p2]", "[p1]", "[]")
}

// The worker on a Loop, as in production, its billing an Await of a
// blocking call that ignores its context (a client without a timeout):
// the attempts time out and the lease ends x1's flow, but the tenant's
// lock stays held until the abandoned calls return, so x2, which has not
// begun, is released when its own lease runs out. Tested on the virtual
// clock of a testing/synctest bubble, since Await runs real goroutines.
func TestWorkerAwaitIgnoringItsContextHoldsTheTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		trace := newTimedTrace(loop.Now)
		logf := trace.logf
		stuck := make(chan struct{})
		billing := func(as asyncsteps.AsyncSteps, j queuedJob) {
			as.Await(func(context.Context) (any, error) {
				if j.Tenant == "X" {
					<-stuck // deaf to the context
				}
				return nil, nil
			})
		}
		q := newQueue(2, queuedJob{"x1", "X", 0}, queuedJob{"x2", "X", 0})
		w := newWorker(loop, q, billing, fake(nil), logf)
		w.lease = 100 * time.Millisecond
		onLoop := func(f func()) { loop.Immediate(f); synctest.Wait() }

		onLoop(func() { w.take(1) })
		time.Sleep(60 * time.Millisecond)
		onLoop(func() { w.take(2) }) // x2 waits for tenant X
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if n := w.tenants.Len(); n != 1 {
			t.Errorf("at 260ms, %d tenants locked, want 1: X, by x1's abandoned calls", n)
		}
		close(stuck)
		synctest.Wait()
		onLoop(func() {
			if n := w.tenants.Len(); n != 0 {
				t.Errorf("%d tenants locked once the calls returned, want 0", n)
			}
			w.take(2)
		})
		time.Sleep(time.Second)
		onLoop(func() { w.drain(time.Second) })

		want := []string{
			"0s: x1 begins, delivery 1",
			"100ms: x1 nack: Timeout",
			"160ms: x2 release: Timeout",
			"260ms: x1 begins, delivery 2",
			"290ms: x1 ack",
			"290ms: x2 begins, delivery 1",
			"320ms: x2 ack",
			"1.26s: draining 0 jobs",
			"1.26s: drained",
		}
		trace.want(t, want)
	})
}

// The worker's loop is closed under a job, which Close ends without
// running a handler of its: the job's done still settles it, on the loop
// as the loop stops, before Close returns. It is nacked, back in the
// queue with its delivery counted, and holds no tenant lock.
func TestWorkerLoopClosedMidJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var trace []string // on the loop
		logf := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
		billing := func(as asyncsteps.AsyncSteps, j queuedJob) { as.WaitExternal() } // never answers
		q := newQueue(2, queuedJob{"x1", "X", 0})
		w := newWorker(loop, q, billing, fake(nil), logf)
		loop.Immediate(func() { w.take(1) })
		synctest.Wait()
		loop.Close()
		want := []string{"x1 begins, delivery 1", "x1 nack: InternalError the flow's loop is closed"}
		wantLines(t, trace, want)
		if got := fmt.Sprint(q.ready, len(q.leased), len(w.flows), w.tenants.Len()); got != "[{x1 X 1}] 0 0 0" {
			t.Errorf("ready, leased, flows, tenant locks = %s, want [{x1 X 1}] 0 0 0", got)
		}
	})
}

// The recipe of ExampleHooks_lateAwait reports what
// TestWorkerAwaitIgnoringItsContextHoldsTheTenant leaves unseen: each
// billing call that ignores its context, 100ms after its step ended (the
// first attempt's timeout at 50ms, the lease at 100ms during the
// second), and again as it returns, the tenant's lock given back then.
func TestWorkerReportsCallsIgnoringTheirContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		trace := newTimedTrace(loop.Now)
		logf := trace.logf
		loop.SetHooks(lateAwaits(nil, 100*time.Millisecond, func(_ context.Context, late time.Duration, returned bool) {
			if returned {
				logf("a call returned %v after its step ended", late)
				return
			}
			logf("a call runs %v after its step ended", late)
		}))
		stuck := []chan struct{}{make(chan struct{}), make(chan struct{})}
		calls := 0 // on the loop
		billing := func(as asyncsteps.AsyncSteps, j queuedJob) {
			release := stuck[calls]
			calls++
			as.Await(func(context.Context) (any, error) {
				<-release // deaf to the context
				return nil, nil
			})
		}
		q := newQueue(2, queuedJob{"x1", "X", 0})
		w := newWorker(loop, q, billing, fake(nil), logf)
		w.lease = 100 * time.Millisecond
		loop.Immediate(func() { w.take(1) })
		time.Sleep(250 * time.Millisecond)
		close(stuck[0])
		time.Sleep(10 * time.Millisecond)
		close(stuck[1])
		synctest.Wait()
		want := []string{
			"0s: x1 begins, delivery 1",
			"100ms: x1 nack: Timeout",
			"150ms: a call runs 100ms after its step ended",
			"200ms: a call runs 100ms after its step ended",
			"250ms: a call returned 200ms after its step ended",
			"260ms: a call returned 160ms after its step ended",
		}
		trace.want(t, want)
		if n := w.tenants.Len(); n != 0 {
			t.Errorf("%d tenants locked once the calls returned, want 0", n)
		}
	})
}
