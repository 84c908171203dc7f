package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The hard cases of Example_poller, each on a Loop in a testing/synctest
// bubble (the checks are Await functions on goroutines): the times are
// the bubble's, exact. Each runs twice, on the poller of flows and on
// plainPoller, the same poller written with goroutines, timers, a
// semaphore and WaitGroups (poller_plain_test.go).

// healthPoller is what the cases drive of either poller. statsOf is read
// once Shutdown has returned.
type healthPoller interface {
	start()
	Shutdown(grace, wait time.Duration) error
	statsOf(target string) pollStats
}

func (p *poller) statsOf(target string) pollStats {
	if s := p.stats[target]; s != nil {
		return *s
	}
	return pollStats{}
}

// productionConfig is the poller of the brief: 5s ± 10%, checks of 1s,
// 8 at once, down after 3 failures, the list read every 30s.
var productionConfig = pollerConfig{Period: 5 * time.Second, Jitter: 0.1, Seed: 1, Timeout: time.Second,
	Concurrent: 8, DownAfter: 3, Refresh: 30 * time.Second}

// healthChecks fakes the targets' health endpoints and their list: each
// check of a target takes the next scriptedCall of its script, else
// answers at once. It logs when each check begins, by target, the
// targets marked down and up, and counts the checks running.
type healthChecks struct {
	mu             sync.Mutex
	start          time.Time
	script         map[string][]scriptedCall
	names          []string
	listTakes      time.Duration // each read of the list, unless its context ends first
	begun          map[string][]time.Duration
	ended          map[string][]string // "time error" of each check, as it returns
	changes        []string
	running        map[string]int
	most           map[string]int // checks of the target at once, at most
	inAll, mostAll int
}

func newHealthChecks(script map[string][]scriptedCall, names ...string) *healthChecks {
	if script == nil {
		script = map[string][]scriptedCall{}
	}
	return &healthChecks{start: time.Now(), script: script, names: names, begun: map[string][]time.Duration{},
		ended: map[string][]string{}, running: map[string]int{}, most: map[string]int{}}
}

func (h *healthChecks) check(ctx context.Context, target string) (err error) {
	h.mu.Lock()
	var s scriptedCall
	if calls := h.script[target]; len(calls) > 0 {
		s, h.script[target] = calls[0], calls[1:]
	}
	h.begun[target] = append(h.begun[target], time.Since(h.start))
	h.running[target]++
	h.most[target] = max(h.most[target], h.running[target])
	h.inAll++
	h.mostAll = max(h.mostAll, h.inAll)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.running[target]--
		h.inAll--
		h.ended[target] = append(h.ended[target], fmt.Sprintf("%v %v", time.Since(h.start), err))
	}()
	switch {
	case s.deaf:
		time.Sleep(s.d)
	case s.d > 0:
		select {
		case <-time.After(s.d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.err
}

func (h *healthChecks) list(ctx context.Context) ([]string, error) {
	h.mu.Lock()
	names, d := slices.Clone(h.names), h.listTakes
	h.mu.Unlock()
	select {
	case <-time.After(d):
		return names, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setList changes the list the next refresh reads.
func (h *healthChecks) setList(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = names
}

func (h *healthChecks) onChange(target string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, fmt.Sprintf("%v %s down=%v", time.Since(h.start), target, down))
}

// pollerImpls makes either poller, started, for the checks of h.
var pollerImpls = []struct {
	name string
	new  func(cfg pollerConfig, h *healthChecks) healthPoller
}{
	{"flows", func(cfg pollerConfig, h *healthChecks) healthPoller {
		p := newPoller(cfg, h.check, h.list, h.onChange)
		p.start()
		return p
	}},
	{"plain", func(cfg pollerConfig, h *healthChecks) healthPoller {
		p := newPlainPoller(cfg, h.check, h.list, h.onChange)
		p.start()
		return p
	}},
}

// eachPoller runs f in a synctest bubble for each poller.
func eachPoller(t *testing.T, f func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller)) {
	for _, impl := range pollerImpls {
		t.Run(impl.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, impl.new) })
		})
	}
}

func shutdown(t *testing.T, p healthPoller, grace, wait time.Duration) {
	t.Helper()
	if err := p.Shutdown(grace, wait); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func atMs(ds ...int) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		out = append(out, time.Duration(d)*time.Millisecond)
	}
	return out
}

// Each target is polled as it is added, then every 5s ± 10%, its
// periods drawn from the seed and its name only.
func TestPollerPollsOnItsJitteredSchedule(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(nil, "api", "db", "cache")
		p := start(productionConfig, h)
		time.Sleep(21 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		want := map[string][]time.Duration{
			"api": atMs(0, 5262, 10328, 15258, 19893),
			"db":  atMs(0, 5463, 10579, 15989),
		}
		for target, times := range want {
			if got := h.begun[target]; !slices.Equal(got, times) {
				t.Errorf("%s checked at %v, want %v", target, got, times)
			}
		}
		for target, times := range h.begun {
			for i := 1; i < len(times); i++ {
				if d := times[i] - times[i-1]; d < 4500*time.Millisecond || d > 5500*time.Millisecond {
					t.Errorf("%s: %v between checks %d and %d", target, d, i-1, i)
				}
			}
		}
	})
}

// A check that ignores its context runs past its timeout (a failure at
// 1s); the target's ticks until it returns, at 12s, are skipped, and it
// is checked again at the next one: never two checks of it at once.
func TestPollerSkipsTheTicksOfATargetStillChecked(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(map[string][]scriptedCall{"api": {{d: 12 * time.Second, deaf: true}}}, "api", "db")
		p := start(productionConfig, h)
		time.Sleep(17 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		if got, want := h.begun["api"], atMs(0, 15258); !slices.Equal(got, want) {
			t.Errorf("api checked at %v, want %v", got, want)
		}
		if got, want := p.statsOf("api"), (pollStats{Polls: 2, Failures: 1, Skipped: 2}); got != want {
			t.Errorf("api: %+v, want %+v", got, want)
		}
		if h.most["api"] != 1 {
			t.Errorf("%d checks of api at once", h.most["api"])
		}
	})
}

// Three failures in a row (errors or timeouts) mark a target down, once;
// one success marks it up.
func TestPollerMarksATargetDownAfterThreeFailuresAndUpAfterOneSuccess(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		e503 := errors.New("503 Service Unavailable")
		slow := scriptedCall{d: 2 * time.Second} // past the timeout of 1s
		h := newHealthChecks(map[string][]scriptedCall{
			"db": {{err: e503}, slow, {}, {err: e503}, slow, {err: e503}, {err: e503}, {}},
		}, "db")
		p := start(productionConfig, h)
		time.Sleep(39 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		at := h.begun["db"]
		want := []string{
			fmt.Sprintf("%v db down=true", at[5]),
			fmt.Sprintf("%v db down=false", at[7]),
		}
		if !slices.Equal(h.changes, want) {
			t.Errorf("changes %q, want %q (checks at %v)", h.changes, want, at)
		}
		if got, want := p.statsOf("db"), (pollStats{Polls: 8, Failures: 6}); got != want {
			t.Errorf("db: %+v, want %+v", got, want)
		}
	})
}

// Fifty targets added at once, each check taking 800ms: 8 run at once,
// never more, and the others wait for a slot.
func TestPollerChecksEightTargetsAtOnceAtMost(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		script := map[string][]scriptedCall{}
		var names []string
		for i := range 50 {
			name := fmt.Sprintf("t%02d", i)
			names = append(names, name)
			script[name] = []scriptedCall{{d: 800 * time.Millisecond}}
		}
		h := newHealthChecks(script, names...)
		p := start(productionConfig, h)
		time.Sleep(10 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		if h.mostAll != 8 {
			t.Errorf("%d checks at once at most, want 8", h.mostAll)
		}
		starts := map[time.Duration]int{}
		for _, name := range names {
			starts[h.begun[name][0]]++
			if s := p.statsOf(name); s.Failures != 0 {
				t.Errorf("%s: %+v, want no failure", name, s)
			}
		}
		want := map[time.Duration]int{0: 8, 800 * time.Millisecond: 8, 1600 * time.Millisecond: 8,
			2400 * time.Millisecond: 8, 3200 * time.Millisecond: 8, 4 * time.Second: 8, 4800 * time.Millisecond: 2}
		if !maps.Equal(starts, want) {
			t.Errorf("first checks begun: %v, want %v", starts, want)
		}
	})
}

// The list read every 30s adds and removes targets: one removed has its
// check cancelled and is checked no more; one added is checked at once.
func TestPollerFollowsTheListOfTargets(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(nil, "api", "db")
		cfg := productionConfig
		cfg.Timeout = 20 * time.Second
		p := start(cfg, h)
		time.Sleep(25 * time.Second)
		h.mu.Lock()
		h.script["db"] = []scriptedCall{{d: time.Minute}} // its check at 26.x s runs at 30s
		h.mu.Unlock()
		h.setList("api", "cache")
		time.Sleep(40 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		if got := h.begun["cache"]; len(got) == 0 || got[0] != 30*time.Second {
			t.Errorf("cache checked at %v, want first at 30s", got)
		}
		if got, want := h.begun["db"], atMs(0, 5463, 10579, 15989, 21064, 26053); !slices.Equal(got, want) {
			t.Errorf("db checked at %v, want %v", got, want)
		}
		if got := h.ended["db"]; got[len(got)-1] != "30s context canceled" {
			t.Errorf("db's checks ended %q, the last cancelled at 30s", got)
		}
		if got, want := p.statsOf("db"), (pollStats{Polls: 6}); got != want {
			t.Errorf("db: %+v, want %+v", got, want)
		}
	})
}

// A target removed while a check of it ignores its context, and added
// again, is not checked until that check has returned.
func TestPollerNeverChecksATargetTwiceAtOnce(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(nil, "api", "db")
		p := start(productionConfig, h)
		time.Sleep(20 * time.Second)
		h.mu.Lock()
		h.script["db"] = []scriptedCall{{d: 42 * time.Second, deaf: true}} // from its check at ~21s to ~63s
		h.mu.Unlock()
		h.setList("api") // read at 30s
		time.Sleep(20 * time.Second)
		h.setList("api", "db") // read at 60s
		time.Sleep(40 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		if h.most["db"] != 1 {
			t.Errorf("%d checks of db at once (begun at %v, ended %q)", h.most["db"], h.begun["db"], h.ended["db"])
		}
		// The check begun at 21.064s returns at 63.064s: the ticks of
		// 26.053s and, db added again, of 60s are skipped; the next one
		// checks it.
		if got, want := h.begun["db"][5:], atMs(65463, 70579, 75989); !slices.Equal(got, want) {
			t.Errorf("db checked at %v once added again, want %v", got, want)
		}
		if got := p.statsOf("db"); got.Skipped != 2 {
			t.Errorf("db: %+v, want 2 ticks skipped", got)
		}
	})
}

// Shutdown stops the ticks, lets a check end within the grace of 2s,
// cancels the one still running then, and waits for one that ignores its
// context: it returns once nothing of the poller runs.
func TestPollerShutdownWaitsForItsChecks(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		before := bubbleGoroutines()
		h := newHealthChecks(map[string][]scriptedCall{
			"quick": {{d: 500 * time.Millisecond}}, "hang": {{d: 10 * time.Second}}, "deaf": {{d: 3 * time.Second, deaf: true}},
		}, "quick", "hang", "deaf")
		cfg := productionConfig
		cfg.Timeout = 20 * time.Second
		p := start(cfg, h)
		time.Sleep(100 * time.Millisecond)
		shutdown(t, p, 2*time.Second, 5*time.Second)
		if took := time.Since(h.start); took != 3*time.Second {
			t.Errorf("Shutdown returned at %v, want 3s", took)
		}
		want := map[string][]string{"quick": {"500ms <nil>"}, "hang": {"2.1s context canceled"}, "deaf": {"3s <nil>"}}
		if !maps.EqualFunc(h.ended, want, slices.Equal) {
			t.Errorf("checks ended: %q, want %q", h.ended, want)
		}
		if got, want := p.statsOf("quick"), (pollStats{Polls: 1}); got != want {
			t.Errorf("quick: %+v, want %+v", got, want)
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble after Shutdown, %d before", n, before)
		}
	})
}

// A check that ignores its context past Shutdown's wait: Shutdown
// returns at the end of the wait with an error.
func TestPollerShutdownReportsACheckOutlivingItsWait(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(map[string][]scriptedCall{"deaf": {{d: 10 * time.Second, deaf: true}}}, "deaf")
		p := start(productionConfig, h)
		time.Sleep(100 * time.Millisecond)
		err := p.Shutdown(2*time.Second, time.Second)
		// The grace is for the polls: the flow of the check's poll ended
		// at its timeout, at 1s, where plainPoller's goroutine waits for
		// the check. The wait then runs out on either.
		want := 3100 * time.Millisecond
		if _, flows := p.(*poller); flows {
			want = 2 * time.Second
		}
		if took := time.Since(h.start); err == nil || took != want {
			t.Errorf("Shutdown returned %v at %v, want an error at %v", err, took, want)
		}
		time.Sleep(10 * time.Second) // the check returns: nothing leaks
	})
}

// A panic in the callback that reports a target down fails that poll's
// flow with an InternalError, which the poller logs; its ticks go on.
// (plainPoller's goroutine would crash the process.)
func TestPollerLogsAPanicOfItsCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := &lockedBuffer{}
		cfg := productionConfig
		cfg.Log = slog.New(slog.NewTextHandler(buf, nil))
		e503 := errors.New("503 Service Unavailable")
		h := newHealthChecks(map[string][]scriptedCall{"db": {{err: e503}, {err: e503}, {err: e503}}}, "db")
		p := newPoller(cfg, h.check, h.list, func(string, bool) { panic("pager unreachable") })
		p.start()
		time.Sleep(21 * time.Second)
		shutdown(t, p, 2*time.Second, time.Second)
		if got, want := len(h.begun["db"]), 4; got != want {
			t.Errorf("db checked %d times, want %d", got, want)
		}
		for _, want := range []string{`msg="poll failed" target=db`, "InternalError", "pager unreachable"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, buf.String())
			}
		}
	})
}

// Shutdown cancels a read of the list under way: it does not wait for it.
func TestPollerShutdownCancelsTheRefresh(t *testing.T) {
	eachPoller(t, func(t *testing.T, start func(pollerConfig, *healthChecks) healthPoller) {
		h := newHealthChecks(nil, "api")
		p := start(productionConfig, h)
		time.Sleep(20 * time.Second)
		h.mu.Lock()
		h.listTakes = 800 * time.Millisecond
		h.mu.Unlock()
		time.Sleep(10100 * time.Millisecond)
		shutdown(t, p, 2*time.Second, time.Second)
		if took := time.Since(h.start); took != 30100*time.Millisecond {
			t.Errorf("Shutdown returned at %v, want 30.1s", took)
		}
	})
}
