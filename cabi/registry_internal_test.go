//go:build cgo

package cabi

import (
	"fmt"
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// stepsByScan is what eachStep gives for st, found the slow way: the ids
// of the step nodes of st in the table, sorted.
func stepsByScan(t *idTable, st *asyncsteps.State) []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []uint64
	for id, v := range t.m {
		if n, ok := v.(*node); ok && n.st == st {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func stepsByIndex(t *idTable, st *asyncsteps.State) []uint64 {
	var ids []uint64
	t.eachStep(st, func(n *node) bool {
		ids = append(ids, n.id)
		return true
	})
	slices.Sort(ids)
	return ids
}

// putStep registers a step node of st in t, as newNode does.
func putStep(t *idTable, st *asyncsteps.State) *node {
	n := &node{kind: kindStep, st: st}
	n.id = t.put(n)
	return n
}

// The index of eachStep gives exactly the step nodes of one flow that the
// table holds, as a scan of the whole table does, through registrations
// and drops (which keep it up), reserved ids set later, values that are
// not step nodes, and more registrations than the table holds (which
// forget it, to be made again by the next look).
func TestEachStepGivesTheNodesOfOneFlow(t *testing.T) {
	var tab idTable
	a, b := asyncsteps.New().State(), asyncsteps.New().State()
	check := func(when string) {
		t.Helper()
		for name, st := range map[string]*asyncsteps.State{"a": a, "b": b} {
			got, want := stepsByIndex(&tab, st), stepsByScan(&tab, st)
			if !slices.Equal(got, want) {
				t.Errorf("%s: flow %s: eachStep gives %v, want %v", when, name, got, want)
			}
		}
	}
	a1, a2, b1 := putStep(&tab, a), putStep(&tab, a), putStep(&tab, b)
	tab.put(&node{kind: kindParallel}) // no state: never a flow's step
	tab.put("a sync")
	check("registered")
	tab.drop(a1.id) // kept up in the index
	check("a's first dropped")
	a3 := putStep(&tab, a)
	check("a third registered")
	reserved := &node{kind: kindStep, st: b}
	reserved.id = tab.reserve()
	check("an id reserved")
	tab.set(reserved.id, reserved)
	check("the reserved id set")
	// Without a look between them, the index is kept up through as many
	// registrations as the table held at the last look, and forgotten by
	// the next one.
	held := len(tab.m)
	var many []*node
	for i := range held + 1 {
		if tab.steps == nil {
			t.Fatalf("the index was forgotten after %d registrations, want %d", i, held+1)
		}
		many = append(many, putStep(&tab, []*asyncsteps.State{a, b}[i%2]))
	}
	if tab.steps != nil {
		t.Errorf("the index is kept up through %d registrations, more than the %d values the table held", held+1, held)
	}
	check("more registered than the table held")
	for _, n := range many {
		tab.drop(n.id)
	}
	check("those dropped")
	for _, n := range []*node{a2, a3, b1, reserved} {
		tab.drop(n.id)
	}
	check("all dropped")
	if len(tab.steps) != 0 {
		t.Errorf("the index keeps %d flows after their nodes were dropped", len(tab.steps))
	}
}

// newerLeft looks only at the nodes of its own flow: a newer live node of
// another flow does not keep a step from leaving, and a newer live node
// of its own does, until it is released.
func TestNewerLeftLooksAtItsOwnFlowOnly(t *testing.T) {
	mine, other := asyncsteps.New().State(), asyncsteps.New().State()
	n := putStep(&registry, mine)
	defer registry.drop(n.id)
	o := putStep(&registry, other)
	defer registry.drop(o.id)
	if n.newerLeft() {
		t.Error("a newer node of another flow counts as the step's")
	}
	sub := putStep(&registry, mine)
	defer registry.drop(sub.id)
	if !n.newerLeft() {
		t.Error("a newer live node of the step's flow does not count")
	}
	if sub.newerLeft() {
		t.Error("an older node counts as newer")
	}
	sub.released.Store(true)
	if n.newerLeft() {
		t.Error("a released newer node still counts")
	}
}

// BenchmarkNewerLeft measures the look for a newer step of one flow of
// two nodes, in a process whose registry holds the nodes of many other
// flows (one each), as the fallbacks of a closing loop do once per
// dropped call from another thread; with busy, another loop registers
// and releases a node of its own between two looks. The index makes a
// look independent of the registry's size; a scan was linear in it.
func BenchmarkNewerLeft(b *testing.B) {
	for _, others := range []int{100, 10_000} {
		for _, busy := range []bool{false, true} {
			b.Run(fmt.Sprintf("others=%d/busy=%v", others, busy), func(b *testing.B) {
				var tab idTable
				for range others {
					putStep(&tab, asyncsteps.New().State())
				}
				st, elsewhere := asyncsteps.New().State(), asyncsteps.New().State()
				n := putStep(&tab, st)
				putStep(&tab, st).released.Store(true)
				b.ReportAllocs()
				for b.Loop() {
					if busy {
						tab.drop(putStep(&tab, elsewhere).id)
					}
					tab.eachStep(n.st, func(o *node) bool { return !(o.id > n.id && !o.released.Load()) })
				}
			})
		}
	}
}
