package asyncsteps_test

import (
	"context"
	"testing"
	"time"

	as "github.com/asyncsteps/asyncsteps"
)

// The public contract (the API every release keeps), checked by the compiler: code
// outside this repository is written against these exact declarations.
var (
	_ as.StepFunc    = func(as.AsyncSteps, ...any) {}
	_ as.ErrorFunc   = func(as.AsyncSteps, string) {}
	_ as.CancelFunc  = func(as.AsyncSteps) {}
	_ as.LoopFunc    = func(as.AsyncSteps) {}
	_ as.RepeatFunc  = func(as.AsyncSteps, int) {}
	_ as.ForEachFunc = func(as.AsyncSteps, any, any) {}
	_ as.AwaitFunc   = func(context.Context) (any, error) { return nil, nil }

	_ as.AsyncSteps = (*as.Root)(nil)
	_ as.Syncer     = (*as.Mutex)(nil)
	_ as.Syncer     = (*as.Throttle)(nil)
	_ as.Syncer     = (*as.Limiter)(nil)
	_ as.Tool       = (*as.Loop)(nil)
	_ as.Tool       = (*as.TestTool)(nil)
	_ error         = (*as.Error)(nil)

	_ func(...as.Option) *as.Root                    = as.New
	_ func(as.Tool) as.Option                        = as.WithTool
	_ func(func(*as.Error)) as.Option                = as.WithUnhandledError
	_ func(*as.Root)                                 = (*as.Root).Execute
	_ func(*as.Root)                                 = (*as.Root).Cancel
	_ func(*as.Root) <-chan as.Result                = (*as.Root).Promise
	_ func(*as.Root, context.Context) ([]any, error) = (*as.Root).Run
	_ func(*as.Root) *as.Root                        = (*as.Root).Clone

	_ func(*as.State, string) any  = (*as.State).Get
	_ func(*as.State, string, any) = (*as.State).Set
	_ func(*as.State, string) bool = (*as.State).Exists
	_ func(*as.State, string)      = (*as.State).Unset

	_ func(*as.Error) string      = (*as.Error).Error
	_ func(*as.Error, error) bool = (*as.Error).Is
	_ func(*as.Error) error       = (*as.Error).Unwrap

	_ func() as.Tool                                = as.DefaultTool
	_ func() *as.Loop                               = as.NewLoop
	_ func(*as.Loop)                                = (*as.Loop).Close
	_ func() *as.TestTool                           = as.NewTestTool
	_ func(*as.TestTool) bool                       = (*as.TestTool).NextEvent
	_ func(*as.TestTool) bool                       = (*as.TestTool).HasEvents
	_ func(*as.TestTool)                            = (*as.TestTool).Run
	_ func(*as.TestTool, time.Duration)             = (*as.TestTool).Advance
	_ func(*as.TestTool)                            = (*as.TestTool).ResetEvents
	_ func(int, ...int) *as.Mutex                   = as.NewMutex
	_ func(int, time.Duration, ...int) *as.Throttle = as.NewThrottle
	_ func(as.LimiterOptions) *as.Limiter           = as.NewLimiter

	// The fields, with their exact types: a return needs the field to be
	// assignable to the type written here.
	_ = func(r as.Result) ([]any, error) { return r.Args, r.Err }
	_ = func(s *as.State) (string, []string, error) { return s.ErrorInfo, s.AsyncStack, s.LastException }
	_ = func(e *as.Error) (string, string, error) { return e.Code, e.Info, e.Cause }
	_ = func(o as.LimiterOptions) (int, int, int, time.Duration, int) {
		return o.Concurrent, o.MaxQueue, o.Rate, o.Period, o.Burst
	}
	_ = []string{as.ConnectError, as.CommError, as.UnknownInterface, as.NotSupportedVersion,
		as.NotImplemented, as.Unauthorized, as.InternalError, as.InvokerError, as.InvalidRequest,
		as.DefenseRejected, as.PleaseReauth, as.SecurityError, as.Timeout, as.LoopBreak, as.LoopCont}
)

// The AsyncSteps and Tool interfaces hold exactly the methods of the public
// API, which code outside this repository is written against.
type (
	apiAsyncSteps interface {
		Add(f as.StepFunc, onerror ...as.ErrorFunc) as.AsyncSteps
		Parallel(onerror ...as.ErrorFunc) as.AsyncSteps
		State() *as.State
		CopyFrom(model *as.Root) as.AsyncSteps
		Sync(obj as.Syncer, f as.StepFunc, onerror ...as.ErrorFunc) as.AsyncSteps
		SuccessStep(args ...any) as.AsyncSteps
		Await(f as.AwaitFunc, onerror ...as.ErrorFunc) as.AsyncSteps
		NewInstance() *as.Root
		IsValid() bool
		Tool() as.Tool
		Success(args ...any)
		Error(code string, info ...string)
		SetTimeout(d time.Duration)
		SetCancel(f as.CancelFunc)
		WaitExternal()
		Loop(f as.LoopFunc, label ...string) as.AsyncSteps
		Repeat(count int, f as.RepeatFunc, label ...string) as.AsyncSteps
		ForEach(collection any, f as.ForEachFunc, label ...string) as.AsyncSteps
		Break(label ...string)
		Continue(label ...string)
	}
	apiTool interface {
		Immediate(f func()) as.Handle
		Deferred(d time.Duration, f func()) as.Handle
		IsSameThread() bool
		Now() time.Time
	}
	apiHandle interface {
		Cancel()
		IsValid() bool
	}
	apiSyncer interface {
		Sync(as as.AsyncSteps, f as.StepFunc, onerror ...as.ErrorFunc)
	}
)

var (
	_ apiAsyncSteps = as.AsyncSteps(nil)
	_ as.AsyncSteps = apiAsyncSteps(nil)
	_ apiTool       = as.Tool(nil)
	_ as.Tool       = apiTool(nil)
	_ apiHandle     = as.Handle(nil)
	_ as.Handle     = apiHandle(nil)
	_ apiSyncer     = as.Syncer(nil)
	_ as.Syncer     = apiSyncer(nil)
)

// The error codes are untyped string constants whose values are their
// names, as the FutoIn standard spells them.
func TestErrorCodesAreTheirNames(t *testing.T) {
	codes := map[string]string{
		"ConnectError": as.ConnectError, "CommError": as.CommError,
		"UnknownInterface": as.UnknownInterface, "NotSupportedVersion": as.NotSupportedVersion,
		"NotImplemented": as.NotImplemented, "Unauthorized": as.Unauthorized,
		"InternalError": as.InternalError, "InvokerError": as.InvokerError,
		"InvalidRequest": as.InvalidRequest, "DefenseRejected": as.DefenseRejected,
		"PleaseReauth": as.PleaseReauth, "SecurityError": as.SecurityError,
		"Timeout": as.Timeout, "LoopBreak": as.LoopBreak, "LoopCont": as.LoopCont,
	}
	for name, value := range codes {
		if value != name {
			t.Errorf("%s = %q, want %q", name, value, name)
		}
	}
	type code string
	var _ code = as.Timeout // an untyped constant converts to any string type
}
