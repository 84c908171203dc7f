package asyncsteps_test

import (
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Immediate and Deferred with a nil function schedule nothing: the handle
// is invalid at once and the tool has no event for it (the loop called the
// nil function, a nil dereference it recovered and logged as a panic).
func TestImmediateAndDeferredOfNilScheduleNothing(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	for name, h := range map[string]asyncsteps.Handle{
		"TestTool Immediate": tt.Immediate(nil),
		"TestTool Deferred":  tt.Deferred(time.Second, nil),
	} {
		if h.IsValid() {
			t.Errorf("%s(nil) returned a valid handle", name)
		}
	}
	if tt.HasEvents() {
		t.Errorf("the TestTool has %d events, want none", tt.Pending())
	}

	loop := asyncsteps.NewLoop()
	defer loop.Close()
	release := make(chan struct{})
	loop.Immediate(func() { <-release }) // the loop runs nothing else meanwhile
	for name, h := range map[string]asyncsteps.Handle{
		"Loop Immediate": loop.Immediate(nil),
		"Loop Deferred":  loop.Deferred(0, nil),
	} {
		if h.IsValid() {
			t.Errorf("%s(nil) returned a valid handle", name)
		}
	}
	close(release)
}
