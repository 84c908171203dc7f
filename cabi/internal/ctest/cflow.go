package ctest

/*
#cgo CFLAGS: -std=gnu11 -I${SRCDIR}/../..
#include <stdlib.h>
#include "cflow.h"
*/
import "C"

import "unsafe"

// The interpreter of FuzzCFlows (package cabi): see cflow.h for the kinds
// of steps.

// Kinds of a Node, as in cflow.h.
const (
	CFOK = iota
	CFFail
	CFSeq
	CFPar
	CFWaitThread
	CFTimeout
	CFTrigger
	CFLoop
	CFState
	CFStack
	CFSync
	CFGo
	CFGoFail
	CFGoWait
	CFWaitGo
)

// Error handlers of a Node (its B), as in cflow.h.
const (
	EHNone = iota
	EHRecover
	EHRethrow
	EHPass
)

// MaxKids is the most kids a Node has.
const MaxKids = C.CF_MAXKIDS

// Node is one step of a program (cf_node).
type Node struct {
	Kind, A, B, C int
	Kids          []int
}

// Counters of the C side, as cf_counters gives them.
type Counters struct {
	StateAllocs, StateCleanups int
	StackAllocs, StackCleanups int
	Threads                    int // C threads still running
	Cancels                    int
	Violations                 int
	Outcomes                   int
	ValuesMade, ValuesCleaned  int // values given to success
}

// FlowHook is called, on the loop, by the steps that involve Go, with the
// step's pointer and its node.
var FlowHook func(step unsafe.Pointer, node int)

//export cfGoHook
func cfGoHook(step *C.FutoInAsyncSteps, node C.int) { FlowHook(unsafe.Pointer(step), int(node)) }

// LoadFlow gives the program to the C side and forgets the last outcome.
// No step of the previous program may run any more.
func LoadFlow(nodes []Node) {
	cn := make([]C.cf_node, len(nodes))
	for i, n := range nodes {
		cn[i].kind, cn[i].a, cn[i].b, cn[i].c = C.int(n.Kind), C.int(n.A), C.int(n.B), C.int(n.C)
		cn[i].nkids = C.int(len(n.Kids))
		for k, kid := range n.Kids {
			cn[i].kids[k] = C.int(kid)
		}
	}
	C.cf_load(&cn[0], C.int(len(cn)))
}

// FlowCounters returns the counters of the C side.
func FlowCounters() Counters {
	var c [10]C.int
	C.cf_counters(&c[0])
	return Counters{
		StateAllocs: int(c[0]), StateCleanups: int(c[1]),
		StackAllocs: int(c[2]), StackCleanups: int(c[3]),
		Threads: int(c[4]), Cancels: int(c[5]), Violations: int(c[6]), Outcomes: int(c[7]),
		ValuesMade: int(c[8]), ValuesCleaned: int(c[9]),
	}
}

// FlowOutcome returns the first outcome reported by the end step ("OK")
// or the unhandled_error (the code) of FlowExecute, "" if none yet.
func FlowOutcome() string {
	var buf [64]C.char
	C.cf_outcome(&buf[0], C.int(len(buf)))
	return C.GoString(&buf[0])
}

// FlowCloseMayEnd tells the loaded program that a Loop.Close may stop its
// flow after the end step reported OK: the second outcome, InternalError,
// is then no violation.
func FlowCloseMayEnd() { C.cf_close_may_end() }

// SetFlowSyncs gives the two syncs of the CF_SYNC steps.
func SetFlowSyncs(a, b unsafe.Pointer) { C.cf_set_syncs((*C.FutoInSync)(a), (*C.FutoInSync)(b)) }

// FlowAdd adds node i to p, a root or a step in its callback.
func FlowAdd(p unsafe.Pointer, i int) { C.cf_add(bsi(p), C.int(i)) }

// FlowComplete completes the step p from the calling thread: code 0
// succeeds, another fails with E<code>.
func FlowComplete(p unsafe.Pointer, code int) { C.cf_complete(bsi(p), C.int(code)) }

// FlowGuard takes stack memory on p, a Go step's pointer given by Binary,
// and sets a C cancel handler on it, for node i; call it in the step's
// callback. It returns the memory, for FlowGoEnded.
func FlowGuard(p unsafe.Pointer, i int) unsafe.Pointer { return C.cf_guard(bsi(p), C.int(i)) }

// FlowGoEnded notes that Go completes, in its callback, the step whose
// memory FlowGuard gave: a cancel handler that runs after it is a
// violation.
func FlowGoEnded(mem unsafe.Pointer) { C.cf_go_ended(mem) }

// FlowStack takes stack memory on p, a C step's pointer, in its
// callback, and returns it, for FlowLive and FlowCancelled.
func FlowStack(p unsafe.Pointer, i int) unsafe.Pointer { return C.cf_stack(bsi(p), C.int(i)) }

// FlowLive checks that the step of p, whose memory FlowStack gave, is
// live: p is valid and the memory not cleaned up. A failed check is a
// violation. On the loop.
func FlowLive(p, mem unsafe.Pointer) { C.cf_live(bsi(p), mem) }

// FlowCancelled counts a Go cancel handler's run for the step whose
// memory FlowStack gave, as the C cancel handler does: a run after the
// memory was cleaned up, or a second one, is a violation.
func FlowCancelled(mem unsafe.Pointer) { C.cf_cancelled(mem) }

// FlowExecute adds an end step to root and executes it; see FlowOutcome.
func FlowExecute(root unsafe.Pointer) { C.cf_execute(bsi(root)) }

// FlowFreeOnThread frees root from a new C thread.
func FlowFreeOnThread(root unsafe.Pointer) { C.cf_free_on_thread(bsi(root)) }

// FlowCancelOnThread cancels root through its table from a new C thread.
func FlowCancelOnThread(root unsafe.Pointer) { C.cf_cancel_on_thread(bsi(root)) }

// FlowFree frees root through its table on the calling thread.
func FlowFree(root unsafe.Pointer) { C.cf_free(bsi(root)) }

// FlowCancel cancels root through its table on the calling thread.
func FlowCancel(root unsafe.Pointer) { C.cf_cancel(bsi(root)) }
