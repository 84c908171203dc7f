package asyncsteps_test

import (
	"context"
	"errors"
	"iter"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A very heavy user: a million levels, branches or steps. Each case runs
// in a child process; it logs its time and memory per unit (go test -v).
// Under the race detector, which makes each step some ten times slower,
// the cases run at a fiftieth of the size.

// scaleTimeout is how long a scale case may run in its child: at 10^6, on
// a loaded machine, a minute is not enough.
const scaleTimeout = 5 * time.Minute

// scale is the size of the scale cases: 10^6, or 2*10^4 under -race or
// with -short, so that the suite stays within seconds there.
func scale() int {
	if raceEnabled || testing.Short() {
		return 20_000
	}
	return 1_000_000
}

// measure runs f and logs its time and allocated bytes per unit.
func measure(t *testing.T, what string, units int, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	start := time.Now()
	f()
	elapsed := time.Since(start)
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	t.Logf("%s: %d units in %v (CPU %v), per unit %v (CPU %v) and %d B allocated, peak heap %d MiB",
		what, units, elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond),
		elapsed/time.Duration(units), cpu/time.Duration(units),
		(after.TotalAlloc-before.TotalAlloc)/uint64(units), after.HeapSys>>20)
}

// cpuTime is the CPU time the process has used, user and system, garbage
// collection included: on a shared machine, a steadier measure than the
// wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runAll runs r on tt to its end, however many events that takes.
func runAll(t *testing.T, r *asyncsteps.Root, tt *asyncsteps.TestTool) asyncsteps.Result {
	t.Helper()
	ch := r.Promise()
	tt.Run()
	return result(t, ch)
}

// nested builds on r a flow nested depth levels deep whose innermost step
// waits with a cancel handler that counts into cancelled.
func nested(r *asyncsteps.Root, depth int, cancelled *int) {
	level := 0
	var nest asyncsteps.StepFunc
	nest = func(as asyncsteps.AsyncSteps, _ ...any) {
		level++
		as.SetCancel(func(asyncsteps.AsyncSteps) { *cancelled++ })
		if level < depth {
			as.Add(nest)
		}
	}
	r.Add(nest)
}

// Point 7: cancelling a flow nested a million levels deep, by Root.Cancel
// or by a timeout, runs every cancel handler without overflowing the
// stack.
func TestHostileScaleDepth(t *testing.T) {
	inChildFor(t, scaleTimeout, func(t *testing.T) {
		n := scale()
		t.Run("Root.Cancel", func(t *testing.T) {
			r, tt := newFlow()
			cancelled := 0
			nested(r, n, &cancelled)
			measure(t, "nest and cancel", n, func() {
				ch := r.Promise()
				tt.Run()
				noResult(t, ch)
				r.Cancel()
				tt.Run()
				if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result = %+v, want Canceled", res)
				}
			})
			if cancelled != n {
				t.Errorf("%d cancel handlers ran, want %d", cancelled, n)
			}
		})
		t.Run("timeout", func(t *testing.T) {
			r, tt := newFlow()
			cancelled := 0
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				inner := as.NewInstance()
				nested(inner, n, &cancelled)
				as.CopyFrom(inner)
			})
			measure(t, "nest and time out", n, func() {
				wantError(t, runAll(t, r, tt).Err, asyncsteps.Timeout, "")
			})
			if cancelled != n {
				t.Errorf("%d cancel handlers ran, want %d", cancelled, n)
			}
		})
		t.Run("error through every level", func(t *testing.T) {
			r, tt := newFlow()
			level, handled := 0, 0
			var nest asyncsteps.StepFunc
			nest = func(as asyncsteps.AsyncSteps, _ ...any) {
				level++
				if level == n {
					as.Error("Deep")
				}
				as.Add(nest, func(as asyncsteps.AsyncSteps, code string) {
					handled++
					as.Error(code) // rethrow: the quadratic path of point 9
				})
			}
			r.Add(nest)
			measure(t, "nest and rethrow", n, func() {
				wantError(t, runAll(t, r, tt).Err, "Deep", "")
			})
			if handled != n-1 {
				t.Errorf("%d handlers ran, want %d", handled, n-1)
			}
		})
	})
}

// Width: a Parallel of a million branches, each in a shared Mutex.
func TestHostileScaleWidth(t *testing.T) {
	inChildFor(t, scaleTimeout, func(t *testing.T) {
		n := scale()
		r, tt := newFlow()
		m := asyncsteps.NewMutex(10)
		ran := 0
		p := r.Parallel()
		for range n {
			p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { ran++ })
		}
		measure(t, "parallel branches through a Mutex(10)", n, func() {
			wantSuccess(t, runAll(t, r, tt))
		})
		if ran != n {
			t.Errorf("%d branches ran, want %d", ran, n)
		}
		// Cancelled while all but one wait in the Mutex's queue: each
		// leaves the queue in O(1).
		r, tt = newFlow()
		m = asyncsteps.NewMutex(1)
		p = r.Parallel()
		for range n {
			p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		}
		measure(t, "parallel branches queued in a Mutex(1), cancelled", n, func() {
			ch := r.Promise()
			tt.Run()
			r.Cancel()
			tt.Run()
			if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result = %+v, want Canceled", res)
			}
		})
		free := asyncsteps.New(asyncsteps.WithTool(tt))
		free.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("in") })
		wantSuccess(t, runAll(t, free, tt), "in")
	})
}

// Length: a million steps in a row, and a ForEach over three million
// pairs of an iter.Seq2 in constant memory (point 8).
func TestHostileScaleLength(t *testing.T) {
	inChildFor(t, scaleTimeout, func(t *testing.T) {
		n := scale()
		t.Run("Repeat", func(t *testing.T) {
			r, tt := newFlow()
			sum := 0
			r.Repeat(n, func(as asyncsteps.AsyncSteps, i int) { sum += i })
			measure(t, "repeat", n, func() { wantSuccess(t, runAll(t, r, tt)) })
			if want := n * (n - 1) / 2; sum != want {
				t.Errorf("sum %d, want %d", sum, want)
			}
		})
		t.Run("ForEach over an iter.Seq2", func(t *testing.T) {
			pairs := 3 * n
			r, tt := newFlow()
			var peak uint64
			count := 0
			r.ForEach(countTo(pairs), func(as asyncsteps.AsyncSteps, k, v any) {
				count++
				if count%(pairs/30) == 0 {
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			})
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			measure(t, "ForEach over an iter.Seq2", pairs, func() { wantSuccess(t, runAll(t, r, tt)) })
			if count != pairs {
				t.Errorf("%d iterations, want %d", count, pairs)
			}
			if grown := int64(peak) - int64(before.HeapInuse); grown > 32<<20 {
				t.Errorf("the heap grew by %d MiB over %d pairs, want it flat", grown>>20, pairs)
			}
		})
	})
}

// Point 8: an endless iter.Seq2 starts at once and is stopped, its cleanup
// run, by Break, an error, a timeout, Root.Cancel and the close of the
// loop.
func TestHostileForEachPullsLazily(t *testing.T) {
	inChild(t, func(t *testing.T) {
		endless := func(cleaned *int) iter.Seq2[int, int] {
			return func(yield func(int, int) bool) {
				defer func() { *cleaned++ }()
				for i := 0; yield(i, i); i++ {
				}
			}
		}
		cases := []struct {
			name string
			body func(r *asyncsteps.Root) asyncsteps.ForEachFunc
			want func(t *testing.T, res asyncsteps.Result)
		}{
			{"Break", func(*asyncsteps.Root) asyncsteps.ForEachFunc {
				return func(as asyncsteps.AsyncSteps, k, v any) {
					if k.(int) == 1000 {
						as.Break()
					}
				}
			}, func(t *testing.T, res asyncsteps.Result) { wantSuccess(t, res) }},
			{"error", func(*asyncsteps.Root) asyncsteps.ForEachFunc {
				return func(as asyncsteps.AsyncSteps, k, v any) {
					if k.(int) == 1000 {
						as.Error("Enough")
					}
				}
			}, func(t *testing.T, res asyncsteps.Result) { wantError(t, res.Err, "Enough", "") }},
			{"Root.Cancel", func(r *asyncsteps.Root) asyncsteps.ForEachFunc {
				return func(as asyncsteps.AsyncSteps, k, v any) {
					if k.(int) == 1000 {
						r.Cancel()
					}
				}
			}, func(t *testing.T, res asyncsteps.Result) {
				if !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result = %+v, want Canceled", res)
				}
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r, tt := newFlow()
				cleaned := 0
				r.ForEach(endless(&cleaned), c.body(r))
				c.want(t, runAll(t, r, tt))
				if cleaned != 1 {
					t.Errorf("the sequence's cleanup ran %d times, want 1", cleaned)
				}
			})
		}
		t.Run("timeout", func(t *testing.T) {
			l := asyncsteps.NewLoop()
			defer l.Close()
			cleaned := make(chan struct{})
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(20 * time.Millisecond)
				as.ForEach(func(yield func(int, int) bool) {
					defer close(cleaned)
					for i := 0; yield(i, i); i++ {
					}
				}, func(as asyncsteps.AsyncSteps, k, v any) {})
			})
			wantError(t, finish(t, l, r.Promise()).Err, asyncsteps.Timeout, "")
			waitFor(t, cleaned)
		})
		t.Run("loop closed", func(t *testing.T) {
			l := asyncsteps.NewLoop()
			cleaned, parked := make(chan struct{}), make(chan struct{})
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.ForEach(func(yield func(int, int) bool) {
				defer close(cleaned)
				for i := 0; yield(i, i); i++ {
				}
			}, func(as asyncsteps.AsyncSteps, k, v any) {
				if k.(int) == 10 {
					as.WaitExternal() // parked when the loop closes
					close(parked)
				}
			})
			ch := r.Promise()
			waitFor(t, parked)
			l.Close()
			wantError(t, finish(t, nil, ch).Err, asyncsteps.InternalError, "the flow's loop is closed")
			waitFor(t, cleaned)
		})
	})
}
