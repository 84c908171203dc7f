package asyncsteps_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// pollerConfig sets a poller's schedule and limits.
type pollerConfig struct {
	Period     time.Duration // between two polls of a target, jittered
	Jitter     float64       // each period drawn from Period × (1 ± Jitter)
	Seed       uint64        // of the jitter; a target's draws depend on it and its name only
	Timeout    time.Duration // a poll's, and the refresh's
	Concurrent int           // polls at once over all targets
	DownAfter  int           // failures in a row that mark a target down
	Refresh    time.Duration // between two reads of the targets' list
	Log        *slog.Logger  // for failed refreshes and polls failed by a bug; nil: slog.Default()
}

// pollStats are a target's counts, kept once it is removed.
type pollStats struct {
	Polls, Failures, Skipped int
	Down                     bool
}

// poller health-checks a list of targets, each on a ticker of its own:
// a tick starts a poll, a flow that awaits check, unless the target's
// last poll still runs (the tick is skipped then). Its fields but loop
// are the loop's: every method but start and Shutdown runs on it.
type poller struct {
	loop     *asyncsteps.Loop
	cfg      pollerConfig
	check    func(ctx context.Context, target string) error // an HTTP GET, in production
	list     func(ctx context.Context) ([]string, error)    // the targets, from the configuration
	onChange func(target string, down bool)                 // a target marked down or up
	slots    *asyncsteps.Mutex                              // Concurrent polls at once
	// busy is held by a target's poll until its check has returned, even
	// past its timeout: with no queue, a poll that finds it held is
	// rejected at once, and that tick counts as skipped.
	busy *asyncsteps.KeyedMutex[string]

	targets   map[string]*target
	stats     map[string]*pollStats
	flows     map[*asyncsteps.Root]*target // polls and the refresh (nil) running
	refreshAt time.Time
	refresh   asyncsteps.Handle
	running   asyncsteps.FlowSet // the same flows, for Shutdown, from its goroutine
}

type target struct {
	name  string
	rng   *rand.Rand
	next  time.Time // the tick scheduled
	tick  asyncsteps.Handle
	fails int // in a row
	stats *pollStats
}

func newPoller(cfg pollerConfig, check func(context.Context, string) error,
	list func(context.Context) ([]string, error), onChange func(string, bool)) *poller {
	return &poller{loop: asyncsteps.NewLoop(), cfg: cfg, check: check, list: list, onChange: onChange,
		slots: asyncsteps.NewMutex(cfg.Concurrent), busy: asyncsteps.NewKeyedMutex[string](1, 0),
		targets: map[string]*target{}, stats: map[string]*pollStats{}, flows: map[*asyncsteps.Root]*target{}}
}

// start reads the targets' list now, then every Refresh; each target is
// polled as it is added, then every Period ± Jitter.
func (p *poller) start() {
	p.loop.Immediate(func() {
		p.refreshAt = p.loop.Now()
		p.refreshTargets()
	})
}

func (p *poller) refreshTargets() {
	p.refreshAt = p.refreshAt.Add(p.cfg.Refresh)
	p.refresh = p.loop.Deferred(p.refreshAt.Sub(p.loop.Now()), p.refreshTargets)
	r := asyncsteps.New(asyncsteps.WithTool(p.loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(p.cfg.Timeout)
		asyncsteps.AwaitThen(as, p.list, func(as asyncsteps.AsyncSteps, names []string) { p.setTargets(names) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		p.log().Warn("refresh failed, the targets stay", "code", code, "info", as.State().ErrorInfo)
		as.Success()
	})
	p.run(r, nil)
}

// setTargets adds the targets named that are not polled yet, and removes
// those not named, cancelling their polls.
func (p *poller) setTargets(names []string) {
	keep := map[string]bool{}
	for _, name := range names {
		keep[name] = true
		if p.targets[name] == nil {
			p.add(name)
		}
	}
	for name, t := range p.targets {
		if !keep[name] {
			t.tick.Cancel()
			delete(p.targets, name)
			for r, of := range p.flows {
				if of == t {
					r.Cancel() // its check is cancelled; busy stays held until it returns
				}
			}
		}
	}
}

func (p *poller) add(name string) {
	if p.stats[name] == nil {
		p.stats[name] = &pollStats{}
	}
	t := &target{name: name, rng: jitterSource(p.cfg, name), next: p.loop.Now(), stats: p.stats[name]}
	p.targets[name] = t
	p.tick(t)
}

// tick schedules t's next tick, Period ± Jitter after this one's time
// (not after now: a loop that runs it late does not delay the next), and
// polls t.
func (p *poller) tick(t *target) {
	t.next = t.next.Add(jittered(p.cfg, t.rng))
	t.tick = p.loop.Deferred(t.next.Sub(p.loop.Now()), func() { p.tick(t) })
	r := asyncsteps.New(asyncsteps.WithTool(p.loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p.busy.Sync(as, t.name, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(p.slots, func(as asyncsteps.AsyncSteps, _ ...any) { p.poll(as, t) })
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.DefenseRejected { // poll recovers from every error of its own
				t.stats.Skipped++
				as.Success()
			}
		})
	})
	p.run(r, t)
}

// poll awaits t's check within Timeout: a success marks t up, DownAfter
// failures in a row mark it down.
func (p *poller) poll(as asyncsteps.AsyncSteps, t *target) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		t.stats.Polls++
		as.SetTimeout(p.cfg.Timeout)
		as.Await(func(ctx context.Context) (any, error) { return nil, p.check(ctx, t.name) })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			t.fails = 0
			if t.stats.Down {
				t.stats.Down = false
				p.onChange(t.name, false)
			}
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		t.stats.Failures++
		if t.fails++; t.fails == p.cfg.DownAfter && !t.stats.Down {
			t.stats.Down = true
			p.onChange(t.name, true)
		}
		as.Success()
	})
}

func (p *poller) log() *slog.Logger { return cmp.Or(p.cfg.Log, slog.Default()) }

// jitterSource is a target's source of jitter, seeded with Seed and its name.
func jitterSource(cfg pollerConfig, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))
}

// jittered is a period drawn from rng: Period × (1 ± Jitter), to the ms.
func jittered(cfg pollerConfig, rng *rand.Rand) time.Duration {
	return time.Duration(float64(cfg.Period) * (1 + (2*rng.Float64()-1)*cfg.Jitter)).Round(time.Millisecond)
}

// run starts r, a poll of t or the refresh (t nil), and keeps it until
// it ends; once Shutdown has begun, it starts nothing. A poll's handlers
// take every failure of its check: an error left is a bug (a panic in
// onChange, say), logged.
func (p *poller) run(r *asyncsteps.Root, t *target) {
	started := p.running.Start(r, func(res asyncsteps.Result) {
		if t != nil && res.Err != nil && !errors.Is(res.Err, context.Canceled) {
			p.log().Error("poll failed", "target", t.name, "err", res.Err)
		}
		delete(p.flows, r)
	})
	if started {
		p.flows[r] = t // before it can end: it ends on this loop, later
	}
}

// Shutdown stops the ticks and the refresh, lets the polls running end
// within grace and cancels the rest, then closes the loop and waits at
// most wait for the checks still running (one that ignores its context).
func (p *poller) Shutdown(grace, wait time.Duration) error {
	p.loop.Immediate(func() {
		p.refresh.Cancel()
		for _, t := range p.targets {
			t.tick.Cancel()
		}
		for r, t := range p.flows {
			if t == nil {
				r.Cancel() // the refresh: nothing to wait for
			}
		}
	})
	p.running.Shutdown(context.Background(), grace) // a cancelled poll ends at once
	p.loop.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return p.loop.Wait(ctx)
}

// A health-check poller: each target polled every 5s ± 10%, its check
// (an HTTP GET) awaited within 1s, 8 checks at once at most, never two of
// one target; 3 failures in a row mark a target down, a success up; the
// list of targets read again every 30s. Here "db" fails until the
// example heals it; the poller runs on a real loop with its periods
// divided by 1000 (5ms), its checks' timeout left at 1s so that a busy
// machine does not fail them. poller_cases_test.go tests it on
// virtual time, exactly: the times of the polls, the skipped ticks,
// the bound, the shutdown.
func Example_poller() {
	var dbHealthy atomic.Bool
	changes := make(chan string, 10)
	p := newPoller(pollerConfig{Period: 5 * time.Millisecond, Jitter: 0.1, Seed: 1, Timeout: time.Second,
		Concurrent: 8, DownAfter: 3, Refresh: 30 * time.Millisecond},
		func(ctx context.Context, target string) error {
			if target == "db" && !dbHealthy.Load() {
				return errors.New("503 Service Unavailable")
			}
			return nil
		},
		func(context.Context) ([]string, error) { return []string{"api", "db", "cache"}, nil },
		func(target string, down bool) { changes <- fmt.Sprintf("%s down: %v", target, down) })
	p.start()
	fmt.Println(<-changes)
	dbHealthy.Store(true)
	fmt.Println(<-changes)
	fmt.Println("shutdown:", p.Shutdown(2*time.Millisecond, time.Second))
	// Output:
	// db down: true
	// db down: false
	// shutdown: <nil>
}
