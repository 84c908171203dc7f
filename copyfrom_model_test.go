package asyncsteps_test

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A wrong use recorded on a model (here a ForEach over a channel, which
// adds no step) is the copies' too: Clone carries it, and so does CopyFrom
// on a Root, instead of running the model's other steps as if nothing had
// been wrong.
func TestCopyFromOnARootCarriesAMisuseOfTheModel(t *testing.T) {
	var tr tracer
	model, tt := newFlow()
	model.Add(tr.step("m1"))
	model.ForEach(make(chan int), func(asyncsteps.AsyncSteps, any, any) { tr.add("body") })
	model.Add(tr.step("m2"))
	const info = "ForEach: cannot iterate over chan int"

	wantError(t, run(t, model.Clone(), tt).Err, asyncsteps.InternalError, info)
	onRoot := model.NewInstance()
	onRoot.Add(tr.step("before"))
	onRoot.CopyFrom(model)
	wantError(t, run(t, onRoot, tt).Err, asyncsteps.InternalError, info)
	wantTrace(t, &tr, "")
}

// CopyFrom on a Root reads the model as Clone does: not while the model's
// flow runs on another goroutine, whose loop pops the steps CopyFrom
// would read (a data race). The Root's execution fails instead, as a
// clone's does.
func TestCopyFromOnARootOfAFlowRunningElsewhere(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	model := asyncsteps.New(asyncsteps.WithTool(loop))
	waiting := make(chan asyncsteps.AsyncSteps, 1)
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
	done := model.Promise()
	step := <-waiting // the model's flow runs, on loop's goroutine

	into, tt := newFlow()
	into.CopyFrom(model)
	clone := model.Clone()
	step.Success()
	<-done

	const info = " called on a running flow outside its loop: it would race with the flow's steps"
	wantError(t, run(t, into, tt).Err, asyncsteps.InternalError, "CopyFrom"+info)
	_, err := clone.Run(context.Background()) // on loop, as the model
	wantError(t, err, asyncsteps.InternalError, "Clone"+info)
}
