package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A SuccessStep of a model Root runs once in each of its copies: each run
// gives the next step, or the caller as Result.Args, arguments of its own,
// those given to SuccessStep.
// A step that rewrites the args it was given (a variadic parameter is the
// callee's), or a caller that changes Result.Args, changes no other run's;
// clones running on two loops would otherwise race on one slice.
func TestSuccessStepOfAModelGivesEachRunItsOwnArgs(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	tr := &tracer{}

	model := asyncsteps.New(asyncsteps.WithTool(tt))
	model.SuccessStep("in")
	model.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("step%v", args)
		args[0] = "rewritten"
	})
	run(t, model.Clone(), tt)
	run(t, model.Clone(), tt)
	twice := asyncsteps.New(asyncsteps.WithTool(tt))
	twice.CopyFrom(model)
	twice.CopyFrom(model)
	run(t, twice, tt)
	wantTrace(t, tr, "step[in],step[in],step[in],step[in]")

	last := asyncsteps.New(asyncsteps.WithTool(tt))
	last.SuccessStep("out", 1)
	res := run(t, last.Clone(), tt)
	wantSuccess(t, res, "out", 1)
	res.Args[0] = "changed by the caller"
	wantSuccess(t, run(t, last.Clone(), tt), "out", 1)

	// The model keeps the args as they were given: a caller that builds
	// it with a buffer may reuse the buffer.
	buf := []any{"first"}
	reused := asyncsteps.New(asyncsteps.WithTool(tt))
	reused.SuccessStep(buf...)
	buf[0] = "reused"
	wantSuccess(t, run(t, reused.Clone(), tt), "first")
}
