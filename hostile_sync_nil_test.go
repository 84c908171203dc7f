package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A nil *Mutex, *Throttle or *Limiter is a Syncer that is not nil as an
// interface: given to Sync, or its Sync method called directly (as an
// asynchttp Client's Guard does), it is the same misuse as a nil Syncer,
// not a nil dereference inside the section's step.
func TestNilSyncerPointersAreMisuse(t *testing.T) {
	const info = "Sync: nil Syncer or step function"
	var mu *asyncsteps.Mutex
	var th *asyncsteps.Throttle
	var li *asyncsteps.Limiter
	body := func(as asyncsteps.AsyncSteps, _ ...any) {}
	cases := []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
	}{
		{"Sync nil *Mutex", func(as asyncsteps.AsyncSteps) { as.Sync(mu, body) }},
		{"Sync nil *Throttle", func(as asyncsteps.AsyncSteps) { as.Sync(th, body) }},
		{"Sync nil *Limiter", func(as asyncsteps.AsyncSteps) { as.Sync(li, body) }},
		{"nil *Mutex.Sync", func(as asyncsteps.AsyncSteps) { mu.Sync(as, body) }},
		{"nil *Throttle.Sync", func(as asyncsteps.AsyncSteps) { th.Sync(as, body) }},
		{"nil *Limiter.Sync", func(as asyncsteps.AsyncSteps) { li.Sync(as, body) }},
		{"Mutex.Sync nil function", func(as asyncsteps.AsyncSteps) { asyncsteps.NewMutex(1).Sync(as, nil) }},
		{"Throttle.Sync nil function", func(as asyncsteps.AsyncSteps) { asyncsteps.NewThrottle(1, 1).Sync(as, nil) }},
		{"Limiter.Sync nil function", func(as asyncsteps.AsyncSteps) { asyncsteps.NewLimiter(asyncsteps.LimiterOptions{}).Sync(as, nil) }},
	}
	for _, c := range cases {
		checkMisuse(t, c.name, c.call, info)
	}
}
