package asyncsteps

import (
	"testing"
	"time"
)

// TestTestToolNestedAdvanceStopsAtTheOuterEnd: an Advance called from a
// callback that an Advance runs goes no further than the outer call's
// end, and neither do a Run or a NextEvent called there: what falls due
// later runs at the next Advance, each callback with the clock at its
// due time. The nested Advance carried the clock 21 s on inside an
// Advance of 10 s, which ran the callbacks due at 15 s and 20 s and
// returned with the clock at 22 s.
func TestTestToolNestedAdvanceStopsAtTheOuterEnd(t *testing.T) {
	for _, nested := range []struct {
		name string
		call func(tt *TestTool)
		back string // the clock when the nested calls return
	}{
		{"Advance", func(tt *TestTool) { tt.Advance(20 * time.Second) }, "10s"},
		{"Advance, then Advance", func(tt *TestTool) { tt.Advance(20 * time.Second); tt.Advance(time.Hour) }, "10s"},
		{"Run", func(tt *TestTool) { tt.Run() }, "5s"},
		{"NextEvent", func(tt *TestTool) {
			for tt.NextEvent() {
			}
		}, "5s"},
	} {
		t.Run(nested.name, func(t *testing.T) {
			tt := NewTestTool()
			var tr trace
			at := func(name string) func() { return func() { tr.add("%s@%v", name, offset(tt)) } }
			tt.Deferred(2*time.Second, func() {
				tr.add("nested@%v", offset(tt))
				nested.call(tt)
				tr.add("back@%v", offset(tt))
			})
			tt.Deferred(5*time.Second, at("a"))
			tt.Deferred(15*time.Second, at("b"))
			tt.Deferred(20*time.Second, at("c"))
			tt.Advance(10 * time.Second)
			tr.add("end@%v", offset(tt))
			tt.Advance(10 * time.Second)
			tr.add("end@%v", offset(tt))
			want := "nested@2s a@5s back@" + nested.back + " end@10s b@15s c@20s end@20s"
			if got := tr.String(); got != want {
				t.Errorf("trace = %q, want %q", got, want)
			}
		})
	}
}
