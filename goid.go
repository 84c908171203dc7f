package asyncsteps

import "runtime"

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
