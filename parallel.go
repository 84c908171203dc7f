package asyncsteps

import (
	"slices"
	"sync/atomic"
	"time"
)

// parallelDef is the definition of a Parallel step: one step per branch,
// the first few in firstChunk, the rest in chunks that double up to
// maxBranchChunk steps, so that adding branches never copies the ones
// already added.
type parallelDef struct {
	more [][]step // the chunks after firstChunk
	n    int32    // branches in all; 32 bits, with firstTaken beside, keep the definition within 192 bytes
	// firstTaken is set once the control first is taken (see below), and
	// when a Root's execution drops the step unrun (see taken).
	firstTaken atomic.Bool

	// What most Parallels need comes with the definition, so that one
	// costs one allocation, not six: the room of the first branches, the
	// value Parallel returns, and the control of the first execution (a
	// definition copied into a model Root's clones may run again, maybe
	// on another loop at once: it is claimed atomically, and later
	// executions make their own).
	firstChunk [4]step
	builder    parallelBuilder
	first      parallelRun
}

// newParallelDef returns an empty definition and the value that adds its
// branches for owner.
func newParallelDef(owner host) (*parallelDef, *parallelBuilder) {
	d := &parallelDef{}
	d.builder = parallelBuilder{def: d, owner: owner}
	return d, &d.builder
}

const maxBranchChunk = 128

// clone returns a copy of d that later adds to d do not reach.
func (d *parallelDef) clone() *parallelDef {
	c := &parallelDef{more: make([][]step, len(d.more)), n: d.n, firstChunk: d.firstChunk}
	for i, chunk := range d.more {
		c.more[i] = slices.Clip(slices.Clone(chunk))
	}
	return c
}

func (d *parallelDef) add(s step) {
	if int(d.n) < len(d.firstChunk) {
		d.firstChunk[d.n] = s
		d.n++
		return
	}
	last := len(d.more) - 1
	if last < 0 || len(d.more[last]) == cap(d.more[last]) {
		size := 2 * len(d.firstChunk)
		if last >= 0 {
			size = min(2*cap(d.more[last]), maxBranchChunk)
		}
		d.more = append(d.more, make([]step, 0, size))
		last++
	}
	d.more[last] = append(d.more[last], s)
	d.n++
}

// firstBranches returns the steps of the branches in firstChunk.
func (d *parallelDef) firstBranches() []step {
	return d.firstChunk[:min(int(d.n), len(d.firstChunk))]
}

// taken reports whether the step of a Root's Parallel has left the Root's
// queue: an execution began it, or ended before it and dropped it. A
// Root's definition is its own (Clone and CopyFrom copy it), so no
// execution runs a branch added afterwards.
func (d *parallelDef) taken() bool { return d.firstTaken.Load() }

// dropParallels marks the definitions of the Parallel steps among q,
// which a Root's execution drops unrun, as taken.
func dropParallels(q []step) {
	for i := range q {
		if impl, _ := q[i].parts(); impl != nil {
			if d, ok := impl.(*parallelDef); ok {
				d.firstTaken.Store(true)
			}
		}
	}
}

func (d *parallelDef) newControl() control {
	if !d.firstTaken.Load() && d.firstTaken.CompareAndSwap(false, true) {
		d.first.def = d
		return &d.first
	}
	return &parallelRun{def: d}
}

// parallelRun runs the branches of one Parallel step, each from a frame of
// its own (modeBranch) queued on the loop, so that branches interleave at
// every step (docs/DESIGN.md#parallel-branches).
type parallelRun struct {
	def      *parallelDef
	branches []*stepAPI  // a frame finished early is recycled: compare step APIs
	pending  int32       // the successes still awaited: every branch's, or a race's need
	spare    int32       // the failures a race may yet take (see raceDef); 0 otherwise
	few      [4]*stepAPI // the room of branches for a few
}

func (pr *parallelRun) begin(p *frame) *frame {
	fl := p.h.fl
	if pr.def.n == 0 {
		return fl.finish(p, nil)
	}
	pr.branches = pr.few[:0]
	if n := int(pr.def.n); n > len(pr.few) {
		pr.branches = make([]*stepAPI, 0, n)
	}
	pr.pending = pr.def.n - pr.spare
	pr.addBranches(p, pr.def.firstBranches())
	for _, chunk := range pr.def.more {
		pr.addBranches(p, chunk)
	}
	for _, h := range pr.branches {
		fl.requeue(h.f)
	}
	return nil
}

// addBranches makes the branches of the steps of chunk.
func (pr *parallelRun) addBranches(p *frame, chunk []step) {
	for i, s := range chunk {
		pr.branches = append(pr.branches, pr.newBranch(p, s, chunk[i:i+1:i+1]))
	}
}

// newBranch makes the frame of the branch of step s, whose queue is one,
// and returns its step API.
func (pr *parallelRun) newBranch(p *frame, s step, queue []step) *stepAPI {
	fl := p.h.fl
	b := fl.blankFrame()
	b.parent, b.mode = p, modeBranch
	if fn := s.plain(); fn != nil {
		// The branch frame runs the plain step itself: one frame and one
		// step API per branch, not two.
		b.impl, b.unstarted, b.fast = fn, true, true
	} else {
		b.queue = queue
	}
	fl.newStepAPI(b, stIdle|stClaim|stDone)
	return b.h
}

func (pr *parallelRun) drained(*frame) bool { return false }

// letGo lets go of the branches' step APIs, which keep their flow, as
// the step ends: they have all ended or been cancelled by then.
func (pr *parallelRun) letGo() {
	clear(pr.few[:])
	pr.branches = nil
}

func (pr *parallelRun) catch(*frame, *Error) (*frame, bool) { return nil, false }

// branchDone completes the parallel step when its last branch succeeds,
// or a race's step when the branch it needed last succeeds.
func (pr *parallelRun) branchDone(p *frame) *frame {
	pr.pending--
	if pr.pending > 0 || p.over {
		return nil
	}
	if pr.spare > 0 {
		// The branches neither succeeded nor failed: as many as the
		// failures the race could still have taken.
		return pr.won(p)
	}
	return p.h.fl.finish(p, nil)
}

// won completes a race's step once it has the successes it needs: the
// branches still running are cancelled as the siblings of a failed branch
// are, and the step succeeds. No error is raised for it, so none is
// recorded: a panic in a cancelled branch's cancel handler, recorded in
// the State meanwhile (and logged), is dropped from it, as branchFailed
// drops it, so that the State after the step is what the race left.
func (pr *parallelRun) won(p *frame) *frame {
	fl := p.h.fl
	st := fl.State()
	info, exc := st.ErrorInfo, st.LastException
	return fl.cancelFrames(func() *frame {
		st.ErrorInfo, st.LastException = info, exc
		return fl.finish(p, nil)
	}, pr.liveBranches()...)
}

// outlives reports whether a race's step goes on after the failure of a
// branch with err, and counts it: while its need can still be met, a
// failed branch ends alone. A Break or Continue is not a failure of the
// branch but meant for a loop around the step, which it leaves as from a
// Parallel's branch.
func (pr *parallelRun) outlives(p *frame, err *Error) bool {
	if pr.spare == 0 || p.over || err.Code == LoopBreak || err.Code == LoopCont {
		return false
	}
	pr.spare--
	return true
}

// branchFailed cancels the other branches, then unwinds the error from the
// parallel step itself, so its own handler sees the error first, with its
// info (docs/DESIGN.md#parallel-branches): a panic in a sibling's cancel handler, recorded
// in the State meanwhile, does not replace it. faulted is as for
// flow.unwindFrom: err is a cancel handler's fault that no handler has
// seen yet.
func (pr *parallelRun) branchFailed(p *frame, err *Error, faulted bool) *frame {
	if p.over {
		return nil
	}
	fl := p.h.fl
	st := fl.State()
	info, exc := st.ErrorInfo, st.LastException
	j := fl.newCancelJob(func() *frame {
		st.ErrorInfo, st.LastException = info, exc
		return fl.unwindFrom(p, err, faulted)
	}, pr.liveBranches()...)
	if faulted {
		// A Goexit of a sibling's cancel handler queues the job: a Close
		// of the loop that drops it logs err (see Loop.endDropped).
		j.fault = err
	}
	return j.finish()
}

// liveBranches returns the frames of the branches still running.
func (pr *parallelRun) liveBranches() []*frame {
	var live []*frame
	for _, h := range pr.branches {
		if b := h.f; b.h == h && !b.over {
			live = append(live, b)
		}
	}
	return live
}

// fanOutOf returns the branches that f runs, which are not its active
// sub-step: its Parallel's, or its ForEachLimit's items; nil for any other
// frame.
func fanOutOf(f *frame) *parallelRun {
	switch c := f.impl.(type) {
	case *parallelRun:
		return c
	case *limitRun:
		return &c.parallelRun
	}
	return nil
}

// branchDone goes on after the branch b of a Parallel or ForEachLimit has
// succeeded.
func branchDone(b *frame) *frame {
	p := b.parent
	if lr, ok := p.impl.(*limitRun); ok {
		return lr.itemDone(p, b)
	}
	return p.impl.(*parallelRun).branchDone(p)
}

// branchFailed goes on after the branch b of a Parallel or ForEachLimit
// has unwound err (faulted as for flow.unwindFrom).
func branchFailed(b *frame, err *Error, faulted bool) *frame {
	p := b.parent
	if lr, ok := p.impl.(*limitRun); ok {
		return lr.itemFailed(p, b, err, faulted)
	}
	pr := p.impl.(*parallelRun)
	if pr.outlives(p, err) {
		if faulted {
			logCancelFault(err) // no handler will see the dropped failure
		}
		p.h.fl.retire(b)
		return nil
	}
	return pr.branchFailed(p, err, faulted)
}

// parallelBuilder is what Parallel returns: each call that adds a step adds
// a branch.
type parallelBuilder struct {
	def   *parallelDef
	owner host
}

func (b *parallelBuilder) push(s step) AsyncSteps {
	b.def.add(s)
	return b
}

func (b *parallelBuilder) misuse(info string) { b.owner.misuse(info) }

// adding reports whether a branch may be added: for a Root's Parallel,
// only while no execution has taken the step (see parallelDef.taken).
// A step's Parallel is refused by the step once its callback returns.
func (b *parallelBuilder) adding() bool { return b.owner.adding() && !b.lateOnRoot() }

func (b *parallelBuilder) addRefused(call string) {
	if b.lateOnRoot() {
		// As a call valid only inside a step, made on a Root: recorded
		// for the Root's next execution, and not for the one running.
		b.owner.misuse(call + " called on the value returned by a Root's Parallel" +
			" once an execution took its step: the branch would never run")
		return
	}
	b.owner.addRefused(call)
}

// lateOnRoot reports whether b is a Root's Parallel whose step an
// execution has taken.
func (b *parallelBuilder) lateOnRoot() bool {
	_, onRoot := b.owner.(*Root)
	return onRoot && b.def.taken()
}

func (b *parallelBuilder) refuse(call string) {
	b.misuse(call + " called on the value returned by Parallel")
}

// Add implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) Add(f StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addStep(b, f, onerror)
}

// Sync implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) Sync(obj Syncer, f StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addSync(b, obj, f, onerror)
}

// Await implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) Await(f AwaitFunc, onerror ...ErrorFunc) AsyncSteps {
	return addAwait(b, f, onerror)
}

// Loop implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) Loop(f LoopFunc, label ...string) AsyncSteps {
	return addLoop(b, f, label)
}

// Repeat implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) Repeat(count int, f RepeatFunc, label ...string) AsyncSteps {
	return addRepeat(b, count, f, label)
}

// ForEach implements [AsyncSteps]: it adds a branch.
func (b *parallelBuilder) ForEach(collection any, f ForEachFunc, label ...string) AsyncSteps {
	return addForEach(b, collection, f, label)
}

// Parallel is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) Parallel(...ErrorFunc) AsyncSteps { b.refuse("Parallel"); return b }

// CopyFrom is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) CopyFrom(*Root) AsyncSteps { b.refuse("CopyFrom"); return b }

// SuccessStep is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) SuccessStep(...any) AsyncSteps { b.refuse("SuccessStep"); return b }

// Success is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) Success(...any) { b.refuse("Success") }

// Error is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) Error(string, ...string) { b.refuse("Error") }

// SetTimeout is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) SetTimeout(time.Duration) { b.refuse("SetTimeout") }

// SetCancel is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) SetCancel(CancelFunc) { b.refuse("SetCancel") }

// WaitExternal is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) WaitExternal() { b.refuse("WaitExternal") }

// Break is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) Break(...string) { b.refuse("Break") }

// Continue is not supported on a parallel: it reports an InternalError.
func (b *parallelBuilder) Continue(...string) { b.refuse("Continue") }

// State implements [AsyncSteps].
func (b *parallelBuilder) State() *State { return b.owner.State() }

// NewInstance implements [AsyncSteps].
func (b *parallelBuilder) NewInstance() *Root { return b.owner.NewInstance() }

// IsValid implements [AsyncSteps].
func (b *parallelBuilder) IsValid() bool { return b.owner.IsValid() }

// Tool implements [AsyncSteps].
func (b *parallelBuilder) Tool() Tool { return b.owner.Tool() }

// raceDef is the definition of a race ([First], [Quorum]): a Parallel
// that succeeds as soon as need of its branches have succeeded, cancelling
// the others as a failed branch's siblings are cancelled, and that fails
// only once need can no longer be met, with the failure that made it so.
// Its control is a parallelRun that may take n-need failures (its spare),
// so the engine reaches its branches wherever it reaches a Parallel's. It
// is added by a running step only, never queued on a Root: the steps a
// Root's Clone or CopyFrom copies never hold one.
type raceDef struct {
	parallelDef
	need int32
}

func (d *raceDef) newControl() control {
	pr := d.parallelDef.newControl().(*parallelRun)
	pr.spare = d.n - d.need
	return pr
}

// addRace adds to as, or to what the decorator as wraps, the step of a
// race that needs need of its branches, and returns the value that adds
// them; call names the helper. It returns nil when as is no AsyncSteps of
// this package, having failed it, or when it refused the step.
func addRace(as AsyncSteps, call string, need int) *parallelBuilder {
	h := builtinHost(as, call)
	if h == nil {
		return nil
	}
	d := &raceDef{need: int32(need)}
	d.builder = parallelBuilder{def: &d.parallelDef, owner: h}
	h.push(builtinStep(d, nil))
	return &d.builder
}
