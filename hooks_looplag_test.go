package asyncsteps_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// LoopPass and LoopLag report each pass exactly, also at the start of a
// Loop made in a testing/synctest bubble, whose clock reads 0 until
// virtual time moves: the first pass's lag is 0, not negative, and a
// callback that takes 10ms delays the probe behind it by 10ms exactly.
func TestHooksLoopPassAndLagExactOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var log []string
		l.SetHooks(&asyncsteps.Hooks{
			LoopPass: func(_ *asyncsteps.Loop, queued int) { log = append(log, fmt.Sprint("pass ", queued)) },
			LoopLag:  func(_ *asyncsteps.Loop, lag time.Duration) { log = append(log, fmt.Sprint("lag ", lag)) },
		})
		synctest.Wait() // the hooks are set, and the loop sleeps
		done := make(chan struct{})
		l.Immediate(func() {
			l.Immediate(func() { time.Sleep(10 * time.Millisecond) })
			l.Immediate(func() {})
			l.Immediate(func() { close(done) })
		})
		<-done
		synctest.Wait() // the probe behind done has run, and the loop sleeps
		got := fmt.Sprint(log)
		if want := "[pass 1 lag 0s pass 3 lag 10ms]"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// A LoopPass hook that panics at every pass is logged each time, and the
// pass goes on as after one that returned: it still measures its lag, and
// LoopLag still reports it.
func TestHooksLoopLagAfterALoopPassThatPanics(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(old)
	synctest.Test(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var log []string
		l.SetHooks(&asyncsteps.Hooks{
			LoopPass: func(_ *asyncsteps.Loop, queued int) {
				log = append(log, fmt.Sprint("pass ", queued))
				panic("LoopPass")
			},
			LoopLag: func(_ *asyncsteps.Loop, lag time.Duration) { log = append(log, fmt.Sprint("lag ", lag)) },
		})
		synctest.Wait()
		done := make(chan struct{})
		l.Immediate(func() {
			time.Sleep(10 * time.Millisecond)
			close(done)
		})
		<-done
		synctest.Wait()
		got := fmt.Sprint(log, " panics logged: ", strings.Count(logs.String(), "panic=LoopPass"))
		if want := "[pass 1 lag 10ms] panics logged: 1"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// Hooks that SetHooks has replaced are called no more: the lag probe a
// pass queued before the replacement took effect reports to nobody.
func TestHooksLoopLagNotCalledOnceRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var log []string
		l.SetHooks(&asyncsteps.Hooks{
			LoopLag: func(_ *asyncsteps.Loop, lag time.Duration) { log = append(log, fmt.Sprint("lag ", lag)) },
		})
		synctest.Wait()
		release := make(chan struct{})
		l.Immediate(func() { <-release }) // its pass measures the lag behind it
		synctest.Wait()
		// Queued together for the next pass, which queues a probe before
		// it runs them: the probe runs after the hooks are removed.
		l.SetHooks(nil)
		done := make(chan struct{})
		l.Immediate(func() { close(done) })
		close(release)
		<-done
		synctest.Wait()
		if got, want := fmt.Sprint(log), "[lag 0s]"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// LoopPass counts the callbacks ready to run, not the lag probe still
// queued from a pass that the limit of 256 callbacks a batch cut short.
func TestHooksLoopPassCountsNoLagProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var log []string
		l.SetHooks(&asyncsteps.Hooks{
			LoopPass: func(_ *asyncsteps.Loop, queued int) { log = append(log, fmt.Sprint("pass ", queued)) },
			LoopLag:  func(_ *asyncsteps.Loop, lag time.Duration) { log = append(log, fmt.Sprint("lag ", lag)) },
		})
		synctest.Wait()
		l.Immediate(func() {
			for range 300 {
				l.Immediate(func() {})
			}
		})
		synctest.Wait()
		got := fmt.Sprint(log)
		if want := "[pass 1 lag 0s pass 300 pass 44 lag 0s]"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}
