//go:build cgo

package cabi_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

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
// So it does in the body of a loop or a repeat, whose success the library
// otherwise keeps until the callback returns: kept there, it was never
// logged. A custom object that success passes, which no step receives,
// is cleaned up at once. The root ends cancelled, no error handler nor
// unhandled_error running. Before, the call had no effect without a word.
func TestCCancelHandlerCallsAreLogged(t *testing.T) {
	calls := []struct{ call, info string }{
		{"add", "Add" + inCancelAdds},
		{"parallel", "Parallel" + inCancelAdds},
		{"loop", "Loop" + inCancelAdds},
		{"repeat", "Repeat" + inCancelAdds},
		{"addSync", "Sync" + inCancelAdds},
		{"setTimeout", "SetTimeout" + inCancelWaits},
		{"setCancel", "SetCancel" + inCancelWaits},
		{"waitExternal", "WaitExternal" + inCancelWaits},
		{"success", "Success" + inCancelEnds},
		{"success value", "Success" + inCancelEnds},
		{"handle_error", "Error(InCancel)" + inCancelEnds},
		{"breakLoop", "Break" + inCancelEnds},
		{"continueLoop", "Continue" + inCancelEnds},
	}
	ins := []struct {
		name string
		in   int
	}{{"step", ctest.CallInStep}, {"loop body", ctest.CallInLoop}, {"repeat body", ctest.CallInRepeat}}
	for _, in := range ins {
		for _, c := range calls {
			t.Run(in.name+"/"+c.call, func(t *testing.T) {
				log := captureSlog(t)
				ctest.ClaimsReset()
				tt := asyncsteps.NewTestTool()
				root := cabi.New(tt)
				defer cabi.FreeWait(root)
				sync := cabi.Sync(asyncsteps.NewMutex(1))
				defer cabi.FreeSync(sync)
				ctest.CancelCalling(root, c.call, sync, in.in)
				tt.Run()
				ctest.Cancel(root)
				tt.Run()

				want := []string{c.call + " cancel went on"}
				if c.call == "success value" {
					want = append([]string{"value cleaned up"}, want...)
				}
				checkClaimsTrace(t, want...)
				line := `msg="asyncsteps: misuse in cancel handler" info="` + c.info + `"`
				if out := log.String(); strings.Count(out, "asyncsteps:") != 1 || !strings.Contains(out, line) {
					t.Errorf("the engine logged:\n%s\nwant %s, once", out, line)
				}
			})
		}
	}
}

// A Go cancel handler that Wrap sets on a C step's pointer is a Go
// cancel handler: its calls on its AsyncSteps that add, make the step
// wait or complete it, and the table's through the step's pointer, are
// logged as the engine logs a Go step's handler's, once, and the
// handler goes on; the root ends cancelled. Before, its Success and
// Error, and the table's calls, went to the loop as completions from
// outside the step, which found it over, without a word.
func TestWrapCancelHandlerOfACStepCallsAreLogged(t *testing.T) {
	never := func(asyncsteps.AsyncSteps, ...any) { ctest.Log("VIOLATION: a step added in a cancel handler ran") }
	for _, c := range []struct {
		name string
		call func(as asyncsteps.AsyncSteps, step unsafe.Pointer)
		info string
	}{
		{"Add", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) { as.Add(never) }, "Add" + inCancelAdds},
		{"Loop", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) {
			as.Loop(func(as asyncsteps.AsyncSteps) { as.Break() })
		}, "Loop" + inCancelAdds},
		{"WaitExternal", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) { as.WaitExternal() }, "WaitExternal" + inCancelWaits},
		{"Success", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) { as.Success(1) }, "Success" + inCancelEnds},
		{"Error", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) { as.Error("InCancel") }, "Error(InCancel)" + inCancelEnds},
		{"Fail", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) {
			asyncsteps.Fail(as, &asyncsteps.Error{Code: "InCancel"})
		}, "Fail(InCancel)" + inCancelEnds},
		{"Break", func(as asyncsteps.AsyncSteps, _ unsafe.Pointer) { as.Break() }, "Break" + inCancelEnds},
		{"handle_error", func(_ asyncsteps.AsyncSteps, step unsafe.Pointer) {
			ctest.HandleError(step, "InCancel", "")
		}, "Error(InCancel)" + inCancelEnds},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := captureSlog(t)
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			ctest.CBranchGo(cabi.Binary(r), func(step unsafe.Pointer) {
				cabi.Wrap(step).SetCancel(func(as asyncsteps.AsyncSteps) {
					c.call(as, step)
					ctest.Log("cancel went on")
				})
			})
			tt.Deferred(10*time.Millisecond, r.Cancel)
			var err error
			r.ExecuteThen(func(res asyncsteps.Result) { err = res.Err })
			tt.Run()

			if !errors.Is(err, context.Canceled) {
				t.Errorf("the flow ended with %v, want context.Canceled", err)
			}
			if got := ctest.Trace(); got != "cancel went on\n" {
				t.Errorf("trace %q, want %q", got, "cancel went on\n")
			}
			line := `msg="asyncsteps: misuse in cancel handler" info="` + c.info + `"`
			if out := log.String(); strings.Count(out, "asyncsteps:") != 1 || !strings.Contains(out, line) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", out, line)
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
