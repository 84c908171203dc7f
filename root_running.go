package asyncsteps

// Running reports whether the Root's flow is running: from the start of an
// execution (Execute, ExecuteWith, Promise, Run) until it has ended. Safe
// for concurrent use; the answer may be stale by the time it is read. The
// C interface uses it for a root's isValid, which is false while its flow
// runs, as on the FutoIn C++ reference implementation.
func (r *Root) Running() bool { return r.fl.isRunning() }
