package asyncsteps

import (
	"runtime"
)

// goid returns the id of the calling goroutine.
//
// Go has no public goroutine id; the loops need one only to answer
// IsSameThread, so parsing the header of the goroutine's own stack trace
// ("goroutine 123 [running]:") is good enough. The header format has been
// stable since Go 1.0. It costs a traceback of the caller's whole stack
// (tens of microseconds under a deep net/http handler), which is why a
// Loop does not ask while it sleeps (Loop.waiting).
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) <= len(prefix) || string(b[:len(prefix)]) != prefix {
		panic("asyncsteps: unexpected goroutine stack header")
	}
	var id int64
	digits := 0
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int64(c-'0')
		digits++
	}
	if digits == 0 {
		panic("asyncsteps: unexpected goroutine stack header")
	}
	return id
}

// loopRunName is the function every goroutine of a Loop runs its
// callbacks under.
var loopRunName = runtime.FuncForPC(funcPC((*Loop).run)).Name()

// mayBeLoopGoroutine reports false when the calling goroutine is surely
// not the goroutine of any Loop: none of the outermost frames of its stack
// is (*Loop).run, where each of them starts (NewLoop, and the goroutine
// that goes on after a Goexit). It reads the stack's return addresses
// only, which costs about a tenth of goid's traceback at the depth of
// a net/http handler: a server that calls Run on each request's goroutine
// asks a busy Loop this before every flow. A stack deeper than it reads
// may be a loop's: goid decides.
func mayBeLoopGoroutine() bool {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	if n == len(pcs) {
		return true
	}
	for _, pc := range pcs[max(0, n-outerFrames):n] {
		// The innermost function at pc: (*Loop).run also when inlined.
		if f := runtime.FuncForPC(pc - 1); f != nil && f.Name() == loopRunName {
			return true
		}
	}
	return false
}

// outerFrames is how many of a goroutine's outermost frames
// mayBeLoopGoroutine looks at: runtime.goexit, the wrapper the go
// statement makes, (*Loop).run, and room for more wrappers in a later Go
// (TestLoopIsSameThreadAtAnyDepth fails if (*Loop).run falls out of it).
const outerFrames = 6
