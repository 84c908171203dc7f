package asyncsteps

import (
	"fmt"
	"testing"
)

// CaptureLog gives the external tests captureLog: the default slog
// logger's output, until the test ends.
func CaptureLog(t *testing.T) fmt.Stringer { return captureLog(t) }
