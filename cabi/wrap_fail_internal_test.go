//go:build cgo

package cabi

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// errGone is the Go error that Go fails a C step with.
var errGone = errors.New("gone by Go")

// asyncsteps.Fail on the pointer of a C step, in its C callback, fails
// the step as Error does there (the C callback returns first: no Go panic
// crosses its frames), with the Go error kept as the Cause and in
// LastException, and releases the step's node.
func TestFailOnACStepInItsCallback(t *testing.T) {
	w := startWrapRun(t, func(w *wrapRun, step unsafe.Pointer) {
		w.trace = append(w.trace, "hook")
		asyncsteps.Fail(Wrap(step), errGone)
		w.trace = append(w.trace, "Fail returned")
	})
	if w.ended != asyncsteps.InternalError || w.st.ErrorInfo != "gone by Go" {
		t.Errorf("the flow ended with %q (%q), want InternalError (gone by Go)", w.ended, w.st.ErrorInfo)
	}
	if exc := w.st.LastException; exc != errGone {
		t.Errorf("LastException = %#v, want the Go error", exc)
	}
	if got := fmt.Sprint(w.trace); got != "[hook Fail returned]" {
		t.Errorf("trace = %s, want [hook Fail returned]", got)
	}
	w.freeClean(t)
}
