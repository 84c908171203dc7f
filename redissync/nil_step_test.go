package redissync

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A Syncer's own Sync given a nil step function fails the flow with the
// InternalError "Sync: nil step function", which its error handler sees,
// as the Syncers of asyncsteps do. Before, it took the lease or the entry
// and then failed with a nil dereference inside the section, an info that
// did not say what was wrong.
func TestSyncWithNilStepFunction(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	const info = "Sync: nil step function"
	syncers := []struct {
		name string
		s    asyncsteps.Syncer
	}{
		{"Mutex", c.NewMutex("m", MutexOptions{})},
		{"Throttle", c.NewThrottle("t", ThrottleOptions{Rate: 10})},
		{"Limiter", c.NewLimiter("l", LimiterOptions{Concurrent: 1, Rate: 10})},
		{"KeyedMutex key", c.NewKeyedMutex("km", MutexOptions{}).Key("a")},
		{"KeyedThrottle key", c.NewKeyedThrottle("kt", ThrottleOptions{Rate: 10}).Key("a")},
	}
	for _, s := range syncers {
		t.Run(s.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			s.s.Sync(r, nil, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("%s: %s", code, as.State().ErrorInfo)
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
			wantError(t, runOnTestTool(t, tt, r).Err, asyncsteps.InternalError, info)
			tr.check(t, "InternalError: "+info)
		})
	}
}

// A Syncer's own Sync given more than one error handler fails the flow
// with InternalError, as the Syncers of asyncsteps do; the section is not
// entered. It kept the first handler and dropped the others unseen.
func TestSyncWithMoreThanOneHandler(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	const info = "Sync: more than one error handler (2 given)"
	h := func(as asyncsteps.AsyncSteps, code string) { as.Success() }
	for _, s := range []struct {
		name string
		s    asyncsteps.Syncer
	}{
		{"Mutex", c.NewMutex("m2", MutexOptions{})},
		{"Throttle", c.NewThrottle("t2", ThrottleOptions{Rate: 10})},
		{"Limiter", c.NewLimiter("l2", LimiterOptions{Concurrent: 1, Rate: 10})},
		{"KeyedMutex key", c.NewKeyedMutex("km2", MutexOptions{}).Key("a")},
		{"KeyedThrottle key", c.NewKeyedThrottle("kt2", ThrottleOptions{Rate: 10}).Key("a")},
	} {
		t.Run(s.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			s.s.Sync(r, func(asyncsteps.AsyncSteps, ...any) { tr.add("inside") }, h, h)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
			wantError(t, runOnTestTool(t, tt, r).Err, asyncsteps.InternalError, info)
			tr.check(t)
		})
	}
}

// A Syncer's own Sync that refuses its flow for a fault of its own (a nil
// step function; a Syncer not made by a Client from New) while also given
// more than one error handler reports that fault, which comes first, not
// the handlers: it passed them on to Add, whose refusal of more than one
// named Add, which the user did not call.
func TestSyncRefusalWithMoreThanOneHandler(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	var zero Client
	step := func(asyncsteps.AsyncSteps, ...any) {}
	for _, s := range []struct {
		name, info string
		s          asyncsteps.Syncer
		f          asyncsteps.StepFunc
	}{
		{"Mutex, nil f", "Sync: nil step function", c.NewMutex("m3", MutexOptions{}), nil},
		{"Throttle, nil f", "Sync: nil step function", c.NewThrottle("t3", ThrottleOptions{Rate: 10}), nil},
		{"Limiter, nil f", "Sync: nil step function", c.NewLimiter("l3", LimiterOptions{Concurrent: 1, Rate: 10}), nil},
		{"KeyedThrottle key, nil f", "Sync: nil step function", c.NewKeyedThrottle("kt3", ThrottleOptions{Rate: 10}).Key("a"), nil},
		{"nil KeyedThrottle's key", "redissync: the KeyedThrottle was not made by a Client from New", (*KeyedThrottle)(nil).Key("a"), step},
		{"zero Mutex", "redissync: the Mutex was not made by a Client from New", new(Mutex), step},
		{"nil Throttle", "redissync: the Throttle was not made by a Client from New", (*Throttle)(nil), step},
		{"zero Client's Limiter, nil f", "redissync: the Limiter was not made by a Client from New", zero.NewLimiter("l", LimiterOptions{}), nil},
	} {
		t.Run(s.name, func(t *testing.T) {
			var tr tracer
			h := func(as asyncsteps.AsyncSteps, code string) { tr.add("handler %s", code) }
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				s.s.Sync(as, s.f, h, h)
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
			wantError(t, runOnTestTool(t, tt, r).Err, asyncsteps.InternalError, s.info)
			tr.check(t)
		})
	}
}

// runOnTestTool runs r, whose tool is tt, to its end, and returns its
// Result; a flow that has not ended once tt is idle fails the test.
func runOnTestTool(t *testing.T, tt *asyncsteps.TestTool, r *asyncsteps.Root) asyncsteps.Result {
	t.Helper()
	res := r.Promise()
	tt.Run()
	select {
	case res := <-res:
		return res
	default:
		t.Fatal("the flow did not end")
		return asyncsteps.Result{}
	}
}
