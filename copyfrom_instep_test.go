package asyncsteps_test

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// In a step, AsyncSteps.CopyFrom of a model with a wrong use recorded
// fails the step with that InternalError, as Clone and Root.CopyFrom do.
func TestCopyFromInAStepCarriesAMisuseOfTheModel(t *testing.T) {
	var tr tracer
	model, tt := newFlow()
	model.Add(tr.step("m1"))
	model.ForEach(make(chan int), func(asyncsteps.AsyncSteps, any, any) {})
	model.Add(tr.step("m2"))
	r := model.NewInstance()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "ForEach: cannot iterate over chan int")
	wantTrace(t, &tr, "")
}

// In a step, AsyncSteps.CopyFrom of a model whose flow runs on another
// loop fails the step instead of reading the steps that loop pops.
func TestCopyFromInAStepOfAFlowRunningElsewhere(t *testing.T) {
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
	step := <-waiting

	other := asyncsteps.NewLoop()
	defer other.Close()
	r := asyncsteps.New(asyncsteps.WithTool(other))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
	_, err := r.Run(context.Background())
	step.Success()
	<-done
	wantError(t, err, asyncsteps.InternalError, "CopyFrom called on a running flow outside its loop: it would race with the flow's steps")
}
