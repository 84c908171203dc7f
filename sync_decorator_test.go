package asyncsteps_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// decoratedSteps is a decorator as a user writes one, to log what a step
// does, say: each step it adds receives a decoratedSteps of the engine's
// AsyncSteps, and Unwrap gives the wrapped one back.
type decoratedSteps struct{ asyncsteps.AsyncSteps }

func (w decoratedSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(decoratedSteps{as}, args...) }, onerror...)
	return w
}

func (w decoratedSteps) Unwrap() asyncsteps.AsyncSteps { return w.AsyncSteps }

// A Mutex lets a flow that holds it enter again also when Sync is given a
// decorator of the flow's AsyncSteps: the Syncer's own Sync on the
// decorator, and AsyncSteps.Sync, which the decorator passes on to the
// engine's AsyncSteps, count as the same flow. Another flow, which asks
// while the first is inside, waits until it has left every level.
func TestMutexReentersThroughADecorator(t *testing.T) {
	syncers := []struct {
		name string
		obj  asyncsteps.Syncer
	}{
		{"Mutex", asyncsteps.NewMutex(1)},
		{"KeyedMutex", asyncsteps.NewKeyedMutex[string](1).Key("a")},
		{"Limiter", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 1})},
		{"KeyedLimiter", asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 1}).Key("a")},
	}
	for _, s := range syncers {
		t.Run(s.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			tr := &tracer{}
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second) // ends a deadlock
				s.obj.Sync(decoratedSteps{as}, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:level 1")
					s.obj.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
						tr.add("A:level 2")
						as.Sync(s.obj, func(as asyncsteps.AsyncSteps, _ ...any) {
							tr.add("A:level 3")
							syncSleep(as, 10*time.Millisecond)
						})
					})
					as.Add(tr.step("A:back at level 1"))
				})
			}, tr.handler("A:onerror"))
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) { syncSleep(as, time.Millisecond) })
			b.Sync(s.obj, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", syncElapsed(tt)) })
			aRes, bRes := a.Promise(), b.Promise()
			drive(t, tt)
			wantTrace(t, tr, "A:level 1,A:level 2,A:level 3,A:back at level 1,B:in@10ms")
			wantSuccess(t, result(t, aRes))
			wantSuccess(t, result(t, bRes))
			syncWantIdle(t, tt)
			wantKeysInUse(t, s.obj, 0)
		})
	}
}

// syncSleep makes the step of as wait d on its Tool.
func syncSleep(as asyncsteps.AsyncSteps, d time.Duration) {
	as.WaitExternal()
	as.Tool().Deferred(d, func() { as.Success() })
}

// A deadlock through Parallel is detected for a decorator's flow too: the
// flow holds the Mutex, and its branch, which the decorator adds, waits for
// it.
func TestMutexDeadlockThroughADecorator(t *testing.T) {
	const info = "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"
	r, tt := newFlow()
	m := asyncsteps.NewMutex(1)
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second) // ends a deadlock that goes undetected
		m.Sync(decoratedSteps{as}, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("flow:in")
			m.Sync(decoratedSteps{as.Parallel()}, tr.step("branch:in"), func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("branch:onerror:%s:%s", code, as.State().ErrorInfo)
			})
		})
	}, tr.handler("flow:onerror"))
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, info)
	wantTrace(t, tr, "flow:in,branch:onerror:InternalError:"+info+",flow:onerror:InternalError")
	syncWantIdle(t, tt)
}

// A decorator that does not give back what it wraps cannot be told from
// another flow: a Sync nested in its critical section waits for that
// section, here until the step's timeout. So does one whose Unwrap gives
// nothing, itself, or a step that has completed; none of them hangs the
// loop or panics.
func TestMutexCannotReenterWithoutUnwrap(t *testing.T) {
	decorators := []struct {
		name     string
		decorate func(as, kept asyncsteps.AsyncSteps) asyncsteps.AsyncSteps
	}{
		{"no Unwrap", func(as, _ asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return foreignSteps{as} }},
		{"nil", func(as, _ asyncsteps.AsyncSteps) asyncsteps.AsyncSteps {
			return oddSteps{as, func(oddSteps) asyncsteps.AsyncSteps { return nil }}
		}},
		{"itself", func(as, _ asyncsteps.AsyncSteps) asyncsteps.AsyncSteps {
			return oddSteps{as, func(w oddSteps) asyncsteps.AsyncSteps { return w }}
		}},
		{"a completed step", func(as, kept asyncsteps.AsyncSteps) asyncsteps.AsyncSteps {
			return oddSteps{as, func(oddSteps) asyncsteps.AsyncSteps { return kept }}
		}},
	}
	for _, w := range decorators {
		t.Run(w.name, func(t *testing.T) {
			r, tt := newFlow()
			m := asyncsteps.NewMutex(1)
			tr := &tracer{}
			var kept asyncsteps.AsyncSteps
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { kept = as })
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				m.Sync(w.decorate(as, kept), func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.addf("level 1@%v", syncElapsed(tt))
					m.Sync(as, tr.step("level 2"))
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("onerror:%s@%v", code, syncElapsed(tt))
			})
			wantCode(t, run(t, r, tt).Err, asyncsteps.Timeout)
			wantTrace(t, tr, "level 1@0s,onerror:Timeout@1s")
			syncWantIdle(t, tt)
		})
	}
}

// oddSteps is a decorator whose Unwrap is unwrap.
type oddSteps struct {
	asyncsteps.AsyncSteps
	unwrap func(w oddSteps) asyncsteps.AsyncSteps
}

func (w oddSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(oddSteps{as, w.unwrap}, args...) }, onerror...)
	return w
}

func (w oddSteps) Unwrap() asyncsteps.AsyncSteps { return w.unwrap(w) }

// Two flows whose decorators unwrap to one step that has completed are not
// taken for one flow: the second waits for the first to leave.
func TestMutexIgnoresACompletedStepUnwrapped(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1)
	tr := &tracer{}
	var kept asyncsteps.AsyncSteps
	stale := func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps {
		return oddSteps{as, func(oddSteps) asyncsteps.AsyncSteps { return kept }}
	}
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) { kept = as })
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(stale(as), func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A:in")
			syncSleep(as, 10*time.Millisecond)
		})
	})
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) { syncSleep(as, time.Millisecond) })
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(stale(as), func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", syncElapsed(tt)) })
	})
	aRes, bRes := a.Promise(), b.Promise()
	drive(t, tt)
	wantTrace(t, tr, "A:in,B:in@10ms")
	wantSuccess(t, result(t, aRes))
	wantSuccess(t, result(t, bRes))
	syncWantIdle(t, tt)
}

// An Unwrap that panics fails the step that called it, as any user code in
// a callback does, and leaves the Mutex free.
func TestMutexUnwrapPanicFailsTheStep(t *testing.T) {
	r, tt := newFlow()
	m := asyncsteps.NewMutex(1)
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(oddSteps{as, func(oddSteps) asyncsteps.AsyncSteps { panic("no unwrap") }}, tr.step("in"))
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("onerror:%s:%s", code, as.State().ErrorInfo)
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "no unwrap")
	wantTrace(t, tr, "onerror:InternalError:no unwrap")
	r2 := asyncsteps.New(asyncsteps.WithTool(tt))
	r2.Sync(m, tr.step("free"))
	wantSuccess(t, run(t, r2, tt))
	syncWantIdle(t, tt)
}

// What the engine does for the flow inside a critical section it does for
// a decorator's flow too: a SyncWait hook sees its wait, and an Await
// function started inside keeps the slot until it returns, after the
// step's timeout has let the flow go on.
func TestDecoratorSectionIsObservedAndCountsItsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		elapsed := stopwatch(tt)
		tr := &tracer{}
		tt.SetHooks(&asyncsteps.Hooks{SyncWait: func(_ asyncsteps.Syncer, d time.Duration) {
			tr.addf("SyncWait %v", d)
		}})
		m := asyncsteps.NewMutex(1)
		release := make(chan struct{})

		holder := asyncsteps.New(asyncsteps.WithTool(tt))
		holder.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { syncSleep(as, 10*time.Millisecond) })
		a := asyncsteps.New(asyncsteps.WithTool(tt))
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			m.Sync(decoratedSteps{as}, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.addf("A:in@%v", elapsed())
				as.SetTimeout(20 * time.Millisecond)
				as.Await(slowCall(tr, "A", release))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("A:onerror:%s@%v", code, elapsed())
				as.Success()
			})
		})
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		b.Add(func(as asyncsteps.AsyncSteps, _ ...any) { syncSleep(as, 15*time.Millisecond) })
		b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", elapsed()) })
		results := []<-chan asyncsteps.Result{holder.Promise(), a.Promise(), b.Promise()}

		tt.Advance(10 * time.Millisecond)
		synctest.Wait() // A's call has started and blocks
		tt.Advance(time.Second)
		wantTrace(t, tr, "SyncWait 10ms,A:in@10ms,A:call,A:onerror:Timeout@30ms")

		close(release)
		synctest.Wait() // the call has returned
		drive(t, tt)
		wantTrace(t, tr, "SyncWait 10ms,A:in@10ms,A:call,A:onerror:Timeout@30ms,A:return,SyncWait 995ms,B:in@1.01s")
		for _, res := range results {
			wantSuccess(t, result(t, res))
		}
		syncWantIdle(t, tt)
	})
}

// A Loop that closes gives back the Mutex slot of a decorator's flow inside
// a critical section, as it does for the engine's own, and stops the
// goroutine of an AwaitChan that the decorator added.
func TestClosedLoopReleasesWhatADecoratorHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer other.Close()
		m := asyncsteps.NewMutex(1)
		tr := &tracer{}

		a := asyncsteps.New(asyncsteps.WithTool(closing))
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			m.Sync(decoratedSteps{as}, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("A:in")
				asyncsteps.AwaitChan(as, make(chan int)) // never delivers
			})
		})
		aRes := a.Promise()
		synctest.Wait()
		b := asyncsteps.New(asyncsteps.WithTool(other))
		b.Sync(m, tr.step("B:in"))
		bRes := b.Promise()
		synctest.Wait()
		wantTrace(t, tr, "A:in")

		closing.Close()
		synctest.Wait()
		wantError(t, result(t, aRes).Err, asyncsteps.InternalError, "the flow's loop is closed")
		wantSuccess(t, result(t, bRes))
		wantTrace(t, tr, "A:in,B:in")
	})
}

// Retry on a decorator adds its loop to the step the decorator wraps, after
// what the decorator added: each attempt receives the engine's AsyncSteps.
func TestRetryThroughADecorator(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		w := decoratedSteps{as}
		w.Add(tr.step("before"))
		next := asyncsteps.Retry(w, asyncsteps.RetryOptions{Attempts: 3}, func(as asyncsteps.AsyncSteps, i int) {
			_, decorated := as.(decoratedSteps)
			tr.addf("attempt %d decorated=%v", i, decorated)
			if i < 2 {
				as.Error(asyncsteps.CommError, "down")
			}
			as.Success("up")
		})
		next.Add(tr.stepArgs("after"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "before,attempt 0 decorated=false,attempt 1 decorated=false,attempt 2 decorated=false,after[up]")
}

// loopBoundSteps is a decorator whose Success and Tool refuse, by a panic,
// to run off the goroutine of its flow's Loop: a decorator that keeps a
// log its loop alone writes, say.
type loopBoundSteps struct {
	asyncsteps.AsyncSteps
	loop *asyncsteps.Loop
}

func (w loopBoundSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(loopBoundSteps{as, w.loop}, args...) }, onerror...)
	return w
}

func (w loopBoundSteps) Unwrap() asyncsteps.AsyncSteps { return w.AsyncSteps }

func (w loopBoundSteps) Success(args ...any) {
	w.onLoop("Success")
	w.AsyncSteps.Success(args...)
}

func (w loopBoundSteps) Tool() asyncsteps.Tool {
	w.onLoop("Tool")
	return w.AsyncSteps.Tool()
}

func (w loopBoundSteps) onLoop(method string) {
	if !w.loop.IsSameThread() {
		panic(method + " called off the flow's loop")
	}
}

// A gate lets a decorator's flow in from whatever goroutine gives a slot
// back or ends a period, here a callback of a flow on another Loop. It
// runs none of the decorator's methods there, with a SyncWait hook or
// without: the decorator's Success completes its step on its own loop.
// (The decorator's Success, and with the hook its Tool, ran in the other
// flow's callback: their panic failed that flow, and the decorator's flow,
// let in but never resumed, held the slot for good.)
func TestGateLetsADecoratorsFlowInOnItsOwnLoop(t *testing.T) {
	gates := []struct {
		name string
		obj  func() asyncsteps.Syncer
	}{
		{"Mutex", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) }},
		{"Limiter", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 1})
		}},
		{"Throttle", func() asyncsteps.Syncer { return asyncsteps.NewThrottle(1, 10*time.Millisecond) }},
		{"KeyedThrottle", func() asyncsteps.Syncer { return asyncsteps.NewKeyedThrottle[string](1, 10*time.Millisecond).Key("a") }},
	}
	for _, g := range gates {
		for _, hooked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hooked=%v", g.name, hooked), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					holderLoop, loop := asyncsteps.NewLoop(), asyncsteps.NewLoop()
					defer holderLoop.Close()
					defer loop.Close()
					tr := &tracer{}
					if hooked {
						loop.SetHooks(&asyncsteps.Hooks{SyncWait: func(_ asyncsteps.Syncer, d time.Duration) {
							tr.addf("SyncWait %v", d)
						}})
					}
					obj := g.obj()
					holder := asyncsteps.New(asyncsteps.WithTool(holderLoop))
					holder.Sync(obj, func(as asyncsteps.AsyncSteps, _ ...any) {
						tr.add("holder:in")
						syncSleep(as, 10*time.Millisecond)
					})
					holderRes := holder.Promise()
					synctest.Wait()
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						obj.Sync(loopBoundSteps{as, loop}, tr.step("decorated:in"))
					})
					res := r.Promise()

					time.Sleep(time.Second)
					synctest.Wait()

					want := "holder:in,decorated:in"
					if hooked {
						want = "holder:in,SyncWait 10ms,decorated:in"
					}
					wantTrace(t, tr, want)
					wantSuccess(t, result(t, holderRes))
					wantSuccess(t, result(t, res))
				})
			})
		}
	}
}

// A decorator's Success that panics as the gate lets its flow in fails the
// decorator's own step with InternalError, and the slot it was given comes
// back as its flow unwinds: the next flow enters. (The panic failed the
// flow that gave the slot back, and the slot stayed taken.)
func TestDecoratorSuccessPanicOnAdmissionFailsItsOwnStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		holderLoop, loop := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer holderLoop.Close()
		defer loop.Close()
		m := asyncsteps.NewMutex(1)
		tr := &tracer{}
		holder := asyncsteps.New(asyncsteps.WithTool(holderLoop))
		holder.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { syncSleep(as, 10*time.Millisecond) })
		holderRes := holder.Promise()
		synctest.Wait()
		panicky := asyncsteps.New(asyncsteps.WithTool(loop))
		panicky.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			m.Sync(panickySuccessSteps{as}, tr.step("panicky:in"))
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("panicky:onerror:%s:%s", code, as.State().ErrorInfo)
		})
		panickyRes := panicky.Promise()
		synctest.Wait()
		next := asyncsteps.New(asyncsteps.WithTool(loop)) // after panicky's handler, on its loop
		next.Sync(m, tr.step("next:in"))
		nextRes := next.Promise()

		time.Sleep(time.Second)
		synctest.Wait()

		const info = "panic: Success refused"
		wantTrace(t, tr, "panicky:onerror:InternalError:"+info+",next:in")
		wantSuccess(t, result(t, holderRes))
		wantError(t, result(t, panickyRes).Err, asyncsteps.InternalError, info)
		wantSuccess(t, result(t, nextRes))
	})
}

// panickySuccessSteps is a decorator whose Success panics.
type panickySuccessSteps struct{ asyncsteps.AsyncSteps }

func (w panickySuccessSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(panickySuccessSteps{as}, args...) }, onerror...)
	return w
}

func (w panickySuccessSteps) Unwrap() asyncsteps.AsyncSteps { return w.AsyncSteps }

func (panickySuccessSteps) Success(...any) { panic("Success refused") }

// A slot that an Await function kept after its flow left the section
// comes back from the function's goroutine as it returns; the decorator's
// flow it lets in is resumed on its own loop, so a decorator's Success
// that panics fails its own step. (It panicked on the function's
// goroutine, which nothing recovers: the process crashed.)
func TestDecoratorLetInByAnAwaitGoroutineCannotCrash(t *testing.T) {
	inChild(t, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			m := asyncsteps.NewMutex(1)
			tr := &tracer{}
			release := make(chan struct{})
			holder := asyncsteps.New(asyncsteps.WithTool(loop))
			holder.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Millisecond) // the flow leaves; the call keeps the slot
				as.Await(slowCall(tr, "holder", release))
			}, func(as asyncsteps.AsyncSteps, code string) { as.Success() })
			holderRes := holder.Promise()
			synctest.Wait()
			panicky := asyncsteps.New(asyncsteps.WithTool(loop))
			panicky.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				m.Sync(panickySuccessSteps{as}, tr.step("panicky:in"))
			}, tr.handler("panicky:onerror"))
			panickyRes := panicky.Promise()
			time.Sleep(time.Second)
			synctest.Wait()
			wantSuccess(t, result(t, holderRes))

			close(release)
			synctest.Wait()

			wantTrace(t, tr, "holder:call,holder:return,panicky:onerror:InternalError")
			wantError(t, result(t, panickyRes).Err, asyncsteps.InternalError, "panic: Success refused")
		})
	})
}

// AwaitChan, AwaitResult and AwaitFlow added through a decorator complete
// their step through the decorator's Success on the flow's loop, not on
// the goroutine that received the value: a decorator bound to its loop
// works, and one whose Success panics fails its own step with
// InternalError. (The goroutine, which nothing recovers, called it: the
// process crashed.)
func TestAwaitHelpersCompleteADecoratorOnItsLoop(t *testing.T) {
	for _, hp := range releasedAwaitHelpers {
		for _, panicky := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/panicky=%v", hp.name, panicky), func(t *testing.T) {
				inChild(t, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						loop := asyncsteps.NewLoop()
						defer loop.Close()
						tr := &tracer{}
						release := make(chan struct{})
						r := asyncsteps.New(asyncsteps.WithTool(loop))
						r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							var d asyncsteps.AsyncSteps = loopBoundSteps{as, loop}
							if panicky {
								d = panickySuccessSteps{as}
							}
							hp.add(d, release)
						}, func(as asyncsteps.AsyncSteps, code string) {
							tr.addf("onerror:%s:%s", code, as.State().ErrorInfo)
						})
						r.Add(tr.stepArgs("next"))
						res := r.Promise()
						synctest.Wait()

						close(release)
						time.Sleep(time.Second)
						synctest.Wait()

						if panicky {
							const info = "panic: Success refused"
							wantTrace(t, tr, "onerror:InternalError:"+info)
							wantError(t, result(t, res).Err, asyncsteps.InternalError, info)
							return
						}
						wantTrace(t, tr, "next[got]")
						wantSuccess(t, result(t, res))
					})
				})
			})
		}
	}
}

// Retry on a decorator of a Root, or of the value Parallel returns, adds
// its loop there, as on the Root or the Parallel itself. (It raised a
// misuse of Error on the Root, or on the Parallel, which named no Retry.)
func TestRetryThroughADecoratorOfARootOrAParallel(t *testing.T) {
	attempt := func(tr *tracer) asyncsteps.RepeatFunc {
		return func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("attempt %d", i)
			if i == 0 {
				as.Error(asyncsteps.CommError, "down")
			}
			as.Success("up")
		}
	}
	t.Run("Root", func(t *testing.T) {
		r, tt := newFlow()
		tr := &tracer{}
		next := asyncsteps.Retry(decoratedSteps{r}, asyncsteps.RetryOptions{Attempts: 2}, attempt(tr))
		next.Add(tr.stepArgs("after"))
		wantSuccess(t, run(t, r, tt))
		wantTrace(t, tr, "attempt 0,attempt 1,after[up]")
	})
	for _, decorated := range []bool{false, true} {
		t.Run(fmt.Sprintf("Parallel/decorated=%v", decorated), func(t *testing.T) {
			r, tt := newFlow()
			tr := &tracer{}
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel()
				if decorated {
					p = decoratedSteps{p}
				}
				asyncsteps.Retry(p, asyncsteps.RetryOptions{Attempts: 2}, attempt(tr))
				p.Add(tr.step("branch 2"))
			})
			r.Add(tr.step("after"))
			wantSuccess(t, run(t, r, tt))
			// The loop's first attempt is a level below its branch.
			wantTrace(t, tr, "branch 2,attempt 0,attempt 1,after")
		})
	}
}

// A Loop that closes stops the goroutine of an AwaitChan, AwaitResult or
// AwaitFlow added through a decorator without Unwrap too, found through
// the decorator's Tool: nothing is left waiting for a flow that is gone.
// (The goroutine waited on its channel for ever.)
func TestClosedLoopStopsTheAwaitChanOfADecoratorWithoutUnwrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		tr := &tracer{}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("waits")
			asyncsteps.AwaitChan(foreignSteps{as}, make(chan int)) // never delivers
		})
		res := r.Promise()
		synctest.Wait()

		loop.Close()
		synctest.Wait() // the bubble fails the test if the goroutine still waits

		wantTrace(t, tr, "waits")
		wantError(t, result(t, res).Err, asyncsteps.InternalError, "the flow's loop is closed")
	})
}
