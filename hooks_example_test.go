package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/asyncsteps/asyncsteps"
)

// Hooks count flows by outcome code and step errors by code, as a metrics
// exporter would (here in maps; a Prometheus counter vector in a server).
func ExampleHooks() {
	tt := asyncsteps.NewTestTool()
	ended := map[string]int{}
	stepErrors := map[string]int{}
	tt.SetHooks(&asyncsteps.Hooks{
		FlowEnd: func(_ context.Context, err error) {
			code := "ok"
			var e *asyncsteps.Error
			switch {
			case errors.As(err, &e):
				code = e.Code
			case errors.Is(err, context.Canceled):
				code = "canceled"
			}
			ended[code]++
		},
		StepError: func(_ context.Context, err *asyncsteps.Error) { stepErrors[err.Code]++ },
	})

	for _, code := range []string{"", "", asyncsteps.NotImplemented, asyncsteps.CommError} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if code != "" {
				as.Error(code)
			}
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.CommError {
				as.Success() // recovered: a step error, not a failed flow
			}
		})
		r.Run(context.Background())
	}

	for _, k := range slices.Sorted(maps.Keys(ended)) {
		fmt.Println("flows", k, ended[k])
	}
	for _, k := range slices.Sorted(maps.Keys(stepErrors)) {
		fmt.Println("step errors", k, stepErrors[k])
	}
	// Output:
	// flows NotImplemented 1
	// flows ok 3
	// step errors CommError 1
	// step errors NotImplemented 1
}
