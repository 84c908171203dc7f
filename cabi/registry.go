//go:build cgo

package cabi

/*
#cgo CFLAGS: -std=gnu11
#cgo LDFLAGS: -lpthread
#include "bridge.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// idTable maps the ids that C memory holds to the Go values they stand for:
// no Go pointer is ever stored in C memory. Ids are never reused, so an id
// read from a stale pointer finds nothing. Safe for concurrent use.
type idTable struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]any
	// steps indexes the step nodes of m by the state of their flow, for
	// the fallbacks of a stopped loop, which look for the nodes of one
	// flow (see eachStep): without it, each would scan every node of the
	// process, so that many flows left by a loop closing would cost the
	// square of their nodes. Made by a look, it is kept up by put, set
	// and drop until more nodes have been registered since the last look
	// than m held then: the running loops' registrations pay for the
	// upkeep no more than a look that makes the index again, and after
	// that nothing. nil while there is none.
	steps map[*asyncsteps.State]map[uint64]*node
	// kept counts the registrations steps was kept up through since the
	// last look, which left them budget: the size of m then.
	kept, budget int
}

func (t *idTable) put(v any) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uint64]any)
	}
	t.next++
	t.m[t.next] = v
	if t.steps != nil {
		t.keepUp(t.next, v)
	}
	return t.next
}

// reserve returns a new id, which stands for nothing until set.
func (t *idTable) reserve() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	return t.next
}

// set makes id, from reserve, stand for v.
func (t *idTable) set(id uint64, v any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uint64]any)
	}
	t.m[id] = v
	if t.steps != nil {
		t.keepUp(id, v)
	}
}

// get returns the value of id, or nil; id 0 is never given out.
func (t *idTable) get(id uint64) any {
	if id == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *idTable) drop(id uint64) {
	t.mu.Lock()
	if t.steps != nil {
		if n, ok := t.m[id].(*node); ok && n.st != nil {
			t.unindex(n)
		}
	}
	delete(t.m, id)
	t.mu.Unlock()
}

// eachStep calls visit with each step node of the flow whose state is st
// in the table, in no order, until visit returns false. It holds the
// table's lock meanwhile: visit must not use the table.
func (t *idTable) eachStep(st *asyncsteps.State, visit func(n *node) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.steps == nil {
		t.steps = make(map[*asyncsteps.State]map[uint64]*node)
		for id, v := range t.m {
			t.index(id, v)
		}
	}
	t.kept, t.budget = 0, len(t.m)
	for _, n := range t.steps[st] {
		if !visit(n) {
			return
		}
	}
}

// keepUp adds v, registered as id, to steps, or forgets steps once it
// has been kept up through more registrations than m held at the last
// look (see steps). With t.mu held.
func (t *idTable) keepUp(id uint64, v any) {
	t.kept++
	if t.kept > t.budget {
		t.steps = nil
		return
	}
	t.index(id, v)
}

// index adds v, registered as id, to steps if it is a step's node. With
// t.mu held.
func (t *idTable) index(id uint64, v any) {
	if n, ok := v.(*node); ok && n.st != nil {
		flow := t.steps[n.st]
		if flow == nil {
			flow = make(map[uint64]*node)
			t.steps[n.st] = flow
		}
		flow[id] = n
	}
}

// unindex takes n out of steps. With t.mu held.
func (t *idTable) unindex(n *node) {
	flow := t.steps[n.st]
	delete(flow, n.id)
	if len(flow) == 0 {
		delete(t.steps, n.st)
	}
}

// registry holds what each FutoInAsyncSteps and FutoInSync we hand out
// stands for.
var registry idTable

func register(v any) uint64 { return registry.put(v) }

func lookup(id uint64) any { return registry.get(id) }

func unregister(id uint64) { registry.drop(id) }

func bsiID(bsi *C.FutoInAsyncSteps) *uint64 {
	return (*uint64)(unsafe.Pointer(&(*C.cabi_bsi)(unsafe.Pointer(bsi)).id))
}

func isOurs(bsi *C.FutoInAsyncSteps) bool {
	return bsi != nil && unsafe.Pointer(bsi.api) == unsafe.Pointer(&C.cabi_api)
}

// nodeOf returns what one of our pointers stands for, or nil when the
// pointer is stale or not ours.
func nodeOf(bsi *C.FutoInAsyncSteps) *node {
	if !isOurs(bsi) {
		return nil
	}
	n, _ := lookup(atomic.LoadUint64(bsiID(bsi))).(*node)
	return n
}

// Quarantine of released structs (see the package doc, Memory). A struct
// is reused only when more than quarantine others were released after it;
// one of a step that waited for an external event also only once it has
// waited longQuarantine.
const (
	quarantine     = 1024
	longQuarantine = time.Minute
)

type released struct {
	p  *C.cabi_bsi
	at time.Time
}

var pool struct {
	mu          sync.Mutex
	short, long []released
}

// allocBSI returns a struct for id, reused from the quarantine if one has
// served its time.
func allocBSI(id uint64) *C.FutoInAsyncSteps {
	var p *C.cabi_bsi
	pool.mu.Lock()
	switch {
	case len(pool.short) > quarantine:
		p = pool.short[0].p
		pool.short = pool.short[1:]
	case len(pool.long) > quarantine && time.Since(pool.long[0].at) > longQuarantine:
		p = pool.long[0].p
		pool.long = pool.long[1:]
	}
	pool.mu.Unlock()
	if p == nil {
		p = C.cabi_bsi_new()
		if p == nil {
			panic("cabi: out of memory")
		}
	}
	b := (*C.FutoInAsyncSteps)(unsafe.Pointer(p))
	atomic.StoreUint64(bsiID(b), id)
	return b
}

// releaseBSI makes b stale and puts it in quarantine.
func releaseBSI(b *C.FutoInAsyncSteps, waited bool) {
	atomic.StoreUint64(bsiID(b), 0)
	r := released{p: (*C.cabi_bsi)(unsafe.Pointer(b)), at: time.Now()}
	pool.mu.Lock()
	if waited {
		pool.long = append(pool.long, r)
	} else {
		pool.short = append(pool.short, r)
	}
	pool.mu.Unlock()
}

// goValues holds the Go values that C sees as custom objects of our types
// (cabi_go_value_type): C holds the id in custom_data.
var goValues idTable

func putGoValue(v any) uint64 { return goValues.put(v) }

func getGoValue(id uint64) any { return goValues.get(id) }

func dropGoValue(id uint64) { goValues.drop(id) }

//export cabiReleaseGoValue
func cabiReleaseGoValue(id C.uint64_t) { dropGoValue(uint64(id)) }
