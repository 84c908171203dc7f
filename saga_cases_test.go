package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// The hard cases of Example_saga's sagas, on virtual time.

type sagaRig struct {
	tt      *asyncsteps.TestTool
	s       *sagas
	trace   []string
	results map[string]orderResult
}

// newSagaRig makes Example_saga's sagas on a TestTool, its services a
// traced fake that answers after 30ms with the codes scripted for each
// "action key" ("" a success, "hang" never, "panic" a panic in the
// call's step), and tells when a call is cancelled.
func newSagaRig(script map[string][]string) *sagaRig {
	rig := &sagaRig{tt: asyncsteps.NewTestTool(), results: map[string]orderResult{}}
	logf := func(format string, args ...any) {
		at := rig.tt.Now().Sub(asyncsteps.TestToolEpoch)
		rig.trace = append(rig.trace, fmt.Sprintf("%v: "+format, append([]any{at}, args...)...))
	}
	call := func(as asyncsteps.AsyncSteps, action, key string) {
		var code string
		if s := script[action+" "+key]; len(s) > 0 {
			code, script[action+" "+key] = s[0], s[1:]
		}
		logf("%s %s %s", action, key, code)
		if code == "panic" {
			panic("no such account") // a bug of the call's code
		}
		var h asyncsteps.Handle
		if code != "hang" {
			h = rig.tt.Deferred(30*time.Millisecond, func() {
				if code == "" {
					as.Success()
				} else {
					as.Error(code, action+" "+key+" failed")
				}
			})
		}
		// A failing step's own cancel handler runs too: h has run then.
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			if h == nil || h.IsValid() {
				logf("%s %s cancelled", action, key)
				if h != nil {
					h.Cancel()
				}
			}
		})
	}
	rig.s = &sagas{tool: rig.tt, call: call, accounts: asyncsteps.NewKeyedMutex[string](1),
		budget: time.Second, settle: 5 * time.Second, logf: logf}
	return rig
}

// place places o, keeping its result for check.
func (rig *sagaRig) place(ctx context.Context, o order) {
	rig.s.place(ctx, o, func(r orderResult) {
		if _, twice := rig.results[o.ID]; twice {
			panic(o.ID + " reported twice")
		}
		rig.results[o.ID] = r
	})
}

// check compares the trace, the result of each order (as "ran ...;
// compensated ...; failed ...; err"), the compensations counted as
// failed, and asserts that no account lock is left and no event either.
func (rig *sagaRig) check(t *testing.T, trace []string, results map[string]string, failures int) {
	t.Helper()
	wantLines(t, rig.trace, trace)
	got := map[string]string{}
	for id, r := range rig.results {
		got[id] = fmt.Sprintf("ran %v; compensated %v; failed %v; %v", r.Ran, r.Compensated, r.Failed, r.Err)
	}
	if fmt.Sprint(got) != fmt.Sprint(results) {
		t.Errorf("results:\n%v\nwant:\n%v", got, results)
	}
	if rig.s.failures != failures {
		t.Errorf("%d compensations failed, want %d", rig.s.failures, failures)
	}
	if n := rig.s.accounts.Len(); n != 0 {
		t.Errorf("%d accounts locked", n)
	}
	if rig.tt.HasEvents() {
		t.Errorf("%d events left on the tool", rig.tt.Pending())
	}
}

// sagaOrder is an order placed by a case of TestSaga.
type sagaOrder struct {
	order
	after     time.Duration // the tool is advanced by it before the order is placed
	budget    time.Duration // the order's budget, if not 0 (it stays for the next)
	cancelled bool          // placed under the context the case cancels
}

// newLoopSagas makes Example_saga's sagas on loop, with a budget of 1s
// and a settle budget of 5s.
func newLoopSagas(loop *asyncsteps.Loop, call service, logf func(string, ...any)) *sagas {
	return &sagas{tool: loop, call: call, accounts: asyncsteps.NewKeyedMutex[string](1),
		budget: time.Second, settle: 5 * time.Second, logf: logf}
}

// placeOnLoop places o with s, from s's tool (a Loop), and returns the
// channel its result is sent on.
func placeOnLoop(ctx context.Context, s *sagas, o order) <-chan orderResult {
	results := make(chan orderResult, 1)
	s.tool.Immediate(func() { s.place(ctx, o, func(r orderResult) { results <- r }) })
	return results
}

// TestSaga places a case's orders on a saga rig, cancels the context of
// those marked cancelled cancelAfter later (if not 0), runs the tool
// and checks the trace, the results and the failed compensations.
func TestSaga(t *testing.T) {
	apple := func(id string) order { return order{id, "ann", []string{"apple"}} }
	for _, c := range []struct {
		name        string
		script      map[string][]string
		orders      []sagaOrder
		cancelAfter time.Duration
		trace       []string
		results     map[string]string
		failures    int
	}{{
		name:   "HappyPath",
		orders: []sagaOrder{{order: order{"o1", "ann", []string{"apple", "pear"}}}},
		trace: []string{
			"0s: reserve o1/apple ",
			"0s: reserve o1/pear ",
			"30ms: charge o1 ",
			"60ms: ship o1 ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple reserve o1/pear charge o1 ship o1]; compensated []; failed []; <nil>",
		},
	}, {
		// A declined card is an answer: not retried, no refund owed; the
		// stock reserved is released.
		name:   "PaymentDeclined",
		script: map[string][]string{"charge o1": {CardDeclined}},
		orders: []sagaOrder{{order: order{"o1", "ann", []string{"apple", "pear"}}}},
		trace: []string{
			"0s: reserve o1/apple ",
			"0s: reserve o1/pear ",
			"30ms: charge o1 CardDeclined",
			"60ms: o1 failed: CardDeclined: charge o1 failed",
			"60ms: release o1/pear ",
			"90ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple reserve o1/pear]; compensated [release o1/pear release o1/apple]; failed []; CardDeclined: charge o1 failed",
		},
	}, {
		// Shipping times out after the payment, each of its attempts: the
		// booking, the payment and the stock are compensated, in that order.
		name:   "ShippingTimesOutAfterPayment",
		script: map[string][]string{"ship o1": {"hang", "hang", "hang"}},
		orders: []sagaOrder{{order: apple("o1")}},
		trace: []string{
			"0s: reserve o1/apple ",
			"30ms: charge o1 ",
			"60ms: ship o1 hang",
			"160ms: ship o1 cancelled",
			"180ms: ship o1 hang",
			"280ms: ship o1 cancelled",
			"320ms: ship o1 hang",
			"420ms: ship o1 cancelled",
			"420ms: o1 failed: Timeout",
			"420ms: cancel shipping o1 ",
			"450ms: refund o1 ",
			"480ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple charge o1]; compensated [cancel shipping o1 refund o1 release o1/apple]; failed []; Timeout",
		},
	}, {
		// The whole order's budget runs out while the charge is in flight:
		// the charge is cancelled, and refunded, since it may have gone
		// through.
		name:   "BudgetRunsOutMidCharge",
		script: map[string][]string{"charge o1": {"CommError", "hang"}},
		orders: []sagaOrder{{order: apple("o1"), budget: 100 * time.Millisecond}},
		trace: []string{
			"0s: reserve o1/apple ",
			"30ms: charge o1 CommError",
			"80ms: charge o1 hang",
			"100ms: charge o1 cancelled",
			"100ms: o1 failed: Timeout",
			"100ms: refund o1 ",
			"130ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple]; compensated [refund o1 release o1/apple]; failed []; Timeout",
		},
	}, {
		// The client goes away mid-charge: the order is cancelled (no error
		// handler runs), and its compensations run all the same, in a flow
		// the cancel does not reach.
		name:        "ClientCancelMidCharge",
		script:      map[string][]string{"charge o1": {"hang"}},
		orders:      []sagaOrder{{order: apple("o1"), cancelled: true}},
		cancelAfter: 50 * time.Millisecond,
		trace: []string{
			"0s: reserve o1/apple ",
			"30ms: charge o1 hang",
			"50ms: charge o1 cancelled",
			"50ms: o1 failed: context canceled",
			"50ms: refund o1 ",
			"80ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple]; compensated [refund o1 release o1/apple]; failed []; context canceled",
		},
	}, {
		// A compensation panics (a bug), another is slow then fails, three
		// times: each is logged, counted and reported, the next one is
		// made, and the order's own failure is kept.
		name: "CompensationFails",
		script: map[string][]string{
			"ship o1":            {"hang", "hang", "hang"},
			"cancel shipping o1": {"panic"},
			"refund o1":          {"hang", "CommError", "hang"},
		},
		orders: []sagaOrder{{order: apple("o1")}},
		trace: []string{
			"0s: reserve o1/apple ",
			"30ms: charge o1 ",
			"60ms: ship o1 hang",
			"160ms: ship o1 cancelled",
			"180ms: ship o1 hang",
			"280ms: ship o1 cancelled",
			"320ms: ship o1 hang",
			"420ms: ship o1 cancelled",
			"420ms: o1 failed: Timeout",
			"420ms: cancel shipping o1 panic",
			"420ms: cancel shipping o1 failed: InternalError no such account",
			"420ms: refund o1 hang",
			"520ms: refund o1 cancelled",
			"540ms: refund o1 CommError",
			"610ms: refund o1 hang",
			"710ms: refund o1 cancelled",
			"710ms: refund o1 failed: Timeout",
			"710ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple charge o1]; compensated [release o1/apple]; failed [cancel shipping o1 refund o1]; Timeout",
		},
		failures: 2,
	}, {
		// Two orders of one account: the second's charge waits for the
		// first's, while the orders of another account go on.
		name:   "OneChargeAtATimePerAccount",
		script: map[string][]string{"charge o1": {"CommError"}},
		orders: []sagaOrder{
			{order: apple("o1")},
			{order: order{"o2", "ann", []string{"pear"}}},
			{order: order{"o3", "bob", []string{"fig"}}},
		},
		trace: []string{
			"0s: reserve o1/apple ",
			"0s: reserve o2/pear ",
			"0s: reserve o3/fig ",
			"30ms: charge o1 CommError",
			"30ms: charge o3 ",
			"60ms: ship o3 ",
			"80ms: charge o1 ",
			"110ms: charge o2 ",
			"110ms: ship o1 ",
			"140ms: ship o2 ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple charge o1 ship o1]; compensated []; failed []; <nil>",
			"o2": "ran [reserve o2/pear charge o2 ship o2]; compensated []; failed []; <nil>",
			"o3": "ran [reserve o3/fig charge o3 ship o3]; compensated []; failed []; <nil>",
		},
	}, {
		// The second order's budget runs out while it waits for the
		// account: its charge never started, so only its stock is
		// released, and the first order goes on holding the account.
		name:   "BudgetRunsOutWaitingForTheAccount",
		script: map[string][]string{"charge o1": {"CommError", "CommError"}},
		orders: []sagaOrder{
			{order: apple("o1")},
			{order: order{"o2", "ann", []string{"pear"}}, after: 10 * time.Millisecond, budget: 100 * time.Millisecond},
		},
		trace: []string{
			"0s: reserve o1/apple ",
			"10ms: reserve o2/pear ",
			"30ms: charge o1 CommError",
			"80ms: charge o1 CommError",
			"110ms: o2 failed: Timeout",
			"110ms: release o2/pear ",
			"150ms: charge o1 ",
			"180ms: ship o1 ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple charge o1 ship o1]; compensated []; failed []; <nil>",
			"o2": "ran [reserve o2/pear]; compensated [release o2/pear]; failed []; Timeout",
		},
	}, {
		// The client goes away while the charge waits for its retry: the
		// backoff is stopped, and the charge, which failed, is refunded
		// all the same.
		name:        "ClientCancelInTheBackoff",
		script:      map[string][]string{"charge o1": {"CommError"}},
		orders:      []sagaOrder{{order: apple("o1"), cancelled: true}},
		cancelAfter: 70 * time.Millisecond,
		trace: []string{
			"0s: reserve o1/apple ",
			"30ms: charge o1 CommError",
			"70ms: o1 failed: context canceled",
			"70ms: refund o1 ",
			"100ms: release o1/apple ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple]; compensated [refund o1 release o1/apple]; failed []; context canceled",
		},
	}, {
		// The client goes away while the order waits for its account: it
		// leaves the account's queue, its stock is released, and the
		// order holding the account goes on.
		name: "ClientCancelWaitingForTheAccount",
		orders: []sagaOrder{
			{order: apple("o1")},
			{order: order{"o2", "ann", []string{"pear"}}, cancelled: true},
		},
		cancelAfter: 40 * time.Millisecond,
		trace: []string{
			"0s: reserve o1/apple ",
			"0s: reserve o2/pear ",
			"30ms: charge o1 ",
			"40ms: o2 failed: context canceled",
			"40ms: release o2/pear ",
			"60ms: ship o1 ",
		},
		results: map[string]string{
			"o1": "ran [reserve o1/apple charge o1 ship o1]; compensated []; failed []; <nil>",
			"o2": "ran [reserve o2/pear]; compensated [release o2/pear]; failed []; context canceled",
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			// A bubble, for the goroutine that context.AfterFunc starts to
			// call Root.Cancel: synctest.Wait lets it run before the tool
			// goes on.
			synctest.Test(t, func(t *testing.T) {
				rig := newSagaRig(c.script)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for _, o := range c.orders {
					if o.after != 0 {
						rig.tt.Advance(o.after)
					}
					if o.budget != 0 {
						rig.s.budget = o.budget
					}
					if o.cancelled {
						rig.place(ctx, o.order)
					} else {
						rig.place(context.Background(), o.order)
					}
				}
				if c.cancelAfter != 0 {
					rig.tt.Advance(c.cancelAfter)
					cancel()
					synctest.Wait()
				}
				rig.tt.Run()
				rig.check(t, c.trace, c.results, c.failures)
			})
		})
	}
}

// The client goes away while the charge, a real Await call, is in flight:
// the call's context is cancelled, and the refund waits until the call
// has returned (10ms later), though the order's flow ended at once. On a
// Loop in a testing/synctest bubble, since Await runs goroutines.
func TestSagaClientCancelCancelsTheChargesContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		trace := newTimedTrace(time.Now)
		logf := trace.logf
		call := func(as asyncsteps.AsyncSteps, action, key string) {
			as.Await(func(ctx context.Context) (any, error) {
				logf("%s %s", action, key)
				if action == "charge" {
					<-ctx.Done()                      // a payment service that takes its time
					time.Sleep(10 * time.Millisecond) // and returns a while after
					logf("charge %s returns %v", key, ctx.Err())
					return nil, ctx.Err()
				}
				time.Sleep(30 * time.Millisecond)
				return nil, ctx.Err()
			})
		}
		s := newLoopSagas(loop, call, logf)
		ctx, cancel := context.WithCancel(context.Background())
		results := placeOnLoop(ctx, s, order{"o1", "ann", []string{"apple"}})
		time.Sleep(50 * time.Millisecond)
		cancel()
		r := <-results
		want := []string{
			"0s: reserve o1/apple",
			"30ms: charge o1",
			"50ms: o1 failed: context canceled",
			"60ms: charge o1 returns context canceled",
			"60ms: refund o1",
			"90ms: release o1/apple",
		}
		trace.want(t, want)
		if got := fmt.Sprint(r.Ran, r.Compensated, r.Failed, errors.Is(r.Err, context.Canceled)); got != "[reserve o1/apple] [refund o1 release o1/apple] [] true" {
			t.Errorf("result %s", got)
		}
		if n := s.accounts.Len(); n != 0 {
			t.Errorf("%d accounts locked", n)
		}
	})
}

// The loop closes under an order: its compensations cannot be made on
// it, and each is reported as failed, none lost.
func TestSagaLoopClosedUnderAnOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var trace []string // on the loop, then read once it has stopped
		logf := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
		call := func(as asyncsteps.AsyncSteps, action, key string) {
			logf("%s %s", action, key)
			if action == "charge" {
				as.WaitExternal() // never answers
				return
			}
			as.Success()
		}
		s := newLoopSagas(loop, call, logf)
		results := placeOnLoop(context.Background(), s, order{"o1", "ann", []string{"apple"}})
		synctest.Wait()
		loop.Close()
		r := <-results
		want := []string{
			"reserve o1/apple",
			"charge o1",
			"o1 failed: InternalError: the flow's loop is closed",
			"refund o1 failed: InternalError: the flow's loop is closed",
			"release o1/apple failed: InternalError: the flow's loop is closed",
		}
		wantLines(t, trace, want)
		if got := fmt.Sprint(r.Ran, r.Compensated, r.Failed, s.failures); got != "[reserve o1/apple] [] [refund o1 release o1/apple] 2" {
			t.Errorf("result %s", got)
		}
		if n := s.accounts.Len(); n != 0 {
			t.Errorf("%d accounts locked", n)
		}
	})
}

// The charge's call ignores its context and never returns: the
// compensations wait for it (they must not overtake it) until their
// settle budget runs out, and are then reported as failed, none lost.
func TestSagaChargeThatNeverReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		trace := newTimedTrace(time.Now)
		logf := trace.logf
		stuck := make(chan struct{})
		call := func(as asyncsteps.AsyncSteps, action, key string) {
			as.Await(func(ctx context.Context) (any, error) {
				logf("%s %s", action, key)
				if action == "charge" {
					<-stuck // deaf to its context
				}
				return nil, nil
			})
		}
		s := newLoopSagas(loop, call, logf)
		s.budget, s.settle = 50*time.Millisecond, time.Second
		r := <-placeOnLoop(context.Background(), s, order{"o1", "ann", []string{"apple"}})
		want := []string{
			"0s: reserve o1/apple",
			"0s: charge o1",
			"50ms: o1 failed: Timeout",
			"1.05s: refund o1 failed: Timeout",
			"1.05s: release o1/apple failed: Timeout",
		}
		trace.want(t, want)
		if got := fmt.Sprint(r.Ran, r.Compensated, r.Failed, s.failures); got != "[reserve o1/apple] [] [refund o1 release o1/apple] 2" {
			t.Errorf("result %s", got)
		}
		close(stuck)
		synctest.Wait()
		if n := s.accounts.Len(); n != 0 {
			t.Errorf("%d accounts locked once the charge returned", n)
		}
	})
}

// Why the saga's compensations are a flow of their own: a step that a
// cancel handler adds never runs, and the Add is logged as a misuse of
// the handler, which goes on (CancelFunc's doc), while a step the
// handler starts in a new flow runs.
func TestSagaCancelHandlerAddsNoStep(t *testing.T) {
	log := asyncsteps.CaptureLog(t)
	tt := asyncsteps.NewTestTool()
	var trace []string
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(as asyncsteps.AsyncSteps) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { trace = append(trace, "refund added to the step") })
			own := asyncsteps.New(asyncsteps.WithTool(as.Tool()))
			own.Add(func(asyncsteps.AsyncSteps, ...any) { trace = append(trace, "refund in a flow of its own") })
			own.Execute()
		})
		as.WaitExternal()
	})
	tt.Deferred(10*time.Millisecond, r.Cancel)
	_, err := r.Run(context.Background())
	tt.Run()
	if !errors.Is(err, context.Canceled) || !slices.Equal(trace, []string{"refund in a flow of its own"}) {
		t.Errorf("err %v, trace %q", err, trace)
	}
	want := `level=ERROR msg="asyncsteps: misuse in cancel handler" info="Add called in a cancel handler:` +
		` the steps it adds never run; start a flow of its own for them"`
	if out := log.String(); strings.Count(out, "asyncsteps:") != 1 || !strings.Contains(out, want) {
		t.Errorf("logged %q, want %s once", out, want)
	}
}

// A context that outlives many orders (a queue consumer's, ended at
// shutdown) keeps nothing of those that have ended, whichever way they
// ended: the order's watch of the context ends with the order. Before,
// each order left its Root registered on the context until the context
// ended, some 750 bytes an order.
func TestSagaContextKeepsNothingOfEndedOrders(t *testing.T) {
	rig := newSagaRig(map[string][]string{"ship o2": {"Refused"}})
	var states []weak.Pointer[asyncsteps.State] // of each order's flow
	call := rig.s.call
	rig.s.call = func(as asyncsteps.AsyncSteps, action, key string) {
		if action == "charge" {
			states = append(states, weak.Make(as.State()))
		}
		call(as, action, key)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig.place(ctx, order{"o1", "ann", []string{"apple"}})
	rig.place(ctx, order{"o2", "ann", []string{"pear"}})
	rig.tt.Run()
	rig.check(t, []string{
		"0s: reserve o1/apple ",
		"0s: reserve o2/pear ",
		"30ms: charge o1 ",
		"60ms: charge o2 ",
		"60ms: ship o1 ",
		"90ms: ship o2 Refused",
		"120ms: o2 failed: Refused: ship o2 failed",
		"120ms: cancel shipping o2 ",
		"150ms: refund o2 ",
		"180ms: release o2/pear ",
	}, map[string]string{
		"o1": "ran [reserve o1/apple charge o1 ship o1]; compensated []; failed []; <nil>",
		"o2": "ran [reserve o2/pear charge o2]; compensated [cancel shipping o2 refund o2 release o2/pear]; failed []; Refused: ship o2 failed",
	}, 0)
	runtime.GC()
	for i, p := range states {
		if p.Value() != nil {
			t.Errorf("order o%d is kept by its context after its end", i+1)
		}
	}
	if len(states) != 2 {
		t.Errorf("%d charges seen, want 2", len(states))
	}
}

// The order runs under its context: a trace id put there reaches every
// call's Await function. Before, the order only watched the context for
// its cancel, and the calls saw none of its values.
func TestSagaCallsSeeTheOrdersTraceID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var mu sync.Mutex
		var trace []string
		call := func(as asyncsteps.AsyncSteps, action, key string) {
			as.Await(func(ctx context.Context) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				trace = append(trace, fmt.Sprintf("%s %s trace=%v", action, key, ctx.Value(traceIDKey{})))
				return nil, nil
			})
		}
		s := newLoopSagas(loop, call, func(string, ...any) {})
		ctx := context.WithValue(context.Background(), traceIDKey{}, "t-42")
		if r := <-placeOnLoop(ctx, s, order{"o1", "ann", []string{"apple"}}); r.Err != nil {
			t.Fatalf("order failed: %v", r.Err)
		}
		mu.Lock()
		defer mu.Unlock()
		wantLines(t, trace, []string{"reserve o1/apple trace=t-42", "charge o1 trace=t-42", "ship o1 trace=t-42"})
	})
}
