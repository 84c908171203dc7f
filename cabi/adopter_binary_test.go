//go:build cgo

package cabi_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// checksum is the sum ctest.Verify computes over payload.
func checksum(payload string) uint32 {
	var sum uint32
	for i := 0; i < len(payload); i++ {
		sum = (sum*31 + uint32(payload[i])) & 0xffff
	}
	return sum
}

// An adopter's Go flow hands a step to a C function through Binary: the C
// side completes it with its result, or fails it with a code and an info
// that the Go error handler sees exactly, whether C answers in the call or
// from a pthread of its own.
func TestBinaryStepGivenToCFunction(t *testing.T) {
	sum := checksum("payload")
	for _, onThread := range []bool{false, true} {
		for _, want := range []uint32{sum, sum + 1} {
			t.Run(fmt.Sprintf("thread=%v/ok=%v", onThread, want == sum), func(t *testing.T) {
				r, _ := newRoot(t)
				var trace []string
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					ctest.Verify(cabi.Binary(as), "payload", want, onThread)
				}, func(as asyncsteps.AsyncSteps, code string) {
					trace = append(trace, "handler "+code+": "+as.State().ErrorInfo)
					as.Error("Rejected", "checksum: "+as.State().ErrorInfo)
				})
				r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					trace = append(trace, fmt.Sprintf("next %T %v", args[0], args[0]))
					as.Success("done")
				})
				res, err := run(t, r)
				ctest.JoinVerify()
				if want == sum {
					checkAdopter(t, res, err, []any{"done"}, nil, trace,
						fmt.Sprintf("next uint32 %d", sum))
					return
				}
				info := fmt.Sprintf("sum 0x%x != 0x%x", sum, want)
				checkAdopter(t, res, err, nil, &asyncsteps.Error{Code: "Rejected", Info: "checksum: " + info}, trace,
					"handler ChecksumError: "+info)
			})
		}
	}
}

func checkAdopter(t *testing.T, res []any, err error, wantRes []any, wantErr *asyncsteps.Error, trace []string, want ...string) {
	t.Helper()
	var got *asyncsteps.Error
	if err != nil && !errors.As(err, &got) {
		t.Fatalf("Run: %v is no *asyncsteps.Error", err)
	}
	if (wantErr == nil) != (got == nil) || got != nil && (got.Code != wantErr.Code || got.Info != wantErr.Info) {
		t.Errorf("Run error: %v, want %v", err, wantErr)
	}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("Run: %v, want %v", res, wantRes)
	}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
}

// A scheduled callback is the loop's: it runs once its root has been
// freed, and sched_is_valid and sched_cancel, which read the handle only,
// still act on it through the stale pointer (or a NULL one).
func TestSchedCallbackOutlivesItsRoot(t *testing.T) {
	ctest.Reset()
	tool := asyncsteps.NewTestTool()
	ctest.SchedOutlives(cabi.New(tool))
	tool.Run()
	want := "after free: valid 1 1\nafter cancel: valid 1 0\nkept ran\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// setCancel called again replaces the step's cancel handler, and a NULL
// one removes it: the step still waits, and its timeout runs nothing
// before the error handler.
func TestSetCancelAgainReplacesTheHandler(t *testing.T) {
	for _, nullLast := range []bool{false, true} {
		ctest.Reset()
		tool := asyncsteps.NewTestTool()
		root := cabi.New(tool)
		ctest.CancelTwice(root, nullLast)
		ctest.ExecuteOnly(root, "x", 1)
		tool.Run()
		want := "cancel two\nTimeout\nunhandled Timeout data=x root=1\n"
		if nullLast {
			want = "Timeout\nunhandled Timeout data=x root=1\n"
		}
		if got := ctest.Trace(); got != want {
			t.Errorf("nullLast=%v: trace %q, want %q", nullLast, got, want)
		}
		ctest.Free(root)
		tool.Run()
	}
}
