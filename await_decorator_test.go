package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// AwaitResult and AwaitFlow keep the original error of the flow they wait
// for as LastException and as the Cause of the step's error also when they
// are given a decorator of the step's AsyncSteps, as they do on the
// engine's own, whether the Result is there at once or comes later: the
// decorator unwraps to the step, which they fail as Await would. A
// decorator that does not unwrap can only be failed through its Error,
// which takes a code and an info: the flow sees an *Error of its own then,
// with no Cause.
func TestAwaitResultKeepsTheCauseThroughADecorator(t *testing.T) {
	const info = "fetch: dial tcp: connection refused"
	decorators := []struct {
		name     string
		decorate func(asyncsteps.AsyncSteps) asyncsteps.AsyncSteps
		kept     bool
	}{
		{"engine", func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return as }, true},
		{"Unwrap", func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return decoratedSteps{as} }, true},
		{"no Unwrap", func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return foreignSteps{as} }, false},
	}
	waits := []struct {
		name string
		add  func(as asyncsteps.AsyncSteps, cause error, tool asyncsteps.Tool)
	}{
		{"AwaitResult ready", func(as asyncsteps.AsyncSteps, cause error, _ asyncsteps.Tool) {
			ch := make(chan asyncsteps.Result, 1)
			ch <- asyncsteps.Result{Err: cause}
			asyncsteps.AwaitResult(as, ch)
		}},
		{"AwaitResult later", func(as asyncsteps.AsyncSteps, cause error, _ asyncsteps.Tool) {
			ch := make(chan asyncsteps.Result)
			go func() {
				time.Sleep(10 * time.Millisecond)
				ch <- asyncsteps.Result{Err: cause}
			}()
			asyncsteps.AwaitResult(as, ch)
		}},
		{"AwaitFlow", func(as asyncsteps.AsyncSteps, cause error, tool asyncsteps.Tool) {
			other := asyncsteps.New(asyncsteps.WithTool(tool))
			other.Await(func(context.Context) (any, error) {
				time.Sleep(10 * time.Millisecond)
				return nil, cause
			})
			asyncsteps.AwaitFlow(as, other)
		}},
	}
	for _, d := range decorators {
		for _, w := range waits {
			t.Run(d.name+"/"+w.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					loop := asyncsteps.NewLoop()
					defer loop.Close()
					refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
					cause := fmt.Errorf("fetch: %w", refused)
					var tr tracer
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						d.decorate(as).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							w.add(as, cause, loop)
						})
					}, func(as asyncsteps.AsyncSteps, code string) {
						st := as.State()
						tr.addf("onerror:%s:%s:%v", code, st.ErrorInfo, errors.Is(st.LastException, refused))
					})
					_, err := r.Run(context.Background())
					wantError(t, err, asyncsteps.ConnectError, info)
					wantTrace(t, &tr, fmt.Sprintf("onerror:ConnectError:%s:%v", info, d.kept))
					if got := errors.Is(err, refused); got != d.kept {
						t.Errorf("errors.Is(Run's error %#v, the dial's error) = %v, want %v", err, got, d.kept)
					}
				})
			})
		}
	}
}

// opaqueSteps is a decorator that gives itself to the steps it adds but
// does not unwrap: the engine cannot reach the step behind it, and must
// complete the step through its methods. Its Success panics.
type opaqueSteps struct{ asyncsteps.AsyncSteps }

func (w opaqueSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(opaqueSteps{as}, args...) }, onerror...)
	return w
}

func (opaqueSteps) Success(...any) { panic("Success refused") }

// AwaitChan, AwaitResult and AwaitFlow given a decorator that does not
// unwrap complete the step through the decorator's Success on the
// goroutine that received the value, the one way to reach the step: one
// that panics fails the step with InternalError, through the decorator's
// Error, as a panic in an Await function does. (Nothing recovered it: the
// process crashed, after the step had failed as if Success had called
// runtime.Goexit.)
func TestAwaitHelpersFailAnOpaqueDecoratorWhoseSuccessPanics(t *testing.T) {
	for _, hp := range releasedAwaitHelpers {
		t.Run(hp.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					loop := asyncsteps.NewLoop()
					defer loop.Close()
					tr := &tracer{}
					release := make(chan struct{})
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						hp.add(opaqueSteps{as}, release)
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("onerror:%s:%s", code, as.State().ErrorInfo)
					})
					r.Add(tr.stepArgs("next"))
					res := r.Promise()
					synctest.Wait()

					close(release)
					synctest.Wait()

					const info = "panic: Success refused"
					wantTrace(t, tr, "onerror:InternalError:"+info)
					wantError(t, result(t, res).Err, asyncsteps.InternalError, info)
				})
			})
		})
	}
}

// releasedAwaitHelpers are the helpers that wait off the loop for a value
// from outside the flow: each adds its step to as, whose value comes once
// release is closed.
var releasedAwaitHelpers = []struct {
	name string
	add  func(as asyncsteps.AsyncSteps, release chan struct{})
}{
	{"AwaitChan", func(as asyncsteps.AsyncSteps, release chan struct{}) {
		ch := make(chan string)
		go func() { <-release; ch <- "got" }()
		asyncsteps.AwaitChan(as, ch)
	}},
	{"AwaitResult", func(as asyncsteps.AsyncSteps, release chan struct{}) {
		ch := make(chan asyncsteps.Result)
		go func() { <-release; ch <- asyncsteps.Result{Args: []any{"got"}} }()
		asyncsteps.AwaitResult(as, ch)
	}},
	{"AwaitFlow", func(as asyncsteps.AsyncSteps, release chan struct{}) {
		other := asyncsteps.New(asyncsteps.WithTool(as.Tool()))
		other.Await(func(context.Context) (any, error) { <-release; return "got", nil })
		asyncsteps.AwaitFlow(as, other)
	}},
}
