package asyncsteps

import "testing"

// A parallel branch whose key toolinfo.OwnerKey gave out is never
// recycled for a later branch: a lock that a flow holds for it with
// HoldFor, beyond its end, must not let that branch in as its holder.
// Before, a later branch was built in the ended one's frame and had its
// key.
func TestOwnerKeyOfABranchIsNoLaterBranchs(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	var lent any
	later := make([]any, 4)
	r.Parallel().Add(func(as AsyncSteps, _ ...any) { lent = ownerKey(as) })
	for i := range later {
		r.Parallel().Add(func(as AsyncSteps, _ ...any) { later[i] = owner(as) })
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if lent == nil {
		t.Fatal("no key for a running branch")
	}
	for i, k := range later {
		if k == lent {
			t.Errorf("branch %d of a later Parallel has the key given out", i)
		}
	}
}

// A flow made to hold for another's owner with HoldFor counts as that
// owner in a Mutex: the owner enters the Mutex the flow holds at once
// (reentrant), and another flow waits.
func TestHoldForCountsAsTheOwner(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	m := NewMutex(1, 0)
	var trace []string
	hidden := New(WithTool(loop))
	r := New(WithTool(loop))
	release := make(chan struct{})
	var hiddenStep AsyncSteps
	r.Add(func(as AsyncSteps, _ ...any) {
		key := ownerKey(as)
		hidden.Add(func(h AsyncSteps, _ ...any) {
			if !holdFor(h, key) {
				t.Error("holdFor refused a running step of a flow")
			}
		})
		m.Sync(hidden, func(h AsyncSteps, _ ...any) {
			trace = append(trace, "hidden in")
			hiddenStep = h
			h.WaitExternal()
			close(release)
		})
		hidden.Execute()
		as.WaitExternal()
		go func() { <-release; as.Success() }()
	})
	m.Sync(r, func(as AsyncSteps, _ ...any) { trace = append(trace, "owner in") })
	r.Add(func(as AsyncSteps, _ ...any) {
		other := New(WithTool(loop))
		m.Sync(other, func(AsyncSteps, ...any) { trace = append(trace, "other in") })
		other.Add(func(AsyncSteps, ...any) {})
		other.ExecuteWith(func(err *Error) { trace = append(trace, "other "+err.Code) })
		as.WaitExternal()
		loop.Immediate(func() { hiddenStep.Success(); as.Success() })
	})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"hidden in", "owner in", "other DefenseRejected"}
	if len(trace) != len(want) {
		t.Fatalf("trace %q, want %q", trace, want)
	}
	for i := range want {
		if trace[i] != want[i] {
			t.Fatalf("trace %q, want %q", trace, want)
		}
	}
}

// ownerKey gives no key for a step whose callback has returned: asked
// from another goroutine while the step waits (a C lock from a thread),
// or once the step is over. Its frames are then the loop's to change, and
// a branch's frame may be another branch's by then. Before, it read the
// frame chain off the loop and marked the branch's frame as lent.
func TestOwnerKeyOnlyFromTheStepsCallback(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	waiting := make(chan AsyncSteps, 1)
	var inCallback any
	r.Parallel().Add(func(as AsyncSteps, _ ...any) {
		inCallback = ownerKey(as)
		as.WaitExternal()
		waiting <- as
	})
	done := r.Promise()
	as := <-waiting
	if k := ownerKey(as); k != nil {
		t.Errorf("ownerKey from another goroutine while the step waits = %p, want nil", k)
	}
	as.Success()
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}
	if inCallback == nil {
		t.Error("ownerKey in the step's callback = nil, want its branch")
	}
	if k := ownerKey(as); k != nil {
		t.Errorf("ownerKey of a completed step = %p, want nil", k)
	}
}

// ownerKey gives no key to another goroutine while the step's callback
// runs and the step has never waited (a C thread given the step's
// pointer, which calls a table's lock): only the callback itself is
// given one. Before, the state of a running callback was taken for the
// loop's own call, and the frame chain was read off the loop.
func TestOwnerKeyNotFromAnotherGoroutineWhileTheCallbackRuns(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	var fromCallback, fromOther any
	r.Parallel().Add(func(as AsyncSteps, _ ...any) {
		other := make(chan any)
		go func() { other <- ownerKey(as) }()
		fromOther = <-other
		fromCallback = ownerKey(as)
	})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fromOther != nil {
		t.Errorf("ownerKey from another goroutine while the callback runs = %p, want nil", fromOther)
	}
	if fromCallback == nil {
		t.Error("ownerKey in the step's callback = nil, want its branch")
	}
}
