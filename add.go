package asyncsteps

import (
	"slices"

	"github.com/asyncsteps/asyncsteps/internal/misuse"
)

// host is what steps are added to: a running step, a Root before execution,
// or the branches of a Parallel. The add functions below hold the checks
// common to all three.
type host interface {
	AsyncSteps
	push(s step) AsyncSteps // only once adding has reported true
	misuse(info string)     // report a wrong use as InternalError
	adding() bool           // whether steps may be added now
	// addRefused handles the call (call names it) that adding has
	// refused: a misuse, or no effect (see stepAPI.refused).
	addRefused(call string)
}

func addStep(h host, fn StepFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		h.addRefused("Add")
		return h
	}
	if fn == nil {
		h.misuse("Add: nil step function")
		return h
	}
	if info := misuse.ExtraArgs("Add", "error handler", len(onerror)); info != "" {
		h.misuse(info)
		return h
	}
	return h.push(plainStep(fn, firstHandler(onerror)))
}

func addParallel(h host, onerror []ErrorFunc) AsyncSteps {
	d, b := newParallelDef(h)
	if !h.adding() {
		h.addRefused("Parallel")
		return b
	}
	if info := misuse.ExtraArgs("Parallel", "error handler", len(onerror)); info != "" {
		h.misuse(info)
		return b
	}
	h.push(builtinStep(d, firstHandler(onerror)))
	return b
}

func addSuccess(h host, args []any) AsyncSteps {
	if !h.adding() {
		h.addRefused("SuccessStep")
		return h
	}
	if len(args) == 0 {
		return h.push(plainStep(succeedNoArgs, nil))
	}
	if _, running := h.(*stepAPI); running {
		// A step added by a running step runs once: the one run may
		// give the slice itself.
		return h.push(plainStep(func(as AsyncSteps, _ ...any) { as.Success(args...) }, nil))
	}
	return h.push(modelSuccess(args))
}

// succeedNoArgs is the step of a SuccessStep without args: a function
// without captures, which costs no allocation.
func succeedNoArgs(as AsyncSteps, _ ...any) { as.Success() }

// modelSuccess returns the step of a SuccessStep of args on a model (a
// Root, or its Parallel's branch), which may run in each of its clones,
// on several loops at once. The step keeps a copy of args, which the
// caller may reuse (SuccessStep(buf...)), and each run gives a copy of
// that, which the next step (its variadic args are its own) or Run's
// caller (Result.Args) may change. args itself is only read: a direct
// call of Root.SuccessStep leaves its variadic slice on its stack.
func modelSuccess(args []any) step {
	kept := slices.Clone(args)
	return plainStep(func(as AsyncSteps, _ ...any) { as.Success(slices.Clone(kept)...) }, nil)
}

// addSync adds a step that hands f to obj with the step's incoming args
// bound, so that they reach the critical section (spec 1.11.3).
func addSync(h host, obj Syncer, fn StepFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		h.addRefused("Sync")
		return h
	}
	if obj == nil || fn == nil || nilSyncer(obj) {
		// Any nil Syncer is named, also one of another package: a nil
		// pointer is refused here only with a nil fn, since its own Sync
		// may still answer (a nil *redissync.Mutex says it was not made
		// by a Client).
		h.misuse(nilSyncInfo(obj == nil || isNilValue(obj) || nilSyncer(obj)))
		return h
	}
	if info := misuse.ExtraArgs("Sync", "error handler", len(onerror)); info != "" {
		h.misuse(info)
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

// nilSyncInfo is the misuse info of a Sync given a nil Syncer
// (syncerNil) or a nil step function: it names the argument, so that the
// user knows which one to fix. When both are nil, it names the Syncer.
func nilSyncInfo(syncerNil bool) string {
	if syncerNil {
		return "Sync: nil Syncer"
	}
	return "Sync: nil step function"
}

// nilSyncer reports whether obj is a nil *Mutex, *Throttle or *Limiter,
// or the key of a nil *KeyedMutex, *KeyedThrottle or *KeyedLimiter: a
// Syncer that is not nil as an interface, but cannot admit anyone.
func nilSyncer(obj Syncer) bool {
	switch s := obj.(type) {
	case *Mutex:
		return s == nil
	case *Throttle:
		return s == nil
	case *Limiter:
		return s == nil
	case interface{ nilSyncer() bool }: // the key of a KeyedMutex, KeyedThrottle or KeyedLimiter
		return s.nilSyncer()
	}
	return false
}

// refuseSync reports a Sync method called on a nil receiver (nilReceiver),
// or with a nil step function, as a misuse of as.
func refuseSync(as AsyncSteps, nilReceiver bool) {
	refuseSyncWith(as, nilSyncInfo(nilReceiver))
}

// refuseSyncWith reports a Sync method's call that info says is wrong as a
// misuse of as.
func refuseSyncWith(as AsyncSteps, info string) {
	if h, ok := as.(host); ok {
		if !h.adding() {
			h.addRefused("Sync") // misplaced, as the step it would add
			return
		}
		h.misuse(info)
		return
	}
	as.Add(func(as AsyncSteps, _ ...any) { as.Error(InternalError, info) }) // a foreign AsyncSteps
}

// syncHandler returns the one error handler of onerror, given to the Sync
// method of a Syncer of this package, or reports more than one as a misuse
// of as (false).
func syncHandler(as AsyncSteps, onerror []ErrorFunc) (ErrorFunc, bool) {
	if info := misuse.ExtraArgs("Sync", "error handler", len(onerror)); info != "" {
		refuseSyncWith(as, info)
		return nil, false
	}
	return firstHandler(onerror), true
}

func addAwait(h host, fn AwaitFunc, onerror []ErrorFunc) AsyncSteps {
	if !h.adding() {
		h.addRefused("Await")
		return h
	}
	if fn == nil {
		h.misuse("Await: nil function")
		return h
	}
	if info := misuse.ExtraArgs("Await", "error handler", len(onerror)); info != "" {
		h.misuse(info)
		return h
	}
	if _, running := h.(*stepAPI); running {
		// A step added by a running step runs once: its call is made with
		// it, one allocation for both (see awaitCall.claim).
		return h.push(newStep(&awaitCall{fn: fn}, firstHandler(onerror)))
	}
	// A model's step may run in each of its clones: each run makes its
	// call, and the model keeps none of them.
	return h.push(plainStep(awaitStep(fn), firstHandler(onerror)))
}
