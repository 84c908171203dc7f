package asyncsteps_test

import (
	"iter"
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// A model Root keeps nothing of what its clones' executions made. The
// definition of a ForEachLimit, a ForEach or a Parallel comes with the
// control of its first execution, and a model keeps the definitions of
// its steps for the next clones: the first clone's control must let go,
// as its step ends, of the sequence it pulled (the last pair that
// iter.Pull2 keeps), the items it made (their step APIs, and through
// them the clone's flow and State) and the snapshot of a collection.
// Each payload is held weakly by the test: the clone's State holds one,
// the sequences yield fresh ones.
func TestAModelKeepsNothingOfItsClonesExecutions(t *testing.T) {
	type payload = [4096]byte
	type steps = asyncsteps.AsyncSteps
	for _, c := range []struct {
		name string
		// build adds the model's step, whose items append their keys to
		// *tr, and returns what to do once the clone has run, or nil.
		build func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func()
		want  []int
	}{
		{"ForEachLimit run out", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			asyncsteps.ForEachLimit(model, freshSeq(fresh, 3), 2, func(as steps, k int, _ *payload) {
				*tr = append(*tr, k)
			})
			return nil
		}, []int{0, 1, 2}},
		{"ForEachLimit Break", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			asyncsteps.ForEachLimit(model, freshSeq(fresh, 3), 1, func(as steps, k int, _ *payload) {
				*tr = append(*tr, k)
				if k == 1 {
					as.Break()
				}
			})
			return nil
		}, []int{0, 1}},
		{"ForEachLimit error", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			asyncsteps.ForEachLimit(model, freshSeq(fresh, 3), 1, func(as steps, k int, _ *payload) {
				*tr = append(*tr, k)
				if k == 1 {
					as.Error("Fail")
				}
			}, func(as steps, code string) { as.Success() })
			return nil
		}, []int{0, 1}},
		{"ForEachLimit in a Parallel", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			asyncsteps.ForEachLimit(model.Parallel(), freshSeq(fresh, 3), 2, func(as steps, k int, _ *payload) {
				*tr = append(*tr, k)
			})
			return nil
		}, []int{0, 1, 2}},
		{"ForEach over an iter.Seq2, Break", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			model.ForEach(freshSeq(fresh, 3), func(as steps, k, _ any) {
				*tr = append(*tr, k.(int))
				if k == 1 {
					as.Break()
				}
			})
			return nil
		}, []int{0, 1}},
		{"ForEach over a map", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			m := map[int]*payload{0: fresh(), 1: fresh()}
			model.ForEach(m, func(as steps, k, _ any) { *tr = append(*tr, k.(int)) })
			return func() { clear(m) } // the model's collection no longer holds them
		}, []int{0, 1}},
		{"Parallel", func(model *asyncsteps.Root, fresh func() *payload, tr *[]int) func() {
			p := model.Parallel()
			for i := range 2 {
				p.Add(func(steps, ...any) { *tr = append(*tr, i) })
			}
			return nil
		}, []int{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			var payloads []weak.Pointer[payload]
			fresh := func() *payload {
				p := new(payload)
				payloads = append(payloads, weak.Make(p))
				return p
			}
			var tr []int
			model := asyncsteps.New(asyncsteps.WithTool(loop))
			after := c.build(model, fresh, &tr)
			clone := model.Clone()
			clone.State().Set("payload", fresh())
			if _, err := clone.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tr, c.want) {
				t.Fatalf("items %v, want %v", tr, c.want)
			}
			if after != nil {
				after()
			}
			clone = nil
			if alive := asyncsteps.AliveAfterGC(loop, payloads); alive != 0 {
				t.Errorf("%d of %d payloads of the clone's execution kept alive by the model", alive, len(payloads))
			}
			runtime.KeepAlive(model)
		})
	}
}

// freshSeq returns a sequence of n pairs: i and a fresh payload.
func freshSeq(fresh func() *[4096]byte, n int) iter.Seq2[int, *[4096]byte] {
	return func(yield func(int, *[4096]byte) bool) {
		for i := range n {
			if !yield(i, fresh()) {
				return
			}
		}
	}
}

// So it does when the loop closes while the clone's ForEachLimit runs:
// the close ends the flow without ending its steps one by one, and the
// model kept the step's control, its items waiting, and through them the
// clone's flow and State.
func TestAModelKeepsNothingOfAClonesExecutionItsLoopClosed(t *testing.T) {
	loop := asyncsteps.NewLoop()
	var payloads []weak.Pointer[[4096]byte]
	fresh := func() *[4096]byte {
		p := new([4096]byte)
		payloads = append(payloads, weak.Make(p))
		return p
	}
	model := asyncsteps.New(asyncsteps.WithTool(loop))
	waiting := make(chan struct{})
	asyncsteps.ForEachLimit(model, freshSeq(fresh, 3), 1, func(as asyncsteps.AsyncSteps, _ int, _ *[4096]byte) {
		as.WaitExternal()
		close(waiting)
	})
	clone := model.Clone()
	clone.State().Set("payload", fresh())
	ch := clone.Promise()
	<-waiting
	loop.Close()
	wantError(t, (<-ch).Err, asyncsteps.InternalError, "the flow's loop is closed")
	clone = nil
	<-loop.Done()
	// The close stops the sequence on a goroutine of its own: the last
	// pair it yielded lives until then.
	alive := len(payloads)
	for try := 0; try < 50 && alive > 0; try++ {
		time.Sleep(time.Duration(try) * time.Millisecond)
		runtime.GC()
		alive = 0
		for _, p := range payloads {
			if p.Value() != nil {
				alive++
			}
		}
	}
	if alive != 0 {
		t.Errorf("%d of %d payloads of the clone's execution kept alive by the model", alive, len(payloads))
	}
	runtime.KeepAlive(model)
}
