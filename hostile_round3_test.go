package asyncsteps_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// nilHandleTool is a foreign Tool whose Immediate and Deferred schedule
// their callbacks but return no Handle.
type nilHandleTool struct{ *manualTool }

func (t nilHandleTool) Immediate(f func()) asyncsteps.Handle {
	t.manualTool.Immediate(f)
	return nil
}

func (t nilHandleTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	t.manualTool.Deferred(d, f)
	return nil
}

// A Tool may return a nil Handle: the engine cannot cancel that timer, so
// a step timeout whose step completed first still runs when due, and finds
// nothing to time out. Before, disarming it dereferenced the nil Handle.
func TestForeignToolNilHandleIsATimerThatCannotBeCancelled(t *testing.T) {
	inChild(t, func(t *testing.T) {
		tool := &manualTool{}
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(nilHandleTool{tool}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second) // disarmed by the completion: cancels nothing
			as.WaitExternal()
			tool.Immediate(func() { as.Success("done") })
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add(fmt.Sprint("got ", args[0], " at ", tool.now))
			as.SetTimeout(time.Minute) // fires
			as.WaitExternal()
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add(fmt.Sprint("handler ", code, " at ", tool.now))
			as.Success("recovered")
		})
		ch := r.Promise()
		tool.run()
		wantSuccess(t, result(t, ch), "recovered")
		wantTrace(t, &tr, "got done at 0s,handler Timeout at 1m0s")
	})
}
