// Package misuse words the misuses that the engine, cabi, redissync and
// asynchttp report alike, so that a user reads one message whichever
// reports it.
package misuse

import "fmt"

// ExtraArgs is the info of a call (call names it) given n of what it
// takes one of at most, an error handler or a label; "" when n is 1 or
// less. Such a call would otherwise keep the first and drop the others
// unseen.
func ExtraArgs(call, what string, n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf("%s: more than one %s (%d given)", call, what, n)
}

// GoexitInfo is the info of the InternalError of a callback that called
// runtime.Goexit (what t.FailNow, t.Fatal and t.SkipNow call): the
// engine's, and that of cabi's and asynchttp's callbacks run as an Await
// function's.
const GoexitInfo = "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"
