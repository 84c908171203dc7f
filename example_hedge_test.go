package asyncsteps_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// searchCall asks one backend: it adds to as the steps of one request,
// which complete with Success(answer string) or fail. In a service it is
// an as.Await of the backend's client (asynchttp.Client.Get, say); here a
// fake on the TestTool's clock, since a TestTool does not wait for the
// goroutines of Await functions.
type searchCall func(as asyncsteps.AsyncSteps, query string)

// searchBackend is one backend of the aggregator.
type searchBackend struct {
	name       string
	call       searchCall
	hedgeAfter time.Duration // its p95: a second attempt starts then
	breaker    *breaker      // shared by every flow that calls it
}

// The code the quorum's flow raises to end its Parallel early: it never
// leaves it.
const codeQuorum = "Quorum" // K backends agreed

// hedged adds the steps of one call to b: a first attempt at once, a
// second one as soon as the first fails (an open circuit's refusal too),
// or once b.hedgeAfter has passed without an answer. The first answer wins: First cancels the other attempt
// (its cancel handlers run, an Await's context is cancelled). A failed
// attempt ends its own branch only; the call fails with the last failure
// when both have.
func hedged(as asyncsteps.AsyncSteps, b searchBackend, query string) {
	hedgeNow := func() {} // starts the second attempt before its time
	attempt := func(as asyncsteps.AsyncSteps) {
		as.Sync(b.breaker, func(as asyncsteps.AsyncSteps, _ ...any) { b.call(as, query) },
			func(as asyncsteps.AsyncSteps, code string) { hedgeNow() })
	}
	asyncsteps.First[string](as, nil, attempt,
		func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { // the hedge delay
				h := as.Tool().Deferred(b.hedgeAfter, func() { as.Success() })
				as.SetCancel(func(asyncsteps.AsyncSteps) { h.Cancel() })
				hedgeNow = func() {
					if h.IsValid() {
						h.Cancel()
						as.Success()
					}
				}
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { attempt(as) })
		})
}

// searchResult is what one backend gave a request.
type searchResult struct {
	Backend, Answer string
	Err             string // "" for an answer
}

const notInTime = "no answer in time"

// aggregate adds the steps that ask every backend within budget, and
// completes with the []searchResult of all of them: those that failed or
// had not answered by then are marked so. It fails with Timeout only when
// none answered.
func aggregate(as asyncsteps.AsyncSteps, backends []searchBackend, query string, budget time.Duration) {
	results := make([]searchResult, len(backends)) // written on the loop only
	for i, b := range backends {
		results[i] = searchResult{Backend: b.name, Err: notInTime}
	}
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(budget) // bounds this step and all it adds
		p := as.Parallel()
		for i, b := range backends {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				hedged(as, b, query)
				asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, answer string) {
					results[i].Answer, results[i].Err = answer, ""
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				results[i].Err = code + ": " + as.State().ErrorInfo
				as.Success() // the backend's failure, not the request's
			})
		}
	}, func(as asyncsteps.AsyncSteps, code string) {
		for _, r := range results {
			if code == asyncsteps.Timeout && r.Err == "" {
				as.Success() // the budget is over: answer with what arrived
				return
			}
		}
	})
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(results) })
}

// quorum adds the steps that ask every backend and complete with the first
// answer that k of them gave, cancelling the calls still running. It fails
// with NoQuorum as soon as so many have failed that fewer than k are left,
// else once every backend has ended without k agreeing: answers split so
// that none can reach k still wait for the calls left.
func quorum(as asyncsteps.AsyncSteps, backends []searchBackend, query string, k int) {
	votes := map[string]int{}
	failed := 0
	var agreed string
	p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		if code == codeQuorum {
			as.Success()
		}
	})
	for _, b := range backends {
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { hedged(as, b, query) },
				func(as asyncsteps.AsyncSteps, code string) {
					if failed++; failed > len(backends)-k {
						as.Error("NoQuorum", "too many backends failed")
						return
					}
					as.Success() // a vote fewer
				})
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				answer, ok := asyncsteps.Arg[string](args, 0) // not Then: a failure's Success() would be a vote for ""
				if !ok {
					return
				}
				if votes[answer]++; votes[answer] == k {
					agreed = answer
					as.Error(codeQuorum) // ends the Parallel: the rest is cancelled
				}
			})
		})
	}
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if agreed == "" {
			as.Error("NoQuorum", "the backends disagree")
			return
		}
		as.Success(agreed)
	})
}

// breaker is a circuit breaker for one backend, shared by the flows of
// every loop, and a Syncer: as.Sync(b, call) runs call if the circuit
// lets it. It opens after threshold failures in a row, refusing calls
// with DefenseRejected; after cooldown it is half-open: one call (the
// probe) goes through, the others are refused, and the probe's outcome
// closes or opens it again. A call cancelled (a hedge's loser) counts as
// nothing, and so does one that ends after the circuit opened or closed
// since it began: a late answer must not close a circuit that another
// call's failures opened, nor a late failure push its cooldown back. Its state is a decision shared by goroutines, so it has a
// sync.Mutex; the probe's single slot is an asyncsteps.Mutex, which gives
// it back on every end of the probe (a cancel too, and only once an Await
// started in it has returned).
type breaker struct {
	threshold int
	cooldown  time.Duration
	probe     *asyncsteps.Mutex

	mu        sync.Mutex
	failures  int       // in a row
	openUntil time.Time // zero: closed
	epoch     int       // counts the openings and closings
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, probe: asyncsteps.NewMutex(1, 0)}
}

// Sync implements asyncsteps.Syncer.
func (b *breaker) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		state, epoch := b.state(as.Tool().Now())
		switch state {
		case "closed":
			b.guard(as, f, args, epoch)
		case "half-open":
			probing := false
			b.probe.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
				probing = true
				b.guard(as, f, args, epoch)
			}, func(as asyncsteps.AsyncSteps, code string) {
				if !probing { // the Mutex's refusal, "Mutex queue limit", reaches f's handler too
					as.Error(asyncsteps.DefenseRejected, "circuit half-open: a probe is in flight")
				}
			})
		default:
			as.Error(asyncsteps.DefenseRejected, "circuit open")
		}
	}, onerror...)
}

// state returns the circuit's state at now, and its epoch.
func (b *breaker) state(now time.Time) (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return "closed", b.epoch
	case now.Before(b.openUntil):
		return "open", b.epoch
	}
	return "half-open", b.epoch
}

// guard runs f and counts how it ended, in the epoch it began in.
func (b *breaker) guard(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, args []any, epoch int) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { f(as, args...) },
		func(as asyncsteps.AsyncSteps, code string) { b.record(false, as.Tool().Now(), epoch) })
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		b.record(true, as.Tool().Now(), epoch)
		as.Success(args...)
	})
}

// record counts the outcome of a call begun in epoch, unless the circuit
// has opened or closed since.
func (b *breaker) record(ok bool, now time.Time, epoch int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if epoch != b.epoch {
		return
	}
	switch {
	case ok && b.openUntil.IsZero():
		b.failures = 0
	case ok: // the probe answered
		b.failures, b.openUntil, b.epoch = 0, time.Time{}, b.epoch+1
	case !b.openUntil.IsZero(): // the probe failed
		b.openUntil, b.epoch = now.Add(b.cooldown), b.epoch+1
	default:
		if b.failures++; b.failures >= b.threshold {
			b.openUntil, b.epoch = now.Add(b.cooldown), b.epoch+1
		}
	}
}

// reply is what a fake backend's call does: answer, or fail with code,
// after the given time.
type reply struct {
	after        time.Duration
	answer, code string
}

// fakeBackend answers its n-th call with script[n] (the last one for
// every call after), on the tool's clock, and logs its calls.
func fakeBackend(name string, logf func(string, ...any), script ...reply) searchCall {
	n := 0
	return func(as asyncsteps.AsyncSteps, _ string) {
		n++
		attempt, r := n, script[min(n, len(script))-1]
		logf("%s: attempt %d starts", name, attempt)
		h := as.Tool().Deferred(r.after, func() {
			if r.code != "" {
				logf("%s: attempt %d fails", name, attempt)
				as.Error(r.code, name+" failed")
				return
			}
			logf("%s: attempt %d answers", name, attempt)
			as.Success(r.answer)
		})
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			if h.IsValid() { // not when it has failed
				h.Cancel()
				logf("%s: attempt %d cancelled", name, attempt)
			}
		})
	}
}

// A search aggregator's request: four backends asked at once within a
// budget of 200ms, each hedged at its p95 and behind its circuit breaker.
// "web" answers in 30ms. "news" is slow at first: its hedge, 50ms later,
// answers first and the slow attempt is cancelled. "images" fails twice,
// reported as its own failure. "video" has not answered when the budget
// is over: the request answers with what arrived, and the calls still
// running are cancelled. All on virtual time: the run takes microseconds.
func Example_hedge() {
	tt := asyncsteps.NewTestTool()
	logf := func(format string, args ...any) {
		fmt.Printf("%-5v "+format+"\n", append([]any{tt.Now().Sub(asyncsteps.TestToolEpoch)}, args...)...)
	}
	backend := func(name string, script ...reply) searchBackend {
		return searchBackend{name: name, call: fakeBackend(name, logf, script...),
			hedgeAfter: 50 * time.Millisecond, breaker: newBreaker(5, time.Second)}
	}
	backends := []searchBackend{
		backend("web", reply{after: 30 * time.Millisecond, answer: "w1"}),
		backend("news", reply{after: time.Second, answer: "n1"}, reply{after: 20 * time.Millisecond, answer: "n1"}),
		backend("images", reply{after: 10 * time.Millisecond, code: asyncsteps.CommError}),
		backend("video", reply{after: time.Second, answer: "v1"}),
	}

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { aggregate(as, backends, "go", 200*time.Millisecond) })
	results, err := asyncsteps.Run[[]searchResult](context.Background(), r)
	for _, res := range results {
		fmt.Printf("%-6s %s%s\n", res.Backend, res.Answer, res.Err)
	}
	fmt.Println("error:", err)

	// The quorum: the first answer two backends agree on, the others cancelled.
	backends = []searchBackend{
		backend("a", reply{after: 10 * time.Millisecond, answer: "x"}),
		backend("b", reply{after: 20 * time.Millisecond, answer: "y"}),
		backend("c", reply{after: 30 * time.Millisecond, answer: "x"}),
		backend("d", reply{after: 40 * time.Millisecond, answer: "x"}),
	}
	tt.Advance(time.Second - 200*time.Millisecond) // to 1s, for a round log
	r = asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { quorum(as, backends, "go", 2) })
	agreed, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Println("agreed:", agreed, "error:", err)
	// Output:
	// 0s    web: attempt 1 starts
	// 0s    news: attempt 1 starts
	// 0s    images: attempt 1 starts
	// 0s    video: attempt 1 starts
	// 10ms  images: attempt 1 fails
	// 10ms  images: attempt 2 starts
	// 20ms  images: attempt 2 fails
	// 30ms  web: attempt 1 answers
	// 50ms  news: attempt 2 starts
	// 50ms  video: attempt 2 starts
	// 70ms  news: attempt 2 answers
	// 70ms  news: attempt 1 cancelled
	// 200ms video: attempt 1 cancelled
	// 200ms video: attempt 2 cancelled
	// web    w1
	// news   n1
	// images CommError: images failed
	// video  no answer in time
	// error: <nil>
	// 1s    a: attempt 1 starts
	// 1s    b: attempt 1 starts
	// 1s    c: attempt 1 starts
	// 1s    d: attempt 1 starts
	// 1.01s a: attempt 1 answers
	// 1.02s b: attempt 1 answers
	// 1.03s c: attempt 1 answers
	// 1.03s d: attempt 1 cancelled
	// agreed: x error: <nil>
}
