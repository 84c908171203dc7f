package asyncsteps_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// This file checks that a Root kept after its execution keeps nothing of
// that execution's context (the values of Run's context, what a FlowStart
// hook added) nor of what its Await functions returned: the call of an
// Await function is its context, and the slice of its success argument.

// retainKey is the key of the payload the tests put in a flow's context.
type retainKey struct{}

// retainPayload is what the tests hold weakly: large enough to be an
// object of its own.
type retainPayload = [4096]byte

// retainCase is a flow whose Root the test keeps after it has run.
type retainCase struct {
	name string
	// build adds the flow's steps to r; fresh returns a new payload, held
	// weakly by the test. It returns the error the flow ends with, "" for
	// none, and the Roots the test keeps beside r.
	build func(r *asyncsteps.Root, fresh func() *retainPayload) (code string, kept []*asyncsteps.Root)
	want  []string // the trace the flow's steps leave
}

// retainCases are the flows of TestAFinishedRootKeepsNothingOfItsExecution;
// tr is the trace their steps append to.
func retainCases(tr *[]string) []retainCase {
	note := func(s string) { *tr = append(*tr, s) }
	// awaitValue is an Await function that checks it sees the payload of
	// its flow's context and returns a fresh one.
	awaitValue := func(fresh func() *retainPayload) asyncsteps.AwaitFunc {
		return func(ctx context.Context) (any, error) {
			if ctx.Value(retainKey{}) == nil {
				return nil, errors.New("no payload in the context")
			}
			return fresh(), nil
		}
	}
	got := func(as asyncsteps.AsyncSteps, args ...any) {
		if _, ok := asyncsteps.Arg[*retainPayload](args, 0); ok {
			note("result")
		}
	}
	return []retainCase{
		{"Await on the Root", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			r.Await(awaitValue(fresh))
			return "", nil
		}, nil},
		{"Await added by a step", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(awaitValue(fresh)) })
			return "", nil
		}, nil},
		{"Await then a step", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			r.Await(awaitValue(fresh))
			r.Add(got)
			return "", nil
		}, []string{"result"}},
		{"Await then an error", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			r.Await(awaitValue(fresh))
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				got(as, args...)
				as.Error("Fail")
			})
			return "Fail", nil
		}, []string{"result"}},
		{"Await failing, handled", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			r.Await(func(ctx context.Context) (any, error) {
				_ = ctx.Value(retainKey{})
				return nil, errors.New("refused")
			}, func(as asyncsteps.AsyncSteps, code string) {
				note(code + ": " + as.State().ErrorInfo)
				as.Success()
			})
			return "", nil
		}, []string{"InternalError: refused"}},
		{"Await in a Parallel", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			p := r.Parallel()
			p.Await(awaitValue(fresh))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(awaitValue(fresh)) })
			return "", nil
		}, nil},
		{"AwaitFlow of a kept Root", func(r *asyncsteps.Root, fresh func() *retainPayload) (string, []*asyncsteps.Root) {
			sub := asyncsteps.New(asyncsteps.WithTool(r.Tool()))
			sub.Await(awaitValue(fresh))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, sub) })
			r.Add(got)
			return "", []*asyncsteps.Root{sub}
		}, []string{"result"}},
	}
}

// TestAFinishedRootKeepsNothingOfItsExecution runs flows that meet an
// Await function under a context with a payload, keeps their Roots, and
// checks that nothing of the payload, nor of what the functions returned,
// outlives the executions: a Root kept for the next request (or a model,
// or the Root of a sub-flow) kept the last call of an Await function, its
// context with it, until it ran again.
func TestAFinishedRootKeepsNothingOfItsExecution(t *testing.T) {
	for _, toolName := range foreignTools {
		var tr []string
		for _, c := range retainCases(&tr) {
			t.Run(toolName+"/"+c.name, func(t *testing.T) {
				_, l, tt, closeTool := openTool(toolName)
				defer closeTool()
				tr = nil
				var payloads []weak.Pointer[retainPayload]
				var mu sync.Mutex // the Await functions of a Parallel run at once
				fresh := func() *retainPayload {
					p := new(retainPayload)
					mu.Lock()
					defer mu.Unlock()
					payloads = append(payloads, weak.Make(p))
					return p
				}
				r := asyncsteps.New(asyncsteps.WithTool(toolOf(l, tt)))
				code, kept := c.build(r, fresh)
				res := runUnder(t, r, tt, fresh())
				if code == "" && res.Err != nil {
					t.Fatal(res.Err)
				}
				if code != "" {
					wantError(t, res.Err, code, "")
				}
				if !slices.Equal(tr, c.want) {
					t.Fatalf("trace %q, want %q", tr, c.want)
				}
				if alive := aliveAfterCollections(payloads); alive != 0 {
					t.Errorf("%d of %d payloads of the execution kept alive by its Root", alive, len(payloads))
				}
				runtime.KeepAlive(r)
				runtime.KeepAlive(kept)
			})
		}
	}
}

// A model Root and a clone of it, both kept after each has run, keep
// nothing of their executions; nor does the model keep the State of a
// clone that is dropped after its run.
func TestAModelAndItsClonesKeepNothingOfTheirExecutions(t *testing.T) {
	for _, toolName := range foreignTools {
		t.Run(toolName, func(t *testing.T) {
			_, l, tt, closeTool := openTool(toolName)
			defer closeTool()
			var payloads []weak.Pointer[retainPayload]
			fresh := func() *retainPayload {
				p := new(retainPayload)
				payloads = append(payloads, weak.Make(p))
				return p
			}
			model := asyncsteps.New(asyncsteps.WithTool(toolOf(l, tt)))
			model.Await(func(ctx context.Context) (any, error) { return ctx.Value(retainKey{}), nil })
			kept := model.Clone()
			dropped := model.Clone()
			dropped.State().Set("payload", fresh())
			for i, r := range []*asyncsteps.Root{model, kept, dropped} {
				res := runUnder(t, r, tt, fresh())
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				if p, _ := asyncsteps.Arg[*retainPayload](res.Args, 0); p != payloads[len(payloads)-1].Value() {
					t.Fatalf("flow %d: the Await function saw no payload", i)
				}
			}
			if alive := aliveAfterCollections(payloads); alive != 0 {
				t.Errorf("%d of %d payloads kept alive by the model and its clone", alive, len(payloads))
			}
			runtime.KeepAlive(model)
			runtime.KeepAlive(kept)
		})
	}
}

// A FlowStart hook's context is the flow's: a Root kept after its
// execution keeps nothing of it either, as otelsteps' span record.
func TestAFinishedRootKeepsNothingOfItsHooksContext(t *testing.T) {
	for _, toolName := range foreignTools {
		t.Run(toolName, func(t *testing.T) {
			_, l, tt, closeTool := openTool(toolName)
			defer closeTool()
			var payloads []weak.Pointer[retainPayload]
			hooks := &asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
				p := new(retainPayload)
				payloads = append(payloads, weak.Make(p))
				return context.WithValue(ctx, retainKey{}, p)
			}}
			if l != nil {
				l.SetHooks(hooks)
			} else {
				tt.SetHooks(hooks)
			}
			sub := asyncsteps.New(asyncsteps.WithTool(toolOf(l, tt)))
			sub.Await(func(ctx context.Context) (any, error) { return ctx.Value(retainKey{}) != nil, nil })
			r := asyncsteps.New(asyncsteps.WithTool(toolOf(l, tt)))
			asyncsteps.AwaitFlow(r, sub)
			res := runUnder(t, r, tt, nil)
			if res.Err != nil || len(res.Args) != 1 || res.Args[0] != true {
				t.Fatalf("Result %v, want the hook's value seen", res)
			}
			if len(payloads) != 2 {
				t.Fatalf("%d flows started, want 2", len(payloads))
			}
			if alive := aliveAfterCollections(payloads); alive != 0 {
				t.Errorf("%d of %d payloads of the hook kept alive by the Roots", alive, len(payloads))
			}
			runtime.KeepAlive(r)
			runtime.KeepAlive(sub)
		})
	}
}

// toolOf returns l, or tt if l is nil.
func toolOf(l *asyncsteps.Loop, tt *asyncsteps.TestTool) asyncsteps.Tool {
	if l != nil {
		return l
	}
	return tt
}

// runUnder runs r to its end, on its Loop or driven on tt, under a context
// with p under retainKey (none if p is nil), and returns its Result. A
// TestTool is driven until the Result comes: an Await function ends on
// a goroutine of its own.
func runUnder(t *testing.T, r *asyncsteps.Root, tt *asyncsteps.TestTool, p *retainPayload) asyncsteps.Result {
	t.Helper()
	ctx := context.Background()
	if p != nil {
		ctx = context.WithValue(ctx, retainKey{}, p)
	}
	if tt == nil {
		args, err := r.Run(ctx)
		return asyncsteps.Result{Args: args, Err: err}
	}
	ch := r.PromiseContext(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case res := <-ch:
			return res
		default:
		}
		if !tt.NextEvent() {
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			t.Fatal("the flow did not end")
		}
	}
}

// aliveAfterCollections returns how many of payloads are still alive
// after collections, which it runs until none is or a few seconds have
// passed: the goroutine of an Await function lets go of its call a moment
// after the step has its outcome.
func aliveAfterCollections(payloads []weak.Pointer[retainPayload]) int {
	deadline := time.Now().Add(3 * time.Second)
	for {
		runtime.GC()
		alive := 0
		for _, p := range payloads {
			if p.Value() != nil {
				alive++
			}
		}
		if alive == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(time.Millisecond)
	}
}

// So it is whichever way the execution ends and is waited for: through
// RunHelping, whose goroutine runs the Await function, or by a cancel or
// a timeout of the step while its function still runs, which lets go of
// the call once the function has returned.
func TestAFinishedRootKeepsNothingOfItsEndedAwait(t *testing.T) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	// valueOnDone returns the payload of its context once that is
	// cancelled.
	valueOnDone := func(ctx context.Context) (any, error) {
		<-ctx.Done()
		return ctx.Value(retainKey{}), nil
	}
	for _, c := range []struct {
		name string
		// run adds r's steps, runs r under ctx (which cancel ends) and
		// returns its Result.
		run  func(r *asyncsteps.Root, ctx context.Context, cancel func()) asyncsteps.Result
		code string
	}{
		{"RunHelping", func(r *asyncsteps.Root, ctx context.Context, _ func()) asyncsteps.Result {
			r.Await(func(ctx context.Context) (any, error) { return ctx.Value(retainKey{}), nil })
			args, err := r.RunHelping(ctx)
			return asyncsteps.Result{Args: args, Err: err}
		}, ""},
		{"Run's context cancelled", func(r *asyncsteps.Root, ctx context.Context, cancel func()) asyncsteps.Result {
			r.Await(func(stepCtx context.Context) (any, error) {
				cancel()
				return valueOnDone(stepCtx)
			})
			args, err := r.Run(ctx)
			return asyncsteps.Result{Args: args, Err: err}
		}, "canceled"},
		{"step timed out, handled", func(r *asyncsteps.Root, ctx context.Context, _ func()) asyncsteps.Result {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Millisecond)
				as.Await(valueOnDone)
			}, func(as asyncsteps.AsyncSteps, code string) { as.Success(code) })
			args, err := r.Run(ctx)
			return asyncsteps.Result{Args: args, Err: err}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			var payloads []weak.Pointer[retainPayload]
			// The context and its cancel live in this call only.
			res := func() asyncsteps.Result {
				p := new(retainPayload)
				payloads = append(payloads, weak.Make(p))
				ctx, cancel := context.WithCancel(context.WithValue(context.Background(), retainKey{}, p))
				defer cancel()
				return c.run(r, ctx, cancel)
			}()
			switch {
			case c.code == "canceled":
				if !errors.Is(res.Err, context.Canceled) {
					t.Fatalf("error %v, want context.Canceled", res.Err)
				}
			case res.Err != nil:
				t.Fatal(res.Err)
			}
			if alive := aliveAfterCollections(payloads); alive != 0 {
				t.Errorf("the payload of the execution's context kept alive by its Root")
			}
			runtime.KeepAlive(r)
		})
	}
}
