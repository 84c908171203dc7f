package asyncsteps_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A StepError hook that calls runtime.Goexit, or panics, at every call
// changes nothing of the flow, as one that returns: each error it is told
// of, in order, goes to the cancel and error handlers as it would without
// the hook (an Error, a panic, a timeout, a cancel handler's panic while
// an error unwinds, an error handler's own Error, one in a cancel of the
// whole flow, one that ends the flow), FlowEnd sees the end after the
// last error, and the loop runs later flows.
func TestStepErrorHookFaultLeavesTheFlowAsItIs(t *testing.T) {
	faults := map[string]func(){
		"Goexit": runtime.Goexit,
		"panic":  func() { panic("StepError") },
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			asyncsteps.CaptureLog(t)
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				var tr tracer
				loop.SetHooks(&asyncsteps.Hooks{
					StepError: func(_ context.Context, err *asyncsteps.Error) {
						tr.addf("hook:%s:%s", err.Code, err.Info)
						fault()
					},
					FlowEnd: func(_ context.Context, err error) { tr.addf("end:%v", err) },
				})
				recoverAs := func(name string) asyncsteps.ErrorFunc {
					return func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("%s:%s:%s", name, code, as.State().ErrorInfo)
						as.Success()
					}
				}
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "bad") }, recoverAs("A"))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("B") }, recoverAs("B"))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Second) }, recoverAs("C"))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("cancelD"); panic("D") })
					as.Error(asyncsteps.CommError, "down")
				}, recoverAs("D"))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "inner") },
						func(as asyncsteps.AsyncSteps, code string) { as.Error(asyncsteps.Unauthorized, "replaced") })
				}, recoverAs("E"))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.SecurityError, "last") })
				res := <-r.Promise()
				wantError(t, res.Err, asyncsteps.SecurityError, "last")

				// The context is cancelled from the step, once its cancel
				// handler is set: cancelled before Run, the flow would never
				// begin, and the loop may run an Immediate before Run does.
				ctx, cancel := context.WithCancel(context.Background())
				cancelled := asyncsteps.New(asyncsteps.WithTool(loop))
				cancelled.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("cancelF"); panic("F") })
					cancel()
				})
				if _, err := cancelled.Run(ctx); err != context.Canceled {
					t.Errorf("cancelled flow: %v, want context.Canceled", err)
				}

				loop.SetHooks(nil)
				after := asyncsteps.New(asyncsteps.WithTool(loop))
				after.SuccessStep("after")
				wantSuccess(t, <-after.Promise(), "after")

				wantTrace(t, &tr, "hook:InvalidRequest:bad,A:InvalidRequest:bad,"+
					"hook:InternalError:B,B:InternalError:B,"+
					"hook:Timeout:,C:Timeout:,"+
					"hook:CommError:down,cancelD,hook:InternalError:D,D:InternalError:D,"+
					"hook:CommError:inner,hook:Unauthorized:replaced,E:Unauthorized:replaced,"+
					"hook:SecurityError:last,end:SecurityError: last,"+
					"cancelF,hook:InternalError:F,end:context canceled")
			})
		})
	}
}
