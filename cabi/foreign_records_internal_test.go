//go:build cgo

package cabi

import (
	"reflect"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// recordCount is the number of records of Go functions given to foreign
// tables.
func recordCount() int {
	frecs.mu.Lock()
	defer frecs.mu.Unlock()
	return len(frecs.m)
}

// A Go step on a foreign table that sets a cancel handler, or waits, and
// adds sub-steps (a Sync on a Mutex does both, for its section) completes
// with its sub-steps, and its records go then: that of its cancel handler
// and that of its error handler. Before, the step counted as waiting, and
// nothing dropped them: they stayed for good, with all they held (the
// section's args, here placeholders of the fake).
func TestForeignStepThatWaitsAndAddsKeepsNoRecord(t *testing.T) {
	var trace []string
	log := func(s string) { trace = append(trace, s) }
	sub := func(asyncsteps.AsyncSteps, ...any) { log("sub-step") }
	cancel := func(asyncsteps.AsyncSteps) { log("VIOLATION: cancel handler") }
	for _, c := range []struct {
		name string
		step asyncsteps.StepFunc
		want []string
	}{
		{"SetCancel then Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(cancel)
			as.Add(sub)
		}, []string{"sub-step", "next step"}},
		{"Add then SetCancel", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(sub)
			as.SetCancel(cancel)
		}, []string{"sub-step", "next step"}},
		{"WaitExternal then Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.Add(sub)
		}, []string{"sub-step", "next step"}},
		{"Sync on a Mutex", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(asyncsteps.NewMutex(1), sub)
		}, []string{"sub-step", "next step"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			trace = nil
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(c.step, func(_ asyncsteps.AsyncSteps, code string) { log("error handler " + code) })
			as.Add(func(asyncsteps.AsyncSteps, ...any) { log("next step") })
			ctest.FakeRun(root)
			if !reflect.DeepEqual(trace, c.want) {
				t.Errorf("trace %q, want %q", trace, c.want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}
