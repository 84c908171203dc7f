package asyncsteps

// This file holds the claims of a completion that package cabi makes on
// a waiting step for C, from another thread, before the loop writes the
// completion: claimWaiting, which claimSuccess (toolinfo.ClaimSuccess)
// and claimError (toolinfo.ClaimError) share.

import "github.com/asyncsteps/asyncsteps/internal/toolinfo"

// claimError is toolinfo.ClaimError: claimSuccess for an error. The
// claim carries stFailed, as Error's from another goroutine does (see
// complete), so that a cancel that kills the step before the error is
// written knows that the step failed and runs its cancel handler (see
// frame.kill), while the step's timer, falling due, loses to the claim
// (see frame.timeOutWins).
func claimError(as any) toolinfo.ClaimedError {
	h := claimWaiting(as, stFailed)
	if h == nil {
		return nil
	}
	return claimedError{h}
}

// claimWaiting claims the completion of the step of as, of kind (0 for a
// success, stFailed for an error), if the step waits and nothing claimed
// it yet, and returns its step API; nil if it claimed nothing. Only a
// step that waits is claimed: with state 0 the engine takes a call as
// the running callback's own.
func claimWaiting(as any, kind uint32) *stepAPI {
	h := stepAPIOf(as)
	if h == nil {
		return nil
	}
	for {
		st := h.st.Load()
		if st&stWait == 0 || st&(stClaim|stDone) != 0 {
			return nil
		}
		if h.st.CompareAndSwap(st, st|stClaim|kind) {
			return h
		}
	}
}

// claimedError is the error claimed by claimError on h.
type claimedError struct{ h *stepAPI }

// Void implements toolinfo.ClaimedError as claimedSuccess's Void does.
func (c claimedError) Void() bool { return claimedSuccess(c).Void() }

// Deliver implements toolinfo.ClaimedError: it writes the error that
// Error(code, info) from outside the step's callback would (see raise),
// an empty code being the InternalError that Error makes of it.
func (c claimedError) Deliver(code, info string) {
	if c.Void() {
		return
	}
	if code == "" {
		code, info = InternalError, errorCallInfo(code, []string{info})
	}
	c.h.f.args = []any{&Error{Code: code, Info: info}}
	c.h.publish(false)
}
