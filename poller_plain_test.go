package asyncsteps_test

import (
	"context"
	"errors"
	"sync"
	"time"
)

// plainPoller is Example_poller's poller in plain Go, for comparison
// (docs/FROM-ERRGROUP.md, "A periodic poller"): a goroutine and a timer
// per target, a channel as the semaphore, WaitGroups for the shutdown.
// poller_cases_test.go runs the same cases on both.
type plainPoller struct {
	cfg      pollerConfig
	check    func(ctx context.Context, target string) error
	list     func(ctx context.Context) ([]string, error)
	onChange func(target string, down bool)
	slots    chan struct{}

	ctx    context.Context // cancelled once the grace is over
	cancel context.CancelFunc
	// stopped is cancelled by Shutdown: no more ticks, and the read of
	// the list under way is cancelled.
	stopped context.Context
	stop    context.CancelFunc
	ticks   sync.WaitGroup
	polls   sync.WaitGroup

	mu      sync.Mutex
	targets map[string]*plainTarget
	stats   map[string]*pollStats
	busy    map[string]bool // a check of the target runs: by name, as one may outlive its target's removal
}

type plainTarget struct {
	name   string
	stop   chan struct{}
	ctx    context.Context // cancelled when the target is removed
	cancel context.CancelFunc
	fails  int
}

func newPlainPoller(cfg pollerConfig, check func(context.Context, string) error,
	list func(context.Context) ([]string, error), onChange func(string, bool)) *plainPoller {
	ctx, cancel := context.WithCancel(context.Background())
	stopped, stop := context.WithCancel(ctx)
	return &plainPoller{cfg: cfg, check: check, list: list, onChange: onChange,
		slots: make(chan struct{}, cfg.Concurrent), ctx: ctx, cancel: cancel, stopped: stopped, stop: stop,
		targets: map[string]*plainTarget{}, stats: map[string]*pollStats{}, busy: map[string]bool{}}
}

func (p *plainPoller) start() {
	p.ticks.Add(1)
	go p.refresher()
}

func (p *plainPoller) refresher() {
	defer p.ticks.Done()
	next := time.Now()
	for {
		ctx, cancel := context.WithTimeout(p.stopped, p.cfg.Timeout)
		names, err := p.list(ctx)
		cancel()
		if err == nil && p.stopped.Err() == nil {
			p.setTargets(names)
		}
		next = next.Add(p.cfg.Refresh)
		timer := time.NewTimer(time.Until(next))
		select {
		case <-timer.C:
		case <-p.stopped.Done():
			timer.Stop()
			return
		}
	}
}

func (p *plainPoller) setTargets(names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := map[string]bool{}
	for _, name := range names {
		keep[name] = true
		if p.targets[name] == nil {
			if p.stats[name] == nil {
				p.stats[name] = &pollStats{}
			}
			ctx, cancel := context.WithCancel(p.ctx)
			t := &plainTarget{name: name, stop: make(chan struct{}), ctx: ctx, cancel: cancel}
			p.targets[name] = t
			p.ticks.Add(1)
			go p.ticker(t)
		}
	}
	for name, t := range p.targets {
		if !keep[name] {
			close(t.stop)
			t.cancel()
			delete(p.targets, name)
		}
	}
}

// ticker polls t now, then every Period ± Jitter from the first tick.
func (p *plainPoller) ticker(t *plainTarget) {
	defer p.ticks.Done()
	rng := jitterSource(p.cfg, t.name)
	next := time.Now()
	for {
		p.poll(t)
		next = next.Add(jittered(p.cfg, rng))
		timer := time.NewTimer(time.Until(next))
		select {
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
			return
		case <-p.stopped.Done():
			timer.Stop()
			return
		}
	}
}

// poll starts a check of t, unless one still runs: the tick is skipped.
func (p *plainPoller) poll(t *plainTarget) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy[t.name] { // by name: a check may outlive its target's removal
		p.stats[t.name].Skipped++
		return
	}
	p.busy[t.name] = true
	p.polls.Add(1)
	go func() {
		defer p.polls.Done()
		defer func() {
			p.mu.Lock()
			delete(p.busy, t.name)
			p.mu.Unlock()
		}()
		select {
		case p.slots <- struct{}{}:
		case <-t.ctx.Done():
			return
		}
		defer func() { <-p.slots }()
		p.mu.Lock()
		p.stats[t.name].Polls++
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(t.ctx, p.cfg.Timeout)
		err := p.check(ctx, t.name)
		if err == nil {
			err = ctx.Err() // an answer past the timeout
		}
		cancel()
		if t.ctx.Err() != nil {
			return // removed, or the shutdown's cancel
		}
		p.result(t, err)
	}()
}

func (p *plainPoller) result(t *plainTarget, err error) {
	p.mu.Lock()
	s := p.stats[t.name]
	var change func()
	switch {
	case err == nil:
		t.fails = 0
		if s.Down {
			s.Down = false
			change = func() { p.onChange(t.name, false) }
		}
	default:
		s.Failures++
		if t.fails++; t.fails == p.cfg.DownAfter && !s.Down {
			s.Down = true
			change = func() { p.onChange(t.name, true) }
		}
	}
	p.mu.Unlock()
	if change != nil {
		change()
	}
}

// Shutdown stops the ticks, lets the checks running end within grace,
// cancels the rest, and waits at most wait for them to return.
func (p *plainPoller) Shutdown(grace, wait time.Duration) error {
	p.stop()
	p.ticks.Wait()
	done := make(chan struct{})
	go func() {
		p.polls.Wait()
		close(done)
	}()
	defer p.cancel()
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	p.cancel()
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return errors.New("checks still running")
	}
}

func (p *plainPoller) statsOf(target string) pollStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stats[target]; s != nil {
		return *s
	}
	return pollStats{}
}
