package asyncsteps

import (
	"sync/atomic"
	"testing"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// toolinfo.Closing gives a channel that Close closes as it sets Closed,
// before the loop's last callback has returned (Done waits for it), and
// asking for it does not wake the loop. It is closed already on a closed
// Loop and a zero Loop, and nil for the loop of DefaultTool and for a
// tool that is not a Loop.
func TestClosingChanIsClosedByClose(t *testing.T) {
	l := NewLoop()
	var passes atomic.Int64
	l.SetHooks(&Hooks{LoopPass: func(*Loop, int) { passes.Add(1) }})
	ran := make(chan struct{})
	l.Immediate(func() { close(ran) })
	<-ran // the loop sleeps now, until something wakes it
	before := passes.Load()
	ch := toolinfo.Closing(l)
	if again := toolinfo.Closing(l); again != ch {
		t.Error("a second call gave another channel")
	}
	if isClosed(ch) {
		t.Fatal("closed before Close")
	}
	if n := passes.Load() - before; n != 0 {
		t.Errorf("%d passes of the loop for the channel, want 0", n)
	}
	started, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	l.Immediate(func() {
		close(started)
		<-release
	})
	<-started // else Close could come first, and a closing loop runs no task
	go func() {
		defer close(returned)
		l.Close()
	}()
	<-ch // Close's first moment, while the loop's callback still runs
	if !l.Closed() {
		t.Error("the channel is closed, but not Closed")
	}
	select {
	case <-l.Done():
		t.Error("Done before the last callback returned")
	default:
	}
	close(release)
	<-returned
	if !isClosed(toolinfo.Closing(l)) || !isClosed(toolinfo.Closing(new(Loop))) {
		t.Error("a closed Loop or a zero Loop gave a channel not closed")
	}
	if toolinfo.Closing(DefaultTool()) != nil || toolinfo.Closing(NewTestTool()) != nil {
		t.Error("the loop of DefaultTool or a TestTool gave a channel")
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
