package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The tests of every Syncer that list a KeyedMutex's key check that it
// behaves as the Mutex of the same row; these pin down what a Mutex has
// not: independent keys, and keys freed however their flows leave.

// wantKeysInUse fails the test unless obj, if the key of a
// KeyedMutex[string] or KeyedThrottle[string], leaves want keys in use.
func wantKeysInUse(t *testing.T, obj asyncsteps.Syncer, want int) {
	t.Helper()
	if n := asyncsteps.KeysInUse(obj); n >= 0 && n != want {
		t.Errorf("%d keys in use, want %d", n, want)
	}
}

// wantLen fails the test unless km, a KeyedMutex or a KeyedThrottle, has
// want keys in use.
func wantLen(t *testing.T, km interface{ Len() int }, when string, want int) {
	t.Helper()
	if n := km.Len(); n != want {
		t.Errorf("%s: %d keys in use, want %d", when, n, want)
	}
}

// wantSuccesses fails the test unless every result is a success.
func wantSuccesses(t *testing.T, results []<-chan asyncsteps.Result) {
	t.Helper()
	for _, res := range results {
		wantSuccess(t, result(t, res))
	}
}

// Flows on one key take turns; flows on another go on at once. A key is in
// use while a flow holds or waits for it.
func TestKeyedMutexKeysAreIndependent(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	km := asyncsteps.NewKeyedMutex[string](1)
	var tr tracer
	var results []<-chan asyncsteps.Result
	for _, f := range []struct{ name, key string }{{"A", "a"}, {"B", "a"}, {"C", "b"}, {"D", "b"}, {"E", "a"}} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		km.Sync(r, f.key, holdStep(&tr, tt, f.name, 10*time.Millisecond))
		results = append(results, r.Promise())
	}
	tt.Advance(0)
	wantLen(t, km, "at 0", 2)
	tt.Advance(15 * time.Millisecond)
	wantLen(t, km, "at 15ms", 2) // B holds a, E waits for it; D holds b
	tt.Advance(10 * time.Millisecond)
	wantLen(t, km, "at 25ms", 1) // E holds a
	drive(t, tt)
	wantTrace(t, &tr, "A@0,C@0,B@10,D@10,E@20")
	wantSuccesses(t, results)
	wantLen(t, km, "at the end", 0)
}

// Every way a flow leaves frees its key once it was the last to hold or
// wait for it: success, error, panic, a timeout inside, a cancel inside, a
// full queue, a waiter cancelled or timed out, a reentrant Sync. The count
// of keys in use drops exactly as their last flow leaves.
func TestKeyedMutexFreesKeysHoweverFlowsLeave(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	km := asyncsteps.NewKeyedMutex[string](1, 1)
	var tr tracer
	hold := func(d time.Duration) asyncsteps.StepFunc { return syncPause(d) }
	type flow struct {
		name string
		r    *asyncsteps.Root
		want string // errText of its result
	}
	var flows []flow
	start := func(name, want string, build func(r *asyncsteps.Root)) *asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		build(r)
		flows = append(flows, flow{name, r, want})
		return r
	}
	start("success", "", func(r *asyncsteps.Root) { km.Sync(r, "success", hold(10*time.Millisecond)) })
	start("error", "Boom", func(r *asyncsteps.Root) {
		km.Sync(r, "error", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(hold(10 * time.Millisecond))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
		})
	})
	start("panic", "InternalError: oops", func(r *asyncsteps.Root) {
		km.Sync(r, "panic", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(hold(10 * time.Millisecond))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("oops") })
		})
	})
	start("timeout", "Timeout", func(r *asyncsteps.Root) {
		km.Sync(r, "timeout", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(5 * time.Millisecond)
			as.WaitExternal()
		})
	})
	cancelled := start("cancel", "context canceled", func(r *asyncsteps.Root) {
		km.Sync(r, "cancel", func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	})
	start("queue holder", "", func(r *asyncsteps.Root) { km.Sync(r, "queue", hold(10*time.Millisecond)) })
	start("queue waiter", "", func(r *asyncsteps.Root) { km.Sync(r, "queue", hold(10*time.Millisecond)) })
	start("queue full", "DefenseRejected: Mutex queue limit", func(r *asyncsteps.Root) {
		km.Sync(r, "queue", tr.step("queue full:in"), tr.handler("queue full:onerror"))
	})
	start("waiter cancelled: holder", "", func(r *asyncsteps.Root) { km.Sync(r, "waiter cancelled", hold(10*time.Millisecond)) })
	waiter := start("waiter cancelled", "context canceled", func(r *asyncsteps.Root) {
		km.Sync(r, "waiter cancelled", tr.step("waiter cancelled:in"))
	})
	start("waiter timed out: holder", "", func(r *asyncsteps.Root) { km.Sync(r, "waiter timed out", hold(10*time.Millisecond)) })
	start("waiter timed out", "Timeout", func(r *asyncsteps.Root) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(5 * time.Millisecond)
			km.Sync(as, "waiter timed out", tr.step("waiter timed out:in"))
		})
	})
	start("reentrant", "", func(r *asyncsteps.Root) {
		km.Sync(r, "reentrant", func(as asyncsteps.AsyncSteps, _ ...any) {
			km.Sync(as, "reentrant", func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("reentrant:in twice")
				as.Add(hold(10 * time.Millisecond))
			})
		})
	})
	results := make([]<-chan asyncsteps.Result, len(flows))
	for i, f := range flows {
		results[i] = f.r.Promise()
	}

	tt.Advance(0)
	wantTrace(t, &tr, "queue full:onerror:DefenseRejected,reentrant:in twice")
	wantLen(t, km, "at 0", 9)
	tt.Advance(5 * time.Millisecond)
	cancelled.Cancel()
	waiter.Cancel()
	tt.Advance(0)
	wantLen(t, km, "at 5ms", 7) // timeout and cancel are free; the others have holders
	tt.Advance(5 * time.Millisecond)
	wantLen(t, km, "at 10ms", 1) // the queue's waiter holds it now
	drive(t, tt)
	wantLen(t, km, "at the end", 0)
	for i, f := range flows {
		if got := errText(result(t, results[i]).Err); got != f.want {
			t.Errorf("%s ended with %q, want %q", f.name, got, f.want)
		}
	}
	wantTrace(t, &tr, "queue full:onerror:DefenseRejected,reentrant:in twice")
}

// A flow refused by a full queue lets go of its key at once, not once the
// error handler given to Sync has finished: here it recovers by waiting
// 30ms, while the holder leaves at 10ms and the key is free then.
func TestKeyedMutexRefusedFlowFreesItsKeyAtOnce(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	km := asyncsteps.NewKeyedMutex[string](1, 0)
	var tr tracer
	holder := asyncsteps.New(asyncsteps.WithTool(tt))
	km.Sync(holder, "a", holdStep(&tr, tt, "holder", 10*time.Millisecond))
	refused := asyncsteps.New(asyncsteps.WithTool(tt))
	km.Sync(refused, "a", tr.step("refused:in"), func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("refused:%s:%s@%d", code, as.State().ErrorInfo, at(tt))
		as.Add(syncPause(30 * time.Millisecond))
	})
	hRes, rRes := holder.Promise(), refused.Promise()
	tt.Advance(0)
	wantLen(t, km, "at 0", 1)
	tt.Advance(15 * time.Millisecond)
	wantLen(t, km, "at 15ms, the refused flow's handler still waiting", 0)
	drive(t, tt)
	wantTrace(t, &tr, "holder@0,refused:DefenseRejected:Mutex queue limit@0")
	wantSuccess(t, result(t, hRes))
	wantSuccess(t, result(t, rRes))
}

// A Loop that closes gives back the keys its flows hold or wait for; a key
// that a flow of another tool holds stays in use, and its waiter on the
// closed Loop leaves its queue.
func TestKeyedMutexLoopCloseFreesKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		km := asyncsteps.NewKeyedMutex[string](1)
		var tr tracer
		outside := asyncsteps.New(asyncsteps.WithTool(tt))
		km.Sync(outside, "shared", holdStep(&tr, tt, "outside", 10*time.Millisecond))
		oRes := outside.Promise()
		tt.Advance(0)

		l := asyncsteps.NewLoop()
		var onLoop []<-chan asyncsteps.Result
		for _, key := range []string{"a", "a", "b", "shared"} {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			km.Sync(r, key, func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
			onLoop = append(onLoop, r.Promise())
		}
		synctest.Wait()
		wantLen(t, km, "before the close", 3)
		l.Close()
		wantLen(t, km, "after the close", 1)
		for _, res := range onLoop {
			wantError(t, result(t, res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		}
		drive(t, tt)
		wantSuccess(t, result(t, oRes))
		wantLen(t, km, "at the end", 0)
		wantTrace(t, &tr, "outside@0")
	})
}

// Flows on several Loops share a KeyedMutex: per key, one flow at a time is
// inside, every flow enters once, and no key is left in use once they
// have ended, whatever their outcome: success, an error, a reentrant Sync,
// or a timeout inside whose Await function keeps the key until it returns
// on its own goroutine. Run with -race.
func TestKeyedMutexOnALoopGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const loops, flows, keys = 4, 400, 7
		g := asyncsteps.NewLoopGroup(loops)
		defer g.Close()
		km := asyncsteps.NewKeyedMutex[int](1)
		var inside [keys]atomic.Int32
		var entered, overlaps atomic.Int32
		enter := func(key int) {
			entered.Add(1)
			if inside[key].Add(1) != 1 {
				overlaps.Add(1)
			}
		}
		results := make([]<-chan asyncsteps.Result, flows)
		for i := range flows {
			key := i % keys
			r := g.New()
			km.Sync(r, key, func(as asyncsteps.AsyncSteps, _ ...any) {
				enter(key)
				switch i % 4 {
				case 0: // success after a wait
					as.Add(syncPause(time.Millisecond))
				case 1: // an error
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
				case 2: // reentrant
					km.Sync(as, key, syncPause(time.Millisecond))
				case 3: // a timeout while an Await function runs
					as.SetTimeout(time.Millisecond)
					as.Await(func(ctx context.Context) (any, error) {
						<-ctx.Done()
						inside[key].Add(-1) // its slot comes back after this
						return nil, nil
					})
					return
				}
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { inside[key].Add(-1) })
			}, func(as asyncsteps.AsyncSteps, code string) {
				if i%4 == 1 {
					inside[key].Add(-1)
				}
				as.Success()
			})
			results[i] = r.Promise()
		}
		for i, res := range results {
			if err := (<-res).Err; err != nil {
				t.Errorf("flow %d: %v", i, err)
			}
		}
		synctest.Wait() // the Await functions have returned
		if n := entered.Load(); n != flows {
			t.Errorf("%d flows entered, want %d", n, flows)
		}
		if n := overlaps.Load(); n != 0 {
			t.Errorf("%d entries while another flow held the key", n)
		}
		wantLen(t, km, "at the end", 0)
	})
}

// A key that is not comparable (an interface holding a slice) or not equal
// to itself (NaN) could never be found again: the step that would enter
// fails with InternalError, before onerror or f run, and no key is kept.
func TestKeyedMutexKeyMisuse(t *testing.T) {
	checkKeyMisuse(t, "KeyedMutex", asyncsteps.NewKeyedMutex[any](1), asyncsteps.NewKeyedMutex[float64](1))
}

// keyedSyncer is the method set that KeyedMutex, KeyedThrottle and
// KeyedLimiter share for a key type K.
type keyedSyncer[K comparable] interface {
	Sync(as asyncsteps.AsyncSteps, key K, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc)
	Key(key K) asyncsteps.Syncer
	Len() int
}

// checkKeyMisuse syncs on keys that cannot be map keys (an interface
// holding a slice) or are not equal to themselves (NaN), through Sync and
// through Key, and checks that each step fails with InternalError and the
// info of typeName before onerror or f run, and that no key is kept.
func checkKeyMisuse(t *testing.T, typeName string, anyKeys keyedSyncer[any], floatKeys keyedSyncer[float64]) {
	t.Helper()
	notComparable := typeName + ": key not comparable: runtime error: comparing uncomparable type []int"
	nan := typeName + ": key not equal to itself (NaN)"
	cases := []struct {
		name string
		sync func(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc)
		info string
	}{
		{"Sync of a slice", func(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc) {
			anyKeys.Sync(as, []int{1}, f, onerror)
		}, notComparable},
		{"AsyncSteps.Sync of the Key of a slice", func(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc) {
			as.Sync(anyKeys.Key([]int{1}), f, onerror)
		}, notComparable},
		{"Sync of NaN", func(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc) {
			floatKeys.Sync(as, math.NaN(), f, onerror)
		}, nan},
		{"Sync of NaN in an interface", func(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc) {
			anyKeys.Sync(as, math.NaN(), f, onerror)
		}, nan},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				c.sync(as, tr.step("f"), tr.handler("onerror"))
			}, tr.handler("step onerror"))
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
			wantTrace(t, &tr, "step onerror:InternalError")
			wantLen(t, anyKeys, "after", 0)
			wantLen(t, floatKeys, "after", 0)
		})
	}
}

// NewKeyedMutex refuses a max below 1 as NewMutex does.
func TestNewKeyedMutexPanicsBelowOne(t *testing.T) {
	for _, max := range []int{0, -1} {
		func() {
			defer func() {
				if p := recover(); p != "asyncsteps: NewKeyedMutex: max must be at least 1" {
					t.Errorf("NewKeyedMutex(%d) panicked with %v", max, p)
				}
			}()
			asyncsteps.NewKeyedMutex[string](max)
		}()
	}
}

// Sync with a nil AsyncSteps panics as Mutex.Sync does: there is no flow
// to fail.
func TestKeyedMutexSyncNilAsPanicsAsMutex(t *testing.T) {
	panicOf := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	step := func(asyncsteps.AsyncSteps, ...any) {}
	want := fmt.Sprint(panicOf(func() { asyncsteps.NewMutex(1).Sync(nil, step) }))
	got := fmt.Sprint(panicOf(func() { asyncsteps.NewKeyedMutex[string](1).Sync(nil, "a", step) }))
	if got != want || want == "<nil>" {
		t.Errorf("KeyedMutex.Sync(nil) panicked with %q, Mutex.Sync(nil) with %q", got, want)
	}
}

// A SyncWait hook is told of the key's Syncer: equal to what Key returns
// for the key, so a hook can name it, while other keys' are not.
func TestKeyedMutexSyncWaitNamesTheKey(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	km := asyncsteps.NewKeyedMutex[string](1)
	var tr tracer
	tt.SetHooks(&asyncsteps.Hooks{SyncWait: func(obj asyncsteps.Syncer, waited time.Duration) {
		tr.addf("waited %v for a:%v b:%v", waited, obj == km.Key("a"), obj == km.Key("b"))
	}})
	a, b := km.Key("a"), km.Key("a")
	if a != b || a == km.Key("b") {
		t.Errorf("Key(a) == Key(a): %v, Key(a) == Key(b): %v", a == b, a == km.Key("b"))
	}
	var results []<-chan asyncsteps.Result
	for i, obj := range []asyncsteps.Syncer{a, b} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(obj, holdStep(&tr, tt, fmt.Sprint("flow", i), 10*time.Millisecond))
		results = append(results, r.Promise())
	}
	drive(t, tt)
	wantTrace(t, &tr, "flow0@0,waited 10ms for a:true b:false,flow1@10")
	wantSuccesses(t, results)
	wantLen(t, km, "at the end", 0)
}

// The Syncer of a key of a nil KeyedMutex is a nil Syncer (see
// TestNilSyncerPointersAreMisuse); a KeyedMutex's Sync with more than one
// error handler is refused as a Mutex's is.
func TestKeyedMutexSyncExtraHandlers(t *testing.T) {
	var tr tracer
	km := asyncsteps.NewKeyedMutex[string](1)
	m := asyncsteps.NewMutex(1)
	var infos []string
	for _, sync := range []func(as asyncsteps.AsyncSteps){
		func(as asyncsteps.AsyncSteps) { m.Sync(as, tr.step("in"), tr.handler("1"), tr.handler("2")) },
		func(as asyncsteps.AsyncSteps) { km.Sync(as, "a", tr.step("in"), tr.handler("1"), tr.handler("2")) },
	} {
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { sync(as) })
		err := run(t, r, tt).Err
		var e *asyncsteps.Error
		if !errors.As(err, &e) || e.Code != asyncsteps.InternalError {
			t.Fatalf("got %v, want an InternalError", err)
		}
		infos = append(infos, e.Info)
	}
	if infos[0] != infos[1] {
		t.Errorf("KeyedMutex's info %q, Mutex's %q", infos[1], infos[0])
	}
	wantTrace(t, &tr, "")
	wantLen(t, km, "after", 0)
}

// Keys free however the engine's other constructs wrap or end their
// sections: Parallel branches that take turns on one key, ForEachLimit
// items on keys that some share, Retry attempts that time out inside, a
// Parallel branch of a holder that would deadlock on its key, and a
// runtime.Goexit inside.
func TestKeyedMutexKeysInBranchesItemsAndRetries(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	km := asyncsteps.NewKeyedMutex[string](1)
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	p := r.Parallel()
	for _, name := range []string{"P1", "P2", "P3"} {
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			km.Sync(as, "p", holdStep(&tr, tt, name, 10*time.Millisecond))
		})
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		items := []string{"x", "x", "y", "x"} // three turns on x, one on y
		asyncsteps.ForEachLimit(as, slices.All(items), len(items), func(as asyncsteps.AsyncSteps, i int, key string) {
			km.Sync(as, key, holdStep(&tr, tt, fmt.Sprint("item", i, key), 10*time.Millisecond))
		})
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Timeout: 5 * time.Millisecond}, func(as asyncsteps.AsyncSteps, i int) {
			km.Sync(as, "r", func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.addf("retry%d@%d", i, at(tt))
				if i < 2 {
					as.WaitExternal() // times out, inside
				}
			})
		})
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		km.Sync(as, "d", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				km.Sync(as, "d", tr.step("deadlocked:in"))
			})
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("deadlock:%s:%s %d keys", code, as.State().ErrorInfo, km.Len())
		as.Success()
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "P1@0,P2@10,P3@20,item0x@30,item2y@30,item1x@40,item3x@50,retry0@60,retry1@65,retry2@70,"+
		"deadlock:InternalError:Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it 0 keys")
	wantLen(t, km, "at the end", 0)

	synctest.Test(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		r := asyncsteps.New(asyncsteps.WithTool(l))
		km.Sync(r, "g", func(as asyncsteps.AsyncSteps, _ ...any) { runtime.Goexit() })
		wantError(t, (<-r.Promise()).Err, asyncsteps.InternalError,
			"runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)")
		wantLen(t, km, "after a Goexit", 0)
	})
}

// An Await function started inside nested sections (a, then b, then a
// again) keeps both keys after its flow has left them on a timeout: a
// flow that comes for a waits until the function returns, and both keys
// are freed then. A Loop that closes while such a function runs gives
// back what its flows wait for at once, and the key held for the
// function once it returns.
func TestKeyedMutexKeysKeptForAwaitFunctions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		km := asyncsteps.NewKeyedMutex[string](1)
		var tr tracer
		release := make(chan struct{})
		block := func(ctx context.Context) (any, error) { <-release; return nil, nil }
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(5 * time.Millisecond)
			km.Sync(as, "a", func(as asyncsteps.AsyncSteps, _ ...any) {
				km.Sync(as, "b", func(as asyncsteps.AsyncSteps, _ ...any) {
					km.Sync(as, "a", func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(block) })
				})
			})
		}, tr.handler("nested"))
		rRes := r.Promise()
		drive(t, tt)
		wantLen(t, km, "the flow timed out, its function runs", 2)
		next := asyncsteps.New(asyncsteps.WithTool(tt))
		km.Sync(next, "a", tr.step("next:in"))
		nRes := next.Promise()
		drive(t, tt)
		wantTrace(t, &tr, "nested:Timeout")
		close(release)
		synctest.Wait()
		drive(t, tt)
		wantTrace(t, &tr, "nested:Timeout,next:in")
		wantError(t, result(t, rRes).Err, asyncsteps.Timeout, "")
		wantSuccess(t, result(t, nRes))
		wantLen(t, km, "at the end", 0)

		l := asyncsteps.NewLoop()
		release = make(chan struct{})
		holder := asyncsteps.New(asyncsteps.WithTool(l))
		km.Sync(holder, "c", func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(block) })
		waiter := asyncsteps.New(asyncsteps.WithTool(l))
		km.Sync(waiter, "c", tr.step("waiter:in"))
		hRes, wRes := holder.Promise(), waiter.Promise()
		synctest.Wait()
		l.Close()
		for _, res := range []<-chan asyncsteps.Result{hRes, wRes} {
			wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		}
		wantLen(t, km, "closed, the function runs", 1)
		close(release)
		synctest.Wait()
		wantLen(t, km, "the function returned", 0)
		wantTrace(t, &tr, "nested:Timeout,next:in")
	})
}

// cancelRefusing is a decorator of a step whose SetCancel panics, as a
// foreign table without set_cancel aborts its step.
type cancelRefusing struct{ asyncsteps.AsyncSteps }

func (w cancelRefusing) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(cancelRefusing{as}, args...) }, onerror...)
	return w
}

func (cancelRefusing) SetCancel(asyncsteps.CancelFunc) { panic("no cancel handler") }

// A section entered through an AsyncSteps whose SetCancel panics fails
// its step with nothing to cancel: the key it counted itself in as it
// began is let go of too, and the next flow on the key enters it.
func TestKeyedMutexFreesTheKeyOfASectionThatCannotSetItsCancel(t *testing.T) {
	km := asyncsteps.NewKeyedMutex[string](1)
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		km.Sync(cancelRefusing{as}, "a", tr.step("refused:in"), tr.handler("refused:onerror"))
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("step onerror:%s:%s", code, as.State().ErrorInfo)
		as.Success()
	})
	wantSuccess(t, run(t, r, tt))
	wantLen(t, km, "after the refused section", 0)
	next, tt := newFlow()
	km.Sync(next, "a", tr.step("next:in"))
	wantSuccess(t, run(t, next, tt))
	wantTrace(t, &tr, "step onerror:InternalError:no cancel handler,next:in")
	wantLen(t, km, "at the end", 0)
}

// BenchmarkKeyedMutexSync measures a flow that enters and leaves a free
// slot of a key, next to BenchmarkMutexSyncUncontended: with a Mutex(2)
// and a KeyedMutex(2) whose key another flow holds (the key is in use),
// and with a key that nobody uses (made and dropped at each Sync).
func BenchmarkKeyedMutexSync(b *testing.B) {
	section := func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(1) }
	wait := func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }
	m := asyncsteps.NewMutex(2)
	km := asyncsteps.NewKeyedMutex[string](2)
	key := km.Key("in use")
	cases := []struct {
		name string
		hold func(r *asyncsteps.Root) // holds the other slot, if not nil
		sync func(r *asyncsteps.Root)
	}{
		{"Mutex", func(r *asyncsteps.Root) { r.Sync(m, wait) }, func(r *asyncsteps.Root) { r.Sync(m, section) }},
		{"KeyedMutex.Sync", func(r *asyncsteps.Root) { km.Sync(r, "in use", wait) },
			func(r *asyncsteps.Root) { km.Sync(r, "in use", section) }},
		{"Key", func(r *asyncsteps.Root) { r.Sync(key, wait) }, func(r *asyncsteps.Root) { r.Sync(key, section) }},
		{"KeyedMutex.Sync new key", nil, func(r *asyncsteps.Root) { km.Sync(r, "new", section) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tt := asyncsteps.NewTestTool()
			if c.hold != nil {
				holder := asyncsteps.New(asyncsteps.WithTool(tt))
				c.hold(holder)
				holder.Execute()
				tt.Run()
				defer func() { holder.Cancel(); tt.Run() }()
			}
			b.ReportAllocs()
			for b.Loop() {
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				c.sync(r)
				r.Execute()
				tt.Run()
			}
		})
	}
}
