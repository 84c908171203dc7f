package asyncsteps

import "time"

// parallelDef is the definition of a Parallel step: one step per branch.
type parallelDef struct {
	branches []step
}

func (d *parallelDef) newControl() control { return &parallelRun{def: d} }

// parallelRun runs the branches of one Parallel step, each from a frame of
// its own (modeBranch) queued on the loop, so that branches interleave at
// every step (API decision 10).
type parallelRun struct {
	def      *parallelDef
	branches []*handle // a frame finished early is recycled: compare handles
	pending  int
}

func (pr *parallelRun) begin(p *frame) *frame {
	fl := p.h.fl
	if len(pr.def.branches) == 0 {
		return fl.finish(p, nil)
	}
	pr.branches = make([]*handle, len(pr.def.branches))
	pr.pending = len(pr.branches)
	for i, s := range pr.def.branches {
		b := fl.blankFrame()
		b.parent, b.mode = p, modeBranch
		if fn := s.plain(); fn != nil && s.onerror == nil {
			// The branch frame runs the plain step itself: one frame and
			// one handle per branch, not two.
			b.impl, b.unstarted, b.fast = fn, true, true
		} else {
			b.queue = pr.def.branches[i : i+1 : i+1]
		}
		fl.newHandle(b, stIdle|stClaim|stDone)
		pr.branches[i] = b.h
	}
	for _, h := range pr.branches {
		fl.requeue(h.f)
	}
	return nil
}

func (pr *parallelRun) drained(*frame) bool { return false }

func (pr *parallelRun) catch(*frame, *Error) (*frame, bool) { return nil, false }

// branchDone completes the parallel step when its last branch succeeds.
func (pr *parallelRun) branchDone(p *frame) *frame {
	pr.pending--
	if pr.pending > 0 || p.over {
		return nil
	}
	return p.h.fl.finish(p, nil)
}

// branchFailed cancels the other branches, then unwinds the error from the
// parallel step itself, so its own handler sees the error first.
func (pr *parallelRun) branchFailed(p *frame, err *Error) *frame {
	if p.over {
		return nil
	}
	pr.cancelBranches()
	return p.h.fl.fail(p, err)
}

func (pr *parallelRun) cancelBranches() {
	for _, h := range pr.branches {
		if b := h.f; b.h == h && !b.over {
			h.fl.cancelTree(b)
		}
	}
}

// parallelBuilder is what Parallel returns: each call that adds a step adds
// a branch.
type parallelBuilder struct {
	def   *parallelDef
	owner host
}

func (b *parallelBuilder) push(s step) AsyncSteps {
	b.def.branches = append(b.def.branches, s)
	return b
}

func (b *parallelBuilder) misuse(info string) { b.owner.misuse(info) }
func (b *parallelBuilder) adding() bool       { return b.owner.adding() }
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
