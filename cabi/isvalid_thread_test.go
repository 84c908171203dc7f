//go:build cgo

package cabi_test

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// isValid from a C thread while the loop settles the step and releases
// its pointer: the header lets any thread call it. Under -race, the read
// of the pointer's state raced with the loop's release.
func TestIsValidFromAThreadWhileTheLoopReleases(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	ctest.ValidFromThread(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	ctest.JoinWorker()
	if got, want := ctest.ReviewTrace(), []string{"worker: isValid 0"}; !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}
