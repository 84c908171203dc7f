//go:build cgo

package cabi_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The infos the engine logs for a call that a cancel handler makes on
// its own step, after the call's name.
const (
	inCancelAdds  = " called in a cancel handler: the steps it adds never run; start a flow of its own for them"
	inCancelWaits = " called in a cancel handler: its step is cancelled or failed, and waits for nothing; start a flow of its own to wait"
	inCancelEnds  = " called in a cancel handler: its step is cancelled or failed, and takes no completion"
)

// A C cancel handler's call on its step's pointer that adds, makes the
// step wait or completes it has no effect, as in a Go cancel handler, and
// is reported as one: the engine logs it as a misuse of the handler,
// naming the Go call the library makes for it, and the handler goes on.
// The root ends cancelled, no error handler nor unhandled_error running.
// Before, the call had no effect without a word.
func TestCCancelHandlerCallsAreLogged(t *testing.T) {
	for _, c := range []struct{ call, info string }{
		{"add", "Add" + inCancelAdds},
		{"parallel", "Parallel" + inCancelAdds},
		{"loop", "Loop" + inCancelAdds},
		{"repeat", "Repeat" + inCancelAdds},
		{"addSync", "Sync" + inCancelAdds},
		{"setTimeout", "SetTimeout" + inCancelWaits},
		{"setCancel", "SetCancel" + inCancelWaits},
		{"waitExternal", "WaitExternal" + inCancelWaits},
		{"success", "Success" + inCancelEnds},
		{"handle_error", "Error(InCancel)" + inCancelEnds},
		{"breakLoop", "Break" + inCancelEnds},
		{"continueLoop", "Continue" + inCancelEnds},
	} {
		t.Run(c.call, func(t *testing.T) {
			log := captureSlog(t)
			ctest.ClaimsReset()
			tt := asyncsteps.NewTestTool()
			root := cabi.New(tt)
			defer cabi.FreeWait(root)
			sync := cabi.Sync(asyncsteps.NewMutex(1))
			defer cabi.FreeSync(sync)
			ctest.CancelCalling(root, c.call, sync)
			tt.Run()
			ctest.Cancel(root)
			tt.Run()

			checkClaimsTrace(t, c.call+" cancel went on")
			want := `msg="asyncsteps: misuse in cancel handler" info="` + c.info + `"`
			if out := log.String(); strings.Count(out, "asyncsteps:") != 1 || !strings.Contains(out, want) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", out, want)
			}
		})
	}
}

// captureSlog makes log/slog's default logger write text into the buffer
// it returns, until the test ends.
func captureSlog(t *testing.T) interface{ String() string } {
	buf := new(lockedBuffer)
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return buf
}

// lockedBuffer is a bytes.Buffer that goroutines may write at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
