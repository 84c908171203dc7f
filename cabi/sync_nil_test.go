//go:build cgo

package cabi_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// Sync on a foreign table given a nil argument fails the step at once with
// an InternalError that names the argument: the Syncer when both are nil.
func TestForeignSyncNamesTheNilArgument(t *testing.T) {
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	as := cabi.Wrap(root)
	mu := asyncsteps.NewMutex(1)
	body := func(asyncsteps.AsyncSteps, ...any) {}
	var trace []string
	for _, c := range []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
	}{
		{"nil Syncer", func(as asyncsteps.AsyncSteps) { as.Sync(nil, body) }},
		{"nil function", func(as asyncsteps.AsyncSteps) { as.Sync(mu, nil) }},
		{"both nil", func(as asyncsteps.AsyncSteps) { as.Sync(nil, nil) }},
		{"nil *Mutex, nil function", func(as asyncsteps.AsyncSteps) { as.Sync((*asyncsteps.Mutex)(nil), nil) }},
		{"nil Syncer of another package, nil function", func(as asyncsteps.AsyncSteps) { as.Sync((*otherSyncer)(nil), nil) }},
		{"key of a nil *KeyedMutex", func(as asyncsteps.AsyncSteps) {
			as.Sync((*asyncsteps.KeyedMutex[string])(nil).Key("a"), body)
		}},
		{"key of a nil *KeyedMutex, nil function", func(as asyncsteps.AsyncSteps) {
			as.Sync((*asyncsteps.KeyedMutex[string])(nil).Key("a"), nil)
		}},
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
		"nil Syncer: InternalError Sync: nil Syncer",
		"nil function: InternalError Sync: nil step function",
		"both nil: InternalError Sync: nil Syncer",
		"nil *Mutex, nil function: InternalError Sync: nil Syncer",
		"nil Syncer of another package, nil function: InternalError Sync: nil Syncer",
		"key of a nil *KeyedMutex: InternalError Sync: nil Syncer",
		"key of a nil *KeyedMutex, nil function: InternalError Sync: nil Syncer",
	}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("Go trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
	checkTrace(t,
		"fake: running root valid=0",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: handle_error InternalError: Sync: nil step function",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: handle_error InternalError: Sync: nil Syncer",
		"fake: end failed=0  string cleanups=1",
	)
}

// otherSyncer is a Syncer of another package than asyncsteps.
type otherSyncer struct{}

func (*otherSyncer) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(f, onerror...)
}
