//go:build cgo

package cabi

import (
	"runtime"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The loop of DefaultTool never closes: cabi starts no goroutine to wait
// for its end, and keeps no post to it for a fallback that would never
// run. Before, a watcher waited on it for the life of the process, and
// every post took two locks to link and unlink itself.
func TestDefaultLoopIsNeitherWatchedNorKept(t *testing.T) {
	l := asyncsteps.DefaultTool().(*asyncsteps.Loop)
	// A loopCtx made now, as for the first C flow on the loop; the one of
	// an earlier test comes back after.
	if v, ok := loops.LoadAndDelete(l); ok {
		defer loops.Store(l, v)
	}
	before := watchers()
	lp := loopFor(l)
	defer loops.Delete(l)
	if got := watchers(); got > before {
		t.Errorf("%d goroutines wait for the end of a loop, %d before loopFor(DefaultTool)", got, before)
	}

	in, resume, ran := make(chan struct{}), make(chan struct{}), make(chan struct{})
	l.Immediate(func() { close(in); <-resume }) // the post waits behind this
	<-in
	lp.post(func() { close(ran) }, func() { t.Error("the fallback of a post to DefaultTool ran") })
	lp.mu.Lock()
	kept := lp.head != nil
	lp.mu.Unlock()
	close(resume)
	<-ran
	if kept {
		t.Error("a post to DefaultTool's loop was kept for a fallback")
	}
}

// watchers counts the goroutines that wait for the end of a loop.
func watchers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "cabi.(*loopCtx).watch(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
