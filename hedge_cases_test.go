package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The hard cases of Example_hedge (example_hedge_test.go), each with its
// exact trace on virtual time.

// hedgeTrace logs the calls of fake backends with the TestTool's time.
type hedgeTrace struct {
	tt    *asyncsteps.TestTool
	lines []string
}

func (h *hedgeTrace) logf(format string, args ...any) {
	h.lines = append(h.lines, fmt.Sprintf("%v ", h.tt.Now().Sub(asyncsteps.TestToolEpoch))+fmt.Sprintf(format, args...))
}

func (h *hedgeTrace) backend(name string, br *breaker, script ...reply) searchBackend {
	if br == nil {
		br = newBreaker(100, time.Second)
	}
	return searchBackend{name: name, call: fakeBackend(name, h.logf, script...), hedgeAfter: 50 * time.Millisecond, breaker: br}
}

func (h *hedgeTrace) check(t *testing.T, want ...string) {
	t.Helper()
	if got := strings.Join(h.lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	h.lines = nil
}

func newHedgeTrace() *hedgeTrace { return &hedgeTrace{tt: asyncsteps.NewTestTool()} }

// runAggregate runs one request over backends and gives its results as
// text, and its error.
func (h *hedgeTrace) runAggregate(backends []searchBackend, budget time.Duration) (string, error) {
	r := asyncsteps.New(asyncsteps.WithTool(h.tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { aggregate(as, backends, "q", budget) })
	results, err := asyncsteps.Run[[]searchResult](context.Background(), r)
	return fmt.Sprint(results), err
}

func (b *breaker) snapshot() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("failures=%d open=%v", b.failures, !b.openUntil.IsZero())
}

// The hedge fires at 50ms and answers first: the first attempt is
// cancelled (its cancel handler runs), and neither its cancel nor the
// hedge counts as a failure of the breaker, which one failure would open.
func TestHedgeWinnerCancelsTheLoser(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(1, time.Second)
	got, err := h.runAggregate([]searchBackend{
		h.backend("news", br, reply{after: time.Second, answer: "n1"}, reply{after: 20 * time.Millisecond, answer: "n2"}),
	}, time.Second)
	if want := "[{news n2 }]"; got != want || err != nil {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	h.check(t,
		"0s news: attempt 1 starts",
		"50ms news: attempt 2 starts",
		"70ms news: attempt 2 answers",
		"70ms news: attempt 1 cancelled")
	if got, want := br.snapshot(), "failures=0 open=false"; got != want {
		t.Errorf("breaker %s, want %s", got, want)
	}
	if h.tt.HasEvents() {
		t.Error("a timer of the request is left on the tool")
	}
}

// Both attempts fail: the first failure starts the hedge at once, the
// backend reports the last failure, the request
// goes on with the others, and the breaker counted both.
func TestHedgeBothAttemptsFail(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(5, time.Second)
	got, err := h.runAggregate([]searchBackend{
		h.backend("web", nil, reply{after: 80 * time.Millisecond, answer: "w1"}),
		h.backend("images", br, reply{after: 10 * time.Millisecond, code: asyncsteps.CommError}, reply{after: 5 * time.Millisecond, code: asyncsteps.ConnectError}),
	}, time.Second)
	if want := "[{web w1 } {images  ConnectError: images failed}]"; got != want || err != nil {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	h.check(t,
		"0s web: attempt 1 starts",
		"0s images: attempt 1 starts",
		"10ms images: attempt 1 fails", // the hedge starts at once
		"10ms images: attempt 2 starts",
		"15ms images: attempt 2 fails",
		"50ms web: attempt 2 starts",
		"80ms web: attempt 1 answers",
		"80ms web: attempt 2 cancelled")
	if got, want := br.snapshot(), "failures=2 open=false"; got != want {
		t.Errorf("breaker %s, want %s", got, want)
	}
}

// callThrough runs one call of b through its breaker alone (no hedge)
// as a flow of its own, and gives its outcome.
func callThrough(b searchBackend, tool asyncsteps.Tool) <-chan asyncsteps.Result {
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Sync(b.breaker, func(as asyncsteps.AsyncSteps, _ ...any) { b.call(as, "q") })
	return r.Promise()
}

// runThrough is callThrough driven to its end.
func runThrough(b searchBackend, tt *asyncsteps.TestTool) asyncsteps.Result {
	res := callThrough(b, tt)
	tt.Run()
	return <-res
}

func outcome(res asyncsteps.Result) string {
	if res.Err != nil {
		return res.Err.Error()
	}
	return fmt.Sprint(res.Args...)
}

// Two failures in a row open the breaker: calls are refused without
// reaching the backend. After the cooldown one call probes, the one
// beside it is refused; the probe fails, the breaker opens again; the
// next probe answers and closes it.
func TestBreakerOpensThenProbes(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(2, time.Second)
	b := h.backend("db", br,
		reply{after: 10 * time.Millisecond, code: asyncsteps.CommError},
		reply{after: 10 * time.Millisecond, code: asyncsteps.CommError},
		reply{after: 10 * time.Millisecond, code: asyncsteps.CommError}, // the first probe
		reply{after: 10 * time.Millisecond, answer: "ok"})
	step := func(n int) []string {
		outs := make([]<-chan asyncsteps.Result, n)
		for i := range outs {
			outs[i] = callThrough(b, h.tt)
		}
		h.tt.Run()
		var got []string
		for _, o := range outs {
			got = append(got, outcome(<-o))
		}
		return got
	}
	var got []string
	got = append(got, step(1)...)
	got = append(got, step(1)...)
	got = append(got, br.snapshot())
	got = append(got, step(1)...) // open
	h.tt.Advance(time.Second)
	got = append(got, step(2)...) // a probe, and a call refused beside it
	got = append(got, br.snapshot())
	h.tt.Advance(time.Second)
	got = append(got, step(1)...) // a probe that answers
	got = append(got, step(1)...)
	got = append(got, br.snapshot())
	want := []string{
		"CommError: db failed",
		"CommError: db failed",
		"failures=2 open=true",
		"DefenseRejected: circuit open",
		"CommError: db failed",
		"DefenseRejected: circuit half-open: a probe is in flight",
		"failures=2 open=true",
		"ok",
		"ok", // the 4th reply again
		"failures=0 open=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h.check(t,
		"0s db: attempt 1 starts",
		"10ms db: attempt 1 fails",
		"10ms db: attempt 2 starts",
		"20ms db: attempt 2 fails",
		"1.02s db: attempt 3 starts",
		"1.03s db: attempt 3 fails",
		"2.03s db: attempt 4 starts",
		"2.04s db: attempt 4 answers",
		"2.04s db: attempt 5 starts",
		"2.05s db: attempt 5 answers")
}

// A probe that is cancelled (the hedge's loser, the request's end) gives
// its slot back and counts as nothing: the breaker stays half-open, and
// the next call probes.
func TestBreakerCancelledProbeCountsAsNothing(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(1, time.Second)
	b := h.backend("db", br,
		reply{after: 10 * time.Millisecond, code: asyncsteps.CommError},
		reply{after: time.Second, answer: "slow"},
		reply{after: 10 * time.Millisecond, answer: "ok"})
	if got := outcome(runThrough(b, h.tt)); got != "CommError: db failed" {
		t.Fatal(got)
	}
	h.tt.Advance(time.Second)
	r := asyncsteps.New(asyncsteps.WithTool(h.tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(100 * time.Millisecond)
		as.Sync(b.breaker, func(as asyncsteps.AsyncSteps, _ ...any) { b.call(as, "q") })
	})
	if _, err := r.Run(context.Background()); !strings.Contains(fmt.Sprint(err), "Timeout") {
		t.Fatalf("the probe's request: %v, want a Timeout", err)
	}
	// The probe's step timed out around it: a Timeout raised above the
	// breaker's guard is no failure of the backend's.
	if got, want := br.snapshot(), "failures=1 open=true"; got != want {
		t.Errorf("breaker %s, want %s", got, want)
	}
	if got := outcome(runThrough(b, h.tt)); got != "ok" {
		t.Errorf("next call: %s, want ok (a probe)", got)
	}
	h.check(t,
		"0s db: attempt 1 starts",
		"10ms db: attempt 1 fails",
		"1.01s db: attempt 2 starts",
		"1.11s db: attempt 2 cancelled",
		"1.11s db: attempt 3 starts",
		"1.12s db: attempt 3 answers")
}

// A call that began before the circuit opened and ends after decides
// nothing: the circuit opened on another call's failure, and neither a
// late answer (which would close it at once) nor a late failure (which
// would push its cooldown back) changes that. The probe alone decides
// once the cooldown has passed.
func TestBreakerIgnoresACallBegunBeforeItOpened(t *testing.T) {
	for _, c := range []struct {
		name string
		late reply
	}{
		{"late answer", reply{after: 500 * time.Millisecond, answer: "late"}},
		{"late failure", reply{after: 500 * time.Millisecond, code: asyncsteps.CommError}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHedgeTrace()
			br := newBreaker(1, time.Second)
			slow := h.backend("slow", br, c.late)
			fast := h.backend("fast", br,
				reply{after: 10 * time.Millisecond, code: asyncsteps.CommError},
				reply{after: 10 * time.Millisecond, answer: "ok"})
			late := callThrough(slow, h.tt)
			if got := outcome(runThrough(fast, h.tt)); got != "CommError: fast failed" {
				t.Fatal(got)
			}
			h.tt.Run() // the slow call ends at 500ms, the circuit open
			<-late
			var got []string
			got = append(got, br.snapshot(), outcome(runThrough(fast, h.tt)))
			h.tt.Advance(520 * time.Millisecond) // to 1.02s: the cooldown from 10ms has passed
			got = append(got, outcome(runThrough(fast, h.tt)), br.snapshot())
			want := []string{"failures=1 open=true", "DefenseRejected: circuit open", "ok", "failures=0 open=false"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// The budget runs out with 2 of 4 answers: the request answers with them,
// the two late backends marked, their calls (both attempts) cancelled.
func TestAggregateDeadlineTwoOfFour(t *testing.T) {
	h := newHedgeTrace()
	got, err := h.runAggregate([]searchBackend{
		h.backend("a", nil, reply{after: 10 * time.Millisecond, answer: "a1"}),
		h.backend("b", nil, reply{after: time.Second, answer: "b1"}),
		h.backend("c", nil, reply{after: 90 * time.Millisecond, answer: "c1"}),
		h.backend("d", nil, reply{after: time.Second, answer: "d1"}),
	}, 100*time.Millisecond)
	want := "[{a a1 } {b  no answer in time} {c c1 } {d  no answer in time}]"
	if got != want || err != nil {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	h.check(t,
		"0s a: attempt 1 starts",
		"0s b: attempt 1 starts",
		"0s c: attempt 1 starts",
		"0s d: attempt 1 starts",
		"10ms a: attempt 1 answers",
		"50ms b: attempt 2 starts",
		"50ms c: attempt 2 starts",
		"50ms d: attempt 2 starts",
		"90ms c: attempt 1 answers",
		"90ms c: attempt 2 cancelled",
		"100ms b: attempt 1 cancelled",
		"100ms b: attempt 2 cancelled",
		"100ms d: attempt 1 cancelled",
		"100ms d: attempt 2 cancelled")
	if h.tt.HasEvents() {
		t.Error("a timer of the request is left on the tool")
	}
}

// No backend answered by the budget: the request fails with Timeout.
// One that failed is no answer either.
func TestAggregateDeadlineNoneAnswered(t *testing.T) {
	h := newHedgeTrace()
	got, err := h.runAggregate([]searchBackend{
		h.backend("a", nil, reply{after: 10 * time.Millisecond, code: asyncsteps.CommError}),
		h.backend("b", nil, reply{after: time.Second, answer: "b1"}),
	}, 100*time.Millisecond)
	if want := "[] Timeout"; fmt.Sprint(got, " ", err) != want {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
}

// runQuorum runs one quorum request of k over backends.
func (h *hedgeTrace) runQuorum(backends []searchBackend, k int) string {
	r := asyncsteps.New(asyncsteps.WithTool(h.tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { quorum(as, backends, "q", k) })
	v, err := asyncsteps.Run[string](context.Background(), r)
	return fmt.Sprint(v, " ", err)
}

// Two of three backends fail: no quorum of 2 can be reached, and the
// request fails at the second backend failure, the third backend cancelled.
func TestQuorumUnreachableFailsEarly(t *testing.T) {
	h := newHedgeTrace()
	got := h.runQuorum([]searchBackend{
		h.backend("a", nil, reply{after: 10 * time.Millisecond, code: asyncsteps.CommError}),
		h.backend("b", nil, reply{after: 20 * time.Millisecond, code: asyncsteps.CommError}),
		h.backend("c", nil, reply{after: time.Second, answer: "x"}),
	}, 2)
	if want := " NoQuorum: too many backends failed"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	h.check(t,
		"0s a: attempt 1 starts",
		"0s b: attempt 1 starts",
		"0s c: attempt 1 starts",
		"10ms a: attempt 1 fails",
		"10ms a: attempt 2 starts",
		"20ms b: attempt 1 fails",
		"20ms b: attempt 2 starts",
		"20ms a: attempt 2 fails",
		"40ms b: attempt 2 fails",
		"40ms c: attempt 1 cancelled") // its hedge not started yet
}

// Every backend answered but no two agree.
func TestQuorumDisagreement(t *testing.T) {
	h := newHedgeTrace()
	got := h.runQuorum([]searchBackend{
		h.backend("a", nil, reply{after: 10 * time.Millisecond, answer: "x"}),
		h.backend("b", nil, reply{after: 20 * time.Millisecond, answer: "y"}),
	}, 2)
	if want := " NoQuorum: the backends disagree"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A backend's call panics: that backend fails with InternalError, the
// others answer, and the process goes on.
func TestAggregatePanicInBackend(t *testing.T) {
	h := newHedgeTrace()
	boom := searchBackend{name: "boom", hedgeAfter: time.Second, breaker: newBreaker(5, time.Second),
		call: func(as asyncsteps.AsyncSteps, _ string) { panic("index out of range") }}
	got, err := h.runAggregate([]searchBackend{h.backend("a", nil, reply{after: 10 * time.Millisecond, answer: "a1"}), boom}, 100*time.Millisecond)
	want := "[{a a1 } {boom  InternalError: index out of range}]"
	if got != want || err != nil {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	if got, want := boom.breaker.snapshot(), "failures=2 open=false"; got != want {
		t.Errorf("breaker %s, want %s", got, want)
	}
}

// The production form of a backend's call: an Await of a Go function,
// tested on a Loop in a testing/synctest bubble. One backend ignores its
// context and answers after a second; one panics; one answers at 30ms.
// The request answers at its budget, 200ms, without waiting for the
// functions it cancelled; their late results are dropped, and every
// goroutine has returned by the end of the bubble.
func TestAggregateAwaitIgnoringItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		start := time.Now()
		var returned atomic.Int32
		await := func(f func(ctx context.Context) (string, error)) searchCall {
			return func(as asyncsteps.AsyncSteps, _ string) { asyncsteps.AwaitThen(as, f, nil) }
		}
		backends := []searchBackend{
			{name: "fast", call: await(func(ctx context.Context) (string, error) {
				time.Sleep(30 * time.Millisecond)
				return "f1", nil
			})},
			{name: "deaf", call: await(func(ctx context.Context) (string, error) {
				time.Sleep(time.Second) // ignores ctx
				returned.Add(1)
				return "late", nil
			})},
			{name: "boom", call: await(func(ctx context.Context) (string, error) { panic("nil map") })},
		}
		for i := range backends {
			backends[i].hedgeAfter, backends[i].breaker = 50*time.Millisecond, newBreaker(5, time.Second)
		}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { aggregate(as, backends, "q", 200*time.Millisecond) })
		results, err := asyncsteps.Run[[]searchResult](context.Background(), r)
		got := fmt.Sprint(results, " ", err, " at ", time.Since(start), " deaf returned ", returned.Load())
		want := "[{fast f1 } {deaf  no answer in time} {boom  InternalError: panic: nil map}] <nil> at 200ms deaf returned 0"
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := returned.Load(); got != 2 { // both attempts
			t.Errorf("deaf returned %d times, want 2", got)
		}
		if got, want := backends[1].breaker.snapshot(), "failures=0 open=false"; got != want {
			t.Errorf("deaf's breaker %s, want %s (its calls were cancelled, not failed)", got, want)
		}
	})
}

// A backend that failed is no vote, not a vote for "": with k of 1, the
// first answer wins even after a failure.
func TestQuorumFailureIsNoVote(t *testing.T) {
	h := newHedgeTrace()
	got := h.runQuorum([]searchBackend{
		h.backend("a", nil, reply{after: 5 * time.Millisecond, code: asyncsteps.CommError}),
		h.backend("b", nil, reply{after: 20 * time.Millisecond, answer: "y"}),
	}, 1)
	if want := "y <nil>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The client goes away: every attempt still running is cancelled, its
// cancel handler run, and no breaker counts it.
func TestAggregateClientGone(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(1, time.Second)
	backends := []searchBackend{
		h.backend("a", br, reply{after: time.Second, answer: "a1"}),
		h.backend("b", br, reply{after: time.Second, answer: "b1"}),
	}
	r := asyncsteps.New(asyncsteps.WithTool(h.tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { aggregate(as, backends, "q", time.Hour) })
	res := r.Promise()
	h.tt.Advance(60 * time.Millisecond)
	r.Cancel()
	h.tt.Run()
	if got := fmt.Sprint((<-res).Err); got != "context canceled" {
		t.Errorf("got %s, want context canceled", got)
	}
	h.check(t,
		"0s a: attempt 1 starts",
		"0s b: attempt 1 starts",
		"50ms a: attempt 2 starts",
		"50ms b: attempt 2 starts",
		"60ms a: attempt 1 cancelled",
		"60ms a: attempt 2 cancelled",
		"60ms b: attempt 1 cancelled",
		"60ms b: attempt 2 cancelled")
	if got, want := br.snapshot(), "failures=0 open=false"; got != want {
		t.Errorf("breaker %s, want %s", got, want)
	}
	if h.tt.HasEvents() {
		t.Error("a timer of the request is left on the tool")
	}
}

// An open circuit refuses both attempts at once: the first refusal
// starts the hedge without its delay, and the backend's failure is in
// at 0s, with no call made.
func TestHedgeOpenCircuitFailsAtOnce(t *testing.T) {
	h := newHedgeTrace()
	br := newBreaker(1, time.Hour)
	br.record(false, h.tt.Now(), 0)
	got, err := h.runAggregate([]searchBackend{
		h.backend("a", br, reply{after: 10 * time.Millisecond, answer: "a1"}),
	}, time.Second)
	if want := "[{a  DefenseRejected: circuit open}]"; got != want || err != nil {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
	if at := h.tt.Now().Sub(asyncsteps.TestToolEpoch); at != 0 {
		t.Errorf("answered at %v, want 0s", at)
	}
	h.check(t)
}
