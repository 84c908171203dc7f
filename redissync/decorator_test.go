package redissync

import (
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// unwrapping is a decorator of a step's AsyncSteps, as a user writes one
// to trace the steps: the steps it adds receive an unwrapping of the
// engine's AsyncSteps, and Unwrap gives that one back.
type unwrapping struct{ asyncsteps.AsyncSteps }

func (w unwrapping) Add(f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { f(unwrapping{as}, args...) }, onerror...)
	return w
}

func (w unwrapping) Unwrap() asyncsteps.AsyncSteps { return w.AsyncSteps }

// opaque is the same decorator without Unwrap.
type opaque struct{ asyncsteps.AsyncSteps }

func (w opaque) Add(f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { f(opaque{as}, args...) }, onerror...)
	return w
}

// TestRefusalKeepsItsCauseThroughADecorator: a Mutex that refuses a flow
// because Redis is gone fails it with a CommError whose cause names the
// server, for the logs, also when Sync is given a decorator of the flow's
// AsyncSteps that unwraps: onerror finds the cause in LastException, and
// the flow's error keeps it. Through a decorator that does not unwrap, the
// refusal can only be raised with the decorator's Error, which takes no
// cause: the flow's error and LastException are a CommError of their own.
func TestRefusalKeepsItsCauseThroughADecorator(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv.addr, Options{OpTimeout: 300 * time.Millisecond, Recheck: time.Hour})
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1})
	l := newLoops(t, 1)[0]
	srv.kill()
	decorators := []struct {
		name     string
		decorate func(asyncsteps.AsyncSteps) asyncsteps.AsyncSteps
		kept     bool
	}{
		{"Unwrap", func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return unwrapping{as} }, true},
		{"no Unwrap", func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return opaque{as} }, false},
	}
	for _, d := range decorators {
		t.Run(d.name, func(t *testing.T) {
			var tr tracer
			var lastException error
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				m.Sync(d.decorate(as), func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("in")
				}, func(as asyncsteps.AsyncSteps, code string) {
					lastException = as.State().LastException
					tr.add("onerror %s: %s", code, as.State().ErrorInfo)
				})
			})
			var res asyncsteps.Result
			select {
			case res = <-r.Promise():
			case <-time.After(5 * time.Second):
				t.Fatal("the flow still waits after Redis failed")
			}
			wantError(t, res.Err, asyncsteps.CommError, "redis: timed out")
			tr.check(t, "onerror CommError: redis: timed out")
			for what, err := range map[string]error{"the flow's error": res.Err, "LastException": lastException} {
				cause := goCause(err)
				if named := cause != nil && strings.HasPrefix(cause.Error(), "redis "+srv.addr+": "); named != d.kept {
					t.Errorf("%s: Go cause %v, naming %s: %v, want %v", what, cause, srv.addr, named, d.kept)
				}
			}
		})
	}
}
