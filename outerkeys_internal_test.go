package asyncsteps

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// toolinfo.OuterKeys gives the keys of the flow and branches a step's
// branch was started from, the nearest first, as OwnerKey gives them;
// none in the flow itself, nor for what the engine cannot reach. An outer
// branch given out so is lent as OwnerKey lends its own key: never
// recycled for a later branch.
func TestOuterKeysAreTheBranchesAndFlowAround(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	var flow, branch any
	var ofFlow, ofBranch, ofInner, ofOpaque, ofOther []any
	r.Add(func(as AsyncSteps, _ ...any) {
		flow = toolinfo.OwnerKey(as)
		ofFlow = toolinfo.OuterKeys(as)
		ofOther = toolinfo.OuterKeys("not a step")
	})
	r.Parallel().Add(func(as AsyncSteps, _ ...any) {
		branch = toolinfo.OwnerKey(as)
		ofBranch = toolinfo.OuterKeys(as)
		as.Parallel().Add(func(as AsyncSteps, _ ...any) {
			ofInner = toolinfo.OuterKeys(as)
			ofOpaque = toolinfo.OuterKeys(struct{ AsyncSteps }{as})
		})
	})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if flow == nil || branch == nil || flow == branch {
		t.Fatalf("keys of the flow %v and of its branch %v: want two", flow, branch)
	}
	for what, c := range map[string]struct{ got, want []any }{
		"the flow":            {ofFlow, nil},
		"a branch":            {ofBranch, []any{flow}},
		"a branch's branch":   {ofInner, []any{branch, flow}},
		"an opaque decorator": {ofOpaque, nil},
		"a string":            {ofOther, nil},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("outer keys of %s: %v, want %v", what, c.got, c.want)
		}
	}
	if len(ofInner) == 0 {
		return
	}
	if f, ok := ofInner[0].(*frame); !ok || f.rare == nil || !f.rare.lent {
		t.Errorf("the outer branch given out is not lent")
	}
}
