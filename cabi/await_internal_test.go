//go:build cgo

package cabi

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The goroutine of a foreign step's Await: a panic in the function becomes
// a *PanicError, and a runtime.Goexit still completes the step (through
// goexit) before the goroutine ends, also when a deferred call of the
// function panics on the way, so the flow never waits forever.
func TestForeignAwaitFunctionPanicsOrExits(t *testing.T) {
	type outcome struct {
		v      any
		err    error
		exited bool
	}
	run := func(f asyncsteps.AwaitFunc) outcome {
		out := make(chan outcome, 2)
		go func() {
			runAwait(context.Background(), f,
				func(v any, err error) { out <- outcome{v: v, err: err} },
				func() { out <- outcome{exited: true} })
		}()
		select {
		case o := <-out:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("the step was not completed")
			return outcome{}
		}
	}

	o := run(func(context.Context) (any, error) { panic("fetch") })
	var p *asyncsteps.PanicError
	if !errors.As(o.err, &p) || p.Value != "fetch" {
		t.Errorf("panic: err %v, want a *PanicError of \"fetch\"", o.err)
	}
	if e := asyncsteps.ErrorFrom(o.err); e.Code != asyncsteps.InternalError || e.Info != "panic: fetch" {
		t.Errorf("panic maps to %s %q, want InternalError \"panic: fetch\"", e.Code, e.Info)
	}
	if o := run(func(context.Context) (any, error) {
		runtime.Goexit()
		return nil, nil
	}); !o.exited {
		t.Errorf("Goexit: %+v, want goexit called", o)
	}
	if o := run(func(context.Context) (any, error) {
		defer func() { panic("in a deferred call") }()
		runtime.Goexit()
		return nil, nil
	}); !o.exited {
		t.Errorf("Goexit with a panicking deferred call: %+v, want goexit called", o)
	}
	if o := run(func(context.Context) (any, error) { return 7, nil }); o.v != 7 || o.err != nil || o.exited {
		t.Errorf("got %+v; want 7, nil", o)
	}
}
