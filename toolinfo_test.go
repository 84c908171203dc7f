package asyncsteps

import (
	"testing"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// What the module's other packages learn of a tool through toolinfo:
// only DefaultTool's loop never closes, and a callback posted to a
// TestTool with a fallback runs, or its fallback does when ResetEvents
// drops it, in the order posted, once the reset is done.
func TestToolInfo(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	if toolinfo.NeverCloses(l) || toolinfo.NeverCloses(NewTestTool()) || toolinfo.NeverCloses(nil) {
		t.Error("NeverCloses is true for a tool that may close")
	}
	if !toolinfo.NeverCloses(DefaultTool()) {
		t.Error("NeverCloses is false for DefaultTool")
	}
	if toolinfo.PostOrDrop(l, func() {}, func() {}) {
		t.Error("PostOrDrop queued on a Loop")
	}

	tt := NewTestTool()
	var tr trace
	post := func(name string) {
		toolinfo.PostOrDrop(tt, func() { tr.add("%s ran", name) }, func() {
			tr.add("%s dropped", name)
			if tt.Pending() != 0 {
				tr.add("pending")
			}
		})
	}
	post("a")
	tt.Run()
	post("b")
	tt.Immediate(func() { tr.add("immediate ran") })
	post("c")
	tt.ResetEvents()
	tt.Run()
	if got, want := tr.String(), "a ran b dropped c dropped"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}
