package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// FutoInCoder is implemented by Go errors that know which FutoIn error code
// they stand for, so that a flow's error handlers see that code rather than
// InternalError. An error type of a client library can implement it without
// importing this package:
//
//	func (e *QuotaError) FutoInCode() string { return "DefenseRejected" }
//
// [ErrorFrom] looks for it along the error's chain, with [errors.As].
type FutoInCoder interface {
	error
	FutoInCode() string
}

// ErrorFrom returns the FutoIn error that the Go error err raises when it
// enters a flow: the error of an [AsyncSteps.Await] function, or the Err of
// a Result taken by [AwaitResult] or [AwaitFlow]. A [*PanicError], a
// recovered panic, is an InternalError whatever its value, with
// err.Error() ("panic: " and the value) as info: a panic is a bug, as in
// any callback, even with an error as its value. So is an error that
// wraps one (or whose type embeds one), unless an [*Error] chose a code
// before the panic in err's chain, in the order [errors.As] walks it:
// above the panic, or in an earlier error of those joined by
// [errors.Join]. Otherwise the first rule that matches err, or an error
// it wraps, gives the code:
//
//   - an [*Error]: its Code and Info (with an empty Code, an
//     InternalError whose info says so and keeps the Info);
//   - a [FutoInCoder]: its FutoInCode(), unless empty;
//   - [context.DeadlineExceeded] (which a dial's timeout matches too) or
//     [os.ErrDeadlineExceeded], the "i/o timeout" of a connection's or a
//     file's deadline (SetDeadline): Timeout;
//   - a connection that could not be made (a *net.OpError of a dial, a
//     *net.DNSError, syscall.ECONNREFUSED, EHOSTUNREACH, ENETUNREACH or
//     ENETDOWN): ConnectError;
//   - any other network or transport error (a [net.Error], which net/http's
//     *url.Error is too, [net.ErrClosed], syscall.ECONNRESET, ECONNABORTED,
//     EPIPE, ETIMEDOUT, ENOTCONN or ENETRESET): CommError; the
//     Errnos named here are a network's bare too, as a raw socket gives
//     them, or under an [*os.SyscallError]; any other syscall.Errno is no
//     net.Error here, though it has the methods of one: a missing file's
//     ENOENT is not a network error;
//   - anything else: InternalError.
//
// Info is err.Error() except for an *Error; Cause is err itself, so
// State().LastException and the flow's error keep errors.Is and errors.As
// working on the original. ErrorFrom(nil) is nil.
//
// An error whose methods panic (typically a nil pointer given as an error)
// is an InternalError that says so, without it as Cause: the mapping runs
// on goroutines nobody recovers.
func ErrorFrom(err error) (mapped *Error) {
	if err == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			info := fmt.Sprintf("reading the %T given as an error panicked: %s", err, printsafe.Sprint(r))
			if isNilValue(err) {
				info = fmt.Sprintf("a nil %T was given as an error", err)
			}
			mapped = &Error{Code: InternalError, Info: info}
		}
	}()
	var found codeOrPanic
	if errors.As(err, &found) {
		var e *Error
		switch x := found.codeOrPanic().(type) {
		case *PanicError:
			if x != nil {
				// Not the code of an error it holds: Retry would retry
				// a CommError, and a LoopBreak would break a loop.
				// Wrapped or not: a panic that a goroutine of an Await
				// function recovered and returned with some context is
				// a panic still.
				return &Error{Code: InternalError, Info: err.Error(), Cause: err}
			}
		case *Error:
			e = x
		}
		if e != nil || errors.As(err, &e) {
			return fromCodedError(err, e)
		}
	}
	return &Error{Code: goErrorCode(err), Info: err.Error(), Cause: err}
}

// Fail raises the Go error err in the step of as: the code and info that
// [ErrorFrom] maps err to, with err kept as the raised error's Cause and
// as State().LastException, as for an error an [AsyncSteps.Await]
// function returns, so that errors.Is and errors.As find it in both. It
// acts as as.Error(code, info) does in every other way: inside the step's
// callback it does not return, and from another goroutine it completes a
// step that waits. A nil err raises an InternalError saying so.
//
// as may be a decorator that implements [Unwrapper]: the error is raised
// on the engine's step it unwraps to, without calling the decorator's
// Error, as an Await's error is (package cabi's step of a C step, from
// Wrap, fails its step as its Error does, the Go error kept: in the
// step's C callback, Fail then returns, and the callback must return at
// once). On a [Root] or the value [AsyncSteps.Parallel] returns (also
// behind a decorator), Fail is the misuse Error is there, named Fail
// ("Fail(InternalError) called on a Root: it is valid only inside a
// step"). Through an AsyncSteps that does not unwrap to this package's,
// Fail calls its Error(code, info), and the Go error is not kept.
func Fail(as AsyncSteps, err error) {
	code, info := InternalError, "Fail: the error is nil"
	var cause error
	if err != nil {
		e := ErrorFrom(err)
		code, info, cause = e.Code, e.Info, e.Cause
	}
	h, failer := failingStep(as)
	if failer != nil {
		if cause == nil {
			as.Error(code, info)
			return
		}
		failer.FailStep(toolinfo.Failure{Err: err})
		return
	}
	if h == nil {
		failWithoutStep(as, code, info)
		return
	}
	if h.raise(code, info, errorCall{code: code, isError: true, fail: true, cause: cause}) {
		panic(abortSignal{})
	}
}

// failingStep returns the step API that as is or unwraps to, or the
// decorator on the way that fails the step itself (package cabi's for a
// C step), or neither.
func failingStep(as AsyncSteps) (*stepAPI, toolinfo.StepFailer) {
	for range maxUnwrap {
		switch s := as.(type) {
		case *stepAPI:
			return s, nil
		case toolinfo.StepFailer:
			return nil, s
		case Unwrapper:
			as = s.Unwrap()
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// failWithoutStep is Fail on an AsyncSteps that does not unwrap to a step
// of the engine's. On a Root or the value Parallel returns, also behind a
// decorator, it is the misuse their Error reports, named Fail: the caller
// called Fail, and a decorator's Error, called instead, would name Error.
// On anything else it is as.Error, the one way to reach the step, which
// keeps no Go error.
func failWithoutStep(as AsyncSteps, code, info string) {
	h, ok := as.(host)
	if !ok {
		h = unwrapHost(as)
	}
	switch x := h.(type) {
	case *Root:
		if x == nil {
			nilRoot("Fail") // as Error names itself there
		}
		x.stepOnly("Fail(" + code + ")")
	case *parallelBuilder:
		x.refuse("Fail")
	default:
		as.Error(code, info)
	}
}

// fromCodedError is ErrorFrom of err, whose chain holds e.
func fromCodedError(err error, e *Error) *Error {
	if e == nil { // reads "<nil>": name the mistake instead
		return &Error{Code: InternalError, Info: fmt.Sprintf("a nil %T was given as an error", e)}
	}
	if e.Code == "" {
		return &Error{Code: InternalError, Info: emptyCodeInfo("*Error", e.Info), Cause: err}
	}
	return &Error{Code: e.Code, Info: e.Info, Cause: err}
}

// codeOrPanic is what ErrorFrom looks for first down an error's chain:
// an *Error, which gives its code, or a *PanicError, an InternalError
// whatever its value. The first one found decides, so that an *Error
// that wraps a panic keeps the code it chose, and one that a panic's
// value is does not give its code.
type codeOrPanic interface {
	error
	// codeOrPanic returns the *Error or *PanicError itself. An error type
	// of a user that embeds a *PanicError has the method too, promoted:
	// it returns the panic then, which is what ErrorFrom must see, and
	// not the error the panic's value is, which the type's Unwrap leads to.
	codeOrPanic() error
}

func (e *Error) codeOrPanic() error      { return e }
func (p *PanicError) codeOrPanic() error { return p }

// goErrorCode is the code of a Go error that is not an *Error.
func goErrorCode(err error) string {
	var coder FutoInCoder
	switch {
	case errors.As(err, &coder) && coder.FutoInCode() != "":
		return coder.FutoInCode()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		// A deadline set on a connection is a timeout too, though its
		// error matches no context's: it is a net.Error, which the rule
		// below would take for a CommError.
		return Timeout
	case notConnected(err):
		return ConnectError
	case isTransportError(err):
		return CommError
	}
	return InternalError
}

// notConnected reports whether err says a connection could not be made.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.ENETDOWN)
}

// isTransportError reports whether err comes from a network or transport
// once connected. The Errnos only a socket gives are named, as no
// *net.OpError may say so: a raw socket's errors are bare Errnos, or
// under an *os.SyscallError (see hasNetError).
func isTransportError(err error) bool {
	return hasNetError(err) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ENETRESET) ||
		errors.Is(err, net.ErrClosed)
}

// hasNetError reports whether err's chain holds a net.Error, walked as
// errors.As walks it, but for a syscall.Errno: every Errno has the
// methods of a net.Error, so errors.As takes the ENOENT of a missing
// file, under its *fs.PathError, for one. The Errnos of a network are
// found by isTransportError and notConnected by their values, or under
// the *net.OpError around them.
func hasNetError(err error) bool {
	for err != nil {
		if ne, ok := err.(net.Error); ok && !isErrno(ne) {
			return true
		}
		if x, ok := err.(interface{ As(any) bool }); ok {
			var ne net.Error
			if x.As(&ne) && !isErrno(ne) {
				return true
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			return slices.ContainsFunc(x.Unwrap(), hasNetError)
		default:
			return false
		}
	}
	return false
}

// isErrno reports whether err is a syscall.Errno.
func isErrno(err error) bool {
	_, ok := err.(syscall.Errno)
	return ok
}

// emptyCodeInfo is the info of the InternalError that stands for an error
// raised with an empty code by what (Error, or an *Error value), keeping
// info: a flow's error handlers, and the caller of its root, tell errors
// apart by their codes, and an empty one names none.
func emptyCodeInfo(what, info string) string {
	s := what + ": empty error code"
	if info != "" {
		s += "; info: " + info
	}
	return s
}

// errorCallInfo is the info of the InternalError that stands for a call of
// Error with an empty code or more than one info: it says what was wrong
// and keeps the code and the infos given, none of which is dropped.
func errorCallInfo(code string, info []string) string {
	if len(info) <= 1 {
		return emptyCodeInfo("Error", firstLabel(info))
	}
	s := "Error: "
	if code == "" {
		s += "empty error code, "
	}
	s += strconv.Itoa(len(info)) + " infos, one at most"
	if code != "" {
		s += "; code: " + code
	}
	s += "; info: "
	for k, x := range info {
		if k > 0 {
			s += ", "
		}
		s += strconv.Quote(x)
	}
	return s
}

// awaitError maps an error that enters a flow from Go code: see ErrorFrom.
func awaitError(err error) *Error { return ErrorFrom(err) }
