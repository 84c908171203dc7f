package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The cases of Example_loader's Loader, on a Loop in a testing/synctest
// bubble: its batch calls are Await functions, which a TestTool's virtual
// time does not wait for. Each case ends with no batch call running,
// before the Loop is closed, and the bubble then checks that no goroutine
// is left.

// loaderBackend is a batch endpoint of values "v<key>": each call takes
// 10ms, or returns when its context ends, and fails with err when set;
// the keys in missing are not in its answer.
type loaderBackend struct {
	tr      *timedTrace
	err     error
	missing map[int]bool
	running atomic.Int32
	mu      sync.Mutex
	sizes   []int // the number of keys of each call
}

func newLoaderBackend() *loaderBackend {
	return &loaderBackend{tr: newTimedTrace(time.Now)}
}

func (b *loaderBackend) fetch(ctx context.Context, keys []int) (map[int]string, error) {
	b.running.Add(1)
	defer b.running.Add(-1)
	b.mu.Lock()
	b.sizes = append(b.sizes, len(keys))
	b.mu.Unlock()
	if len(keys) <= 10 {
		b.tr.logf("fetch %v", keys)
	}
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
		b.tr.logf("fetch %v: %v", keys, ctx.Err())
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	values := map[int]string{}
	for _, k := range keys {
		if !b.missing[k] {
			values[k] = fmt.Sprint("v", k)
		}
	}
	return values, nil
}

// loaderCase runs f in a bubble with a Loop and a Loader of b, and checks
// that no batch call is left running once f's flows have ended.
func loaderCase(t *testing.T, f func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string])) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		b := newLoaderBackend()
		f(t, loop, b, NewLoader("products", 100, b.fetch))
		synctest.Wait()
		if n := b.running.Load(); n != 0 {
			t.Errorf("%d batch calls still running", n)
		}
	})
}

// startTogether starts roots in one callback of loop, as requests that
// arrive in one turn of it, and returns their Results in order.
func startTogether(t *testing.T, loop *asyncsteps.Loop, roots ...*asyncsteps.Root) []asyncsteps.Result {
	t.Helper()
	promises := make([]<-chan asyncsteps.Result, len(roots))
	started := make(chan struct{})
	loop.Immediate(func() {
		for i, r := range roots {
			promises[i] = r.Promise()
		}
		close(started)
	})
	<-started
	results := make([]asyncsteps.Result, len(roots))
	for i, p := range promises {
		results[i] = <-p
	}
	return results
}

// loadAll adds a step that loads keys in parallel, logs the values as
// name and succeeds with them.
func loadAll(as asyncsteps.AsyncSteps, tr *timedTrace, l *Loader[int, string], name string, keys ...int) {
	asyncsteps.Gather(as, func(as asyncsteps.AsyncSteps, vs []string) {
		tr.logf("%s got %v", name, vs)
		as.Success(vs)
	}, asyncsteps.Branches(keys, func(as asyncsteps.AsyncSteps, k int) { l.Load(as, k) })...)
}

// threeBranches is a flow on tool whose three parallel branches load 7
// keys, c a step behind a and b, then load 2 and 7 again from the flow's
// cache: the case both tools must batch into one call.
func threeBranches(tool asyncsteps.Tool, b *loaderBackend, l *Loader[int, string]) *asyncsteps.Root {
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "a", 1, 2, 3) })
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "b", 3, 4, 5) })
	// c is a step behind a and b, and its keys still join their call.
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "c", 6, 7, 1, 5) })
	})
	// The flow's cache: loaded again, 2 and 7 make no call.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "again", 2, 7) })
	return r
}

func TestLoaderMergesParallelBranchesIntoOneCall(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		r := threeBranches(loop, b, l)
		res := startTogether(t, loop, r)
		wantSuccess(t, res[0], []string{"v2", "v7"})
		b.tr.want(t, []string{
			"0s: fetch [1 2 3 4 5 6 7]",
			"10ms: a got [v1 v2 v3]",
			"10ms: b got [v3 v4 v5]",
			"10ms: c got [v6 v7 v1 v5]",
			"10ms: again got [v2 v7]",
		})
	})
}

func TestLoaderBatchesTheFlowsOfALoop(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		r1 := asyncsteps.New(asyncsteps.WithTool(loop))
		r1.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r1", 1, 2) })
		r2 := asyncsteps.New(asyncsteps.WithTool(loop))
		r2.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r2", 2, 3) })
		// r3 asks for 3 while the call fetches it: it waits for that call.
		r3 := asyncsteps.New(asyncsteps.WithTool(loop))
		r3.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Tool().Deferred(5*time.Millisecond, func() { as.Success() })
				as.WaitExternal()
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r3", 3) })
		})
		// Another flow does not share r1's cache: 1 is fetched again.
		r4 := asyncsteps.New(asyncsteps.WithTool(loop))
		r4.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Tool().Deferred(20*time.Millisecond, func() { as.Success() })
				as.WaitExternal()
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r4", 1) })
		})
		for _, res := range startTogether(t, loop, r1, r2, r3, r4) {
			if res.Err != nil {
				t.Error(res.Err)
			}
		}
		b.tr.want(t, []string{
			"0s: fetch [1 2 3]",
			"10ms: r1 got [v1 v2]",
			"10ms: r2 got [v2 v3]",
			"10ms: r3 got [v3]",
			"20ms: fetch [1]",
			"30ms: r4 got [v1]",
		})
	})
}

func TestLoaderSplits250KeysIntoCallsOf100(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		keys := make([]int, 250)
		for i := range keys {
			keys[i] = i
		}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		loadAll(r, b.tr, l, "r", keys...)
		res := startTogether(t, loop, r)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		vs, _ := asyncsteps.Arg[[]string](res[0].Args, 0)
		if len(vs) != 250 || vs[0] != "v0" || vs[249] != "v249" {
			t.Errorf("got %d values, first %q, last %q", len(vs), vs[0], vs[len(vs)-1])
		}
		slices.Sort(b.sizes) // the calls run at once, in any order
		if want := []int{50, 100, 100}; !slices.Equal(b.sizes, want) {
			t.Errorf("calls of %v keys, want %v", b.sizes, want)
		}
	})
}

var errUpstream = errors.New("upstream: 503")

func TestLoaderCallErrorReachesEveryWaiter(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		b.err = &asyncsteps.Error{Code: asyncsteps.CommError, Info: "GET /products: 503", Cause: errUpstream}
		var roots []*asyncsteps.Root
		for _, name := range []string{"r1", "r2"} {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				loadAll(as, b.tr, l, name, 1, 2)
			}, func(as asyncsteps.AsyncSteps, code string) {
				b.tr.logf("%s: %s %s", name, code, as.State().ErrorInfo)
			})
			roots = append(roots, r)
		}
		for _, res := range startTogether(t, loop, roots...) {
			wantError(t, res.Err, asyncsteps.CommError, "GET /products: 503")
			if !errors.Is(res.Err, errUpstream) {
				t.Errorf("%v does not keep the backend's error", res.Err)
			}
		}
		b.tr.want(t, []string{
			"0s: fetch [1 2]",
			"10ms: r1: CommError GET /products: 503",
			"10ms: r2: CommError GET /products: 503",
		})
	})
}

func TestLoaderMissingKeyFailsItsWaitersOnly(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		b.missing = map[int]bool{7: true}
		r1 := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.Settle(r1, func(as asyncsteps.AsyncSteps, rs []asyncsteps.Settled[string]) {
			for _, s := range rs {
				b.tr.logf("r1 got %q %v", s.Value, s.Err)
			}
		}, func(as asyncsteps.AsyncSteps) { l.Load(as, 1) }, func(as asyncsteps.AsyncSteps) { l.Load(as, 7) })
		r2 := asyncsteps.New(asyncsteps.WithTool(loop))
		r2.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r2", 1) })
		res := startTogether(t, loop, r1, r2)
		wantSuccess(t, res[1], []string{"v1"})
		b.tr.want(t, []string{
			"0s: fetch [1 7]",
			`10ms: r1 got "v1" <nil>`,
			`10ms: r1 got "" NotFound: products: no 7`,
			"10ms: r2 got [v1]",
		})
	})
}

// waitsWithTimeout returns a flow that loads keys within d.
func waitsWithTimeout(loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string], name string, d time.Duration, keys ...int) *asyncsteps.Root {
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if d > 0 {
			as.SetTimeout(d)
		}
		loadAll(as, b.tr, l, name, keys...)
	}, func(as asyncsteps.AsyncSteps, code string) { b.tr.logf("%s: %s", name, code) })
	return r
}

func TestLoaderWaiterCancelledLeavesTheCallToTheOthers(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		res := startTogether(t, loop,
			waitsWithTimeout(loop, b, l, "r1", 5*time.Millisecond, 1),
			waitsWithTimeout(loop, b, l, "r2", 0, 1, 2))
		wantCode(t, res[0].Err, asyncsteps.Timeout)
		wantSuccess(t, res[1], []string{"v1", "v2"})
		b.tr.want(t, []string{
			"0s: fetch [1 2]",
			"5ms: r1: Timeout",
			"10ms: r2 got [v1 v2]",
		})
	})
}

func TestLoaderCallCancelledOnceEveryWaiterLeft(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		res := startTogether(t, loop,
			waitsWithTimeout(loop, b, l, "r1", 3*time.Millisecond, 1),
			waitsWithTimeout(loop, b, l, "r2", 6*time.Millisecond, 1, 2))
		wantCode(t, res[0].Err, asyncsteps.Timeout)
		wantCode(t, res[1].Err, asyncsteps.Timeout)
		synctest.Wait() // for the call's goroutine to see its context end
		b.tr.want(t, []string{
			"0s: fetch [1 2]",
			"3ms: r1: Timeout",
			"6ms: r2: Timeout",
			"6ms: fetch [1 2]: context canceled",
		})
	})
}

// A Load cancelled in the turn it asked in (a sibling failed at once)
// leaves its key out of the turn's call: a turn left with no key makes
// no call.
func TestLoaderKeyNobodyWaitsForIsNotFetched(t *testing.T) {
	loaderCase(t, func(t *testing.T, loop *asyncsteps.Loop, b *loaderBackend, l *Loader[int, string]) {
		refused := func() *asyncsteps.Root {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			p := r.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r1", 1, 2) })
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Refused") })
			})
			return r
		}
		r2 := asyncsteps.New(asyncsteps.WithTool(loop))
		r2.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loadAll(as, b.tr, l, "r2", 2, 3) })
		res := startTogether(t, loop, refused(), r2)
		wantCode(t, res[0].Err, "Refused")
		b.tr.want(t, []string{
			"0s: fetch [2 3]",
			"10ms: r2 got [v2 v3]",
		})
		b.tr.lines = nil
		res = startTogether(t, loop, refused())
		wantCode(t, res[0].Err, "Refused")
		b.tr.want(t, nil)
		if len(b.sizes) != 1 {
			t.Errorf("%d calls, want 1", len(b.sizes))
		}
	})
}

// A Loop closed while a call is in flight ends the flows that wait for
// it and cancels the call; the call's end then finds no Load to serve.
func TestLoaderLoopClosedDuringACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		b := newLoaderBackend()
		l := NewLoader("products", 100, b.fetch)
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		loadAll(r, b.tr, l, "r", 1, 2)
		ch := r.Promise()
		time.Sleep(5 * time.Millisecond)
		loop.Close()
		wantError(t, (<-ch).Err, asyncsteps.InternalError, "the flow's loop is closed")
		synctest.Wait()
		b.tr.want(t, []string{
			"0s: fetch [1 2]",
			"5ms: fetch [1 2]: context canceled",
		})
		if n := b.running.Load(); n != 0 {
			t.Errorf("%d batch calls still running", n)
		}
	})
}

// On a TestTool the Loader's turn ends as on a Loop: the branch whose
// Load comes a step after the others' still joins their call, and 250
// keys make calls of 100, 100 and 50
// (TestLoaderMergesParallelBranchesIntoOneCall,
// TestLoaderSplits250KeysIntoCallsOf100). The calls are Await functions:
// Run waits for them, and the trace is on the tool's clock, which no
// timer moves.
func TestLoaderBatchesOnATestToolAsOnALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		b := newLoaderBackend()
		b.tr = newTimedTrace(tt.Now)
		l := NewLoader("products", 100, b.fetch)
		r := threeBranches(tt, b, l)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.tr.want(t, []string{
			"0s: fetch [1 2 3 4 5 6 7]",
			"0s: a got [v1 v2 v3]",
			"0s: b got [v3 v4 v5]",
			"0s: c got [v6 v7 v1 v5]",
			"0s: again got [v2 v7]",
		})

		synctest.Wait() // the calls' goroutines have ended
		b.tr.lines, b.sizes = nil, nil
		keys := make([]int, 250)
		for i := range keys {
			keys[i] = i
		}
		r = asyncsteps.New(asyncsteps.WithTool(tt))
		loadAll(r, b.tr, l, "r", keys...)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		slices.Sort(b.sizes)
		if want := []int{50, 100, 100}; !slices.Equal(b.sizes, want) {
			t.Errorf("calls of %v keys, want %v", b.sizes, want)
		}
		synctest.Wait()
	})
}
