package asyncsteps_test

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A wrong use recorded on a model (here a ForEach over a channel, which
// adds no step) is the copies' too: Clone carries it, and so does CopyFrom,
// on a Root and in a step, instead of running the model's other steps as
// if nothing had been wrong.
func TestCopyFromCarriesAMisuseOfTheModel(t *testing.T) {
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
	inStep := model.NewInstance()
	inStep.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
	wantError(t, run(t, inStep, tt).Err, asyncsteps.InternalError, info)
	wantTrace(t, &tr, "")
}

// Each run of a model's copies fails with an *Error of its own: a caller
// that changes the error of one Result (adds to its Info, say) changes no
// other's, nor the model's.
func TestCopiesOfAModelFailWithErrorsOfTheirOwn(t *testing.T) {
	model, tt := newFlow()
	model.Success() // valid only inside a step: recorded on the model
	const info = "Success called on a Root: it is valid only inside a step"
	first, second := model.Clone(), model.Clone()

	err1 := run(t, first, tt).Err
	wantError(t, err1, asyncsteps.InternalError, info)
	err1.(*asyncsteps.Error).Info = "changed by the first caller"
	err2 := run(t, second, tt).Err
	wantError(t, err2, asyncsteps.InternalError, info)
	if err1 == err2 {
		t.Error("two copies' runs gave the same *Error")
	}
	wantError(t, run(t, model, tt).Err, asyncsteps.InternalError, info)
}

// runningModel returns a model whose flow runs on a loop of its own,
// waiting in its first step until release is called; release also waits
// for the flow's end.
func runningModel(t *testing.T) (model *asyncsteps.Root, release func()) {
	t.Helper()
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	model = asyncsteps.New(asyncsteps.WithTool(loop))
	waiting := make(chan asyncsteps.AsyncSteps, 1)
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
	done := model.Promise()
	step := <-waiting // the model's flow runs, on loop's goroutine
	return model, func() {
		step.Success()
		<-done
	}
}

const (
	runningCopyInfo  = " called on a running flow outside its loop: it would race with the flow's steps"
	runningModelInfo = "CopyFrom of a model whose flow runs outside its loop: it would race with the model's steps"
)

// CopyFrom on a Root reads the model as Clone does: not while the model's
// flow runs on another goroutine, whose loop pops the steps CopyFrom
// would read (a data race). The Root's execution fails instead, as a
// clone's does.
func TestCopyFromOnARootOfAFlowRunningElsewhere(t *testing.T) {
	model, release := runningModel(t)
	into, tt := newFlow()
	into.CopyFrom(model)
	clone := model.Clone()
	release()

	wantError(t, run(t, into, tt).Err, asyncsteps.InternalError, runningModelInfo)
	_, err := clone.Run(context.Background()) // on the model's loop
	wantError(t, err, asyncsteps.InternalError, "Clone"+runningCopyInfo)
}

// In a step, CopyFrom of a model whose flow runs on another loop fails
// the step instead of reading the steps that loop pops.
func TestCopyFromInAStepOfAFlowRunningElsewhere(t *testing.T) {
	model, release := runningModel(t)
	other := asyncsteps.NewLoop()
	defer other.Close()
	r := asyncsteps.New(asyncsteps.WithTool(other))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
	_, err := r.Run(context.Background())
	release()
	wantError(t, err, asyncsteps.InternalError, runningModelInfo)
}
