package asyncsteps

import (
	"context"
	"reflect"
	"runtime/debug"
)

// host is what steps are added to: a running step, a Root before execution,
// or the branches of a Parallel. The add functions below hold the checks
// common to all three.
type host interface {
	AsyncSteps
	push(s step) AsyncSteps // only once adding has reported true
	misuse(info string)     // report a wrong use as InternalError
	adding() bool           // whether steps may be added now
}

func addStep(h host, fn StepFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		return h
	}
	if fn == nil {
		h.misuse("Add: nil step function")
		return h
	}
	return h.push(plainStep(fn, firstHandler(onerror)))
}

func addParallel(h host, onerror []ErrorFunc) AsyncSteps {
	d := &parallelDef{}
	if h.adding() {
		h.push(builtinStep(d, firstHandler(onerror)))
	}
	return &parallelBuilder{def: d, owner: h}
}

func addSuccess(h host, args []any) AsyncSteps {
	if !h.adding() {
		return h
	}
	return h.push(plainStep(func(as AsyncSteps, _ ...any) { as.Success(args...) }, nil))
}

// addSync adds a step that hands f to obj with the step's incoming args
// bound, so that they reach the critical section (spec 1.11.3).
func addSync(h host, obj Syncer, fn StepFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		return h
	}
	if obj == nil || fn == nil {
		h.misuse("Sync: nil Syncer or step function")
		return h
	}
	if sc, ok := obj.(sectioner); ok {
		onerr := firstHandler(onerror)
		return h.push(plainStep(func(as AsyncSteps, args ...any) {
			sc.enterSection(as, fn, onerr, args)
		}, nil))
	}
	return h.push(plainStep(func(as AsyncSteps, args ...any) {
		obj.Sync(as, func(as AsyncSteps, _ ...any) { fn(as, args...) }, onerror...)
	}, nil))
}

func addAwait(h host, fn AwaitFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		return h
	}
	if fn == nil {
		h.misuse("Await: nil function")
		return h
	}
	return h.push(plainStep(awaitStep(fn), firstHandler(onerror)))
}

// awaitStep runs fn on a goroutine of its own (spec 1.13): the step waits,
// its cancel handler cancels fn's context, and fn's outcome completes it.
// A closed loop runs no cancel handler, so the loop's end cancels the
// context too: fn's goroutine is not left waiting for a flow that is gone.
// The critical sections around the step count fn until it returns (see
// holdWork); that hold is given back before the step completes, so that a
// flow that leaves a section after fn's result finds nothing left to wait
// for.
func awaitStep(fn AwaitFunc) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		h := as.(*handle)
		run := fn
		if w := h.fl.wait; w != nil && w.hooks != nil {
			run = w.hooks.observeAwait(fn)
		}
		// fn sees the values and deadline of Run's context, but only the
		// step cancels it (see awaitContext).
		ctx, cancel := h.fl.awaitContext(h.f)
		as.SetCancel(func(AsyncSteps) { cancel() })
		stopOnClose := func() bool { return false }
		if life := h.fl.sched.lifetime(); life != nil {
			stopOnClose = context.AfterFunc(life, cancel)
		}
		held := holdWork(h.f)
		go func() {
			defer stopOnClose()
			defer cancel()
			v, err := callAwait(ctx, run, func() {
				held.release()
				h.complete(&Error{Code: InternalError, Info: goexitInfo})
			})
			held.release()
			if err == nil {
				h.Success(v)
				return
			}
			h.complete(awaitError(err))
		}()
	}
}

// isNilValue reports whether err holds a nil pointer, map, slice, channel
// or function: an error that is not nil as an interface, but has no value.
func isNilValue(err error) bool {
	switch v := reflect.ValueOf(err); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// callAwait runs fn, turning a panic into an error: a panic on a goroutine
// nobody recovers would end the process. A Goexit in fn ends the
// goroutine whatever is done here: goexit then completes the step.
func callAwait(ctx context.Context, fn AwaitFunc, goexit func()) (v any, err error) {
	returned := false
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		} else if !returned {
			goexit()
		}
	}()
	v, err = fn(ctx)
	returned = true
	return v, err
}
