package asyncsteps

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestClonesOfAModelRunAtOnce runs many copies of one model Root at once,
// on two loops: clones (Clone, on the model's loop) and roots of the other
// loop that copied the model's steps (CopyFrom). They share the model's
// step definitions, the Loop's and the Repeat's (and the clones the
// Parallel's), whose first execution each definition carries in itself
// and hands out to one run only. Every run must get its own: under -race
// a shared one is a data race, and the counts each run leaves in its
// State would be wrong.
func TestClonesOfAModelRunAtOnce(t *testing.T) {
	loops := []*Loop{newTestLoop(t), newTestLoop(t)}
	model := New(WithTool(loops[0]))
	model.Loop(func(as AsyncSteps) {
		n, _ := as.State().Get("loop").(int)
		as.State().Set("loop", n+1)
		if n+1 == 3 {
			as.Break()
		}
	}, "l")
	model.Repeat(4, func(as AsyncSteps, i int) {
		n, _ := as.State().Get("repeat").(int)
		as.State().Set("repeat", n+i)
	})
	p := model.Parallel()
	for range 3 {
		p.Add(func(as AsyncSteps, _ ...any) {
			n, _ := as.State().Get("branches").(int)
			as.State().Set("branches", n+1)
		})
	}
	model.Add(func(as AsyncSteps, _ ...any) {
		st := as.State()
		as.Success(fmt.Sprint(st.Get("loop"), st.Get("repeat"), st.Get("branches")))
	})

	const clones = 200
	results := make([]string, clones)
	errs := make([]error, clones)
	var wg sync.WaitGroup
	for i := range clones {
		c := model.Clone()
		if i%2 == 1 {
			c = New(WithTool(loops[1]))
			c.CopyFrom(model)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.Run(context.Background())
			errs[i] = err
			if len(out) == 1 {
				results[i], _ = out[0].(string)
			}
		}()
	}
	wg.Wait()
	for i := range clones {
		if errs[i] != nil || results[i] != "3 6 3" {
			t.Fatalf("clone %d: %q, %v; want \"3 6 3\", nil", i, results[i], errs[i])
		}
	}
}
