package asyncsteps_test

// This file is long on purpose: the seed programs are one list, each with
// the rule it shows, and the check that together they use every operation.

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	ff "github.com/asyncsteps/asyncsteps/internal/flowfuzz"
)

var writeSeeds = flag.Bool("flowfuzz.seeds", false, "write the FuzzFlows seed programs to testdata/fuzz/FuzzFlows")

// Builders for seed programs. IDs and arg values are given by Decode; only
// the shape and the number of args matter here.

func seedLeaf(end ff.End) *ff.Node { return &ff.Node{Kind: ff.KStep, End: end} }

func seedOk(nargs int) *ff.Node {
	return &ff.Node{Kind: ff.KStep, End: ff.ESuccess, Args: make([]int, nargs)}
}

func seedFails(code, info string) *ff.Node {
	return &ff.Node{Kind: ff.KStep, End: ff.EError, Code: code, Info: info}
}

func seedExt(at, nargs int) *ff.Node {
	return &ff.Node{Kind: ff.KStep, End: ff.EExternal, At: at, Args: make([]int, nargs)}
}

func seedExtErr(at int, code, info string) *ff.Node {
	return &ff.Node{Kind: ff.KStep, End: ff.EExternalErr, At: at, Code: code, Info: info}
}

func seedBrk(end ff.End, label string) *ff.Node {
	return &ff.Node{Kind: ff.KStep, End: end, Label: label}
}

func seedWith(n *ff.Node, subs ...*ff.Node) *ff.Node { n.Subs = subs; return n }

func seedTimeout(n *ff.Node, ms int) *ff.Node { n.Timeout = ms; return n }

func seedCancellable(n *ff.Node) *ff.Node { n.Cancel = true; return n }

func seedOnerror(n *ff.Node, h *ff.Handler) *ff.Node { n.Handler = h; return n }

func seedRecovers(nargs int) *ff.Handler {
	return &ff.Handler{Action: ff.HRecover, Args: make([]int, nargs)}
}

func seedRethrows(code, info string) *ff.Handler {
	return &ff.Handler{Action: ff.HRethrow, Code: code, Info: info}
}

func seedReturns() *ff.Handler { return &ff.Handler{Action: ff.HReturn} }

func seedAdds(steps ...*ff.Node) *ff.Handler { return &ff.Handler{Action: ff.HAdd, Steps: steps} }

func seedPar(branches ...*ff.Node) *ff.Node { return &ff.Node{Kind: ff.KParallel, Subs: branches} }

func seedLoop(label string, breakAt int, body ...*ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KLoop, Label: label, Count: breakAt, Subs: body}
}

func seedRepeat(label string, count int, body ...*ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KRepeat, Label: label, Count: count, Subs: body}
}

func seedSyncOn(mutex int, body *ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KSync, Mutex: mutex, Body: body}
}

func seedSuccessStep(nargs int) *ff.Node {
	return &ff.Node{Kind: ff.KSuccessStep, Args: make([]int, nargs)}
}

func seedPanics() *ff.Node { return &ff.Node{Kind: ff.KStep, End: ff.EPanic} }

func seedRearm(n *ff.Node, first, second int) *ff.Node {
	n.Timeout, n.Timeout2 = first, second
	return n
}

func seedHandlerPanics() *ff.Handler { return &ff.Handler{Action: ff.HPanic} }

// seedHandlerWaits is a handler that waits (timeout > 0: SetTimeout, else
// WaitExternal) and is completed at +at by done: ff.EExternal (Success
// with nargs args), ff.EExternalErr (Error(code)) or ff.EWait (nothing).
func seedHandlerWaits(timeout int, done ff.End, at, nargs int, code string) *ff.Handler {
	return &ff.Handler{Action: ff.HWait, Timeout: timeout, Done: done, At: at, Args: make([]int, nargs), Code: code}
}

func seedThrottled(body *ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KSync, Mutex: ff.ThrottleGate, Body: body}
}

// seedForEach is a ForEach over n elements (a map if isMap) that calls
// Break or Continue (end) at the iteration at.
func seedForEach(label string, isMap bool, n int, end ff.End, at int, body ...*ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KForEach, Label: label, Map: isMap, Count: n, End: end, At: at, Subs: body}
}

func seedQueues(p *ff.Program, q0, q1 int) *ff.Program { p.MutexQueues = []int{q0, q1}; return p }

func seedThrottle(p *ff.Program, n, period, queue int) *ff.Program {
	p.Throttle = &ff.Throttle{N: n, Period: period, Queue: queue}
	return p
}

func seedProg(cancelAt int, mutexes [2]int, steps ...*ff.Node) *ff.Program {
	return &ff.Program{Steps: steps, Mutexes: mutexes[:], CancelAt: cancelAt}
}

var seedOne = [2]int{1, 1}

// flowSeeds are the hand-written programs of the seed corpus: together they
// use every operation of the program language.
func flowSeeds() []*ff.Program {
	seeds := plainSeeds()
	// With hooks that trace their calls: errors of every kind, waits in
	// a Mutex, a Throttle and a Limiter, Await functions, flows and
	// channels, Run's deadline.
	for _, i := range hookedSeeds {
		p := plainSeeds()[i-1]
		p.Hooks = true
		seeds = append(seeds, p)
	}
	seeds = append(seeds,
		// 87 the flow of an AwaitFlow has hook calls of its own; one
		// whose start is queued as the outer flow ends begins,
		// cancelled, after it.
		seedHooks(seedProg(0, seedOne, seedOnerror(seedAwait(ff.AwaitFlow, ff.EExternalErr, 10, "E1"), seedRecovers(0)),
			seedPar(seedAwait(ff.AwaitFlow, ff.EWait, 0, ""), seedFails("E2", "")))),
		// 88 AwaitEnd: a function cancelled by a failing sibling sees
		// context.Canceled, one cancelled by the timeout of a step around
		// it, or at its due time, context.DeadlineExceeded.
		seedHooks(seedProg(0, seedOne, seedPar(seedAwait(ff.AwaitFn, ff.EWait, 0, ""),
			seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EWait, 0, "")), 10), seedAwait(ff.AwaitFn, ff.EExternalErr, 5, "E1")))),
		seedHooks(seedProg(0, seedOne, seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitThen, ff.EWait, 0, "")), 10), seedRecovers(0)),
			seedPar(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EWait, 0, "")), 30), seedExtErr(30, "E1", "")))),
		// 90 Await steps under Run: only a cancel ends them (Run's
		// deadline, its ctx's cancel, a step's timeout); the value of a
		// channel waits in it.
		seedHooks(seedRun(seedProg(0, seedOne, seedChan(ff.AwaitChan, ff.EExternal, 0, true), seedOnerror(seedChanErr(ff.AwaitResult, "E1", 0, true), seedRecovers(1)),
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitThen, ff.EWait, 0, "")), 10), seedRecovers(0)),
			seedPar(seedAwait(ff.AwaitFn, ff.EWait, 0, ""), seedAwait(ff.AwaitFlow, ff.EWait, 0, ""), seedNilChan(ff.AwaitChan))), ff.CtxDeadline, 30)),
		seedRun(seedProg(0, seedOne, seedOnerror(seedPar(seedAwait(ff.AwaitFn, ff.EWait, 0, ""), seedAwait(ff.AwaitFlow, ff.EWait, 0, ""),
			seedChan(ff.AwaitResult, ff.EWait, 0, false)), seedRecovers(0))), ff.CtxCancel, 20),
		// 92 a SyncWait hook that panics (for Mutex 1 of max 2) fails the
		// step let in; its slot comes back as the flow unwinds.
		seedHooks(seedProg(0, [2]int{1, 2}, seedOnerror(seedPar(seedSyncOn(1, seedExt(10, 0)), seedSyncOn(1, seedExt(20, 0)),
			seedSyncOn(1, seedOnerror(seedLeaf(ff.EImplicit), seedRecovers(0)))), seedRecovers(0)),
			seedPar(seedSyncOn(1, seedExt(10, 1)), seedSyncOn(1, seedOk(1)), seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedSyncOn(1, seedOk(0))), seedRecovers(2))),
			seedSyncOn(1, seedOk(1)))),
		// 93 an AwaitEnd hook that panics (for IDs that are multiples of
		// 3) after a function that succeeded fails its step; AwaitEnd saw
		// the success.
		seedHooks(seedProg(0, seedOne, seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit), seedOnerror(seedAwait(ff.AwaitFn, ff.EExternal, 10, ""), seedRecovers(1))),
			seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedAwait(ff.AwaitThen, ff.EExternal, 10, ""), seedRecovers(1))))),
		// 94 a sub-step in a loop that calls Break on the AsyncSteps of
		// its waiting parent: an InternalError in the sub-step, which
		// the handler of the step around the loop recovers; unlabelled,
		// and with the loop's label.
		seedProg(0, seedOne,
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRepeat("", 3, seedWith(seedLeaf(ff.EImplicit), seedBrk(ff.EParentBreak, "")))), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRepeat("A", 2, seedWith(seedLeaf(ff.EImplicit), seedBrk(ff.EParentBreak, "A")))), seedReturns())),
	)
	seeds = append(seeds, failSeeds()...)
	// 100, 101: 95 and 97 with hooks, the second by Run: the errors of
	// Fail, and those a Settle branch raises, are told to StepError.
	seeds = append(seeds, seedHooks(failSeeds()[0]), seedHooks(seedRun(failSeeds()[2], ff.CtxRun, 0)))
	seeds = append(seeds, cancelWinsSeeds()...)
	seeds = append(seeds, limitSeeds()...)
	seeds = append(seeds, keyedSeeds()...)
	// 122 with hooks: a Goexit in the error handler of a step that times
	// out, which runs in the timeout's task before the flow's drive: the
	// flow goes on at once, as after a panic, and the end of the
	// AwaitFlow that the timeout cancelled, queued meanwhile, comes after
	// the next step.
	seeds = append(seeds, seedHooks(seedProg(0, seedOne,
		seedOnerror(seedWith(seedLeaf(ff.EImplicit),
			seedOnerror(seedCancellable(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFlow, ff.EWait, 0, "")), 10)),
				&ff.Handler{Action: ff.HGoexit})), seedRecovers(0)),
		seedLeaf(ff.EImplicit))))
	seeds = append(seeds, goexitSeeds()...)
	seeds = append(seeds, raceSeeds()...)
	// 129 Retry's Delay, under a timeout of 40ms: its wait of 20ms after
	// the first CommError is waited, the one after the second, which
	// would end at 40ms with the timeout, is not: the CommError unwinds
	// at once, as it does through a Parallel's branch under 10ms; the
	// Timeout of an attempt's own is given to Delay, and retried after
	// it.
	return append(seeds, seedProg(0, seedOne,
		seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedRetryDelay(seedRetry("", 3, 2, ff.EError, "CommError", 0), 0, 20)), 40), seedRecovers(0)),
		seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedPar(seedRetryDelay(seedRetry("", 3, 1, ff.EError, "CommError", 0), 0, 20), seedOk(0))), 10), seedRecovers(0)),
		seedRetryDelay(seedRetry("", 2, 1, ff.EWait, "", 1), 10, 10)))
}

// goexitSeeds are seeds 123 to 125: a runtime.Goexit where a panic is an
// InternalError that goes on in the turn the callback had: in a cancel
// handler, in the sequence of a ForEach and of a ForEachLimit.
func goexitSeeds() []*ff.Program {
	return []*ff.Program{
		// 123 the cancel handler of a step that times out (in the
		// timeout's task: the handler recovers at once), of a branch
		// cancelled by its sibling's error (in the flow's drive, and at a
		// completion from outside): the InternalError replaces the
		// Timeout, and nothing where the step is only cancelled.
		seedHooks(seedProg(0, seedOne,
			seedOnerror(seedCancelExits(seedTimeout(seedLeaf(ff.EWait), 10)), seedRecovers(0)),
			seedOnerror(seedPar(seedCancelExits(seedTimeout(seedLeaf(ff.EWait), 60)), seedFails("E1", "")), seedRecovers(0)),
			seedOnerror(seedPar(seedCancelExits(seedTimeout(seedLeaf(ff.EWait), 60)), seedExtErr(10, "E2", ""), seedExt(0, 0)), seedRecovers(1)),
			seedLeaf(ff.EImplicit))),
		// 124 a ForEach's sequence that panics or calls Goexit after its
		// last pair: the iteration that raises its error takes a turn, as
		// any step does; a Break stops the sequence before it.
		seedProg(0, seedOne,
			seedOnerror(seedPar(seedSeqFault(seedSeqForEach(2, ff.EImplicit, 0, seedLeaf(ff.EImplicit)), true), seedExt(0, 0), seedExt(0, 0)), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedSeqFault(seedSeqForEach(0, ff.EImplicit, 0), false)), seedRecovers(1)),
			seedSeqFault(seedSeqForEach(3, ff.EImplicit, 0, seedBrk(ff.EBreak, "")), true)),
		// 125 a ForEachLimit's sequence that calls Goexit after its last
		// pair fails the step as its panic does (116).
		seedProg(0, seedOne, seedOnerror(seedSeqExits(seedLimit(2, 3, ff.EImplicit, 0, "", seedCancellable(seedExt(10, 0)))), seedRecovers(1)),
			seedOnerror(seedSeqExits(seedLimit(4, 2, ff.EImplicit, 0, "", seedCancelExits(seedTimeout(seedLeaf(ff.EWait), 60)))), seedReturns())),
	}
}

// raceSeeds are seeds 126 to 128: First and Quorum.
func raceSeeds() []*ff.Program {
	ok := seedLeaf(ff.EImplicit)
	return []*ff.Program{
		// 126 with hooks: First's winner is the first branch to succeed;
		// a branch that failed before ended alone, its error told; the
		// others are cancelled in their order, and no error is told for
		// the win.
		seedHooks(seedProg(0, seedOne,
			seedFirst(seedCancellable(seedExt(20, 1)), seedExt(10, 1), seedFails("E1", ""),
				seedCancellable(seedTimeout(seedLeaf(ff.EWait), 60))))),
		// 127 Quorum's results in the order the branches succeeded; the
		// failure after which k can no longer be had fails the step,
		// the branch still running cancelled; when every branch of a
		// First has failed, the last failure is the step's.
		seedProg(0, seedOne,
			seedQuorum(2, seedExt(20, 1), seedExt(10, 1), seedOk(1)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedQuorum(2, seedExtErr(10, "E1", ""), seedExtErr(5, "E2", ""), seedCancellable(seedExt(30, 1)))), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedFirst(seedExtErr(5, "E0", ""), seedExtErr(10, "E2", ""), seedFails("E1", ""))), seedRecovers(0))),
		// 128 a Continue from a branch leaves the race for its loop; a
		// timeout around a race cancels its branches; Mutex sections in
		// the branches of a race in a Parallel's branch.
		seedProg(0, seedOne,
			seedRepeat("A", 2, seedFirst(seedCancellable(seedExt(10, 0)), seedBrk(ff.EContinue, "A"))),
			seedOnerror(seedTimeout(seedWith(ok, seedFirst(seedCancellable(seedLeaf(ff.EWait)), seedExtErr(5, "E1", ""))), 20), seedRecovers(0)),
			seedPar(seedWith(seedLeaf(ff.EImplicit), seedQuorum(1, seedSyncOn(0, seedExt(10, 0)), seedSyncOn(0, seedOk(1)))), seedExt(5, 0))),
	}
}

// seedFirst is First over branches.
func seedFirst(branches ...*ff.Node) *ff.Node { return &ff.Node{Kind: ff.KRace, Subs: branches} }

// seedQuorum is Quorum(k) over branches.
func seedQuorum(k int, branches ...*ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KRace, Need: k, Subs: branches}
}

// seedCancelExits gives n a cancel handler that calls runtime.Goexit: n
// needs a timeout, or an end that is an error, a panic, a Break or a
// Continue, whose byte has room for it.
func seedCancelExits(n *ff.Node) *ff.Node { n.Cancel, n.CancelGoexit = true, true; return n }

// seedSeqExits makes the sequence of the ForEachLimit n call
// runtime.Goexit after its last pair.
func seedSeqExits(n *ff.Node) *ff.Node { n.SeqGoexit = true; return n }

// seedSeqFault makes the sequence of the ForEach n panic, or call
// runtime.Goexit (exits), after its last pair.
func seedSeqFault(n *ff.Node, exits bool) *ff.Node {
	n.SeqPanic, n.SeqGoexit = !exits, exits
	return n
}

// keyedSeeds are seeds 117 to 121: a KeyedMutex, each key a Mutex of its
// own.
func keyedSeeds() []*ff.Program {
	k0, k1, k2 := ff.KeyedGate, ff.KeyedGate+1, ff.KeyedGate+2
	return []*ff.Program{
		// 117 branches on one key take turns, those on other keys go on
		// at once; a flow that holds a key enters it again at once from a
		// nested step, and waits for another key as any flow.
		seedKeyed(seedProg(0, seedOne,
			seedPar(seedSyncOn(k0, seedExt(10, 0)), seedSyncOn(k0, seedExt(10, 1)), seedSyncOn(k1, seedExt(5, 0))),
			seedPar(seedSyncOn(k1, seedExt(10, 0)), seedSyncOn(k0, seedWith(seedLeaf(ff.EImplicit), seedSyncOn(k0, seedOk(1)), seedSyncOn(k1, seedExt(5, 0)))),
				seedSyncOn(k2, seedOk(0)))), 1, -1),
		// 118, 119 the queue limit is per key: with one waiter allowed, a
		// third branch on key 0 is rejected while key 1 lets one wait;
		// with two slots and no queue, two enter a key and a third is
		// rejected.
		seedKeyed(seedProg(0, seedOne,
			seedOnerror(seedPar(seedSyncOn(k0, seedExt(10, 0)), seedSyncOn(k0, seedExt(10, 0)), seedSyncOn(k0, seedOk(0))), seedRecovers(0)),
			seedPar(seedSyncOn(k1, seedExt(10, 0)), seedSyncOn(k1, seedOk(1)), seedSyncOn(k2, seedOk(0)))), 1, 1),
		seedKeyed(seedProg(0, seedOne,
			seedOnerror(seedPar(seedSyncOn(k0, seedExt(10, 0)), seedSyncOn(k0, seedExt(5, 0)), seedSyncOn(k0, seedOk(0))), seedRecovers(1)),
			seedPar(seedSyncOn(k1, seedExt(5, 0)), seedSyncOn(k1, seedOk(0)))), 2, 0),
		// 120 with hooks: a branch that waits for a key its flow holds
		// meets the deadlock; waits are reported per key; a waiter
		// timed out, and one the root cancel ends, leave their key.
		seedHooks(seedKeyed(seedProg(40, seedOne,
			seedSyncOn(k0, seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedPar(seedSyncOn(k1, seedExt(5, 0)), seedSyncOn(k0, seedOk(0))), seedRecovers(0)))),
			seedPar(seedSyncOn(k2, seedExt(15, 0)), seedSyncOn(k2, seedExt(5, 0))),
			seedPar(seedSyncOn(k1, seedExt(20, 0)), seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedSyncOn(k1, seedOk(0))), 10), seedRecovers(0)),
				seedSyncOn(k1, seedCancellable(seedLeaf(ff.EWait))))), 1, -1)),
		// 121 a key is in use as long as a section holds or waits for
		// it: the first holder leaves while a second waits, and a third
		// that comes while the second holds waits for it, on the same
		// Mutex, not a new one made as the first let go.
		seedKeyed(seedProg(0, seedOne,
			seedPar(seedSyncOn(k0, seedExt(10, 0)), seedSyncOn(k0, seedExt(20, 0)),
				seedWith(seedLeaf(ff.EImplicit), seedExt(20, 0), seedSyncOn(k0, seedOk(0))))), 1, -1),
	}
}

// seedKeyed gives p a KeyedMutex of max and queue limit (< 0: none).
func seedKeyed(p *ff.Program, max, queue int) *ff.Program {
	p.Keyed = &ff.Keyed{Max: max, MaxQueue: queue}
	return p
}

// limitSeeds are seeds 107 to 116: ForEachLimit.
func limitSeeds() []*ff.Program {
	return []*ff.Program{
		// 107 at most limit items at once, each pair pulled as a slot
		// comes free; Continue ends an item as a success does; a
		// sequence shorter than the limit, and an empty one, run out as
		// the step begins.
		seedProg(0, seedOne, seedLimit(2, 5, ff.EContinue, 1, "", seedExt(10, 0), seedLeaf(ff.EImplicit)), seedLeaf(ff.EImplicit),
			seedLimit(4, 2, ff.EImplicit, 0, "", seedExt(10, 1)), seedLimit(1, 0, ff.EImplicit, 0, "")),
		// 108 Break stops the sequence at once; the items running go on to
		// their end. A Break once it has run out only ends its item. An
		// item that ends at once frees its slot for the next pair while
		// the first item still runs.
		seedProg(0, seedOne, seedLimit(2, 6, ff.EBreak, 1, "", seedExt(10, 0)),
			seedLimit(3, 3, ff.EBreak, 2, "", seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit))),
			seedLimit(2, 5, ff.ESuccess, 0, "", seedExt(10, 0), seedLeaf(ff.EImplicit))),
		// 109 an item's error cancels the items running (their cancel
		// handlers first), the step's cancel handler stops the
		// sequence, then its handler sees the error.
		seedProg(0, seedOne, seedOnerror(seedLimit(3, 5, ff.EImplicit, 0, "", seedCancellable(seedExt(10, 0)), seedFails("E1", "x")), seedRecovers(1)),
			seedOnerror(seedLimit(2, 4, ff.EImplicit, 0, "", seedCancellable(seedExt(10, 0)), seedWith(seedLeaf(ff.EImplicit), seedLimit(1, 2, ff.EImplicit, 0, "", seedPanics()))), seedReturns())),
		// 110 a labelled Break leaves the step for its loop, as from a
		// Parallel's branch; an unlabelled one inside an item's loop is
		// that loop's; a timeout around the step cancels its items.
		seedProg(0, seedOne, seedRepeat("A", 2, seedOnerror(seedLimit(2, 4, ff.EBreak, 1, "A", seedCancellable(seedExt(20, 0))), seedReturns())),
			seedLimit(2, 3, ff.EImplicit, 0, "", seedRepeat("", 3, seedBrk(ff.EBreak, ""))),
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedLimit(1, 3, ff.EImplicit, 0, "", seedCancellable(seedExt(15, 0)))), 20), seedRecovers(0))),
		// 111 an Await function whose step a timeout ended keeps its
		// item's slot until it returns; an item that waits for a Mutex
		// the flow holds around the step meets the Parallel's deadlock.
		seedExtended(seedProg(0, seedOne, seedLimit(1, 3, ff.EImplicit, 0, "",
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EWait, 0, "")), 10), seedRecovers(0))),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedSyncOn(0, seedWith(seedLeaf(ff.EImplicit), seedLimit(2, 2, ff.EImplicit, 0, "", seedSyncOn(0, seedOk(0)))))), seedRecovers(0)),
			seedLeaf(ff.EImplicit))),
		// 112 with hooks: a root cancel, and channels made per item.
		seedHooks(seedProg(35, seedOne, seedLimit(2, 4, ff.EImplicit, 0, "", seedChan(ff.AwaitChan, ff.EExternal, 10, false), seedCancellable(seedLeaf(ff.EWait))))),
		// 113 Run's deadline times the step out as a whole; past it, a
		// step that waits times out in an item, its handler recovers,
		// and the next item fails with Timeout as it starts.
		seedRun(seedProg(0, seedOne, seedOnerror(seedLimit(1, 4, ff.EImplicit, 0, "", seedExt(30, 0)), seedRecovers(0)),
			seedOnerror(seedLimit(1, 3, ff.EImplicit, 0, "", seedOnerror(seedExt(5, 0), seedRecovers(0))), seedRecovers(0)),
			seedLimit(2, 2, ff.EImplicit, 0, "", seedExt(5, 0))), ff.CtxDeadline, 10),
		// 114 slots held by the Await functions of ended items: a pair
		// pulled ahead waits for one; the quick item frees its own at
		// once; a function cancelled with its Parallel branch, whose
		// handler recovers, holds it too.
		seedHooks(seedProg(0, seedOne, seedLimit(2, 5, ff.ESuccess, 1, "",
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EWait, 0, "")), 10), seedRecovers(0))),
			seedLimit(1, 2, ff.EImplicit, 0, "", seedOnerror(seedPar(seedAwait(ff.AwaitThen, ff.EExternal, 20, ""), seedExtErr(5, "E1", "")), seedRecovers(0)), seedExt(1, 0)))),
		// 115 an item's error cancels the item whose Await function runs:
		// the step has ended when it returns, and takes no slot back. A
		// function cancelled by a timeout returns as the event ends, not
		// when it would have: its slot comes back then.
		seedExtended(seedProg(0, seedOne, seedOnerror(seedLimit(2, 6, ff.EImplicit, 0, "",
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EWait, 0, "")), 10), seedRecovers(0)), seedFails("E2", "")), seedRecovers(0)),
			seedLimit(1, 3, ff.EContinue, 0, "", seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EExternal, 30, "")), 10), seedRecovers(0))))),
		// 116 a sequence that panics after its last pair fails the step
		// with InternalError, raised at the step once its cleanup has
		// run: the item running is cancelled, as for an item's error;
		// items queued and not started, as the step begins, are dropped.
		seedProg(0, seedOne, seedOnerror(seedSeqPanics(seedLimit(2, 3, ff.EImplicit, 0, "", seedCancellable(seedExt(10, 0)))), seedRecovers(1)),
			seedOnerror(seedSeqPanics(seedLimit(4, 2, ff.EImplicit, 0, "", seedCancellable(seedLeaf(ff.EWait)))), seedReturns())),
	}
}

// seedSeqPanics makes the sequence of the ForEachLimit n panic after its
// last pair.
func seedSeqPanics(n *ff.Node) *ff.Node { n.SeqPanic = true; return n }

// seedLimit is a ForEachLimit of limit over n pairs whose item at calls
// Break or Continue (end, with label), and whose other items add body.
func seedLimit(limit, n int, end ff.End, at int, label string, body ...*ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KForEachLimit, Limit: limit, Count: n, End: end, At: at, Label: label, Subs: body}
}

// cancelWinsSeeds are seeds 102 to 106: a Root.Cancel from a callback
// wins over the error that follows it. No error handler runs after it;
// the cancel handlers of the steps still running do.
func cancelWinsSeeds() []*ff.Program {
	return []*ff.Program{
		// From the cancel handler of the failing step, on the path of its
		// error: neither its handler nor the outer one runs.
		seedCancelIn(seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit),
			seedOnerror(seedCancellable(seedFails("E1", "")), seedRecovers(0))), seedRecovers(1))), 2),
		// From an error handler in a branch that raises an error of its
		// own: the waiting sibling is cancelled, the Parallel's handler
		// does not run.
		seedCancelFrom(seedProg(0, seedOne, seedOnerror(seedPar(seedCancellable(seedLeaf(ff.EWait)),
			seedOnerror(seedFails("E1", ""), seedRethrows("E2", ""))), seedRecovers(0)), seedLeaf(ff.EImplicit)), 4),
		// From a step that then calls Break: the loop does not take it.
		seedCancelFrom(seedProg(0, seedOne, seedOnerror(seedRepeat("", 3, seedCancellable(seedBrk(ff.EBreak, ""))), seedRecovers(0)),
			seedLeaf(ff.EImplicit)), 2),
		// From a branch that then fails: its own cancel handler runs
		// first, then its sibling's; the Parallel's handler does not run.
		seedCancelFrom(seedProg(0, seedOne, seedOnerror(seedPar(seedCancellable(seedLeaf(ff.EWait)),
			seedCancellable(seedOnerror(seedFails("E1", ""), seedRecovers(0)))), seedRecovers(0))), 3),
		// From a branch of a Settle that then fails: Settle's handler does
		// not take the error, the other branch is cancelled.
		seedCancelFrom(seedProg(0, seedOne, seedOnerror(seedSettle(seedCancellable(seedExt(10, 0)), seedFails("E1", "")), seedRecovers(0)),
			seedLeaf(ff.EImplicit)), 3),
	}
}

// failSeeds are seeds 95 to 99: Fail and Settle.
func failSeeds() []*ff.Program {
	return []*ff.Program{
		// 95 Fail with each kind of Go error: a plain one is an
		// InternalError; Fail after Add is a misuse, without the error; a
		// handler's Error keeps the Go error as Cause, from its callback
		// and once it waited, and ends the flow with it.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedFail(ff.FailPlain, "", false, 0)), seedRecovers(1)),
			seedOnerror(seedFail(ff.FailDeadline, "", false, 0), seedRecovers(0)),
			seedOnerror(seedWith(seedFail(ff.FailCoded, "E1", false, 0), seedLeaf(ff.EImplicit)), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFail(ff.FailCoded, "E2", false, 0), seedHandlerWaits(0, ff.EExternalErr, 10, 0, "E0"))), seedRecovers(0))),
		// 96 the same from the tool; a handler that calls Fail raises its
		// own Go error.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFail(ff.FailWrapped, "E1", true, 20), seedRethrows("E2", "x"))), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFails("E0", ""), seedHandlerFails(ff.FailWrapped, "E2"))), seedRecovers(0)),
			seedOnerror(seedFail(ff.FailPlain, "", true, 10), seedHandlerFails(ff.FailDeadline, ""))),
		// 97 Settle: every branch runs to its end, its error (Error, Fail,
		// a panic, its own timeout, Break outside of a loop taken by
		// none) its outcome; branches of any kind, then sees them in
		// order; a Break for a loop around it leaves it, cancelling the
		// other branches, then not run.
		seedProg(0, seedOne, seedSettle(seedOk(1), seedFail(ff.FailCoded, "E1", true, 10), seedPanics()),
			seedSettle(seedTimeout(seedLeaf(ff.EWait), 10), seedPar(seedExt(5, 1), seedOk(0)), seedSuccessStep(2)),
			seedRepeat("A", 2, seedSettle(seedCancellable(seedExt(10, 0)), seedBrk(ff.EBreak, "A"))),
			seedSettle()),
		// 98 a cancel of the Settle step (a timeout around it, a failed
		// sibling branch of a Parallel around it) cancels its branches,
		// then not run; a Mutex its branch waits for.
		seedProg(0, seedOne, seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedSettle(seedCancellable(seedLeaf(ff.EWait)), seedFails("E1", ""))), 20), seedRecovers(0)),
			seedOnerror(seedPar(seedWith(seedLeaf(ff.EImplicit), seedSettle(seedSyncOn(0, seedExt(10, 0)), seedSyncOn(0, seedOk(1)))), seedExtErr(5, "E2", "")), seedRecovers(0)),
			seedSettle(seedSyncOn(0, seedExt(10, 1)), seedSyncOn(0, seedFail(ff.FailCoded, "E0", false, 0)))),
		// 99 the steps of Settle and of each branch take their turns: a
		// sibling branch of a Parallel around it goes on meanwhile.
		seedProg(0, seedOne, seedPar(seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit)),
			seedWith(seedLeaf(ff.EImplicit), seedSettle(seedLeaf(ff.EImplicit), seedFail(ff.FailPlain, "", false, 0))),
			seedRepeat("", 3, seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit))))),
	}
}

// seedFail is a step that calls Fail with the Go error of kind k (code:
// that of ff.FailCoded or ff.FailWrapped), from the tool at ms if
// external.
func seedFail(k ff.FailKind, code string, external bool, at int) *ff.Node {
	n := &ff.Node{Kind: ff.KStep, End: ff.EFail, Fail: k, Code: code}
	if external {
		n.End, n.At = ff.EExternalFail, at
	}
	return n
}

// seedHandlerFails is a handler that calls Fail with the Go error of kind
// k.
func seedHandlerFails(k ff.FailKind, code string) *ff.Handler {
	return &ff.Handler{Action: ff.HFail, Fail: k, Code: code}
}

// seedSettle is a Settle with a branch per node.
func seedSettle(branches ...*ff.Node) *ff.Node { return &ff.Node{Kind: ff.KSettle, Subs: branches} }

// seedHooks runs p with hooks that trace their calls.
func seedHooks(p *ff.Program) *ff.Program { p.Hooks, p.Ext = true, true; return p }

// hookedSeeds are the plain seeds (counting from 1) that run again with
// hooks.
var hookedSeeds = []int{2, 5, 13, 18, 23, 28, 32, 41, 42, 44, 51, 53, 57, 60, 61, 62, 63, 64, 65, 66}

// plainSeeds are the seeds written by hand.
func plainSeeds() []*ff.Program {
	return []*ff.Program{
		// 1 levels and args: sub-steps' last args become the parent's result.
		seedProg(0, seedOne, seedWith(seedLeaf(ff.EImplicit), seedOk(1), seedWith(seedLeaf(ff.EImplicit), seedOk(2))), seedLeaf(ff.EImplicit), seedSuccessStep(2)),
		// 2 spec 1.2: the inner handler replaces the error, the outer recovers.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFails("E1", "i"), seedRethrows("E2", "x"))), seedRecovers(1)), seedLeaf(ff.EImplicit)),
		// 3 spec 1.2.1: steps added by a handler fail; it does not run again.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFails("E0", ""), seedAdds(seedOnerror(seedFails("E1", "i"), seedReturns())))), seedReturns())),
		// 4 a handler that returns lets the error reach the root.
		seedProg(0, seedOne, seedOnerror(seedFails("E2", "info"), seedReturns()), seedLeaf(ff.EImplicit)),
		// 5 docs/DESIGN.md#timeouts: a timeout cancels the sub-steps innermost first.
		seedProg(0, seedOne, seedOnerror(seedCancellable(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedCancellable(seedWith(seedLeaf(ff.EImplicit), seedCancellable(seedExt(50, 1))))), 20)), seedRecovers(0)), seedLeaf(ff.EImplicit)),
		// 6 external success and error at virtual times.
		seedProg(0, seedOne, seedExt(10, 2), seedOnerror(seedExtErr(20, "E1", "late"), seedRecovers(1)), seedExt(0, 0)),
		// 7 docs/DESIGN.md#parallel-branches: the first error cancels the other branches.
		seedProg(0, seedOne, seedOnerror(seedPar(seedCancellable(seedExt(30, 0)), seedExtErr(10, "E1", "b"), seedCancellable(seedLeaf(ff.EWait))), seedRecovers(0)), seedLeaf(ff.EImplicit)),
		// 8 interleaving: two branches that each add a sub-step give 1,2,1.1,2.1.
		seedProg(0, seedOne, seedPar(seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit)), seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit))), seedLeaf(ff.EImplicit)),
		// 9 labelled Break and Continue from an inner loop.
		seedProg(0, seedOne, seedLoop("A", 3, seedRepeat("B", 2, seedBrk(ff.EContinue, "A")), seedLeaf(ff.EImplicit)), seedLoop("", 2, seedLoop("B", 3, seedBrk(ff.EBreak, "A"))), seedLeaf(ff.EImplicit)),
		// 10 handlers between Break and its loop see LoopBreak; one recovers it.
		seedProg(0, seedOne, seedRepeat("A", 3, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedBrk(ff.EBreak, "")), seedRecovers(0)), seedOnerror(seedBrk(ff.EContinue, "A"), seedReturns())), seedRepeat("", 0, seedLeaf(ff.EImplicit))),
		// 11 docs/DESIGN.md#break-and-continue: Break with no loop of its label ends the flow.
		seedProg(0, seedOne, seedRepeat("A", 2, seedOnerror(seedBrk(ff.EBreak, "B"), seedReturns()))),
		// 12 root cancel at a virtual time: cancel handlers only.
		seedProg(25, seedOne, seedOnerror(seedPar(seedCancellable(seedWith(seedLeaf(ff.EImplicit), seedCancellable(seedLeaf(ff.EWait)))), seedCancellable(seedExt(40, 0))), seedReturns())),
		// 13 Mutex(1): two branches queue, each waits inside.
		seedProg(0, seedOne, seedPar(seedSyncOn(0, seedExt(10, 1)), seedSyncOn(0, seedExt(10, 1)), seedSyncOn(1, seedLeaf(ff.EImplicit))), seedLeaf(ff.EImplicit)),
		// 14 Mutex reentrance within one flow.
		seedProg(0, seedOne, seedSyncOn(0, seedWith(seedLeaf(ff.EImplicit), seedSyncOn(0, seedOk(1)))), seedLeaf(ff.EImplicit)),
		// 15 a timeout inside a critical section gives the Mutex back.
		seedProg(0, seedOne, seedPar(seedSyncOn(0, seedOnerror(seedCancellable(seedTimeout(seedLeaf(ff.EWait), 20)), seedReturns())), seedSyncOn(0, seedExt(0, 0))), seedLeaf(ff.EImplicit)),
		// 16 docs/DESIGN.md#completing-after-add: Success after Add is an InternalError.
		seedProg(0, seedOne, seedOnerror(seedWith(seedOk(1), seedLeaf(ff.EImplicit)), seedRecovers(0)), seedWith(seedFails("E0", ""), seedLeaf(ff.EImplicit))),
		// 17 an empty parallel, then an empty root.
		seedProg(0, seedOne, seedPar(), seedLeaf(ff.EImplicit)),
		seedProg(0, seedOne),
		// 18 Mutex(2): three branches, the third waits.
		seedProg(0, [2]int{2, 1}, seedPar(seedSyncOn(0, seedExt(10, 0)), seedSyncOn(0, seedExt(20, 0)), seedSyncOn(0, seedLeaf(ff.EImplicit)))),
		// 19 a timeout and an external completion due at the same time.
		seedProg(0, seedOne, seedOnerror(seedTimeout(seedExt(30, 1), 30), seedRecovers(2)), seedOnerror(seedTimeout(seedCancellable(seedLeaf(ff.EImplicit)), 10), seedRethrows("E1", ""))),
		// 20 a parallel's handler recovers with args; Continue after Add.
		seedProg(0, seedOne, seedOnerror(seedPar(seedFails("E1", "")), seedRecovers(1)), seedLeaf(ff.EImplicit), seedRepeat("", 2, seedWith(seedBrk(ff.EContinue, ""), seedLeaf(ff.EImplicit)))),
		// 21 root cancel while a branch waits for a Mutex.
		seedProg(15, seedOne, seedPar(seedSyncOn(0, seedCancellable(seedLeaf(ff.EWait))), seedSyncOn(0, seedLeaf(ff.EImplicit)))),
		// 23 panics: in a step after Add (its sub-step does not run), in a
		// handler, in a parallel branch; handlers see InternalError.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedCancellable(seedWith(seedPanics(), seedLeaf(ff.EImplicit))), seedHandlerPanics())), seedRecovers(1)),
			seedOnerror(seedPar(seedCancellable(seedLeaf(ff.EWait)), seedPanics()), seedReturns())),
		// 24 waiting handlers: Success at +10 resumes after the failed step;
		// Error at +20 replaces the error for the outer handler.
		seedProg(0, seedOne, seedOnerror(seedFails("E1", "i"), seedHandlerWaits(0, ff.EExternal, 10, 2, "")),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFails("E0", ""), seedHandlerWaits(0, ff.EExternalErr, 20, 0, "E2"))), seedRecovers(0)), seedLeaf(ff.EImplicit)),
		// 25 a waiting handler times out (SetTimeout 20 before its Success at
		// +30): Timeout goes outward, the handler does not run again.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedCancellable(seedFails("E1", "")), seedHandlerWaits(20, ff.EExternal, 30, 1, ""))), seedRecovers(0)),
			seedOnerror(seedFails("E2", ""), seedHandlerWaits(10, ff.EWait, 0, 0, "")), seedLeaf(ff.EImplicit)),
		// 26 SetTimeout re-armed in the same step: only the second counts.
		seedProg(0, seedOne, seedOnerror(seedRearm(seedCancellable(seedLeaf(ff.EWait)), 50, 10), seedRecovers(0)),
			seedRearm(seedExt(30, 1), 10, 40), seedOnerror(seedRearm(seedWith(seedLeaf(ff.EImplicit), seedExt(50, 0)), 60, 20), seedReturns())),
		// 27 Mutex queue limits: Mutex(1, 0) rejects the second branch, whose
		// Sync onerror sees DefenseRejected first; Mutex(1, 1) queues the
		// second and rejects the third.
		seedQueues(seedProg(0, seedOne,
			seedPar(seedSyncOn(0, seedExt(10, 0)), seedSyncOn(0, seedOnerror(seedOk(1), seedRecovers(1)))),
			seedOnerror(seedPar(seedSyncOn(1, seedExt(10, 0)), seedSyncOn(1, seedExt(0, 1)), seedSyncOn(1, seedOnerror(seedOk(0), seedReturns()))), seedRecovers(0))), 0, 1),
		// 28 Throttle(1, 20ms): three branches enter at 0, 20 and 40; then,
		// after idle, one more enters at once.
		seedThrottle(seedProg(0, seedOne, seedPar(seedThrottled(seedLeaf(ff.EImplicit)), seedThrottled(seedOk(1)), seedThrottled(seedExt(5, 0))), seedExt(50, 0), seedThrottled(seedLeaf(ff.EImplicit))), 1, 20, -1),
		// 29 Throttle(1, 20ms, queue 1): the third branch is rejected; the root
		// cancel at 15 takes the second out of the queue; the Throttle goes idle.
		seedThrottle(seedProg(15, seedOne, seedPar(seedThrottled(seedCancellable(seedLeaf(ff.EWait))), seedThrottled(seedLeaf(ff.EImplicit)), seedThrottled(seedOnerror(seedLeaf(ff.EImplicit), seedRecovers(0))))), 1, 20, 1),
		// 30 Throttle(1, 10ms, queue 1): the third branch is rejected and
		// fails the parallel (the queued second leaves the queue), whose
		// handler waits and succeeds (at +0, from the tool); the next entry
		// queues until the period ends at 10.
		seedThrottle(seedProg(0, seedOne, seedOnerror(seedPar(seedThrottled(seedExt(0, 0)), seedThrottled(seedCancellable(seedLeaf(ff.EWait))), seedThrottled(seedOnerror(seedLeaf(ff.EImplicit), seedReturns()))), seedHandlerWaits(0, ff.EExternal, 0, 1, "")), seedThrottled(seedOk(1))), 1, 10, 1),
		// 31 ForEach over a slice with Continue at 1, over a map (sorted keys)
		// with a labelled Break at 1 from an inner step.
		seedProg(0, seedOne, seedForEach("", false, 3, ff.EContinue, 1, seedLeaf(ff.EImplicit)),
			seedForEach("A", true, 3, ff.EImplicit, 0, seedRepeat("", 2, seedBrk(ff.EBreak, "A"))), seedForEach("B", true, 3, ff.EBreak, 1, seedOk(1)), seedForEach("", false, 0, ff.EImplicit, 0)),
		// 32 hostile callbacks: a Goexit in a step and in a handler, a panic
		// with a value that panics when printed, a sub-step that completes
		// its waiting parent, a ForEach pulling an iter.Seq2 lazily that
		// Breaks at 1 (the sequence is stopped).
		seedProg(0, seedOne, seedOnerror(seedLeaf(ff.EGoexit), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedFails("E1", ""), &ff.Handler{Action: ff.HGoexit})), seedRecovers(2)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EPanicEvil)), seedRecovers(1))),
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EParent), seedLeaf(ff.EImplicit)), seedReturns())),
		seedProg(0, seedOne, seedSeqForEach(3, ff.EBreak, 1, seedLeaf(ff.EImplicit)), seedSeqForEach(2, ff.EImplicit, 0)),
		// 36 Retry: two CommErrors, a backoff of 10ms each, then success
		// with args, which the next step gets; a Retryable of its own
		// retries E1, never E2.
		seedProg(0, seedOne, seedRetryOpts(seedRetry("", 3, 2, ff.EError, "CommError", 1), 0, 10, false), seedLeaf(ff.EImplicit),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetryOpts(seedRetry("", 4, 3, ff.EError, "E1", 0), 0, 0, true)), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetryOpts(seedRetry("", 4, 3, ff.EError, "E2", 0), 0, -1, true)), seedReturns())),
		// 37 Retry with a timeout per attempt: waits time out and are
		// retried; a sub-step's cancel handler runs at each timeout; an
		// attempt that adds nothing does not succeed implicitly.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetryOpts(seedRetry("A", 2, 1, ff.EWait, "", 0, seedOnerror(seedCancellable(seedLeaf(ff.EWait)), seedReturns())), 20, 10, false)), seedRecovers(1)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetryOpts(seedRetry("", 2, 0, ff.EError, "", 0), 10, -1, false)), seedRecovers(0))),
		// 38 Retry's Break and Continue: its own label, an outer loop's,
		// Continue on the last attempt ends it; a panic is not retried by
		// default.
		seedProg(0, seedOne, seedRepeat("B", 2, seedRetryOpts(seedRetry("A", 3, 1, ff.EContinue, "A", 1), 0, 10, true), seedRetry("", 2, 1, ff.EContinue, "B", 0)),
			seedRetry("", 2, 2, ff.EContinue, "", 0), seedRetry("A", 3, 1, ff.EBreak, "", 2)),
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetry("", 3, 1, ff.EPanic, "", 0)), seedRecovers(0)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedRetryOpts(seedRetry("", 3, 2, ff.EPanic, "", 1), 0, -1, true)), seedRecovers(0))),
		// 39 a root cancel during a backoff; a parallel's failing sibling
		// cancels a Retry's attempt.
		seedProg(35, seedOne, seedOnerror(seedPar(seedRetryOpts(seedRetry("", 4, 3, ff.EWait, "", 0, seedCancellable(seedLeaf(ff.EWait))), 10, 0, false), seedExtErr(25, "E1", "")), seedRecovers(0)),
			seedRetryOpts(seedRetry("", 3, 3, ff.EError, "Timeout", 0), 0, 20, false)),
		// 41 Limiter(1 at once, queue 1; 1 per 20ms, burst 0): the first
		// branch enters, the second queues for the slot, the third finds
		// the queue full; the second, admitted at 10, finds the period's
		// entry taken and is rejected by the Throttle, giving the slot
		// back at once, though its handler waits; a reentrant entry.
		seedLimiter(seedProg(0, seedOne,
			seedOnerror(seedPar(seedLimited(seedExt(10, 0)), seedLimited(seedOnerror(seedOk(1), seedHandlerWaits(0, ff.EExternal, 30, 0, ""))), seedLimited(seedOnerror(seedOk(0), seedRecovers(2)))), seedRecovers(0)),
			seedExt(30, 0), seedLimited(seedWith(seedLeaf(ff.EImplicit), seedLimited(seedOk(1))))), ff.Limiter{Concurrent: 1, MaxQueue: 1, Rate: 1, Period: 20, Burst: 0}),
		// 42 Limiter(2 at once, queue 1; 1 per 10ms, burst 1): two branches
		// enter the Mutex, the second waits for the next period, the third
		// for a slot.
		seedLimiter(seedProg(0, seedOne, seedPar(seedLimited(seedExt(10, 1)), seedLimited(seedCancellable(seedExt(0, 0))), seedLimited(seedLeaf(ff.EImplicit)))),
			ff.Limiter{Concurrent: 2, MaxQueue: 1, Rate: 1, Period: 10, Burst: 1}),
		// 44 cancel handlers that panic: on the path of an error the panic
		// replaces it; in a cancelled sibling, under a timeout, or under
		// the root cancel, it replaces nothing.
		seedProg(0, seedOne, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedCancelPanics(seedFails("E1", "i"))), seedRecovers(0)),
			seedOnerror(seedPar(seedCancelPanics(seedTimeout(seedLeaf(ff.EWait), 60)), seedFails("E2", "j")), seedRecovers(1)),
			seedOnerror(seedTimeout(seedCancelPanics(seedWith(seedLeaf(ff.EImplicit), seedCancelPanics(seedBrk(ff.EContinue, "")), seedCancelPanics(seedTimeout(seedLeaf(ff.EWait), 50)))), 10), seedRecovers(0))),
		// 50 SetTimeout(0): the step times out once nothing else is
		// runnable, unless it completes first; re-armed with 10ms.
		seedProg(0, seedOne, seedOnerror(seedCancellable(seedZeroTimeout(seedLeaf(ff.EWait))), seedRecovers(0)),
			seedOnerror(seedZeroTimeout(seedWith(seedLeaf(ff.EImplicit), seedOk(1))), seedRecovers(2)),
			seedOnerror(seedPar(seedZeroTimeout(seedExt(0, 1)), seedZeroTimeout(seedOk(0)), seedRearm(seedZeroTimeout(seedLeaf(ff.EWait)), 0, 10)), seedRecovers(0))),
		// 46 Root.Cancel from a callback: the step completes, then the
		// flow sees the cancel before its next step.
		seedCancelFrom(seedProg(0, seedOne, seedCancellable(seedOk(1)), seedLeaf(ff.EImplicit)), 1),
		// 47 from a step that then fails: the cancel wins, its handler
		// does not run; a waiting sibling branch is cancelled.
		seedCancelFrom(seedProg(0, seedOne, seedPar(seedCancellable(seedLeaf(ff.EWait)),
			seedOnerror(seedFails("E1", ""), seedAdds(seedLeaf(ff.EImplicit))))), 3),
		// 48 from a step that then waits, or adds sub-steps: its cancel
		// handler runs, the sub-steps do not.
		seedCancelFrom(seedProg(0, seedOne, seedCancellable(seedLeaf(ff.EWait))), 1),
		seedCancelFrom(seedProg(0, seedOne, seedPar(seedExt(0, 0), seedCancellable(seedWith(seedLeaf(ff.EImplicit), seedLeaf(ff.EImplicit))))), 3),
		// 52 Root.Cancel from an error handler that recovers; from the
		// cancel handler of a sibling a failed branch cancels, and from a
		// cancel handler under a timeout: the cancel wins, the error
		// handler of the parallel, or of the step timed out, does not run.
		seedCancelFrom(seedProg(0, seedOne, seedOnerror(seedFails("E1", ""), seedRecovers(1)), seedLeaf(ff.EImplicit)), 2),
		seedCancelIn(seedProg(0, seedOne, seedOnerror(seedPar(seedCancellable(seedLeaf(ff.EWait)), seedExtErr(10, "E1", "")), seedAdds(seedLeaf(ff.EImplicit)))), 2),
		seedCancelIn(seedProg(0, seedOne, seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedCancellable(seedLeaf(ff.EWait))), 10), seedHandlerWaits(0, ff.EExternal, 5, 0, ""))), 2),
		// 55 Mutex deadlocks: a branch syncs on the Mutex(1) its flow
		// holds, and its Sync's handler sees InternalError; under a
		// Mutex(2) that another branch holds too, it waits instead.
		seedProg(0, [2]int{1, 2},
			seedSyncOn(0, seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedPar(seedSyncOn(0, seedOnerror(seedOk(1), seedRethrows("E1", "d"))))), seedRecovers(0))),
			seedSyncOn(1, seedWith(seedLeaf(ff.EImplicit), seedPar(seedSyncOn(1, seedExt(10, 0)), seedSyncOn(1, seedLeaf(ff.EImplicit)))))),
		seedLimiter(seedProg(0, seedOne, seedLimited(seedWith(seedLeaf(ff.EImplicit), seedPar(seedLimited(seedOnerror(seedOk(0), seedReturns())), seedExt(5, 0))))),
			ff.Limiter{Concurrent: 1, MaxQueue: -1}),
		// 57 the turn a retry takes (a model defect the fuzzer found): a
		// failed attempt retried at once yields once, before the next
		// attempt, to the branch queued behind it.
		seedProg(0, seedOne, seedPar(seedRetryOpts(seedRetry("", 3, 2, ff.EError, "Timeout", 1, seedLoop("", 0)), 40, -1, false),
			seedSyncOn(0, seedLeaf(ff.EImplicit)))),
		seedProg(20, seedOne, seedCancelPanics(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedCancelPanics(seedTimeout(seedLeaf(ff.EWait), 30))), 60))),
		// 43 the zero Limiter limits nothing; a Limiter with a rate only.
		seedLimiter(seedProg(0, seedOne, seedPar(seedLimited(seedExt(10, 1)), seedLimited(seedLeaf(ff.EImplicit)))), ff.Limiter{}),
		seedLimiter(seedProg(0, seedOne, seedPar(seedLimited(seedExt(10, 1)), seedLimited(seedLeaf(ff.EImplicit)), seedLimited(seedLeaf(ff.EImplicit)))), ff.Limiter{Rate: 2, Period: 30, Burst: -1}),
		// 57 Run, its ctx cancelled: cancel handlers only, as Root.Cancel.
		seedRun(seedProg(0, seedOne, seedOnerror(seedPar(seedCancellable(seedExt(40, 0)), seedCancellable(seedWith(seedLeaf(ff.EImplicit), seedCancellable(seedLeaf(ff.EWait))))), seedRecovers(0))), ff.CtxCancel, 20),
		// 58 Run's deadline: the innermost waiting step times out, its
		// handler recovers; the next step waits and fails at once.
		seedRun(seedProg(0, seedOne, seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedCancellable(seedExt(50, 1)), seedRecovers(1)), seedOnerror(seedExt(10, 0), seedRecovers(2))), seedOk(1)), ff.CtxDeadline, 20),
		// 59 Run's deadline times a Parallel out as a whole; a loop through
		// which it went begins no further iteration.
		seedHelping(seedRun(seedProg(0, seedOne, seedRepeat("", 3, seedOnerror(seedPar(seedCancellable(seedExt(30, 0)), seedLeaf(ff.EImplicit)), seedRecovers(0)))), ff.CtxDeadline, 10)),
		// 60 a Retry past Run's deadline retries nothing.
		seedRun(seedProg(0, seedOne, seedOnerror(seedRetryOpts(seedRetry("", 4, 3, ff.EWait, "", 0), 0, 10, true), seedAdds(seedRetry("", 3, 1, ff.EError, "Timeout", 1)))), ff.CtxDeadline, 15),
		// 61 Await functions that end at chosen times: success, error,
		// Timeout, panic, Goexit; one never ends and is cancelled.
		seedExtended(seedProg(0, seedOne,
			seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFn, ff.EExternal, 10, ""),
				seedOnerror(seedAwait(ff.AwaitFn, ff.EExternalErr, 0, "E1"), seedRecovers(1))),
			seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedAwait(ff.AwaitFn, ff.EExternalErr, 20, "Timeout"), seedRecovers(0)),
				seedOnerror(seedAwait(ff.AwaitFn, ff.EPanic, 0, ""), seedRecovers(0)),
				seedOnerror(seedAwait(ff.AwaitFn, ff.EGoexit, 10, ""), seedRecovers(0))),
			seedOnerror(seedPar(seedAwait(ff.AwaitFn, ff.EWait, 0, ""), seedExtErr(10, "E2", "")), seedRecovers(0)))),
		// 62 AwaitFlow: a sub-flow that succeeds, one that fails, one a
		// step timeout cancels.
		seedExtended(seedProg(0, seedOne, seedAwait(ff.AwaitFlow, ff.EExternal, 10, ""),
			seedOnerror(seedAwait(ff.AwaitFlow, ff.EExternalErr, 0, "E1"), seedRecovers(1)),
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitFlow, ff.EWait, 0, "")), 20), seedRecovers(0)))),
		// 63 AwaitThen: then gets the value, or what the handler recovers
		// with; an error it does not recover skips then.
		seedExtended(seedProg(0, seedOne, seedAwait(ff.AwaitThen, ff.EExternal, 10, ""),
			seedOnerror(seedAwait(ff.AwaitThen, ff.EExternalErr, 10, "E1"), seedRecovers(2)),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedAwait(ff.AwaitThen, ff.EExternalErr, 0, "E2")), seedRecovers(0)))),
		// 64 handlers that add steps under a timeout and a cancel handler
		// of their own.
		seedExtended(seedProg(0, seedOne, seedOnerror(seedFails("E1", ""), seedAddsUnder(30, true, seedExt(50, 0))),
			seedOnerror(seedFails("E0", ""), seedAddsUnder(0, true, seedFails("E2", ""))),
			seedOnerror(seedFails("E0", ""), seedAddsUnder(20, false, seedExt(10, 1))))),
		// 65 AwaitChan: a value sent while the step waits, one waiting
		// in the channel before the step runs, which takes it at once, a
		// channel closed (the zero value); a nil channel and one nothing
		// is sent to are cancelled by a failing sibling.
		seedExtended(seedProg(0, seedOne, seedChan(ff.AwaitChan, ff.EExternal, 10, false),
			seedWith(seedLeaf(ff.EImplicit), seedExt(20, 0), seedChan(ff.AwaitChan, ff.EExternal, 10, false), seedChan(ff.AwaitChan, ff.EExternal, 0, true)),
			seedClosed(seedChan(ff.AwaitChan, ff.EExternal, 5, false)),
			seedOnerror(seedPar(seedNilChan(ff.AwaitChan), seedChan(ff.AwaitChan, ff.EWait, 0, false), seedExtErr(10, "E2", "")), seedRecovers(0)))),
		// 66 AwaitResult: args, an *Error its handler recovers, Go
		// errors (context.DeadlineExceeded is Timeout, context.Canceled
		// an InternalError), a closed channel (no args), an error waiting
		// in the channel; a parent's timeout cancels a step nothing is
		// sent to.
		seedExtended(seedProg(0, seedOne, seedWith(seedLeaf(ff.EImplicit), seedChan(ff.AwaitResult, ff.EExternal, 10, false, 2),
			seedOnerror(seedChanErr(ff.AwaitResult, "E1", 0, false), seedRecovers(1)),
			seedOnerror(seedChanErr(ff.AwaitResult, "Timeout", 10, false), seedRecovers(0))),
			seedWith(seedLeaf(ff.EImplicit), seedOnerror(seedChanErr(ff.AwaitResult, asyncsteps.InternalError, 10, false), seedRecovers(0)),
				seedClosed(seedChan(ff.AwaitResult, ff.EExternal, 0, true))),
			seedOnerror(seedWith(seedLeaf(ff.EImplicit), seedChanErr(ff.AwaitResult, "E2", 0, true)), seedRecovers(0)),
			seedOnerror(seedTimeout(seedWith(seedLeaf(ff.EImplicit), seedChan(ff.AwaitResult, ff.EWait, 0, false)), 20), seedReturns()))),
	}
}

// seedChan is an AwaitChan or AwaitResult whose channel gets a value
// (ff.EExternal; AwaitResult: nargs args) at ms after the add, or at once
// (ready); ff.EWait: nothing.
func seedChan(kind ff.AwaitKind, end ff.End, at int, ready bool, nargs ...int) *ff.Node {
	n := &ff.Node{Kind: ff.KAwait, Await: kind, End: end, At: at, Ready: ready}
	if end == ff.EExternal && kind == ff.AwaitChan {
		n.Args = make([]int, 1)
	}
	if len(nargs) > 0 {
		n.Args = make([]int, nargs[0])
	}
	return n
}

// seedChanErr is an AwaitResult whose Result has the error of code
// ("Timeout": context.DeadlineExceeded; InternalError: context.Canceled).
func seedChanErr(kind ff.AwaitKind, code string, at int, ready bool) *ff.Node {
	n := seedChan(kind, ff.EExternalErr, at, ready)
	n.Code = code
	return n
}

func seedClosed(n *ff.Node) *ff.Node { n.Closed = true; return n }

func seedNilChan(kind ff.AwaitKind) *ff.Node {
	return &ff.Node{Kind: ff.KAwait, Await: kind, End: ff.EWait, NilChan: true}
}

// seedRun runs p by Run, with a ctx that ends at ms as mode says.
func seedRun(p *ff.Program, mode ff.CtxMode, ms int) *ff.Program {
	p.Ctx, p.CtxAt = mode, ms
	return p
}

// seedAwait is a KAwait ending at at ms as end says (ff.EExternalErr with
// code, "Timeout" for context.DeadlineExceeded).
func seedAwait(kind ff.AwaitKind, end ff.End, at int, code string) *ff.Node {
	n := &ff.Node{Kind: ff.KAwait, Await: kind, End: end, At: at, Code: code}
	if end == ff.EExternal {
		n.Args = make([]int, 1)
	}
	return n
}

func seedExtended(p *ff.Program) *ff.Program { p.Ext = true; return p }

// seedHelping runs p by RunHelping.
func seedHelping(p *ff.Program) *ff.Program { p.Helping = true; return p }

// seedAddsUnder is a handler that adds steps after SetTimeout(timeout ms),
// if > 0, and SetCancel, if cancel.
func seedAddsUnder(timeout int, cancel bool, steps ...*ff.Node) *ff.Handler {
	return &ff.Handler{Action: ff.HAdd, Steps: steps, Timeout: timeout, Cancel: cancel}
}

// seedRetry is a Retry of attempts whose attempts below failUntil fail by
// fail (ff.EError with code, ff.EWait, ff.EPanic, ff.EBreak or
// ff.EContinue with code as the label), then succeed with nargs args or
// add body.
func seedRetry(label string, attempts, failUntil int, fail ff.End, code string, nargs int, body ...*ff.Node) *ff.Node {
	rs := &ff.RetrySpec{FailUntil: failUntil, Fail: fail, Backoff: -1}
	switch fail {
	case ff.EBreak, ff.EContinue:
		rs.Label = code
	default:
		rs.Code = code
	}
	return &ff.Node{Kind: ff.KRetry, Label: label, Count: attempts, Args: make([]int, nargs), Subs: body, Retry: rs}
}

// seedRetryOpts sets a Retry's timeout, backoff (< 0: none) and whether
// it has a Retryable of its own.
func seedRetryOpts(n *ff.Node, timeout, backoff int, retryable bool) *ff.Node {
	n.Retry.Timeout, n.Retry.Backoff, n.Retry.Retryable = timeout, backoff, retryable
	return n
}

// seedRetryDelay sets a Retry's timeout and its wait (>= 0), given as its
// Delay.
func seedRetryDelay(n *ff.Node, timeout, wait int) *ff.Node {
	n.Retry.Timeout, n.Retry.Backoff, n.Retry.Delay = timeout, wait, true
	return n
}

func seedLimited(body *ff.Node) *ff.Node {
	return &ff.Node{Kind: ff.KSync, Mutex: ff.LimiterGate, Body: body}
}

func seedLimiter(p *ff.Program, l ff.Limiter) *ff.Program { p.Limiter = &l; return p }

func seedZeroTimeout(n *ff.Node) *ff.Node { n.ZeroTimeout = true; return n }

// seedCancelFrom makes the callback of the step with the given ID (as
// Decode numbers them) call Root.Cancel.
func seedCancelFrom(p *ff.Program, id int) *ff.Program { p.CancelFrom = id; return p }

// seedCancelIn makes the cancel handler of the step with the given ID call
// Root.Cancel.
func seedCancelIn(p *ff.Program, id int) *ff.Program {
	p.CancelFrom, p.CancelInCancel = id, true
	return p
}

// seedCancelPanics gives n a cancel handler that panics.
func seedCancelPanics(n *ff.Node) *ff.Node { n.Cancel, n.CancelPanic = true, true; return n }

// syncsInside reports whether a branch of a Parallel under n syncs on the
// Mutex (or Limiter) mutex.
func syncsInside(n *ff.Node, mutex int, inBranch bool) bool {
	if n == nil {
		return false
	}
	if inBranch && n.Kind == ff.KSync && n.Mutex == mutex {
		return true
	}
	for _, s := range n.Subs {
		if syncsInside(s, mutex, inBranch || n.Kind == ff.KParallel) {
			return true
		}
	}
	return syncsInside(n.Body, mutex, inBranch)
}

// seedSeqForEach is a ForEach over an iter.Seq2 of n pairs that calls
// Break or Continue (end) at the iteration at.
func seedSeqForEach(n int, end ff.End, at int, body ...*ff.Node) *ff.Node {
	f := seedForEach("", false, n, end, at, body...)
	f.Seq = true
	return f
}

// TestFlowSeedCorpus checks that every seed program is in the corpus
// directory (go test -run FlowSeedCorpus -flowfuzz.seeds writes them), and
// that the corpus uses every operation.
func TestFlowSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzFlows")
	for i, p := range flowSeeds() {
		name := filepath.Join(dir, "seed-"+strconv.Itoa(i+1))
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(ff.Encode(p))) + ")\n"
		if *writeSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Errorf("%s is missing or out of date: run go test -run FlowSeedCorpus -flowfuzz.seeds", name)
		}
	}
	seen := map[string]bool{}
	for _, p := range flowSeeds() {
		p = ff.Decode(ff.Encode(p))
		if p.CancelAt != ff.SafetyCancel {
			seen["root cancel"] = true
		}
		if p.CancelFrom > 0 {
			seen["cancel from a step"] = true
		}
		seen[[...]string{"promise", "run", "run ctx cancel", "run deadline"}[p.Ctx]] = true
		if p.Helping {
			seen["run helping"] = true
		}
		if p.Hooks {
			seen["hooks"] = true
		}
		if p.MutexQueue(0) >= 0 || p.MutexQueue(1) >= 0 {
			seen["mutex queue"] = true
		}
		if p.Throttle != nil && p.Throttle.Queue >= 0 {
			seen["throttle queue"] = true
		}
		if p.Keyed != nil && p.Keyed.MaxQueue >= 0 {
			seen["keyed queue"] = true
		}
		for _, n := range p.Steps {
			coverage(n, seen)
		}
	}
	want := []string{"root cancel", "step", "parallel", "loop", "repeat", "sync", "successStep",
		"timeout", "cancel", "label", "implicit", "success", "error", "break", "continue",
		"external", "externalErr", "wait", "return", "recover", "rethrow", "add",
		"panic", "handler panic", "handler wait", "handler wait timeout", "rearm",
		"mutex queue", "throttle", "throttle queue", "forEach", "forEach map",
		"goexit", "unprintable panic", "success on the parent", "break on the parent", "handler goexit", "forEach seq",
		"retry", "retry timeout", "retry backoff", "retry delay", "retryable", "retry wait", "retry panic",
		"retry break", "retry continue", "limiter", "cancel panic", "cancel from a step", "zero timeout", "deadlock",
		"run ctx cancel", "run deadline", "run helping", "await", "await fn success", "await fn error", "await fn deadline exceeded",
		"await fn panic", "await fn goexit", "await fn wait", "await flow success", "await flow error", "await flow wait", "await then success", "await then error",
		"handler add timeout", "handler add cancel",
		"await chan success", "await chan wait", "await chan closed", "await chan nil", "await chan ready",
		"await result success", "await result error", "await result wait", "await result closed", "await result ready", "hooks",
		"settle", "fail", "external fail", "handler fail", "fail coded", "fail plain", "fail wrapped", "fail deadline",
		"forEachLimit", "forEachLimit break", "forEachLimit continue", "forEachLimit quick item", "forEachLimit short",
		"forEachLimit sequence panic", "keyed", "keyed queue", "keyed deadlock",
		"cancel goexit", "forEach sequence panic", "forEach sequence goexit", "forEachLimit sequence goexit",
		"race", "first", "quorum"}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no seed uses %s", w)
		}
	}
}

func coverage(n *ff.Node, seen map[string]bool) {
	seen[[...]string{"step", "parallel", "loop", "repeat", "sync", "successStep", "forEach", "retry", "await", "settle", "forEachLimit", "race"}[n.Kind]] = true
	failKinds := [...]string{"fail coded", "fail plain", "fail wrapped", "fail deadline"}
	if n.Kind == ff.KAwait {
		seen[[...]string{"await fn", "await flow", "await then", "await chan", "await result"}[n.Await]+" "+[...]string{ff.EExternal: "success", ff.EExternalErr: "error",
			ff.EWait: "wait", ff.EPanic: "panic", ff.EGoexit: "goexit"}[n.End]] = true
		for _, c := range []struct {
			on   bool
			what string
		}{{n.Closed, "closed"}, {n.NilChan, "nil"}, {n.Ready, "ready"}} {
			if c.on {
				seen[[...]string{"await fn", "await flow", "await then", "await chan", "await result"}[n.Await]+" "+c.what] = true
			}
		}
		if n.Code == "Timeout" {
			seen["await fn deadline exceeded"] = true
		}
	}
	if rs := n.Retry; rs != nil {
		if rs.Timeout > 0 {
			seen["retry timeout"] = true
		}
		if rs.Backoff > 0 {
			seen["retry backoff"] = true
		}
		if rs.Delay {
			seen["retry delay"] = true
		}
		if rs.Retryable {
			seen["retryable"] = true
		}
		if rs.FailUntil > 0 {
			seen[map[ff.End]string{ff.EError: "retry error", ff.EWait: "retry wait", ff.EPanic: "retry panic",
				ff.EBreak: "retry break", ff.EContinue: "retry continue"}[rs.Fail]] = true
		}
	}
	if n.Kind == ff.KStep {
		seen[[...]string{"implicit", "success", "error", "break", "continue", "external", "externalErr", "wait", "panic",
			"goexit", "unprintable panic", "success on the parent", "break on the parent", "fail", "external fail"}[n.End]] = true
		if n.End == ff.EFail || n.End == ff.EExternalFail {
			seen[failKinds[n.Fail]] = true
		}
	}
	if n.Kind == ff.KForEach && n.Map {
		seen["forEach map"] = true
	}
	if n.Kind == ff.KForEach && n.Seq {
		seen["forEach seq"] = true
		if n.SeqPanic {
			seen["forEach sequence panic"] = true
		}
		if n.SeqGoexit {
			seen["forEach sequence goexit"] = true
		}
	}
	if n.Kind == ff.KRace {
		seen[map[bool]string{true: "first", false: "quorum"}[n.Need == 0]] = true
	}
	if n.Kind == ff.KForEachLimit {
		seen[[...]string{ff.EImplicit: "forEachLimit", ff.ESuccess: "forEachLimit quick item", ff.EBreak: "forEachLimit break", ff.EContinue: "forEachLimit continue"}[n.End]] = true
		if n.Count <= n.Limit {
			seen["forEachLimit short"] = true
		}
		if n.SeqPanic {
			seen["forEachLimit sequence panic"] = true
		}
		if n.SeqGoexit {
			seen["forEachLimit sequence goexit"] = true
		}
	}
	if n.Kind == ff.KSync && n.Mutex == ff.ThrottleGate {
		seen["throttle"] = true
	}
	if n.Kind == ff.KSync && ff.IsKeyed(n.Mutex) {
		seen["keyed"] = true
		if syncsInside(n.Body, n.Mutex, false) {
			seen["keyed deadlock"] = true
		}
	}
	if n.Kind == ff.KSync && n.Mutex == ff.LimiterGate {
		seen["limiter"] = true
	}
	if n.Kind == ff.KSync && n.Mutex != ff.ThrottleGate && syncsInside(n.Body, n.Mutex, false) {
		seen["deadlock"] = true
	}
	if n.Timeout > 0 {
		seen["timeout"] = true
	}
	if n.ZeroTimeout {
		seen["zero timeout"] = true
	}
	if n.Timeout2 > 0 {
		seen["rearm"] = true
	}
	if n.Cancel {
		seen["cancel"] = true
	}
	if n.CancelPanic {
		seen["cancel panic"] = true
	}
	if n.CancelGoexit {
		seen["cancel goexit"] = true
	}
	if n.Label != "" {
		seen["label"] = true
	}
	if n.Body != nil {
		coverage(n.Body, seen)
	}
	for _, s := range n.Subs {
		coverage(s, seen)
	}
	if h := n.Handler; h != nil {
		seen[[...]string{"return", "recover", "rethrow", "add", "handler panic", "handler wait", "handler goexit", "handler fail"}[h.Action]] = true
		if h.Action == ff.HFail {
			seen[failKinds[h.Fail]] = true
		}
		if h.Action == ff.HWait && h.Timeout > 0 {
			seen["handler wait timeout"] = true
		}
		if h.Action == ff.HAdd && h.Timeout > 0 {
			seen["handler add timeout"] = true
		}
		if h.Action == ff.HAdd && h.Cancel {
			seen["handler add cancel"] = true
		}
		for _, s := range h.Steps {
			coverage(s, seen)
		}
	}
}
