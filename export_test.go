package asyncsteps

import (
	"fmt"
	"testing"
)

// CaptureLog gives the external tests captureLog: the default slog
// logger's output, until the test ends.
func CaptureLog(t *testing.T) fmt.Stringer { return captureLog(t) }

// PassingCtx gives the external tests passingCtx: Run's deadline without
// a clock, passed by Pass.
type PassingCtx = passingCtx

// NewPassingCtx returns a PassingCtx whose deadline has not passed.
func NewPassingCtx() *PassingCtx { return newPassingCtx() }

// Pass makes the deadline pass.
func (c *passingCtx) Pass() { c.pass() }
