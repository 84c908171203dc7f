package asyncsteps

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
)

// LoopGroup is a fixed set of event loops that flows are spread over, one
// loop per core by default, so that a server uses every core without
// managing loops by hand. A flow stays on the loop it was made on: flows on
// one loop interleave, flows on different loops run in parallel, so state
// shared between flows of a group needs the same care as state shared
// between goroutines ([Mutex], [Throttle], [Limiter] and their keyed
// forms may be shared).
//
// Several loops pay off when the flows' own steps take the CPU. Flows that
// do little, made by goroutines that already keep every core busy, gain
// nothing from more loops than cores are free: on a 2-core machine, one
// goroutine making trivial flows for a group of two loops ran them slower
// than for one loop (BenchmarkScaleGroup, in bench/; the "two loops"
// workload of docs/PERFORMANCE.md feeds each loop from a goroutine of its
// own). The garbage collector is much of the reason: while
// a core is idle, the collector marks and sweeps there, and keeps its write
// barrier on only briefly; with a busy loop on every core, the loops do
// that work themselves, between their steps
// (docs/PERFORMANCE.md#tuning-the-collector).
//
// Its methods are safe for concurrent use. The zero value is not usable:
// create a LoopGroup with [NewLoopGroup]. It has no loops: Next returns a
// zero [Loop], on which flows end at once with an InternalError, "the
// flow's LoopGroup was not made by NewLoopGroup". A nil *LoopGroup acts
// the same, its flows' error naming it ("the flow's tool is a nil
// *LoopGroup").
type LoopGroup struct {
	loops []*Loop
	next  atomic.Uint64 // turns taken by Next
}

// NewLoopGroup starts n loops; n <= 0 means runtime.GOMAXPROCS(0), one per
// core the Go scheduler uses.
func NewLoopGroup(n int) *LoopGroup {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	g := &LoopGroup{loops: make([]*Loop, n)}
	for i := range g.loops {
		g.loops[i] = NewLoop()
	}
	return g
}

// Next returns the loop for the next flow: the loops in turn, the first
// call returning the first of [LoopGroup.Loops]. Round robin spreads flows
// evenly by number, not by load, and costs one atomic add.
func (g *LoopGroup) Next() *Loop {
	if g == nil {
		return &Loop{unmadeInfo: nilToolInfo("*LoopGroup")} // see LoopGroup
	}
	if len(g.loops) == 0 {
		// A zero LoopGroup's: see LoopGroup. Its flows' error names the
		// group, which the caller made, not a Loop it never saw.
		return &Loop{unmadeInfo: "the flow's LoopGroup was not made by NewLoopGroup"}
	}
	i := g.next.Add(1) - 1
	return g.loops[i%uint64(len(g.loops))]
}

// New returns a new, empty Root on the group's next loop, like
// New(append(opts, WithTool(g.Next()))...) but without allocating for the
// options. An explicit [WithTool] in opts wins: the flow runs on that tool,
// and the group's turn is not taken, so the spread of the other flows stays
// even.
func (g *LoopGroup) New(opts ...Option) *Root {
	for _, o := range opts {
		if o.tool != nil {
			return New(opts...)
		}
	}
	// New keeps no reference to its options, so they fit in a buffer on the
	// stack; only more than three options would make append allocate.
	var buf [4]Option
	return New(append(append(buf[:0], opts...), WithTool(g.Next()))...)
}

// Loops returns the group's loops in the order Next takes them. The slice
// is a copy: the caller may keep or change it, e.g. to set up per-loop
// resources so that the flows of a loop share nothing with the others.
func (g *LoopGroup) Loops() []*Loop {
	if g == nil {
		return nil
	}
	return slices.Clone(g.loops)
}

// Len returns the number of loops.
func (g *LoopGroup) Len() int {
	if g == nil {
		return 0
	}
	return len(g.loops)
}

// Wait waits for every loop of the group as [Loop.Wait] does, and returns
// nil once each has stopped and nothing it started still runs, or ctx's
// error if ctx ends first. Like Loop.Wait, it waits for [LoopGroup.Close]
// too, and returns an InternalError at once on the goroutine of a Loop or
// for a nil ctx. A nil or zero LoopGroup has nothing to wait for.
func (g *LoopGroup) Wait(ctx context.Context) error {
	if err := waitMisuse("LoopGroup.Wait", ctx); err != nil {
		return err
	}
	if g == nil {
		return nil
	}
	for _, l := range g.loops {
		if err := l.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every loop of the group, see [Loop.Close]: close the group
// only after its flows have ended, because a flow still running on a closed
// loop stops where it is, without its cancel handlers (its [Root.Promise]
// or [Root.Run] gets an InternalError, "the flow's loop is closed"), and a
// flow started afterwards fails at once the same way. Every loop is told
// to close before Close waits for any, so that a loop stuck in a callback
// keeps no other from closing (and giving back the slots its flows hold in
// a Mutex or Limiter). Close is idempotent; called from a callback on any
// Loop, it does not wait for the loops' goroutines to exit. It does not
// wait for the Await functions of the loops' flows: [LoopGroup.Wait]
// does.
func (g *LoopGroup) Close() {
	if g == nil {
		return
	}
	stopped := make([]bool, len(g.loops))
	for i, l := range g.loops {
		stopped[i] = l.stop()
	}
	for i, l := range g.loops {
		if stopped[i] {
			l.awaitStop()
		}
	}
}
