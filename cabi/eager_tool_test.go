//go:build cgo

package cabi_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// eagerTool is a Tool of the caller's that runs its callbacks inside
// Immediate: the outermost call runs them all, those scheduled meanwhile
// included, before it returns. Deferred callbacks run as immediate ones
// (the tests that use it start no timer that must wait).
type eagerTool struct {
	mu      sync.Mutex
	queue   []func()
	running bool
}

type eagerHandle struct{}

func (eagerHandle) Cancel()       {}
func (eagerHandle) IsValid() bool { return false }

func (t *eagerTool) Immediate(f func()) asyncsteps.Handle {
	t.mu.Lock()
	t.queue = append(t.queue, f)
	if t.running {
		t.mu.Unlock()
		return eagerHandle{}
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
	return eagerHandle{}
}

func (t *eagerTool) Deferred(_ time.Duration, f func()) asyncsteps.Handle { return t.Immediate(f) }

func (t *eagerTool) IsSameThread() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

func (t *eagerTool) Now() time.Time { return asyncsteps.TestToolEpoch }

// On a Tool that runs the flow inside execute, a C step may free its own
// root: the free, which comes while execute starts the flow, is released
// once the start has returned, and cancels the flow then (the held step's
// cancel handler runs). Holding a lock over the start, so that a free from
// another thread waits for it, would deadlock here.
func TestStepFreesItsRootOnToolThatRunsInsideImmediate(t *testing.T) {
	ctest.Reset()
	root := cabi.New(&eagerTool{})
	ctest.FreeOwn(root)
	ctest.HeldWithCancel(root)
	ctest.ExecuteOnly(root, "x", 1)
	want := []string{"free own root", "held", "held cancel"}
	if got := ctest.Lines(); !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}
