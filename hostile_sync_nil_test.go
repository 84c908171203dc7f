package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The infos of a Sync given a nil argument: they name the argument, the
// Syncer when both are nil.
const (
	nilSyncerInfo   = "Sync: nil Syncer"
	nilSyncFuncInfo = "Sync: nil step function"
)

// A nil *Mutex, *Throttle or *Limiter is a Syncer that is not nil as an
// interface: given to Sync, or its Sync method called directly (as an
// asynchttp Client's Guard does), it is the same misuse as a nil Syncer,
// not a nil dereference inside the section's step. Their Sync with a nil
// function is a nil step function. The info says which, also when the
// Sync method is called with an AsyncSteps that is not the package's own.
func TestNilSyncerPointersAreMisuse(t *testing.T) {
	body := func(as asyncsteps.AsyncSteps, _ ...any) {}
	syncers := []struct {
		name   string
		nilPtr asyncsteps.Syncer
		made   asyncsteps.Syncer
	}{
		{"Mutex", (*asyncsteps.Mutex)(nil), asyncsteps.NewMutex(1)},
		{"Throttle", (*asyncsteps.Throttle)(nil), asyncsteps.NewThrottle(1, 1)},
		{"Limiter", (*asyncsteps.Limiter)(nil), asyncsteps.NewLimiter(asyncsteps.LimiterOptions{})},
		{"KeyedMutex key", (*asyncsteps.KeyedMutex[string])(nil).Key("a"), asyncsteps.NewKeyedMutex[string](1).Key("a")},
		{"KeyedThrottle key", (*asyncsteps.KeyedThrottle[string])(nil).Key("a"), asyncsteps.NewKeyedThrottle[string](1, 1).Key("a")},
		{"KeyedLimiter key", (*asyncsteps.KeyedLimiter[string])(nil).Key("a"), new(asyncsteps.KeyedLimiter[string]).Key("a")},
	}
	for _, s := range syncers {
		nilPtr, made := s.nilPtr, s.made
		cases := []struct {
			name string
			call func(as asyncsteps.AsyncSteps)
			info string
			own  bool // calls the Syncer's own Sync: also run on a foreign AsyncSteps
		}{
			{"Sync nil *" + s.name, func(as asyncsteps.AsyncSteps) { as.Sync(nilPtr, body) }, nilSyncerInfo, false},
			{"Sync nil *" + s.name + " and nil function", func(as asyncsteps.AsyncSteps) { as.Sync(nilPtr, nil) }, nilSyncerInfo, false},
			{"nil *" + s.name + ".Sync", func(as asyncsteps.AsyncSteps) { nilPtr.Sync(as, body) }, nilSyncerInfo, true},
			{"nil *" + s.name + ".Sync nil function", func(as asyncsteps.AsyncSteps) { nilPtr.Sync(as, nil) }, nilSyncerInfo, true},
			{s.name + ".Sync nil function", func(as asyncsteps.AsyncSteps) { made.Sync(as, nil) }, nilSyncFuncInfo, true},
		}
		for _, c := range cases {
			checkMisuse(t, c.name, c.call, c.info)
			if !c.own {
				continue
			}
			t.Run(c.name+" on a foreign AsyncSteps", func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				c.call(foreignSteps{r})
				r.Add(tr.step("after"))

				res := run(t, r, tt)

				wantTrace(t, &tr, "")
				wantError(t, res.Err, asyncsteps.InternalError, c.info)
			})
		}
	}
}
