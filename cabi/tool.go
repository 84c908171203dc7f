package cabi

// DropReporter is an optional interface of an [asyncsteps.Tool] of
// another package (neither an [asyncsteps.Loop] nor an
// [asyncsteps.TestTool], which cabi knows) that may drop a callback it
// has accepted, or refuse one: a tool that closes, or that a test resets.
// cabi posts to the tool of a C flow the release of what C was given (a
// free, a success or handle_error from another thread, the cleanup of a
// custom object or of a failed step's stack memory); on a tool that
// drops such a callback and has no ImmediateOrDropped, that C memory
// stays allocated and its C cleanups never run, for cabi cannot learn of
// the drop. A Tool that never drops a callback it accepted needs nothing.
//
// cabi takes a tool that implements it for one that runs later callbacks
// after a drop, as a reset TestTool does: the dropped free of a root made
// by C cancels its flow (the cancel applies when the tool runs next),
// that of a Go root given by [Binary] releases only the root pointer,
// and a dropped success, handle_error or call that fails a waiting step
// from another thread applies, its step completing or failing when the
// tool runs next (see the package doc, Concurrency). A DropReporter that drops callbacks because
// it has closed for good runs no next time: the C steps of a Go root
// given by [Binary] that such a completion reached then stay allocated,
// with their stack memory, as the release waits for a run of the flow.
type DropReporter interface {
	// ImmediateOrDropped schedules run as Immediate does. If the tool is
	// never to run it (it refuses it, or drops it once accepted), it calls
	// dropped instead, exactly once, never beside a callback of the tool
	// (after the tool's last callback, or from a reset on the goroutine
	// that drives it), one at a time, and in the order the callbacks were
	// scheduled: a dropped free must find a step completed by a success
	// posted before it. dropped may schedule callbacks in turn. run and
	// dropped are never both called.
	ImmediateOrDropped(run, dropped func())
}
