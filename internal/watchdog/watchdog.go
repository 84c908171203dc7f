// Package watchdog times the hangs of the fuzzing harnesses on the time
// their process runs, not on the wall clock: a test binary stopped or
// starved as a whole (its machine paused, loaded, a debugger attached)
// has not hung, and a harness that took the wall clock's word for it
// crashed fuzzing workers with no input to blame.
package watchdog

import (
	"sync"
	"sync/atomic"
	"time"
)

// ticksPerLimit is how finely a Timer counts: it reads the clock that
// many times over its limit.
const ticksPerLimit = 50

// Timer calls its function once the process has run for its limit since
// AfterFunc, unless stopped first. It counts the gaps between its ticks,
// each at most two ticks long: a longer gap is the process stalled.
type Timer struct {
	limit   time.Duration
	f       func()
	elapsed atomic.Int64 // the running time counted, in nanoseconds
	stop    chan struct{}
	once    sync.Once
}

// AfterFunc starts a Timer that calls f, on a goroutine of its own, once
// the process has run for limit.
func AfterFunc(limit time.Duration, f func()) *Timer {
	t := newTimer(limit, f)
	tick := max(limit/ticksPerLimit, time.Millisecond)
	ticker := time.NewTicker(tick)
	go func() {
		defer ticker.Stop()
		t.count(tick, time.Now(), ticker.C)
	}()
	return t
}

func newTimer(limit time.Duration, f func()) *Timer {
	return &Timer{limit: limit, f: f, stop: make(chan struct{})}
}

// count counts the gaps between the times of ticks, from start, until
// the limit is reached (it then calls f) or the Timer is stopped.
func (t *Timer) count(tick time.Duration, start time.Time, ticks <-chan time.Time) {
	last := start
	for {
		select {
		case <-t.stop:
			return
		case now := <-ticks:
			if t.advance(now.Sub(last), tick) {
				t.f()
				return
			}
			last = now
		}
	}
}

// advance counts gap, the time between two ticks, at most two ticks of
// it, and reports whether the limit is reached.
func (t *Timer) advance(gap, tick time.Duration) bool {
	return time.Duration(t.elapsed.Add(int64(min(gap, 2*tick)))) >= t.limit
}

// Elapsed returns the running time counted so far.
func (t *Timer) Elapsed() time.Duration { return time.Duration(t.elapsed.Load()) }

// Expired reports whether the limit has been reached.
func (t *Timer) Expired() bool { return t.Elapsed() >= t.limit }

// Stop stops the Timer: f is not called if it has not been yet. Stop may
// be called more than once.
func (t *Timer) Stop() { t.once.Do(func() { close(t.stop) }) }
