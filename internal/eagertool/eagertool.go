// Package eagertool is a Tool for tests: one of the caller's, not of
// package asyncsteps, that runs its callbacks inside Immediate.
package eagertool

import (
	"sync"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Tool runs its callbacks inside Immediate: the outermost call runs them
// all, those scheduled meanwhile (from its callbacks or other goroutines)
// included, one at a time, before it returns. Deferred callbacks run as
// immediate ones: the tests that use it start no timer that must wait.
// Its zero value is ready to use.
type Tool struct {
	mu      sync.Mutex
	queue   []func()
	running bool
}

type handle struct{}

func (handle) Cancel()       {}
func (handle) IsValid() bool { return false }

// Immediate implements [asyncsteps.Tool].
func (t *Tool) Immediate(f func()) asyncsteps.Handle {
	t.mu.Lock()
	t.queue = append(t.queue, f)
	if t.running {
		t.mu.Unlock()
		return handle{}
	}
	t.running = true
	for len(t.queue) > 0 {
		f := t.queue[0]
		t.queue = t.queue[1:]
		t.mu.Unlock()
		f()
		t.mu.Lock()
	}
	t.running = false
	t.mu.Unlock()
	return handle{}
}

// Deferred implements [asyncsteps.Tool]: f runs as an immediate callback.
func (t *Tool) Deferred(_ time.Duration, f func()) asyncsteps.Handle { return t.Immediate(f) }

// IsSameThread implements [asyncsteps.Tool]: true while callbacks run.
func (t *Tool) IsSameThread() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// Now implements [asyncsteps.Tool]: the clock stands at TestToolEpoch.
func (t *Tool) Now() time.Time { return asyncsteps.TestToolEpoch }
