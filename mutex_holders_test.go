package asyncsteps

import (
	"fmt"
	"testing"
	"time"
)

// A Mutex counts its holders in a list up to smallHolders slots and in a
// map above. Either way, slots+3 flows that each enter twice (reentrant)
// are let in slots at a time, each holding two entries under one key while
// inside, and leave nothing behind.
func TestMutexHolderSetListAndMap(t *testing.T) {
	for _, slots := range []int{1, smallHolders, smallHolders + 1} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			tt := NewTestTool()
			m := NewMutex(slots)
			var trace []string
			flows := slots + 3
			for i := range flows {
				r := New(WithTool(tt))
				r.Sync(m, func(as AsyncSteps, _ ...any) {
					as.Sync(m, func(as AsyncSteps, _ ...any) {
						m.mu.Lock()
						trace = append(trace, fmt.Sprintf("%d:%d/%d", i, m.holders.count(owner(as)), m.holders.len()))
						m.mu.Unlock()
						as.WaitExternal()
						as.Tool().Deferred(time.Duration(i+1)*time.Millisecond, func() { as.Success() })
					})
				})
				r.Promise()
			}
			tt.Advance(0)
			if got := len(trace); got != slots {
				t.Fatalf("%d flows inside at first, want %d", got, slots)
			}
			for tt.HasEvents() {
				tt.Advance(time.Millisecond)
			}
			if got := len(trace); got != flows {
				t.Fatalf("%d flows entered, want %d", got, flows)
			}
			for k, step := range trace {
				var i, n, holders int
				fmt.Sscanf(step, "%d:%d/%d", &i, &n, &holders)
				if n != 2 || holders < 1 || holders > slots {
					t.Errorf("entry %d: %s (flow:entries/holders), want 2 entries of at most %d holders", k, step, slots)
				}
			}
			if (m.holders.byKey != nil) != (slots > smallHolders) {
				t.Errorf("map in use: %v, want %v", m.holders.byKey != nil, slots > smallHolders)
			}
			syncMutexClean(t, m)
		})
	}
}

// count returns the entries key holds.
func (h *holderSet) count(key *frame) int {
	if h.byKey != nil {
		return h.byKey[key]
	}
	for _, c := range h.list {
		if c.key == key {
			return c.n
		}
	}
	return 0
}
