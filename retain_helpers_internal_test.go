package asyncsteps

import (
	"runtime"
	"weak"
)

// This file holds what the tests of retention share, internal and
// external: flows that wait with a payload in their State, and a count of
// the payloads a collection leaves.

// ParkWithPayload starts on loop a flow that puts a payload of 4 KiB in
// its State and waits, with nothing referring to it but what the loop
// keeps, and returns the payload, held weakly, once the flow waits. Close
// ends the flow if it is still alive.
func ParkWithPayload(loop *Loop) weak.Pointer[[4096]byte] {
	payload := new([4096]byte)
	parked := make(chan struct{})
	r := New(WithTool(loop), WithUnhandledError(func(*Error) {}))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.State().Set("payload", payload)
		as.WaitExternal()
		close(parked)
	})
	r.Execute()
	<-parked
	return weak.Make(payload)
}

// AliveAfterGC returns how many of payloads a collection leaves, once
// loop has run what was queued on it (the last step has returned, and
// holds nothing on the loop's stack).
func AliveAfterGC[T any](loop *Loop, payloads []weak.Pointer[T]) int {
	done := make(chan struct{})
	loop.Immediate(func() { close(done) })
	<-done
	runtime.GC()
	n := 0
	for _, p := range payloads {
		if p.Value() != nil {
			n++
		}
	}
	return n
}
