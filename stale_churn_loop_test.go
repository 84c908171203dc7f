package asyncsteps_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// loopChurn is the state shared by the flows of a churn on a Loop.
type loopChurn struct {
	mu      sync.Mutex
	apis    []asyncsteps.AsyncSteps // stale: their steps have completed
	pending []asyncsteps.AsyncSteps // kept by callbacks that may still run; the loop's goroutine only
	n       int
	poke    bool
	rng     *rand.Rand // under mu
	lock    *asyncsteps.Mutex
}

// keep notes as, whose step its running callback completes: it is stale
// once that callback has returned (see pokeNow).
func (c *loopChurn) keep(as asyncsteps.AsyncSteps) { c.pending = append(c.pending, as) }

// keepNow notes as, whose step has completed already.
func (c *loopChurn) keepNow(as asyncsteps.AsyncSteps) {
	c.mu.Lock()
	c.add(as)
	c.mu.Unlock()
}

func (c *loopChurn) add(as asyncsteps.AsyncSteps) {
	if len(c.apis) < 512 {
		c.apis = append(c.apis, as)
	} else {
		c.apis[c.n%512] = as
	}
	c.n++
}

// pokeNow calls, from a callback on the loop or from any goroutine
// (onLoop false), a few stale step APIs. On the loop, it first makes the
// step APIs kept by the callbacks that have returned callable: only one
// callback runs at a time there.
func (c *loopChurn) pokeNow(onLoop bool) {
	c.mu.Lock()
	if onLoop {
		for _, as := range c.pending {
			c.add(as)
		}
		c.pending = c.pending[:0]
	}
	var picked []asyncsteps.AsyncSteps
	var calls []int
	if c.poke && len(c.apis) > 0 {
		for range c.rng.IntN(4) {
			picked = append(picked, c.apis[c.rng.IntN(len(c.apis))])
			calls = append(calls, c.rng.IntN(len(staleCalls)))
		}
	}
	c.mu.Unlock()
	for i, as := range picked {
		staleCalls[calls[i]](as, c.lock)
	}
}

// outcome is what the flow recorded, and the kinds of its steps.
func (cf *loopChurnFlow) outcome() (string, [2][]int) {
	return strings.Join(cf.trace, ",") + " => " + strings.Join(cf.res, " ; "), cf.kinds
}

// loopChurnFlow is one flow of a churn on a Loop.
type loopChurnFlow struct {
	id    int
	kinds [2][]int
	mu    sync.Mutex
	trace []string
	res   []string
}

func (cf *loopChurnFlow) add(format string, args ...any) {
	cf.mu.Lock()
	cf.trace = append(cf.trace, fmt.Sprintf(format, args...))
	cf.mu.Unlock()
}

// Kinds of step of a churn on a Loop.
const (
	lcLeaf = iota
	lcNested
	lcWait      // completed by a goroutine
	lcTimeout   // times out: its completion comes later
	lcInTime    // completed before its timeout, which is disarmed
	lcRearm     // SetTimeout twice, then completed between the two dues
	lcAwait     // an Await function, which calls stale step APIs too
	lcParallel  // branches with timeouts
	lcSync      // a critical section
	lcCancelled // the flow cancels itself
	lcRetry     // attempts that time out, then one that succeeds in time
	lcSyncAwait // a critical section cancelled while its Await function runs
	lcReenter   // a critical section entered again inside itself
	lcKinds
)

// churnDurations are the timeouts of the churn: more durations than a
// Loop keeps lists for, so that some go to its heap of step timers.
var churnDurations = []time.Duration{
	3 * time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond, 11 * time.Millisecond,
	13 * time.Millisecond, 17 * time.Millisecond, 19 * time.Millisecond, 23 * time.Millisecond,
	29 * time.Millisecond, 31 * time.Millisecond, 37 * time.Millisecond, 41 * time.Millisecond,
}

func (c *loopChurn) addStep(r *asyncsteps.Root, cf *loopChurnFlow, name string, k int) {
	d := churnDurations[(cf.id+len(name))%len(churnDurations)]
	leaf := func(name string) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.Success(name)
			c.keep(as)
		}
	}
	handler := func(name string) asyncsteps.ErrorFunc {
		return func(as asyncsteps.AsyncSteps, code string) {
			c.pokeNow(true)
			cf.add("%s handler %s", name, code)
			as.Success(name + " handled")
			c.keep(as)
		}
	}
	cancel := func(name string) asyncsteps.CancelFunc {
		return func(as asyncsteps.AsyncSteps) {
			c.pokeNow(true)
			cf.add("%s cancelled", name)
		}
	}
	completeAfter := func(as asyncsteps.AsyncSteps, name string, after time.Duration) {
		go func() {
			time.Sleep(after)
			c.pokeNow(false)
			as.Success(name)
			c.keepNow(as)
		}()
	}
	switch k {
	case lcLeaf:
		r.Add(leaf(name))
	case lcNested:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.Add(leaf(name + ".a")).Add(leaf(name + ".b"))
		})
	case lcWait:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.WaitExternal()
			completeAfter(as, name, d)
		})
	case lcTimeout, lcInTime:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.SetCancel(cancel(name))
			as.SetTimeout(d)
			if k == lcTimeout {
				completeAfter(as, name, d+time.Millisecond)
			} else {
				completeAfter(as, name, d-time.Millisecond)
			}
		}, handler(name))
	case lcRearm:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.SetTimeout(d)
			as.SetTimeout(2 * d)
			completeAfter(as, name, d+time.Millisecond)
		}, handler(name))
	case lcAwait:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.Await(func(context.Context) (any, error) {
				c.pokeNow(false)
				time.Sleep(d)
				return name + " awaited", nil
			})
		})
	case lcParallel:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			p := as.Parallel()
			p.Add(leaf(name + ".p0"))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				c.pokeNow(true)
				as.SetTimeout(d)
				completeAfter(as, name+".p1", d/2)
			})
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				c.pokeNow(true)
				as.Add(leaf(name + ".p2"))
			})
		})
	case lcSync:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.Sync(c.lock, func(as asyncsteps.AsyncSteps, _ ...any) {
				c.pokeNow(true)
				as.Add(leaf(name + ".in"))
			})
		})
	case lcRetry:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Timeout: d}, func(as asyncsteps.AsyncSteps, i int) {
				c.pokeNow(true)
				cf.add("%s attempt %d", name, i)
				if i == 2 {
					as.Add(leaf(name + ".last"))
					return
				}
				as.WaitExternal()
				completeAfter(as, name, 2*d)
			})
		})
	case lcSyncAwait:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			p := as.Parallel()
			p.Sync(c.lock, func(as asyncsteps.AsyncSteps, _ ...any) {
				c.pokeNow(true)
				// The function outlives the cancel of its step: the
				// section keeps its slot until it returns.
				as.Await(func(context.Context) (any, error) {
					c.pokeNow(false)
					time.Sleep(d)
					return nil, nil
				})
			})
			p.Await(func(context.Context) (any, error) {
				time.Sleep(d / 2)
				return nil, &asyncsteps.Error{Code: "Sibling"}
			})
		}, handler(name))
	case lcReenter:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.Sync(c.lock, func(as asyncsteps.AsyncSteps, _ ...any) {
				c.pokeNow(true)
				as.Sync(c.lock, func(as asyncsteps.AsyncSteps, _ ...any) {
					c.pokeNow(true)
					as.Await(func(context.Context) (any, error) {
						time.Sleep(d / 3)
						return name + " inner", nil
					})
				})
			})
		})
	case lcCancelled:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			c.pokeNow(true)
			cf.add("%s%v", name, args)
			as.SetCancel(cancel(name))
			r.Cancel()
		})
	}
}

// loopChurnRun runs n flows, each executed twice, on a Loop inside a
// testing/synctest bubble, and returns what each recorded.
func loopChurnRun(t *testing.T, seed uint64, n int, poke bool) []*loopChurnFlow {
	var flows []*loopChurnFlow
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		c := &loopChurn{poke: poke, rng: rand.New(rand.NewPCG(seed, 99)), lock: asyncsteps.NewMutex(1)}
		var wg sync.WaitGroup
		done := make(chan struct{})
		var poker sync.WaitGroup
		poker.Go(func() {
			// Stale calls from a goroutine of no flow, between the
			// events of the loop.
			for {
				select {
				case <-done:
					return
				case <-time.After(500 * time.Microsecond):
					c.pokeNow(false)
				}
			}
		})
		for id := range n {
			rng := rand.New(rand.NewPCG(seed, uint64(id)))
			cf := &loopChurnFlow{id: id}
			for round := range cf.kinds {
				for range 1 + rng.IntN(4) {
					cf.kinds[round] = append(cf.kinds[round], rng.IntN(lcKinds))
				}
			}
			flows = append(flows, cf)
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			wg.Go(func() {
				// Started apart, so that the flows overlap in part.
				time.Sleep(time.Duration(id%5) * time.Millisecond)
				for round, kinds := range cf.kinds {
					for j, k := range kinds {
						c.addStep(r, cf, fmt.Sprintf("r%d.s%d", round, j), k)
					}
					res := <-r.Promise()
					cf.mu.Lock()
					cf.res = append(cf.res, fmt.Sprint(res.Args, res.Err))
					cf.mu.Unlock()
				}
			})
		}
		wg.Wait()
		// The completions that came too late, and the Await functions
		// that outlived their steps, end well within a second.
		time.Sleep(time.Second)
		close(done)
		poker.Wait()
	})
	return flows
}

// docs/DESIGN.md#stale-steps and #timeouts on a Loop, whose step timers
// are pooled: flows churn on one Loop, on virtual time, with timeouts
// that fire, are disarmed and re-armed, in a Loop's lists and in its heap,
// and each Root runs twice. Callbacks, Await functions and the goroutines
// that complete steps call the kept step APIs of completed steps of any
// flow and execution: every flow records exactly what it records when
// nobody makes a stale call.
func TestStaleCallsInAChurnOfFlowsOnALoopChangeNoFlow(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			want := loopChurnRun(t, seed, 150, false)
			got := loopChurnRun(t, seed, 150, true)
			wantSameChurn(t, want, got)
		})
	}
}
