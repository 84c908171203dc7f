package asyncsteps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// job embeds a Root by value, as a Go user may do instead of calling New.
type job struct {
	asyncsteps.Root
	name string
}

// The zero Root, declared or embedded, is what New() returns: an empty Root
// on DefaultTool. Every start method runs it, and Tool and NewInstance
// answer for it (they dereferenced a nil tool before).
func TestHostileZeroRootRunsOnTheDefaultTool(t *testing.T) {
	inChild(t, func(t *testing.T) {
		starts := []struct {
			name  string
			start func(r *asyncsteps.Root) ([]any, error)
		}{
			{"Run", func(r *asyncsteps.Root) ([]any, error) { return r.Run(context.Background()) }},
			{"RunHelping", func(r *asyncsteps.Root) ([]any, error) { return r.RunHelping(context.Background()) }},
			{"Promise", func(r *asyncsteps.Root) ([]any, error) { res := <-r.Promise(); return res.Args, res.Err }},
			{"AwaitFlow", func(r *asyncsteps.Root) ([]any, error) {
				outer := asyncsteps.New()
				outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, r) })
				return outer.Run(context.Background())
			}},
		}
		for _, s := range starts {
			t.Run(s.name, func(t *testing.T) {
				var tr tracer
				j := &job{name: "j"}
				j.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.addf("step on default loop:%v", as.Tool() == asyncsteps.DefaultTool())
					as.Success(j.name)
				})
				args, err := s.start(&j.Root)
				if err != nil || len(args) != 1 || args[0] != "j" {
					t.Errorf("got %v, %v; want [j], nil", args, err)
				}
				wantTrace(t, &tr, "step on default loop:true")
			})
		}
		var r asyncsteps.Root
		if r.Tool() != asyncsteps.DefaultTool() {
			t.Errorf("Tool() = %v, want DefaultTool()", r.Tool())
		}
		var z asyncsteps.Root
		if z.NewInstance().Tool() != asyncsteps.DefaultTool() {
			t.Error("NewInstance of a zero Root is not on DefaultTool")
		}
		var c asyncsteps.Root
		c.Cancel() // not running: nothing to do
		errs := make(chan *asyncsteps.Error, 1)
		c.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Mine", "from a zero Root") })
		c.ExecuteWith(func(err *asyncsteps.Error) { errs <- err })
		if err := <-errs; err.Code != "Mine" || err.Info != "from a zero Root" {
			t.Errorf("unhandled error %+v, want Mine: from a zero Root", err)
		}
	})
}

// Goroutines that share an idle Root as a model clone it at once, each
// running its own copy: Clone only reads the model, a zero one too.
func TestHostileConcurrentClonesOfAnIdleModel(t *testing.T) {
	models := map[string]*asyncsteps.Root{"New": asyncsteps.New(), "zero": new(asyncsteps.Root)}
	for name, model := range models {
		t.Run(name, func(t *testing.T) {
			model.State().Set("n", 1)
			model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.State().Set("n", as.State().Get("n").(int)+1)
				as.Success(as.State().Get("n"))
			})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					args, err := model.Clone().Run(context.Background())
					if err != nil || len(args) != 1 || args[0] != 2 {
						t.Errorf("got %v, %v; want [2], nil", args, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// Clone of a running flow from another goroutine read the steps and the
// state that the flow changes (a fatal "concurrent map clone and map
// write" at worst): it copies nothing, and the clone fails at once. From
// the flow's own step, Clone copies as usual.
func TestHostileCloneOfARunningFlowOutsideItsLoop(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.State().Set("n", 1)
	waiting := make(chan asyncsteps.AsyncSteps)
	var inside *asyncsteps.Root
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		inside = r.Clone()
		as.WaitExternal()
		waiting <- as
	})
	done := r.Promise()
	as := <-waiting
	outside := r.Clone()
	as.Success()
	if res := <-done; res.Err != nil {
		t.Fatalf("the flow failed: %v", res.Err)
	}
	var tr tracer
	outside.Add(tr.step("outside's own step"))
	_, err := outside.Run(context.Background())
	wantError(t, err, asyncsteps.InternalError,
		"Clone called on a running flow outside its loop: it would race with the flow's steps")
	wantTrace(t, &tr, "")
	if !inside.State().Exists("n") {
		t.Error("the clone made by the flow's own step lacks the state")
	}
}

// A TestTool runs a flow only while a goroutine drives it: between its
// events, the test may clone the running flow.
func TestHostileCloneOfARunningFlowBetweenTestToolEvents(t *testing.T) {
	r, tt := newFlow()
	r.State().Set("n", 1)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Second) },
		func(as asyncsteps.AsyncSteps, code string) { as.Success() })
	done := r.Promise()
	tt.NextEvent() // the step runs and waits
	c := r.Clone()
	tt.Run()
	if res := <-done; res.Err != nil {
		t.Fatalf("the flow failed: %v", res.Err)
	}
	c.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(as.State().Get("n")) })
	res := run(t, c, tt)
	wantSuccess(t, res, 1)
}

const unmadeLoopInfo = "the flow's Loop was not made by NewLoop"

// A zero Loop, or the zero LoopGroup's, acts as a closed Loop that never
// ran: nothing it is given runs, Close returns, and a flow on it ends at
// once with an InternalError that names the mistake. (Run on it hung,
// Deferred dereferenced a nil lock, Close waited forever, and the zero
// LoopGroup's Next divided by zero.)
func TestHostileZeroLoopActsClosed(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var l asyncsteps.Loop
		ran := make(chan string, 2)
		for name, h := range map[string]asyncsteps.Handle{
			"Immediate": l.Immediate(func() { ran <- "Immediate" }),
			"Deferred":  l.Deferred(0, func() { ran <- "Deferred" }),
		} {
			if h.IsValid() {
				t.Errorf("%s on a zero Loop returned a valid handle", name)
			}
			h.Cancel()
		}
		l.Close()

		var g asyncsteps.LoopGroup
		g.Close()
		if g.Len() != 0 {
			t.Errorf("zero LoopGroup Len() = %d, want 0", g.Len())
		}
		roots := map[string]struct {
			newRoot func() *asyncsteps.Root
			info    string
		}{
			"Loop":      {func() *asyncsteps.Root { return asyncsteps.New(asyncsteps.WithTool(&l)) }, unmadeLoopInfo},
			"LoopGroup": {func() *asyncsteps.Root { return g.New() }, "the flow's LoopGroup was not made by NewLoopGroup"},
		}
		for name, c := range roots {
			var tr tracer
			r := c.newRoot()
			r.Add(tr.step("step"))
			_, err := r.Run(context.Background())
			wantError(t, err, asyncsteps.InternalError, c.info)

			r = c.newRoot()
			r.Add(tr.step("step"))
			res := <-r.Promise()
			wantError(t, res.Err, asyncsteps.InternalError, c.info)

			errs := make(chan *asyncsteps.Error, 1)
			r = c.newRoot()
			r.Add(tr.step("step"))
			r.ExecuteWith(func(err *asyncsteps.Error) { errs <- err })
			if err := <-errs; err.Code != asyncsteps.InternalError || err.Info != c.info {
				t.Errorf("%s: unhandled error %+v", name, err)
			}
			wantTrace(t, &tr, "")
		}
		select {
		case name := <-ran:
			t.Errorf("%s ran on a zero Loop", name)
		default:
		}
	})
}

// A nil *Loop or *TestTool given to WithTool is a tool that runs nothing,
// like a zero Loop: the Root's executions fail at once with an
// InternalError that names it (New dereferenced the nil pointer).
func TestHostileNilToolPointers(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var loop *asyncsteps.Loop
		var tt *asyncsteps.TestTool
		for _, c := range []struct {
			tool asyncsteps.Tool
			info string
		}{
			{loop, "the flow's tool is a nil *Loop"},
			{tt, "the flow's tool is a nil *TestTool"},
		} {
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(c.tool))
			r.Add(tr.step("step"))
			_, err := r.Run(context.Background())
			wantError(t, err, asyncsteps.InternalError, c.info)
			res := <-r.Promise()
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
			wantTrace(t, &tr, "")
		}
	})
}

// A nil *LoopGroup acts as the zero LoopGroup: no loops, a Close and a
// SetHooks that do nothing, and flows from New, or on the Loop from Next,
// that fail at once with an InternalError naming it. (Each method
// dereferenced the nil pointer.)
func TestHostileNilLoopGroup(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var g *asyncsteps.LoopGroup
		g.Close()
		g.SetHooks(&asyncsteps.Hooks{})
		g.SetHooks(nil)
		if n, loops := g.Len(), g.Loops(); n != 0 || len(loops) != 0 {
			t.Errorf("nil LoopGroup: Len() = %d, Loops() = %v; want 0 and none", n, loops)
		}
		const info = "the flow's tool is a nil *LoopGroup"
		for name, newRoot := range map[string]func() *asyncsteps.Root{
			"New":  func() *asyncsteps.Root { return g.New() },
			"Next": func() *asyncsteps.Root { return asyncsteps.New(asyncsteps.WithTool(g.Next())) },
		} {
			var tr tracer
			r := newRoot()
			r.Add(tr.step("step"))
			_, err := r.Run(context.Background())
			wantError(t, err, asyncsteps.InternalError, info)
			res := <-r.Promise()
			wantError(t, res.Err, asyncsteps.InternalError, info)
			wantTrace(t, &tr, "")
			if t.Failed() {
				t.Logf("with the Root from %s", name)
			}
		}
	})
}

// A nil *Root is idle for Cancel and Running, and its start methods panic
// with a message that says what was wrong, not a nil dereference.
// (Its other methods: TestHostileNilRootBuilt.)
func TestHostileNilRoot(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var r *asyncsteps.Root
		r.Cancel()
		if r.Running() {
			t.Error("a nil Root is running")
		}
		const want = "asyncsteps: a nil *Root was started"
		for name, start := range map[string]func(){
			"Execute":     r.Execute,
			"ExecuteWith": func() { r.ExecuteWith(func(*asyncsteps.Error) {}) },
			"ExecuteThen": func() { r.ExecuteThen(func(asyncsteps.Result) {}) },
			"Promise":     func() { r.Promise() },
			"Run":         func() { r.Run(context.Background()) },                  //nolint:errcheck // it panics
			"RunHelping":  func() { r.RunHelping(context.Background()) },           //nolint:errcheck // it panics
			"Run[T]":      func() { asyncsteps.Run[int](context.Background(), r) }, //nolint:errcheck // it panics
			// Before its context's checks, as any start's.
			"PromiseContext": func() {
				//lint:ignore SA1012 the nil context must not hide the nil Root
				r.PromiseContext(nil)
			},
			"ExecuteThenContext": func() {
				//lint:ignore SA1012 the nil context must not hide the nil Root
				r.ExecuteThenContext(nil, func(asyncsteps.Result) {})
			},
		} {
			func() {
				defer func() {
					if p := recover(); p != want {
						t.Errorf("%s panicked with %v, want %q", name, p, want)
					}
				}()
				start()
			}()
		}
	})
}

// Every other method of a nil *Root panics with a message that names it,
// not a nil dereference, and so does a helper adding a step to one; it is
// not valid. Only Cancel and Running are idle on it (TestHostileNilRoot).
func TestHostileNilRootBuilt(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var r *asyncsteps.Root
		if r.IsValid() {
			t.Error("a nil Root is valid")
		}
		step := func(asyncsteps.AsyncSteps, ...any) {}
		for _, c := range []struct {
			method string
			call   func()
		}{
			{"Add", func() { r.Add(step) }},
			{"Parallel", func() { r.Parallel() }},
			{"State", func() { r.State() }},
			{"CopyFrom", func() { r.CopyFrom(asyncsteps.New()) }},
			{"Sync", func() { r.Sync(asyncsteps.NewMutex(1), step) }},
			{"SuccessStep", func() { r.SuccessStep(1) }},
			{"Await", func() { r.Await(func(context.Context) (any, error) { return nil, nil }) }},
			{"Tool", func() { r.Tool() }},
			{"Success", func() { r.Success() }},
			{"Error", func() { r.Error("E") }},
			{"SetTimeout", func() { r.SetTimeout(time.Second) }},
			{"SetCancel", func() { r.SetCancel(func(asyncsteps.AsyncSteps) {}) }},
			{"WaitExternal", func() { r.WaitExternal() }},
			{"Loop", func() { r.Loop(func(as asyncsteps.AsyncSteps) { as.Break() }) }},
			{"Repeat", func() { r.Repeat(1, func(asyncsteps.AsyncSteps, int) {}) }},
			{"ForEach", func() { r.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) {}) }},
			{"Break", func() { r.Break() }},
			{"Continue", func() { r.Continue() }},
			{"Clone", func() { r.Clone() }},
			{"NewInstance", func() { r.NewInstance() }},
		} {
			wantPanic(t, c.method, "asyncsteps: "+c.method+" called on a nil *Root", c.call)
		}
		// A helper panics in the method it calls, or, adding a step of
		// its own, or reporting a misuse, as it adds the step.
		const helper = "asyncsteps: a step added to a nil *Root"
		wantPanic(t, "Retry", helper, func() {
			asyncsteps.Retry(r, asyncsteps.RetryOptions{}, func(asyncsteps.AsyncSteps, int) {})
		})
		wantPanic(t, "Then(nil)", helper, func() { asyncsteps.Then[int](r, nil) })
		const add = "asyncsteps: Add called on a nil *Root"
		wantPanic(t, "Then", add, func() { asyncsteps.Then(r, func(asyncsteps.AsyncSteps, int) {}) })
		wantPanic(t, "AwaitChan", add, func() { asyncsteps.AwaitChan(r, make(chan int)) })
	})
}

// wantPanic fails the test unless call panics with want; name names it.
func wantPanic(t *testing.T, name, want string, call func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if p := recover(); p != want {
			t.Errorf("%s panicked with %v, want %q", name, p, want)
		}
	}()
	call()
}

// A Tool of the user's that embeds a nil *Loop or *TestTool, or a zero
// Loop, is that loop: the Root's executions fail at once with the
// InternalError that names it, as when the loop is given itself. The
// engine took such a tool for a loop of its own, and called the embedded
// nil pointer's methods (a nil dereference in Promise), or ran the flow
// on the zero Loop, where it waited for good.
func TestHostileToolEmbeddingANilOrZeroLoop(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for _, c := range []struct {
			name string
			tool asyncsteps.Tool
			info string
		}{
			{"nil *Loop", loggingLoop{}, "the flow's tool is a nil *Loop"},
			{"nil *TestTool", struct{ *asyncsteps.TestTool }{}, "the flow's tool is a nil *TestTool"},
			{"zero Loop", loggingLoop{new(asyncsteps.Loop)}, unmadeLoopInfo},
		} {
			runOneStepOn(t, c.name, c.tool, c.info)
		}
	})
}

// A nil pointer to a Tool of the user's that embeds a *Loop or *TestTool,
// directly or through a nil pointer to a struct that does, embeds no loop
// the engine can reach: the Root's executions fail at once with an
// InternalError that names the nil pointer, as for a nil *Loop. New
// dereferenced it, looking for the loop it embeds, and panicked with a
// nil dereference inside the engine.
func TestHostileNilPointerToAToolEmbeddingALoop(t *testing.T) {
	type embedsTestTool struct{ *asyncsteps.TestTool }
	type throughPointer struct{ *embedsTestTool }
	inChild(t, func(t *testing.T) {
		for _, c := range []struct {
			tool asyncsteps.Tool
			info string
		}{
			{(*loggingLoop)(nil), "the flow's tool is a nil *asyncsteps_test.loggingLoop"},
			{(*embedsTestTool)(nil), "the flow's tool is a nil *asyncsteps_test.embedsTestTool"},
			{throughPointer{}, "the flow's tool is a nil *asyncsteps_test.embedsTestTool"},
		} {
			runOneStepOn(t, fmt.Sprintf("%T", c.tool), c.tool, c.info)
		}
	})
}

// A Tool of the user's whose struct embeds two loops at different depths
// is the shallowest one, as Go's own selectors take: the engine looks for
// a nil pointer on the way to that one only. It followed the first
// embedded field that led to a loop, whatever its depth: a nil pointer on
// that way failed the flows of a tool whose methods come from a real Loop,
// and a nil pointer on the way to the loop the methods come from was not
// seen, and the engine dereferenced it.
func TestHostileToolEmbeddingLoopsAtTwoDepths(t *testing.T) {
	type embedsTestTool struct{ *asyncsteps.TestTool }
	type deeper struct{ embedsTestTool }
	inChild(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		for _, c := range []struct {
			name string
			tool asyncsteps.Tool
			info string // "" for a flow that runs
		}{
			{"nil decoy, real Loop", struct {
				*embedsTestTool
				*asyncsteps.Loop
			}{nil, loop}, ""},
			{"real decoy, nil way to the Loop", struct {
				deeper
				*loggingLoop
			}{deeper{embedsTestTool{asyncsteps.NewTestTool()}}, nil},
				"the flow's tool is a nil *asyncsteps_test.loggingLoop"},
		} {
			runOneStepOn(t, c.name, c.tool, c.info)
		}
	})
}

// runOneStepOn runs a flow of one step on tool and checks that it fails at
// once with an InternalError of info, its step unrun, or, with an empty
// info, that it runs its step and succeeds.
func runOneStepOn(t *testing.T, name string, tool asyncsteps.Tool, info string) {
	t.Helper()
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(tr.step("step"))
	select {
	case res := <-r.Promise():
		if info == "" {
			if res.Err != nil {
				t.Errorf("%s: %v", name, res.Err)
			}
			wantTrace(t, &tr, "step")
			return
		}
		wantError(t, res.Err, asyncsteps.InternalError, info)
	case <-time.After(10 * time.Second):
		t.Errorf("%s: the flow never ended", name)
	}
	wantTrace(t, &tr, "")
}
