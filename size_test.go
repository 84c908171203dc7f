package asyncsteps

import (
	"testing"
	"unsafe"
)

// A parked flow is its Root, the frame of its waiting step and that step's
// handle; docs/PERFORMANCE.md (workload h) holds it to 400 bytes. These are
// the sizes that keep it there: a field added to frame or Root must be paid
// for elsewhere.
func TestParkedFlowFitsItsBudget(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"frame", unsafe.Sizeof(frame{}), 112},
		{"Root", unsafe.Sizeof(Root{}), 192},
		{"handle", unsafe.Sizeof(stepAPI{}), 24},
	}
	total := uintptr(0)
	for _, s := range sizes {
		if s.got > s.want {
			t.Errorf("%s is %d bytes, want at most %d", s.name, s.got, s.want)
		}
		total += s.got
	}
	if total > 328 {
		t.Errorf("a parked flow is %d bytes, want at most 328", total)
	}
}

// A flow's first four steps share one 64-byte array (Root.push), which a
// field added to step would make 96: workloads c and g allocate it once
// per flow.
func TestStepFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(step{}); got > 16 {
		t.Errorf("step is %d bytes, want at most 16", got)
	}
}

// A critical section is one allocation per Sync (workload f); at 256 bytes
// it fills its size class exactly.
func TestSectionFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(section{}); got > 256 {
		t.Errorf("section is %d bytes, want at most 256", got)
	}
}
