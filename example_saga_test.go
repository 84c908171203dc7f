package asyncsteps_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// order is a request to place: each item is reserved at the stock
// service, then the account is charged, then the shipping is booked.
type order struct {
	ID, Account string
	Items       []string
}

// CardDeclined is the payment service's refusal: an answer, not a
// failure, so it is never retried.
const CardDeclined = "CardDeclined"

// undo names each action's compensation, made with the same key.
var undo = map[string]string{"reserve": "release", "charge": "refund", "ship": "cancel shipping"}

// service adds the steps of one request to a service: action on key, the
// request's idempotency key (in production an as.Await of the service's
// client; in the tests a fake on the tool's virtual clock).
type service func(as asyncsteps.AsyncSteps, action, key string)

// orderResult is how an order ended: the actions that completed, the
// compensations made and those that failed (each logged and counted),
// and the order's own failure: nil, an *Error, or a cancel.
type orderResult struct {
	Ran, Compensated, Failed []string
	Err                      error
}

// sagas places orders, each as a flow on tool. Its methods run on the loop.
type sagas struct {
	tool     asyncsteps.Tool
	call     service
	accounts *asyncsteps.KeyedMutex[string] // one charge at a time per account
	budget   time.Duration                  // of each order, not of its compensations
	settle   time.Duration                  // of an order's compensations
	logf     func(format string, args ...any)
	failures int // compensations that failed, for the operators
}

// step makes action on key. Its compensation is owed as the call starts:
// a call cut short (a timeout, a lost answer, a cancel) may have taken
// effect, and compensating one that did not is a no-op for an idempotent
// service. A refusal is certain: it owes nothing.
func (s *sagas) step(as asyncsteps.AsyncSteps, out *orderResult, owed *[]string, action, key string) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		*owed = append(*owed, undo[action]+" "+key)
		s.retry(as, action, key)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { out.Ran = append(out.Ran, action+" "+key) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		if code == CardDeclined {
			*owed = slices.DeleteFunc(*owed, func(c string) bool { return c == undo[action]+" "+key })
		}
	})
}

// retry makes the call, 3 attempts of 100ms at most, 20ms and 40ms
// apart, on Timeout, CommError and ConnectError only.
func (s *sagas) retry(as asyncsteps.AsyncSteps, action, key string) {
	asyncsteps.Retry(as, asyncsteps.RetryOptions{
		Attempts: 3,
		Timeout:  100 * time.Millisecond,
		Backoff:  func(n int) time.Duration { return time.Duration(n) * 20 * time.Millisecond },
	}, func(as asyncsteps.AsyncSteps, _ int) { s.call(as, action, key) })
}

// place runs o: the items reserved in parallel, the charge under the
// account's lock, the shipping booked, all within the budget. done gets
// the result once the compensations owed, if o failed, have been made.
// ctx's end (the client gone) cancels the order, not its compensations.
func (s *sagas) place(ctx context.Context, o order, done func(orderResult)) {
	out, owed := &orderResult{}, &[]string{}
	// A flow does not wait for the Await calls it cancels, but a Mutex
	// slot is held until those started inside have returned: the
	// compensations enter this one, so none overtakes the call it undoes.
	calls := asyncsteps.NewMutex(1)
	r := asyncsteps.New(asyncsteps.WithTool(s.tool))
	r.Sync(calls, func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(s.budget)
		p := as.Parallel()
		for _, item := range o.Items {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { s.step(as, out, owed, "reserve", o.ID+"/"+item) })
		}
		s.accounts.Sync(as, o.Account, func(as asyncsteps.AsyncSteps, _ ...any) {
			s.step(as, out, owed, "charge", o.ID)
		})
		s.step(as, out, owed, "ship", o.ID)
	})
	// Every end of the order comes here: a success, an error, the
	// budget's Timeout, a cancel. A cancelled flow runs no more steps,
	// so the compensations are a flow of their own. The order runs under
	// ctx, whose values (a trace id) reach the calls' Await functions,
	// and which keeps nothing of it once it has ended.
	r.ExecuteThenContext(ctx, func(res asyncsteps.Result) {
		if out.Err = res.Err; res.Err == nil {
			done(*out)
			return
		}
		s.logf("%s failed: %v", o.ID, res.Err)
		slices.Reverse(*owed)
		s.compensate(calls, out, *owed, done)
	})
}

// compensate makes each compensation in turn, each retried, within the
// settle budget; one that still fails is logged, counted and reported,
// and the next one is made.
func (s *sagas) compensate(calls *asyncsteps.Mutex, out *orderResult, owed []string, done func(orderResult)) {
	r := asyncsteps.New(asyncsteps.WithTool(s.tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(s.settle) // also bounds the wait for a call that ignores its context
		as.Sync(calls, func(as asyncsteps.AsyncSteps, _ ...any) {
			for _, c := range owed {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					i := strings.LastIndexByte(c, ' ') // "cancel shipping o1"
					s.retry(as, c[:i], c[i+1:])
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { out.Compensated = append(out.Compensated, c) })
				}, func(as asyncsteps.AsyncSteps, code string) {
					s.failed(out, c, strings.TrimSpace(code+" "+as.State().ErrorInfo))
					as.Success()
				})
			}
		})
	})
	r.ExecuteThen(func(res asyncsteps.Result) {
		for _, c := range owed[len(out.Compensated)+len(out.Failed):] {
			s.failed(out, c, res.Err.Error()) // not made: the settle budget ran out, or the loop closed
		}
		done(*out)
	})
}

// failed reports compensation c as failed: logged, counted and kept.
func (s *sagas) failed(out *orderResult, c, why string) {
	s.failures++
	s.logf("%s failed: %s", c, why)
	out.Failed = append(out.Failed, c)
}

// fakeServices answer each call after 30ms on the flow's clock with the
// next code scripted for it ("" or none: a success; "hang": never).
func fakeServices(script map[string][]string, logf func(string, ...any)) service {
	return func(as asyncsteps.AsyncSteps, action, key string) {
		var code string
		if s := script[action+" "+key]; len(s) > 0 {
			code, script[action+" "+key] = s[0], s[1:]
		}
		logf("%s %s", action, key)
		if code == "hang" {
			as.WaitExternal()
			return
		}
		asyncsteps.Sleep(as, 30*time.Millisecond) // a timeout or a cancel stops it
		if code != "" {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(code, action+" "+key+" failed") })
		}
	}
}

// An order saga on virtual time: two orders of one account. o1 is placed
// whole. o2's charge waits for o1's (one at a time per account); then its
// shipping never answers: its three attempts time out, and o2's
// compensations are made in reverse order, the booking that may have been
// made included.
func Example_saga() {
	tt := asyncsteps.NewTestTool()
	logf := func(format string, args ...any) {
		fmt.Printf("%v: "+format+"\n", append([]any{tt.Now().Sub(asyncsteps.TestToolEpoch)}, args...)...)
	}
	script := map[string][]string{"ship o2": {"hang", "hang", "hang"}}
	s := &sagas{tool: tt, call: fakeServices(script, logf), accounts: asyncsteps.NewKeyedMutex[string](1),
		budget: time.Second, settle: 5 * time.Second, logf: logf}
	report := func(out orderResult) {
		logf("ran %v, compensated %v, failed %v: %v", out.Ran, out.Compensated, out.Failed, out.Err)
	}
	s.place(context.Background(), order{"o1", "ann", []string{"apple", "pear"}}, report)
	s.place(context.Background(), order{"o2", "ann", []string{"fig"}}, report)
	tt.Run()
	// Output:
	// 0s: reserve o1/apple
	// 0s: reserve o1/pear
	// 0s: reserve o2/fig
	// 30ms: charge o1
	// 60ms: charge o2
	// 60ms: ship o1
	// 90ms: ship o2
	// 90ms: ran [reserve o1/apple reserve o1/pear charge o1 ship o1], compensated [], failed []: <nil>
	// 210ms: ship o2
	// 350ms: ship o2
	// 450ms: o2 failed: Timeout
	// 450ms: cancel shipping o2
	// 480ms: refund o2
	// 510ms: release o2/fig
	// 540ms: ran [reserve o2/fig charge o2], compensated [cancel shipping o2 refund o2 release o2/fig], failed []: Timeout
}
