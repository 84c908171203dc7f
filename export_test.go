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

// KeysInUse returns the Len of the KeyedMutex[string], KeyedThrottle[string]
// or KeyedLimiter[string] whose key s is, or -1 for any other Syncer: a
// test of every Syncer checks with it that the keys are all freed.
func KeysInUse(s Syncer) int {
	switch k := s.(type) {
	case keySyncer[string]:
		return k.m.Len()
	case keyThrottleSyncer[string]:
		return k.t.Len()
	case keyLimiterSyncer[string]:
		return k.l.Len()
	}
	return -1
}
