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
