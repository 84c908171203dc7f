//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// syncObj is a Go [asyncsteps.Syncer] seen from C as a FutoInSync.
type syncObj struct {
	s  asyncsteps.Syncer
	cs *C.cabi_sync

	mu sync.Mutex
	// The lock/unlock callers: by flow, those whose rootId is known;
	// in the order they entered, those whose rootId is 0 (see holderKey).
	holders   map[holderKey]*holder
	anonymous []*holder
}

// holderKey is the flow of a lock/unlock caller: its rootId, which tells
// flows apart only within one implementation of the table (two may both
// count from 1), and that table. A rootId of 0 tells nothing: the table
// has no rootId function. Such a caller is never taken for a flow that
// holds the sync already, as that flow could be another one: each of its
// locks is a holder of its own (a nested lock waits for the outer one, as
// a Go decorator without Unwrap does in a Mutex). Safety over liveness.
type holderKey struct {
	api    uintptr
	rootID int64
}

func holderOf(bsi *C.FutoInAsyncSteps) holderKey {
	return holderKey{api: uintptr(unsafe.Pointer(bsi.api)), rootID: int64(C.cabi_f_root_id(bsi))}
}

func (k holderKey) known() bool { return k.rootID != 0 }

// holder is a flow that entered through the lock function: a hidden flow
// of the library waits inside the critical section on its behalf until
// unlock.
type holder struct {
	key   holderKey
	count int
	as    asyncsteps.AsyncSteps // the hidden flow's step inside the section
	root  *asyncsteps.Root

	lockMu   sync.Mutex    // see completeLock
	lockOver bool          // the caller's lock step was completed or cancelled
	lockDone chan struct{} // closed once a completion that came first has returned
}

// add records h, a new holder. o.mu held.
func (o *syncObj) add(h *holder) {
	if h.key.known() {
		o.holders[h.key] = h
		return
	}
	o.anonymous = append(o.anonymous, h)
}

// remove forgets h, if it is still recorded. o.mu held.
func (o *syncObj) remove(h *holder) {
	if h.key.known() {
		if o.holders[h.key] == h {
			delete(o.holders, h.key)
		}
		return
	}
	if i := slices.Index(o.anonymous, h); i >= 0 {
		o.anonymous = slices.Delete(o.anonymous, i, i+1)
	}
}

// unlocked returns the holder that an unlock with key releases: the
// flow's; for a rootId of 0, the first of its table to have entered that
// is inside the section (one still waiting may be another flow's, whose
// lock step would never complete). nil if none. o.mu held.
func (o *syncObj) unlocked(key holderKey) *holder {
	if key.known() {
		return o.holders[key]
	}
	for _, h := range o.anonymous {
		if h.key == key && h.as != nil {
			return h
		}
	}
	return nil
}

// Sync returns s as a FutoInSync* for addSync, valid until [FreeSync]. Our
// own addSync enters s directly, with all its semantics (a Mutex is
// reentrant per flow and parallel branch). Its lock and unlock functions
// serve other implementations of the table: a hidden flow enters s on
// behalf of the caller, reentrant per rootId of the caller's table. A
// caller whose table has no rootId function (a rootId of 0) is never
// taken for a reentrant one: each of its lock calls enters as a flow of
// its own, and its unlock gives back the first such entry of its table
// (docs/DESIGN.md#c-addsync).
func Sync(s asyncsteps.Syncer) unsafe.Pointer {
	o := &syncObj{s: s, holders: make(map[holderKey]*holder)}
	id := register(o)
	o.cs = C.cabi_sync_new(C.uint64_t(id))
	return unsafe.Pointer(o.cs)
}

// FreeSync releases a FutoInSync* made by [Sync], at once: call it only
// when no flow uses it any more, since a flow that still does reads freed
// memory.
func FreeSync(p unsafe.Pointer) {
	s := (*C.FutoInSync)(p)
	if o := syncOf(s); o != nil {
		unregister(uint64(atomic.SwapUint64(syncID(s), 0)))
		C.free(p)
	}
}

func syncID(s *C.FutoInSync) *uint64 {
	return (*uint64)(unsafe.Pointer(&(*C.cabi_sync)(unsafe.Pointer(s)).id))
}

// syncOf returns our syncObj behind s, or nil for a foreign one.
func syncOf(s *C.FutoInSync) *syncObj {
	if s == nil || unsafe.Pointer(s.api) != unsafe.Pointer(&C.cabi_sync_api) {
		return nil
	}
	o, _ := lookup(atomic.LoadUint64(syncID(s))).(*syncObj)
	return o
}

//export cabiSyncLock
func cabiSyncLock(bsi *C.FutoInAsyncSteps, s *C.FutoInSync) {
	o := syncOf(s)
	if o == nil || bsi == nil || isOurs(bsi) && nodeOf(bsi) == nil {
		return // a stale pointer of ours is ignored, as by every function
	}
	if lockRefused(bsi) {
		return
	}
	key := holderOf(bsi)
	o.mu.Lock()
	if h := o.holders[key]; key.known() && h != nil {
		h.count++ // reentrant
		o.mu.Unlock()
		return
	}
	h := &holder{key: key, count: 1}
	o.add(h)
	o.mu.Unlock()

	tool := asyncsteps.DefaultTool()
	var owner any
	if n := nodeOf(bsi); n != nil {
		tool = n.tool
		owner = toolinfo.OwnerKey(n.as)
	}
	h.root = asyncsteps.New(asyncsteps.WithTool(tool), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
	if owner != nil {
		o.leaveAtEnd(nodeOf(bsi), h)
		// A step of ours whose callback runs: the hidden flow holds as
		// the step's flow or branch, the holder its addSync enters as,
		// so that the two forms nest in either order (a Mutex is
		// reentrant per holder) and still exclude another branch.
		h.root.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			toolinfo.HoldFor(as, owner)
			as.Success()
		})
	}
	forget := func() {
		o.mu.Lock()
		o.remove(h)
		o.mu.Unlock()
	}
	cancel := putRec(&frec{cancel: func(asyncsteps.AsyncSteps) {
		if !h.cancelLock() {
			return // completed first: the caller's step is over, its section held
		}
		h.root.Cancel()
		forget()
	}})
	// Without waitExternal, the cancel handler alone makes the step wait.
	C.cabi_f_wait_external(bsi)
	C.cabi_f_set_cancel(bsi, C.uint64_t(cancel))
	// The record of the cancel handler is dropped once the step is
	// completed, not before: a cancel that comes meanwhile must still
	// find it, to wait for the completion (see cancelLock).
	o.s.Sync(h.root, func(as asyncsteps.AsyncSteps, _ ...any) {
		defer dropRec(cancel)
		// Cancelled first, the step returns: the hidden flow leaves the
		// section at once.
		h.completeLock(func() {
			o.mu.Lock()
			h.as = as
			o.mu.Unlock()
			as.WaitExternal()
			C.cabi_f_success(bsi, nil)
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		defer dropRec(cancel)
		forget()
		h.completeLock(func() {
			info := as.State().ErrorInfo
			if !failLock(bsi, code, info) {
				lockErrorLost(code, info, "the lock step does not complete")
			}
		})
	})
	h.root.Execute()
}

// lockNeeds are the functions of the caller's table that lock cannot do
// without: success completes the step once inside, and setCancel gives
// the step the cancel handler by which a cancel of the waiting step
// stops the hidden flow, and keeps the completion off a step that may be
// gone. setCancel also makes the step wait on a table without
// waitExternal, the spec's way to wait before waitExternal.
var lockNeeds = [...]tableFunc{fnSuccess, fnSetCancel}

// lockRefused reports whether the table of bsi lacks a function that
// lock needs. If so, lock fails the step with InternalError naming it,
// rather than make the step hang inside, or leave a cancel unseen, or,
// without waitExternal too, return without making the step wait, which
// the table takes as the lock held though the hidden flow never entered.
// Without handle_error as well, the error is logged, and the step made
// to wait for good, which the table cannot take for a held lock; a table
// on which the step can neither fail nor wait is told so in the log.
func lockRefused(bsi *C.FutoInAsyncSteps) bool {
	for _, f := range lockNeeds {
		if tableHas(bsi, f) {
			continue
		}
		info := "FutoInSync lock: the foreign table has no " + f.String()
		if failLock(bsi, asyncsteps.InternalError, info) {
			return true
		}
		what := "the lock step waits for good"
		if C.cabi_f_wait_external(bsi) == 0 && C.cabi_f_set_cancel(bsi, 0) == 0 {
			what = "the lock step cannot wait either: the table may take the lock as held"
		}
		lockErrorLost(asyncsteps.InternalError, info, what)
		return true
	}
	return false
}

// failLock fails the caller's lock step with code and info; false if its
// table has no handle_error.
func failLock(bsi *C.FutoInAsyncSteps, code, info string) bool {
	cc, ci := C.CString(code), C.CString(info)
	defer C.free(unsafe.Pointer(cc))
	defer C.free(unsafe.Pointer(ci))
	return C.cabi_f_handle_error(bsi, cc, ci) != 0
}

// lockErrorLost logs the error of a lock step whose table has no
// handle_error, as for a Go step's on such a table, rather than drop it
// in silence; what says what became of the step.
func lockErrorLost(code, info, what string) {
	slog.Error("cabi: the foreign table has no "+fnHandleError.String()+": the error of a FutoInSync lock is lost, and "+what,
		"code", code, "info", info)
}

// completeLock completes the caller's lock step with complete (success
// or handle_error on it), unless its cancel handler came first. The
// hidden flow runs on its own loop, another thread than the caller's,
// possibly: the cancel handler and the completion exclude each other, so
// that once the cancel handler has returned no completion reaches the
// caller, whose step may be gone (see cancelLock).
func (h *holder) completeLock(complete func()) {
	h.lockMu.Lock()
	if h.lockOver {
		h.lockMu.Unlock()
		return
	}
	h.lockOver = true
	done := make(chan struct{})
	h.lockDone = done
	h.lockMu.Unlock()
	defer close(done)
	complete()
}

// cancelLock, the caller's cancel handler, reports whether it came before
// the completion. If not, it returns once the completion has returned: a
// cancel on another thread meanwhile waits for it. One on the hidden
// flow's loop comes from inside the completion (an implementation's
// handle_error that unwinds the step calls its cancel handler), or after
// it, and must not wait for itself.
func (h *holder) cancelLock() bool {
	h.lockMu.Lock()
	if !h.lockOver {
		h.lockOver = true
		h.lockMu.Unlock()
		return true
	}
	done := h.lockDone
	h.lockMu.Unlock()
	if done != nil && !h.root.Tool().IsSameThread() {
		<-done
	}
	return false
}

//export cabiSyncUnlock
func cabiSyncUnlock(bsi *C.FutoInAsyncSteps, s *C.FutoInSync) {
	o := syncOf(s)
	if o == nil || bsi == nil || isOurs(bsi) && nodeOf(bsi) == nil {
		return
	}
	key := holderOf(bsi)
	o.mu.Lock()
	h := o.unlocked(key)
	if h == nil {
		o.mu.Unlock()
		return
	}
	h.count--
	if h.count > 0 {
		o.mu.Unlock()
		return
	}
	o.leave(h)
}

// release makes h leave the sync, whatever its count, if it is still
// recorded: its hidden flow leaves the section, or stops waiting for it.
func (o *syncObj) release(h *holder) {
	o.mu.Lock()
	if !o.recorded(h) {
		o.mu.Unlock()
		return
	}
	o.leave(h)
}

// leave forgets h and makes its hidden flow leave. Called with o.mu held,
// which it unlocks.
func (o *syncObj) leave(h *holder) {
	o.remove(h)
	as := h.as
	o.mu.Unlock()
	if as != nil {
		as.Success() // the hidden flow leaves the section
	} else {
		h.root.Cancel()
	}
}

// recorded reports whether h is one of o's holders. o.mu held.
func (o *syncObj) recorded(h *holder) bool {
	if h.key.known() {
		return o.holders[h.key] == h
	}
	return slices.Contains(o.anonymous, h)
}

// tableLock is a holder that the table's lock made for a step of ours.
type tableLock struct {
	o *syncObj
	h *holder
}

// leaveAtEnd has h, the holder that lock made for n, a step of ours whose
// callback runs, given back as the execution of n's flow ends, by any
// path, if its unlock has not come: a flow that fails, times out or is
// cancelled between its lock and its unlock leaves no holder behind, as
// a Go Sync section is left however its step ends. Kept, it would hold
// the section for the flow's rootId for good: the Root's next execution
// would enter as a reentrant holder that never locked, and any other flow
// would wait for ever. On the loop.
func (o *syncObj) leaveAtEnd(n *node, h *holder) {
	fc := n.flow
	if !fc.watchEnd(n.as) {
		return
	}
	fc.locks = slices.DeleteFunc(fc.locks, func(l tableLock) bool {
		l.o.mu.Lock()
		defer l.o.mu.Unlock()
		return !l.o.recorded(l.h)
	})
	fc.locks = append(fc.locks, tableLock{o, h})
}

// addForeignSync adds to as the steps of addSync with a foreign FutoInSync:
//
//	section (cancel handler: unlock if held)
//	├─ lock      sync->api->lock(bsi, sync); held once it completes by success
//	├─ f         with the incoming args, eh as its error handler
//	└─ unlock    then succeeds with f's result
func (fc *flowCtx) addForeignSync(as asyncsteps.AsyncSteps, rid int64, s *C.FutoInSync, fn asyncsteps.StepFunc, onerror asyncsteps.ErrorFunc) {
	as.Add(func(sec asyncsteps.AsyncSteps, args ...any) {
		var held, unlocked bool
		var ln *node               // the lock step's, once it runs
		fc, rid := fc.of(sec, rid) // the flow's own, also in a copy of the Root
		secNode := newNode(kindStep, sec, fc, rid)
		unlock := func() {
			if !held && ln != nil && ln.successPending() {
				// Granted from another thread, and the flow cancelled
				// before the loop took the grant: the lock step completed
				// all the same (its cancel handler did not run), so the
				// sync counts the lock as ours.
				held = true
			}
			if held && !unlocked {
				unlocked = true
				C.cabi_sync_unlock(s, secNode.bsi)
			}
			secNode.release()
		}
		sec.SetCancel(func(asyncsteps.AsyncSteps) { unlock() })
		// A stopped loop runs no cancel handler: the free of the root,
		// or for a flow of Go's the fallback of its end, unlocks, on the
		// thread of the fallbacks (see releaseLeft). The flow may stop
		// between two steps of the section, with no C step left waiting.
		secNode.onLeft = unlock
		fc.watchLeft(sec)
		sec.Add(func(l asyncsteps.AsyncSteps, _ ...any) {
			fc.runC(l, rid, nil, func(n *node) {
				ln = n
				n.onSuccess = func() { held = true }
			}, func(bsi *C.FutoInAsyncSteps, _ *C.FutoInArgs) {
				C.cabi_sync_lock(s, bsi)
				// Returned without making the step wait: held (an error
				// aborts the step before the next one).
				if ln.pending == nil && (!ln.waiting || ln.completed) {
					held = true
				}
			})
		})
		sec.Add(func(as asyncsteps.AsyncSteps, _ ...any) { fn(as, args...) }, onerror)
		sec.Add(func(as asyncsteps.AsyncSteps, res ...any) {
			unlock()
			as.Success(res...)
		})
	})
}
