package asyncsteps

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A key whose period ends, with nobody waiting, while a flow has taken
// the key but not asked its Throttle yet, is kept for that flow: it
// enters the key's Throttle, not one that was dropped, and a flow that
// comes next within the period it opens waits for its end. Had the key
// been dropped, the first flow would have entered a Throttle that no map
// holds, and the next would have made a new one and entered at once.
// The newcomer runs on another tool, as a flow of another Loop would.
func TestKeyedThrottlePeriodEndsAsAFlowTakesTheKey(t *testing.T) {
	holderTool, tt := NewTestTool(), NewTestTool()
	kt := NewKeyedThrottle[string](1, 100*time.Millisecond)
	var trace []string
	note := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
	enter := func(tool *TestTool, name string) <-chan Result {
		r := New(WithTool(tool))
		kt.Sync(r, "a", func(as AsyncSteps, _ ...any) {
			note("%s in at %v", name, tool.Now().Sub(TestToolEpoch))
		})
		return r.Promise()
	}
	aRes := enter(holderTool, "A")
	holderTool.Advance(0)
	onceHook(t, &testHookKeyRateEnter, func() {
		note("B took the key, %d key", kt.Len())
		holderTool.Advance(100 * time.Millisecond) // A's period ends
		note("A's period ended, %d key", kt.Len())
	})
	bRes := enter(tt, "B")
	tt.Advance(0)
	note("%d key", kt.Len())
	tt.Advance(50 * time.Millisecond)
	cRes := enter(tt, "C")
	tt.Run()
	note("%d key", kt.Len())

	want := "A in at 0s,B took the key, 1 key,A's period ended, 1 key,B in at 0s,1 key,C in at 100ms,0 key"
	if got := strings.Join(trace, ","); got != want {
		t.Errorf("trace\n got: %s\nwant: %s", got, want)
	}
	for _, res := range []<-chan Result{aRes, bRes, cRes} {
		if r := <-res; r.Err != nil {
			t.Errorf("flow ended with %v", r.Err)
		}
	}
	if n := holderTool.Pending() + tt.Pending(); n != 0 {
		t.Errorf("%d events left", n)
	}
}

// Keys used once and gone give back the room of their map and of the
// parked keys' heap.
func TestKeyedThrottleGivesBackTheRoomOfItsKeys(t *testing.T) {
	tt := NewTestTool()
	kt := NewKeyedThrottle[int](1, time.Second)
	for i := range 4 * keptKeys {
		r := New(WithTool(tt))
		kt.Sync(r, i, func(AsyncSteps, ...any) {})
		r.Execute()
		kt.Hold(-1-i, TestToolEpoch.Add(time.Second))
	}
	tt.Advance(0)
	if n := len(kt.keys.parked); n != 4*keptKeys {
		t.Errorf("%d keys parked, want %d", n, 4*keptKeys)
	}
	tt.Run()
	r := New(WithTool(tt))
	kt.Sync(r, 0, func(AsyncSteps, ...any) {}) // sweeps the holds, which have ended
	r.Execute()
	tt.Run()
	if len(kt.keys.table.byKey) != 0 || kt.keys.table.peak > keptKeys || kt.keys.parked != nil {
		t.Errorf("%d keys in a map of peak %d, %d parked: want none in a map of peak %d at most, no heap",
			len(kt.keys.table.byKey), kt.keys.table.peak, len(kt.keys.parked), keptKeys)
	}
}

// A burst of parked keys gives back the room of their heap once most of
// them have gone, though a few are still parked, as the map of the keys
// does: a hold far ahead on one key keeps no room of the burst.
func TestKeyedThrottleGivesBackTheRoomOfABurstOfHolds(t *testing.T) {
	tt := NewTestTool()
	kt := NewKeyedThrottle[int](1, time.Second)
	kt.Hold(-1, TestToolEpoch.Add(time.Hour))
	for i := range 4 * keptKeys {
		kt.Hold(i, TestToolEpoch.Add(time.Second))
	}
	tt.Advance(time.Second)
	r := New(WithTool(tt))
	kt.Sync(r, 0, func(AsyncSteps, ...any) {}) // sweeps the holds that have ended
	r.Execute()
	tt.Run()
	if n, c := len(kt.keys.parked), cap(kt.keys.parked); n != 1 || c > keptKeys {
		t.Errorf("%d keys parked in a heap of room %d: want 1 in room for %d at most", n, c, keptKeys)
	}
	if n := kt.Len(); n != 1 {
		t.Errorf("%d keys in use, want 1", n)
	}
}
