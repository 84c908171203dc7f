//go:build cgo

package cabi_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// checkClaimsTrace compares the trace of the claims' C steps with want.
func checkClaimsTrace(t *testing.T, want ...string) {
	t.Helper()
	if got := ctest.ClaimsTrace(); !reflect.DeepEqual(got, want) {
		t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every function of the table on the pointer of a completed step is
// ignored, on the loop's thread too: rootId 0, isValid and
// is_same_thread 0, NULL from stack, stateVariable (allocate not called),
// parallel and newInstance, sched_* an invalid handle whose callback
// never runs, and no step added, run or cancelled.
func TestStalePointerEveryFunction(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	ctest.StaleTable(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkClaimsTrace(t,
		"rootId=0 isValid=0 is_same_thread=0 own is_same_thread=1",
		"stack=NULL stateVariable=NULL parallel=NULL newInstance=NULL",
		"sched_is_valid immediate=0 deferred=0",
		"own isValid=1",
		"own immediate ran",
	)
}

// A NULL function, sync or code fails the calling step with
// InternalError naming the argument, once its callback returns; sched_* with a NULL callback gives
// an invalid handle, a NULL handle is never valid, and stateVariable
// with a NULL name returns NULL without allocating.
func TestNullArgumentsOfTheTable(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	sync := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(sync)
	ctest.NullArgs(root, sync)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkClaimsTrace(t,
		"add: returned",
		"add: InternalError Add: nil step function",
		"loop: returned",
		"loop: InternalError Loop: nil body function",
		"repeat: returned",
		"repeat: InternalError Repeat: nil body function",
		"addSync sync: returned",
		"addSync sync: InternalError Sync: nil Syncer",
		"addSync f: returned",
		"addSync f: InternalError Sync: nil step function",
		"handle_error code: returned",
		"handle_error code: InternalError handle_error: NULL code",
		"sched cb: valid=00",
		"sched cb: NULL handle valid=0",
		"sched cb: returned",
		"stateVariable name: NULL",
		"stateVariable name: returned",
	)
}

// A second setTimeout in the step's callback re-arms the timeout: the
// step times out after the second duration, whether it is longer or
// shorter than the first.
func TestSetTimeoutAgainRearms(t *testing.T) {
	for _, c := range []struct{ first, second uint32 }{{20, 100}, {100, 20}} {
		ctest.ClaimsReset()
		tt := asyncsteps.NewTestTool()
		root := cabi.New(tt)
		ctest.TimeoutTwice(root, c.first, c.second)
		ctest.Execute(root, "data")
		tt.Advance(time.Duration(c.second-1) * time.Millisecond)
		checkClaimsTrace(t)
		tt.Advance(time.Millisecond)
		checkClaimsTrace(t, "timed: Timeout")
		ctest.Free(root)
		tt.Run()
	}
}

// execute with a NULL unhandled_error logs the error that ends the flow,
// with its code and info.
func TestUnhandledErrorWithNoHandlerIsLogged(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		logged := make(chan string, 1)
		slog.SetDefault(slog.New(&recordHandler{logged}))
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		root := cabi.New(loop)
		ctest.FailUnhandled(root)
		select {
		case line := <-logged:
			fmt.Println(line)
		case <-time.After(10 * time.Second):
			fmt.Println("nothing logged")
		}
		cabi.FreeWait(root)
	})
	if want := "ERROR asyncsteps: unhandled error code=Unhandled info=nobody handles it\n"; out != want {
		t.Errorf("child printed:\n%s\nwant:\n%s", out, want)
	}
}

// recordHandler sends each record, as "LEVEL message key=value...", to a
// channel.
type recordHandler struct{ out chan<- string }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	select {
	case h.out <- line:
	default:
	}
	return nil
}

// loop, repeat and addSync on a parallel's pointer each add a branch, with
// a rootId of its own, that runs beside the others; the step after the
// parallel runs once all three have ended.
func TestLoopRepeatAndAddSyncAreBranchesOfAParallel(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	sync := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(sync)
	ctest.BranchKinds(root, sync)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkClaimsTrace(t,
		"loop body same branch=1",
		"repeat body 0 same branch=1",
		"sync body same branch=1",
		"loop body same branch=1",
		"repeat body 1 same branch=1",
		"after: branches distinct=1 none the flow's=1",
	)
}

// newInstance on a step's pointer gives an empty, idle root on the same
// loop, with a flow of its own, which the caller executes and frees.
func TestNewInstanceIsARootOnTheSameLoop(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	ctest.NewInstance(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	cabi.FreeWait(ctest.InstanceRoot())
	checkClaimsTrace(t,
		"instance: made isValid=1",
		"instance step: same thread=1 is_same_thread=1 rootId new=1",
		"after: instance isValid=1",
	)
}

// cancel of a C root runs the cancel handlers of its running steps,
// innermost first, and no error handler nor unhandled_error; no later
// step runs, the root is idle again, and the steps' pointers are stale:
// a success on one is ignored, its value still cleaned up once. In its
// cancel handler a step is over (isValid 0) but its pointer still reads:
// rootId, stateVariable, and stack, whose memory is cleaned up with the
// step's; success, handle_error and add there have no effect.
func TestCancelOfARootAsItsCStepsSeeIt(t *testing.T) {
	ctest.ClaimsReset()
	tt := asyncsteps.NewTestTool()
	root := cabi.New(tt)
	defer cabi.FreeWait(root)
	ctest.CancelNested(root)
	tt.Run()
	if v := ctest.IsValid(root); v != 0 {
		t.Errorf("isValid of the running root %d, want 0", v)
	}
	ctest.Cancel(root)
	tt.Run()
	if v := ctest.IsValid(root); v != 1 {
		t.Errorf("isValid of the cancelled root %d, want 1", v)
	}
	ctest.CancelledLate()
	tt.Run()
	checkClaimsTrace(t,
		"inner waits",
		"inner cancel: isValid=0 rootId=1 stack=not NULL state=not NULL same=1",
		"outer cancel: isValid=0 rootId=1 stack=not NULL state=not NULL same=1",
		"stack cleanup",
		"stack cleanup",
		"late value cleaned up: 5",
		"late: isValid=0 slot reset=1",
	)
}

// The cancel handler of a step that fails from outside sees the step as
// cancel handlers of a cancelled flow do, then its error handler gets the
// step's error: a handle_error in the handler does not replace it.
func TestCancelHandlerOfAFailingStep(t *testing.T) {
	ctest.ClaimsReset()
	tt := asyncsteps.NewTestTool()
	root := cabi.New(tt)
	defer cabi.FreeWait(root)
	ctest.FailWaiting(root)
	tt.Run()
	ctest.FailIt()
	tt.Run()
	checkClaimsTrace(t,
		"failing cancel: isValid=0 rootId=1 stack=not NULL state=not NULL same=1",
		"failing error handler: Outside",
		"stack cleanup",
		"end",
	)
}

// Once free returns, calls on the root are ignored also before the tool
// has run the release: a step added and an execute start nothing.
func TestFreedRootIgnoresAddAndExecute(t *testing.T) {
	ctest.Reset()
	tt := asyncsteps.NewTestTool()
	root := cabi.New(tt)
	ctest.Execute(root, "first") // the root is used: its release is posted
	tt.Run()
	if tr := ctest.Trace(); tr != "end\n" {
		t.Fatalf("first execution traced %q, want \"end\\n\"", tr)
	}
	ctest.Reset()
	ctest.Free(root)
	ctest.Execute(root, "after free")
	if v := ctest.IsValid(root); v != 0 {
		t.Errorf("isValid after free %d, want 0", v)
	}
	tt.Run()
	if tr := ctest.Trace(); tr != "" {
		t.Errorf("the freed root ran:\n%s", tr)
	}
}
