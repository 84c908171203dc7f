package asyncsteps_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// churnKinds are the kinds of top-level step a churned flow runs.
const (
	churnLeaf = iota
	churnNested
	churnWait
	churnTimeout
	churnError
	churnParallel
	churnRepeat
	churnSync
	churnCancel
	churnKinds
)

// outcome is what the flow recorded, and the kinds of its steps.
func (cf *churnFlow) outcome() (string, [2][]int) {
	return strings.Join(cf.trace, ",") + " => " + strings.Join(cf.res, " ; "), cf.kinds
}

// churnFlow is one flow of a churn: its program, drawn from its own seed,
// and what it recorded.
type churnFlow struct {
	id    int
	root  *asyncsteps.Root
	kinds [2][]int // per round
	trace []string
	res   []string
	ch    <-chan asyncsteps.Result
	round int
}

func (cf *churnFlow) add(format string, args ...any) {
	cf.trace = append(cf.trace, fmt.Sprintf(format, args...))
}

// staleSet holds step APIs whose steps have completed, for any flow's
// callbacks, and other goroutines, to call. A step API is kept from its
// callback, which completes the step, and becomes stale once the
// callback has returned: flush makes the kept ones callable, between two
// events of the tool.
type staleSet struct {
	mu      sync.Mutex
	apis    []asyncsteps.AsyncSteps
	pending []asyncsteps.AsyncSteps // the tool's goroutine only
	n       int
}

func (s *staleSet) keep(as asyncsteps.AsyncSteps) { s.pending = append(s.pending, as) }

func (s *staleSet) flush() {
	s.mu.Lock()
	for _, as := range s.pending {
		if len(s.apis) < 512 {
			s.apis = append(s.apis, as)
		} else {
			s.apis[s.n%512] = as
		}
		s.n++
	}
	s.mu.Unlock()
	s.pending = s.pending[:0]
}

func (s *staleSet) pick(rng *rand.Rand) asyncsteps.AsyncSteps {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.apis) == 0 {
		return nil
	}
	return s.apis[rng.IntN(len(s.apis))]
}

// staleCalls are the calls made on a stale step API: each must have no
// effect on any flow (docs/DESIGN.md#stale-steps).
var staleCalls = []func(as asyncsteps.AsyncSteps, mu *asyncsteps.Mutex){
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Success("stale") },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Error("Stale", "stale") },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Break() },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Continue() },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Add(staleStep) },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.Parallel().Add(staleStep) },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) {
		as.Repeat(1, func(as asyncsteps.AsyncSteps, _ int) { panic("stale repeat ran") })
	},
	func(as asyncsteps.AsyncSteps, mu *asyncsteps.Mutex) { as.Sync(mu, staleStep) },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.SuccessStep("stale") },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.SetTimeout(time.Millisecond) },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { panic("stale cancel ran") })
	},
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) { as.WaitExternal() },
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) {
		as.Await(func(context.Context) (any, error) { panic("stale await ran") })
	},
	func(as asyncsteps.AsyncSteps, _ *asyncsteps.Mutex) {
		if as.IsValid() {
			panic("a stale step API is valid")
		}
	},
}

func staleStep(asyncsteps.AsyncSteps, ...any) { panic("stale step ran") }

// churn runs n flows on tt, with stale calls between their steps when
// poke is set, and returns each flow's trace and result.
func churn(t *testing.T, seed uint64, n int, poke bool) []*churnFlow {
	t.Helper()
	tt := asyncsteps.NewTestTool()
	mu := asyncsteps.NewMutex(1)
	var stale staleSet
	pokeRng := rand.New(rand.NewPCG(seed, 99))
	pokeNow := func() {
		if !poke {
			return
		}
		for range pokeRng.IntN(3) {
			if as := stale.pick(pokeRng); as != nil {
				staleCalls[pokeRng.IntN(len(staleCalls))](as, mu)
			}
		}
	}
	var flows []*churnFlow
	begin := func(cf *churnFlow) {
		for j, k := range cf.kinds[cf.round] {
			addChurnStep(cf.root, cf, fmt.Sprintf("r%d.s%d", cf.round, j), k, tt, mu, &stale, pokeNow)
		}
		cf.ch = cf.root.Promise()
	}
	start := func(id int) {
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		cf := &churnFlow{id: id, root: asyncsteps.New(asyncsteps.WithTool(tt))}
		for r := range cf.kinds {
			for range 1 + rng.IntN(4) {
				cf.kinds[r] = append(cf.kinds[r], rng.IntN(churnKinds))
			}
		}
		flows = append(flows, cf)
		begin(cf)
	}
	// reexecute runs again each Root whose first execution has ended,
	// while the step APIs of that execution are kept.
	reexecute := func() {
		for _, cf := range flows {
			if cf.round > 0 {
				continue
			}
			select {
			case res := <-cf.ch:
				cf.res = append(cf.res, fmt.Sprint(res.Args, res.Err))
				cf.round++
				begin(cf)
			default:
			}
		}
	}
	// Flows start in waves, so that later ones reuse the frames of the
	// earlier ones while some of those still run.
	for id := range n {
		start(id)
		for range id % 7 {
			tt.NextEvent()
			stale.flush()
			reexecute()
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if poke {
		// Another goroutine calls them too, while the tool runs.
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				if as := stale.pick(rng); as != nil {
					staleCalls[rng.IntN(len(staleCalls))](as, mu)
				}
				time.Sleep(10 * time.Microsecond) // leave the cores to the tool
			}
		})
	}
	for events := 0; ; events++ {
		if events > maxEvents {
			t.Fatalf("still running after %d events", maxEvents)
		}
		ran := tt.NextEvent()
		stale.flush()
		if !ran {
			reexecute()
			if !tt.HasEvents() {
				break
			}
		}
		reexecute()
	}
	close(done)
	wg.Wait()
	for _, cf := range flows {
		res := result(t, cf.ch)
		cf.res = append(cf.res, fmt.Sprint(res.Args, res.Err))
	}
	return flows
}

// addChurnStep adds to r the top-level step name of kind k.
func addChurnStep(r *asyncsteps.Root, cf *churnFlow, name string, k int, tt *asyncsteps.TestTool,
	mu *asyncsteps.Mutex, stale *staleSet, pokeNow func()) {
	leaf := func(name string) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.Success(name)
			stale.keep(as)
		}
	}
	switch k {
	case churnLeaf:
		r.Add(leaf(name))
	case churnNested:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.Add(leaf(name + ".a")).Add(leaf(name + ".b"))
		})
	case churnWait:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.WaitExternal()
			tt.Immediate(func() {
				pokeNow()
				as.Success(name)
				stale.keep(as)
			})
		})
	case churnTimeout:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.SetCancel(func(asyncsteps.AsyncSteps) { cf.add("%s cancelled", name) })
			as.SetTimeout(5 * time.Millisecond)
			late := time.Duration(2+6*(cf.id%2)) * time.Millisecond
			tt.Deferred(late, func() {
				pokeNow()
				as.Success(name)
				stale.keep(as)
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			pokeNow()
			cf.add("%s handler %s", name, code)
			as.Success(name + " timed out")
			stale.keep(as)
		})
	case churnError:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			stale.keep(as)
			as.Error("E", name)
		}, func(as asyncsteps.AsyncSteps, code string) {
			pokeNow()
			cf.add("%s handler %s %s", name, code, as.State().ErrorInfo)
			as.Success(name + " handled")
			stale.keep(as)
		})
	case churnParallel:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			p := as.Parallel()
			p.Add(leaf(name + ".p0"))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				pokeNow()
				as.Add(leaf(name + ".p1"))
			})
		})
	case churnRepeat:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
				pokeNow()
				cf.add("%s.%d", name, i)
				stale.keep(as)
				if i == 1 {
					as.Continue()
				}
			})
		})
	case churnSync:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) {
				pokeNow()
				as.WaitExternal()
				tt.Deferred(time.Millisecond, func() {
					as.Success(name + " synced")
					stale.keep(as)
				})
			})
		})
	case churnCancel:
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			pokeNow()
			cf.add("%s%v", name, args)
			as.SetCancel(func(as asyncsteps.AsyncSteps) {
				pokeNow()
				cf.add("%s cancelled", name)
				stale.keep(as)
			})
			r.Cancel()
		})
	}
}

// docs/DESIGN.md#stale-steps: a call on a step API whose step has
// completed has no effect on any flow. Hundreds of flows churn on one
// TestTool, each step's frame recycled for the steps of other flows, and
// each Root runs twice. The callbacks, between their own steps, and a
// goroutine of no flow call the kept step APIs of completed steps of any
// flow and execution: every flow records exactly the trace and result it
// records when nobody makes a stale call.
func TestStaleCallsInAChurnOfFlowsChangeNoFlow(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			want := churn(t, seed, 200, false)
			got := churn(t, seed, 200, true)
			wantSameChurn(t, want, got)
		})
	}
}

// wantSameChurn fails t for each flow whose record differs between a
// churn without stale calls (want) and the same churn with them (got).
func wantSameChurn[F interface{ outcome() (string, [2][]int) }](t *testing.T, want, got []F) {
	t.Helper()
	for i := range want {
		w, kinds := want[i].outcome()
		if g, _ := got[i].outcome(); g != w {
			t.Errorf("flow %d (kinds %v)\n got: %s\nwant: %s", i, kinds, g, w)
		}
	}
}
