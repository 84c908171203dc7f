package asyncsteps_test

import (
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps"
)

// A flow that awaits another with AwaitFlow owns it: when the awaiting
// flow's loop closes, which runs no cancel handler, the awaited flow on
// another loop is cancelled as if the step had been, rather than left
// running for a flow that is gone. Its cancel handler runs, its error
// handler does not, and it ends.
func TestAwaitFlowCancelsTheAwaitedFlowWhenItsOwnLoopCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		here, there := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer there.Close()
		tr := &tracer{}
		other := asyncsteps.New(asyncsteps.WithTool(there))
		other.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("other waits")
			as.SetCancel(tr.cancel("other cancelled"))
		}, tr.handler("other handler"))
		r := asyncsteps.New(asyncsteps.WithTool(here))
		asyncsteps.AwaitFlow(r, other, tr.handler("awaiting handler"))
		res := r.Promise()
		synctest.Wait()

		here.Close()
		if got := <-res; got.Err == nil || got.Err.Error() != asyncsteps.InternalError+": "+closedInfo {
			t.Errorf("the awaiting flow ended with %v, want %s: %s", got.Err, asyncsteps.InternalError, closedInfo)
		}
		synctest.Wait()
		wantTrace(t, tr, "other waits,other cancelled")
		if other.Running() {
			t.Error("the awaited flow still runs after its owner's loop closed")
		}
	})
}

// The awaited flow is cancelled, once the awaiting loop has closed, from
// the goroutine that waited for it, which the engine started: a Tool of
// the awaited flow whose Immediate panics, stopped meanwhile, ended the
// process there. The panic is logged, as for every completion handed to
// such a tool from the engine's goroutines, and the awaited flow, on a
// tool that runs nothing any more, waits for good.
func TestAwaitFlowCancelOnAStoppedToolAfterItsOwnerLoopClosesIsLogged(t *testing.T) {
	inChild(t, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			logs := slogRecords()
			tool := &stoppedTool{manualTool: &manualTool{}}
			other := asyncsteps.New(asyncsteps.WithTool(tool))
			other.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
			here := asyncsteps.NewLoop()
			r := asyncsteps.New(asyncsteps.WithTool(here))
			asyncsteps.AwaitFlow(r, other)
			res := r.Promise()
			synctest.Wait() // the step has started other on tool
			tool.run()
			tool.stopped = true

			here.Close()

			if got := <-res; got.Err == nil || got.Err.Error() != asyncsteps.InternalError+": "+closedInfo {
				t.Errorf("the awaiting flow ended with %v, want %s: %s", got.Err, asyncsteps.InternalError, closedInfo)
			}
			wantLogged(t, logs, lostCompletionLog)
			if !other.Running() {
				t.Error("the awaited flow has ended; want it waiting on its stopped tool")
			}
		})
	})
}
