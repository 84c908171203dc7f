package redissync

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// The admission benchmarks: one process, benchConcurrency flows (or
// goroutines) that each ask for an admission again as soon as they have
// one, against one local redis-server started for the run, with a rate
// far above what either side reaches, so that what is measured is the
// cost of an admission, not the limit. Run both in one run:
//
//	go test -run '^$' -bench Admissions -benchtime 200000x ./redissync
//
// Each reports admissions/s and the p99 of the time from asking to being
// admitted (p99-µs).

const benchConcurrency = 1000

var benchServer struct {
	once sync.Once
	srv  *redisServer
	err  error
}

func benchRedis(b *testing.B) string {
	benchServer.once.Do(func() {
		port, err := pickPort()
		if err != nil {
			benchServer.err = err
			return
		}
		benchServer.srv, benchServer.err = launchRedis(port, b.TempDir())
	})
	if benchServer.err != nil {
		b.Fatal(benchServer.err)
	}
	return benchServer.srv.addr
}

// latencies collects the admission times of many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, admitted int, elapsed time.Duration) {
	slices.Sort(l.all)
	p99 := l.all[len(l.all)*99/100]
	b.ReportMetric(float64(admitted)/elapsed.Seconds(), "admissions/s")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAdmissionsThrottle: flows on one LoopGroup (one loop per core)
// through one redissync.Throttle.
func BenchmarkAdmissionsThrottle(b *testing.B) {
	addr := benchRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, Options{Prefix: fmt.Sprintf("bench%d", prefixSeq.Add(1))})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	th := c.NewThrottle("admit", ThrottleOptions{Rate: 1_000_000_000, MaxQueue: -1})
	g := asyncsteps.NewLoopGroup(0)
	defer g.Close()

	var left atomic.Int64
	left.Store(int64(b.N))
	var lat latencies
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchConcurrency {
		var asked time.Time
		var mine []time.Duration
		r := g.New()
		r.Loop(func(as asyncsteps.AsyncSteps) {
			if left.Add(-1) < 0 {
				as.Break()
			}
			asked = time.Now()
			as.Sync(th, func(asyncsteps.AsyncSteps, ...any) {
				mine = append(mine, time.Since(asked))
			})
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Run(context.Background()); err != nil {
				b.Error(err)
			}
			lat.add(mine)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	lat.report(b, b.N, elapsed)
}

// BenchmarkAdmissionsRedisRate: goroutines through redis_rate's Allow
// (one round trip per admission) with go-redis's default pool.
func BenchmarkAdmissionsRedisRate(b *testing.B) {
	addr := benchRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.PerSecond(1_000_000_000)
	key := fmt.Sprintf("bench%d:admit", prefixSeq.Add(1))

	var left atomic.Int64
	left.Store(int64(b.N))
	var lat latencies
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				asked := time.Now()
				res, err := limiter.Allow(context.Background(), key, limit)
				if err != nil || res.Allowed != 1 {
					b.Errorf("Allow: %v %+v", err, res)
					return
				}
				mine = append(mine, time.Since(asked))
			}
			lat.add(mine)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	lat.report(b, b.N, elapsed)
}

// BenchmarkParallelBranchesOnOneMutex: one flow whose Parallel of
// branches each enter one Mutex(1), so that every branch but the first
// queues behind its siblings, on a local redis-server. The deadlock check
// each branch passes as it asks must not grow with the branches already
// waiting:
//
//	go test -run '^$' -bench ParallelBranchesOnOneMutex -benchtime 3x ./redissync
//
// It reports the time per branch (ns/branch).
func BenchmarkParallelBranchesOnOneMutex(b *testing.B) {
	for _, n := range []int{500, 2000, 8000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c, _ := newClient(b, benchRedis(b), Options{})
			m := c.NewMutex("bench-branches", MutexOptions{Max: 1, MaxQueue: -1})
			l := newLoops(b, 1)[0]
			entered := 0
			for b.Loop() {
				r := asyncsteps.New(asyncsteps.WithTool(l))
				p := r.Parallel()
				for range n {
					p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { entered++ })
					})
				}
				if _, err := r.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if entered != b.N*n {
				b.Fatalf("%d entries, want %d", entered, b.N*n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/branch")
		})
	}
}

// BenchmarkUncontendedEntry: one flow at a time enters and leaves a
// Mutex, or a key of a KeyedMutex (the same key, or a new key each time,
// whose state is made and dropped each time), or enters a Throttle or a
// key of a KeyedThrottle likewise (a rate that never makes a flow wait),
// on a local redis-server:
//
//	go test -run '^$' -bench UncontendedEntry -benchmem ./redissync
func BenchmarkUncontendedEntry(b *testing.B) {
	c, _ := newClient(b, benchRedis(b), Options{})
	l := newLoops(b, 1)[0]
	m := c.NewMutex("bench-entry", MutexOptions{})
	km := c.NewKeyedMutex("bench-entry-keyed", MutexOptions{})
	rate := ThrottleOptions{Rate: 1 << 30, Period: time.Second}
	th := c.NewThrottle("bench-entry-rate", rate)
	kt := c.NewKeyedThrottle("bench-entry-keyed-rate", rate)
	bench := func(b *testing.B, syncer func(i int) asyncsteps.Syncer) {
		entered := 0
		i := 0
		for b.Loop() {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Sync(syncer(i), func(asyncsteps.AsyncSteps, ...any) { entered++ })
			if _, err := r.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if entered != i {
			b.Fatalf("%d entries, want %d", entered, i)
		}
	}
	b.Run("Mutex", func(b *testing.B) {
		bench(b, func(int) asyncsteps.Syncer { return m })
	})
	b.Run("KeyedMutex/SameKey", func(b *testing.B) {
		key := km.Key("acct-1")
		bench(b, func(int) asyncsteps.Syncer { return key })
	})
	b.Run("KeyedMutex/NewKey", func(b *testing.B) {
		bench(b, func(i int) asyncsteps.Syncer { return km.Key(strconv.Itoa(i)) })
	})
	b.Run("Throttle", func(b *testing.B) {
		bench(b, func(int) asyncsteps.Syncer { return th })
	})
	b.Run("KeyedThrottle/SameKey", func(b *testing.B) {
		key := kt.Key("key-1")
		bench(b, func(int) asyncsteps.Syncer { return key })
	})
	b.Run("KeyedThrottle/NewKey", func(b *testing.B) {
		bench(b, func(i int) asyncsteps.Syncer { return kt.Key(strconv.Itoa(i)) })
	})
}
