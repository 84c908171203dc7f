package asyncsteps

import (
	"context"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
)

// FutoIn standard error codes (FTN3), used as the code of [Error] and given
// to [ErrorFunc] handlers.
//
// LoopBreak and LoopCont are how Break and Continue unwind to their loop,
// the label in ErrorInfo: raised any other way (Error(LoopBreak, label),
// an Await function's *Error with that code), they act as that Break or
// Continue, so do not use them for errors of your own.
const (
	ConnectError        = "ConnectError"
	CommError           = "CommError"
	UnknownInterface    = "UnknownInterface"
	NotSupportedVersion = "NotSupportedVersion"
	NotImplemented      = "NotImplemented"
	Unauthorized        = "Unauthorized"
	InternalError       = "InternalError"
	InvokerError        = "InvokerError"
	InvalidRequest      = "InvalidRequest"
	DefenseRejected     = "DefenseRejected"
	PleaseReauth        = "PleaseReauth"
	SecurityError       = "SecurityError"
	Timeout             = "Timeout"
	LoopBreak           = "LoopBreak" // seen by error handlers between Break and its loop
	LoopCont            = "LoopCont"  // likewise for Continue
)

// Error is a FutoIn error: a code from the constants above (or any other
// string), the error_info that went with it, and the Go error or panic that
// caused it, if any.
//
// Test a code with errors.Is and a template value:
//
//	errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout})
//
// A Timeout error also matches [context.DeadlineExceeded]. The zero value
// is an error of the empty code, which reads "".
//
// The Error that an error handler raises itself (its Error call, a misuse
// of its AsyncSteps) has as Cause the Go error or panic under the error
// it handles, if any: the first Cause under that error's own *Error
// copies (those [AsyncSteps.Await] and [AwaitResult] make). The handled
// *Error is not chained, so errors.Is with a template tests the code the
// handler raised, not the one it replaced; a Go cause that wraps an
// *Error of its own (fmt.Errorf("...: %w", err) of another flow's error)
// is kept whole, and errors.Is finds that *Error's code too.
type Error struct {
	Code  string
	Info  string
	Cause error // the original Go error or panic, if any
}

// Error returns "Code" or "Code: Info". The methods of Error accept a nil
// receiver (the typed nil a function may return as its error): it reads
// "<nil>", matches nothing and unwraps to nil.
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Info == "" {
		return e.Code
	}
	return e.Code + ": " + e.Info
}

// Is reports whether target is an *Error with the same Code, or
// context.DeadlineExceeded for a Timeout.
func (e *Error) Is(target error) bool {
	if e == nil {
		return false
	}
	if t, ok := target.(*Error); ok {
		return t != nil && t.Code == e.Code
	}
	return e.Code == Timeout && target == context.DeadlineExceeded
}

// Unwrap returns Cause.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Cause
}

// PanicError is the cause of the InternalError raised when a callback panics:
// the panic value and the stack of the goroutine at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "panic: " and the printed value; a value that panics when
// printed is named by its type instead. A nil *PanicError reads "<nil>".
func (p *PanicError) Error() string {
	if p == nil {
		return "<nil>"
	}
	return "panic: " + printsafe.Sprint(p.Value)
}

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	if p == nil {
		return nil
	}
	err, _ := p.Value.(error)
	return err
}
