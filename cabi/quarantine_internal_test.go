//go:build cgo

package cabi

import (
	"os"
	"os/exec"
	"testing"
	"unsafe"
)

// The struct of a released pointer is reused only once 1024 pointers
// were released after it; that of a step that waited, also not before a
// minute (checked here: not at once). Run in a child process, where no
// other flow releases or takes a struct meanwhile.
func TestReleasedStructIsReusedOnlyAfterTheQuarantine(t *testing.T) {
	const env = "CABI_QUARANTINE_CHILD"
	if os.Getenv(env) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count", "1")
		cmd.Env = append(os.Environ(), env+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child process: %v; output:\n%s", err, out)
		}
		return
	}
	for _, waited := range []bool{false, true} {
		first := allocBSI(1)
		releaseBSI(first, waited)
		for range quarantine - 1 {
			releaseBSI(allocBSI(1), waited)
		}
		if b := allocBSI(1); unsafe.Pointer(b) == unsafe.Pointer(first) {
			t.Fatalf("waited=%v: reused after %d later releases", waited, quarantine-1)
		} else {
			releaseBSI(b, waited)
		}
		// first now has quarantine structs released after it.
		b := allocBSI(1)
		reused := unsafe.Pointer(b) == unsafe.Pointer(first)
		releaseBSI(b, waited) // kept by the pool, not leaked
		if reused != !waited {
			t.Errorf("waited=%v: reused=%v after %d later releases, want %v", waited, reused, quarantine, !waited)
		}
	}
}
