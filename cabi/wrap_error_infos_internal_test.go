//go:build cgo

package cabi

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// Go's Error through Wrap of a C step's pointer with more than one info
// fails the step as the engine's Error does on a Go step: an InternalError
// that names the code and every info. Before, the infos after the first
// were dropped, and the step failed with the code given.
func TestWrapErrorWithInfosFailsAsTheEngines(t *testing.T) {
	for _, tc := range []struct {
		code  string
		info  []string
		ended string
		want  string
	}{
		{"E1", []string{"a", "b"}, asyncsteps.InternalError, `Error: 2 infos, one at most; code: E1; info: "a", "b"`},
		{"E1", []string{"a"}, "E1", "a"},
		{"E1", nil, "E1", ""},
	} {
		w := startWrapRun(t, func(w *wrapRun, step unsafe.Pointer) {
			Wrap(step).Error(tc.code, tc.info...)
		})
		w.awaitEnd()
		if w.ended != tc.ended || w.st.ErrorInfo != tc.want {
			t.Errorf("Error(%q, %q): the flow ended with %q, info %q; want %q, info %q",
				tc.code, tc.info, w.ended, w.st.ErrorInfo, tc.ended, tc.want)
		}
		ctest.FlowFree(w.ptr)
		w.tt.Run()
		if n := nodesOf(w.st); n != 0 {
			t.Errorf("%d nodes of the flow in the registry, want 0", n)
		}
	}
}
