//go:build cgo

package cabi_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// On a foreign table, as on the engine, a call given more than one error
// handler or label fails the step that made it with an InternalError that
// says so, rather than keeping the first and dropping the others.
func TestForeignMoreThanOneHandlerOrLabelIsAMisuse(t *testing.T) {
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	as := cabi.Wrap(root)
	body := func(asyncsteps.AsyncSteps, ...any) {}
	eh := func(asyncsteps.AsyncSteps, string) {}
	loop := func(asyncsteps.AsyncSteps) {}
	var trace []string
	for _, c := range []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
	}{
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(body, eh, eh) }},
		{"Await", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) { return nil, nil }, eh, eh)
		}},
		{"Parallel", func(as asyncsteps.AsyncSteps) { as.Parallel(eh, eh, eh) }},
		{"Loop", func(as asyncsteps.AsyncSteps) { as.Loop(loop, "a", "b") }},
		{"Repeat", func(as asyncsteps.AsyncSteps) { as.Repeat(1, func(asyncsteps.AsyncSteps, int) {}, "a", "b") }},
		{"ForEach", func(as asyncsteps.AsyncSteps) {
			as.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) {}, "a", "b")
		}},
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break("a", "b") }},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue("a", "b") }},
	} {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			c.call(as)
			trace = append(trace, c.name+": not aborted")
		}, func(as asyncsteps.AsyncSteps, code string) {
			trace = append(trace, c.name+": "+code+" "+as.State().ErrorInfo)
			as.Success()
		})
	}
	ctest.FakeRun(root)
	want := []string{
		"Add: InternalError Add: more than one error handler (2 given)",
		"Await: InternalError Await: more than one error handler (2 given)",
		"Parallel: InternalError Parallel: more than one error handler (3 given)",
		"Loop: InternalError Loop: more than one label (2 given)",
		"Repeat: InternalError Repeat: more than one label (2 given)",
		"ForEach: InternalError ForEach: more than one label (2 given)",
		"Break: InternalError Break: more than one label (2 given)",
		"Continue: InternalError Continue: more than one label (2 given)",
	}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("Go trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
}

// Sync given more than one error handler fails the step that called it,
// as on the engine, not one step later inside the Syncer's own Sync (a
// test of its own: the fake table holds at most 8 sub-steps).
func TestForeignSyncMoreThanOneHandlerIsAMisuse(t *testing.T) {
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	as := cabi.Wrap(root)
	body := func(asyncsteps.AsyncSteps, ...any) {}
	eh := func(asyncsteps.AsyncSteps, string) {}
	var trace []string
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Sync(&otherSyncer{}, body, eh, eh)
		trace = append(trace, "not aborted")
	}, func(as asyncsteps.AsyncSteps, code string) {
		trace = append(trace, code+" "+as.State().ErrorInfo)
		as.Success()
	})
	ctest.FakeRun(root)
	want := []string{"InternalError Sync: more than one error handler (2 given)"}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("Go trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
}
