package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A retry waits up to -retry-backoff before the first retry, twice that
// before the second, and so on, the doubling capped; 0 retries at once.
func TestBackoffDoublesUpToItsCap(t *testing.T) {
	cfg := config{RetryBackoff: 25 * time.Millisecond, jitter: func(ceiling time.Duration) time.Duration { return ceiling }}
	for n, want := range map[int]time.Duration{
		0: 0, 1: 25 * time.Millisecond, 2: 50 * time.Millisecond, 3: 100 * time.Millisecond,
		11: 25 * time.Millisecond << 10, 100: 25 * time.Millisecond << 10,
	} {
		if got := cfg.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (&config{}).backoff(1); got != 0 {
		t.Errorf("backoff(1) without -retry-backoff = %v, want 0", got)
	}
	maxCfg := config{RetryBackoff: maxRetryBackoff, jitter: cfg.jitter}
	if got := maxCfg.backoff(maxRetries); got != maxRetryBackoff<<maxBackoffDoublings {
		t.Errorf("backoff(%d) of -retry-backoff %v = %v, want %v", maxRetries, maxRetryBackoff, got, maxRetryBackoff<<maxBackoffDoublings)
	}
}

// Without a jitter of the test's, the wait is drawn at random from 0 to
// its ceiling, both included, and not always the same.
func TestBackoffIsRandomWithinItsCeiling(t *testing.T) {
	cfg := config{RetryBackoff: 4 * time.Nanosecond}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := cfg.backoff(2)
		if d < 0 || d > 8 {
			t.Fatalf("backoff(2) = %v, want 0 to 8ns", d)
		}
		seen[d] = true
	}
	if len(seen) != 9 {
		t.Errorf("1000 draws gave %d of the 9 waits from 0 to 8ns", len(seen))
	}
}

// Both gateways wait between the attempts at a failing symbol: here the
// whole ceiling, 20 ms then 40 ms, before the third attempt answers.
func TestQuoteRetriesWaitTheirBackoff(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.RetryBackoff = 20 * time.Millisecond
			cfg.jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			g := startGateway(t, impl, cfg)
			g.up.answer("AAPL", 500, 503)
			start := time.Now()
			wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
			if took := time.Since(start); took < 60*time.Millisecond {
				t.Errorf("answered after %v, want at least the waits of 20 and 40 ms", took)
			}
			if n := g.up.count("AAPL"); n != 3 {
				t.Errorf("AAPL asked %d times, want 3", n)
			}
			checkCounters(t, g.gw.stats, counters{started: 1, finished: map[string]int64{"OK": 1}})
		})
	}
}

// The request's timeout ends a retry's wait: the request is answered 504
// at its timeout, the upstream asked no more.
func TestQuoteTimeoutEndsTheBackoff(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.Timeout, cfg.RetryBackoff = 100*time.Millisecond, time.Minute
			cfg.jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			g := startGateway(t, impl, cfg)
			g.up.answer("AAPL", 500, 500, 500, 500)
			start := time.Now()
			wantAnswer(t, g.get("?symbols=AAPL"), 504, "", errBody("Timeout", "request timed out"))
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("answered after %v, want about the timeout, 100ms", took)
			}
			if n := g.up.count("AAPL"); n != 1 {
				t.Errorf("AAPL asked %d times, want once", n)
			}
			checkCounters(t, g.gw.stats, counters{started: 1, finished: map[string]int64{"Timeout": 1}})
		})
	}
}

// An -attempt-timeout not shorter than -timeout is accepted, with a
// warning at start naming both: the request's timeout bounds each attempt.
func TestAttemptTimeoutNotShorterIsWarned(t *testing.T) {
	up := httptest.NewServer(newFakeUpstream())
	defer up.Close()
	_, logs := runLogged(t, "-upstream", up.URL, "-timeout", "1s", "-attempt-timeout", "2s")
	want := `level=WARN msg="-attempt-timeout is not shorter than -timeout: an upstream request is bounded by its request's timeout" attempt_timeout=2s timeout=1s` + "\n"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line %q", logs, want)
	}
	_, logs = runLogged(t, "-upstream", up.URL, "-timeout", "1s", "-attempt-timeout", "999ms")
	if strings.Contains(logs.String(), "-attempt-timeout") {
		t.Errorf("log:\n%s\nwant no warning for an attempt timeout shorter than the request's", logs)
	}
}
