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
// goexit) before the goroutine ends, so the flow never waits forever.
func TestForeignAwaitFunctionPanicsOrExits(t *testing.T) {
	noGoexit := func() { t.Error("goexit called for a function that returned") }
	_, err := callAwait(context.Background(), func(context.Context) (any, error) { panic("fetch") }, noGoexit)
	var p *asyncsteps.PanicError
	if !errors.As(err, &p) || p.Value != "fetch" {
		t.Errorf("panic: err %v, want a *PanicError of \"fetch\"", err)
	}
	if e := asyncsteps.ErrorFrom(err); e.Code != asyncsteps.InternalError || e.Info != "panic: fetch" {
		t.Errorf("panic maps to %s %q, want InternalError \"panic: fetch\"", e.Code, e.Info)
	}

	exited := make(chan bool)
	go func() {
		_, _ = callAwait(context.Background(), func(context.Context) (any, error) {
			runtime.Goexit()
			return nil, nil
		}, func() { exited <- true })
		t.Error("callAwait returned after a Goexit")
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("goexit not called after a Goexit in the function")
	}

	v, err := callAwait(context.Background(), func(context.Context) (any, error) { return 7, nil }, noGoexit)
	if v != 7 || err != nil {
		t.Errorf("got %v, %v; want 7, nil", v, err)
	}
}
