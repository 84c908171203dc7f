package asynchttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asyncsteps/asyncsteps"
)

// Handler is an [http.Handler] that serves each request with one flow.
//
// For every request it makes a Root on the tool Tool returns and adds one
// step, which sets the request timeout (Timeout), enters Guard and calls
// Flow to add the steps that serve the request. It then runs the flow under
// the request's context and writes the response from the flow's result,
// once, after the flow has fully stopped:
//
//   - success with a [Reply] or a [*Reply] as the first argument: that
//     reply (a nil *Reply, or one whose Status is not a final HTTP status,
//     is a logged 500 InternalError, which Done sees as such);
//   - success with another first argument: that value as JSON, status 200
//     (the arguments after the first are not answered; a value JSON cannot
//     encode is a 500 InternalError like a nil *Reply);
//   - success with no argument: status 204, no body;
//   - an [*asyncsteps.Error]: the JSON body {"error": code, "info": info}
//     with the status Codes or [StatusOf] gives the code; a 503 or a 429
//     also carries a Retry-After header. The info is the error's, but an
//     InternalError's (a panic, a misuse of the API) is logged and not
//     shown, a Timeout's empty one says [TimeoutInfo], the text of a
//     network error is answered in fixed words, and one longer than 1 KiB
//     is clipped (see Errors and statuses in the package documentation;
//     ExampleStatusOf and ExampleHandler_applicationErrors show them);
//   - an InternalError caused by an [*http.MaxBytesError] (a request body
//     over the limit of [http.MaxBytesReader]): a 413 with the code
//     InvalidRequest, not logged (see Request bodies in the package
//     documentation);
//   - the request's context was cancelled (the client went away, or the
//     server cancelled it): the flow is cancelled, and the answer, if
//     anyone still reads it, is a 503 DefenseRejected "request cancelled",
//     also when the flow ended with an error of its own as the cancel
//     came (see [Outcome]); an InternalError of the flow's own (a panic,
//     a misuse) is then logged all the same, at Error with its stack.
//     A deadline of the request's context is not a cancel but a timeout
//     of the whole flow (see [asyncsteps.Root.Run]): a Timeout error,
//     which the flow's error handlers see, and a 504 unless they recover
//     (a 504 too when it has passed before the flow could start). Its
//     info, answered and logged, is the engine's "the flow's context
//     deadline passed", which tells it from the Handler's own Timeout
//     ([TimeoutInfo]), and the line logged has the context's cause (the
//     cause a middleware gave it with [context.WithTimeoutCause], or
//     context.DeadlineExceeded).
//
// Never block in Flow or in a step: they run on the flow's loop, and one
// blocking call (a net/http request, a database query, a time.Sleep, a
// lock held elsewhere) stalls every flow of that loop until it returns.
// Do such work in an [asyncsteps.AsyncSteps.Await] function, or with a
// [Client]. The [asyncsteps.Hooks].LoopLag hook finds a callback that
// blocks all the same: it reports how long work queued on a loop waited
// to run, which such a callback makes long. For example, on the loops
// the Handler's Tool spreads requests over:
//
//	group.SetHooks(&asyncsteps.Hooks{LoopLag: func(l *asyncsteps.Loop, lag time.Duration) {
//		if lag > 50*time.Millisecond { // a callback held the loop that long
//			slog.Warn("asyncsteps loop lags: a callback blocks", "lag", lag)
//		}
//	}})
//
// The request's goroutine, which waits for the flow, runs the flow's
// [asyncsteps.AsyncSteps.Await] functions itself meanwhile (see
// [asyncsteps.Root.RunHelping]): a [Client]'s request, for example, one
// at a time; one that starts while another runs goes to a goroutine of
// the loop's. The flow of a request in flight thus needs no goroutine
// besides the request's own. The response is written once such a
// function has returned, which a Client's request does as soon as its
// step is cancelled. A function that calls runtime.Goexit ends the
// request's goroutine, as it would in any handler, while the flow goes on
// to its end without it; the client is answered with a 500 InternalError
// all the same, logged and given to Done, as it is when Tool calls
// Goexit. When Done or Logger calls Goexit, the answer already written is
// sent, Done is called unless it was the one, and the Goexit is logged.
// Over HTTP/2, net/http then resets the stream: the client gets the status
// and the body, and an error where the body should end.
//
// A step, Flow, an Await function or Tool that panics with
// [http.ErrAbortHandler] aborts the response, as a handler that panics
// with it does. When the InternalError that panic raises ends the flow
// (no error handler recovered it), nothing is answered nor logged, Done
// is called with an Outcome of Code InternalError, Err that error and
// Status 0, and ServeHTTP then panics with http.ErrAbortHandler, on which
// net/http closes the connection (HTTP/1) or resets the stream (HTTP/2).
// A middleware around the Handler that recovers panics should let that
// one through, as around any handler. Only the value itself aborts: a
// panic with an error that wraps it, as any other panic, is a 500.
//
// The zero Handler answers every request with 204 on [asyncsteps.DefaultTool]
// (a flow with no steps). Set its fields before serving; a Handler is then
// safe for concurrent use.
type Handler struct {
	// Flow adds to as the steps that serve req. It runs inside the flow's
	// first step, on the flow's loop. nil adds nothing. A request with a
	// body is given as a copy of its own, not the one Done is given (see
	// Request bodies in the package documentation).
	Flow func(as asyncsteps.AsyncSteps, req *http.Request)

	// Tool returns the tool of the next request's flow, for example
	// func() asyncsteps.Tool { return group.Next() } to spread requests over
	// the loops of an [asyncsteps.LoopGroup]. nil means
	// [asyncsteps.DefaultTool]. A panic in Tool fails the request with
	// InternalError, as a panic in a step does.
	Tool func() asyncsteps.Tool

	// Timeout, if positive, bounds each flow, the wait for Guard included:
	// past it the flow fails with Timeout, answered 504.
	//
	// It is the timeout of the Handler's own step, around the steps Flow
	// adds: they are cancelled (their cancel handlers run), and none of
	// their error handlers sees the Timeout, so nothing Flow adds can
	// recover from it or answer in its place. A flow that answers
	// something of its own when its time is up (what it has done so far,
	// a fallback) sets that time itself: SetTimeout in a step whose error
	// handler recovers. A deadline of the request's context differs: it
	// is a Timeout of the whole flow, which Flow's error handlers see (see
	// [asyncsteps.Root.Run]).
	//
	// The 504 is written by the request's goroutine, which runs the flow's
	// Await functions itself, one at a time (see
	// [asyncsteps.Root.RunHelping]). At Timeout the flow fails and cancels
	// the context of each function it runs, but if the request's goroutine
	// is running one then, the answer waits until that function returns.
	// One that honours its ctx returns at once, as a [Client]'s request
	// does; one that ignores it (a call without the context, a time.Sleep,
	// a receive from a channel alone) holds the answer past Timeout, for
	// as long as it runs. So every Await function of a flow must return
	// when its ctx is done. A read of the request's Body, which has no
	// context, is the Handler's to end: as the flow ends, it ends the read
	// (see Request bodies in the package documentation).
	Timeout time.Duration

	// Guard, if not nil, runs the steps Flow adds inside its critical
	// section: an [asyncsteps.Limiter], for example, bounds the requests
	// served at once and per second, and its rejections are answered 503.
	Guard asyncsteps.Syncer

	// Codes maps error codes to statuses before [StatusOf]: an application's
	// own codes (raised with as.Error, or by a Go error type of its own
	// that an Await function returns: see Errors and statuses in the
	// package documentation), or another status for a standard one. A
	// code that neither Codes nor StatusOf knows is a 500. A status that
	// is not a final HTTP status (200 to 599) is a mistake of the set-up:
	// such an answer is a 500, logged. A 204 or a 304 is answered without the JSON
	// body, as a [Reply] with that status is. A 429 (Too Many Requests)
	// carries the Retry-After header of a 503 (see RetryAfter).
	Codes map[string]int

	// RetryAfter is the delay a 503 or a 429 answer asks the client to
	// wait, in its Retry-After header, rounded up to whole seconds; 0 means
	// one second.
	RetryAfter time.Duration

	// ErrorHeader, if not nil, sets the header fields of an error answer
	// that the Handler cannot know. RFC 9110 requires a 401 (the status
	// of Unauthorized and PleaseReauth) to carry a WWW-Authenticate
	// challenge, whose scheme and realm are the application's, say:
	//
	//	ErrorHeader: func(header http.Header, e *asyncsteps.Error, status int) {
	//		if status == http.StatusUnauthorized {
	//			header.Set("WWW-Authenticate", `Bearer realm="api"`)
	//		}
	//	},
	//
	// It is called on the request's goroutine before each error answer is
	// written, with a header of its own, empty, the error answered and
	// the status. The fields it sets are sent, each replacing the
	// Handler's of its name (a Retry-After), but for Content-Type and
	// Content-Length, which frame the JSON body and stay the Handler's,
	// and for the "Connection: close" of a request whose body read the
	// Handler ended (see Request bodies in the package documentation).
	// Over HTTP/2 the connection-specific fields of HTTP/1 among them
	// (an Upgrade, a Keep-Alive) are dropped, as a [Reply]'s are; but
	// WriteError, which is not given the request, sends them as set.
	// e is the flow's error, with its Cause for errors.As; or the
	// Handler's own: the InvalidRequest of a request body over its limit,
	// the DefenseRejected "request cancelled" of a cancelled request, the
	// InternalError of a result that cannot be answered. Its Info may not
	// be the one answered (an InternalError's is kept from the client): a
	// header must not repeat it. WriteError calls it too, with an error of
	// the code and the info it is given.
	//
	// A panic in ErrorHeader loses its fields, not the answer: the
	// request is answered with a 500 InternalError without them, the
	// panic logged at Error with its stack, and Done sees that 500 with
	// Code InternalError and Err the Handler's error, caused by an
	// [*asyncsteps.PanicError] of the panic. A cancelled request's answer
	// is the exception: it stays the cancel's, without the fields, and
	// Done sees it as any cancelled request (see [Outcome]), the panic
	// logged all the same. The 500 that answers a
	// runtime.Goexit (see above), and the 500 of such a panic, are
	// written without calling it.
	ErrorHeader func(header http.Header, e *asyncsteps.Error, status int)

	// Logger logs each answer with status 500 and above, at a level that
	// says whether someone should look: a 500 (an InternalError, a panic
	// or a misuse in a step, an unmapped code) at Error; a 503 (a limit's
	// rejection, load shed as designed, which Done can count) at Debug,
	// so that an overload does not flood the log; any other (an
	// upstream's failure, a timeout) at Warn. An InternalError is logged
	// at Error whatever status Codes maps it to. The line of a panic has
	// its stack, and that of a 500 or a 504 the steps the flow was in
	// (see LogFailure). nil means slog.Default().
	// A Logger that panics loses that line, not the answer.
	Logger *slog.Logger

	// Done, if not nil, is called once per request, after the response has
	// been written, with what the flow ended with: for metrics. A request
	// whose goroutine a callback ended with runtime.Goexit counts too, and
	// so does one whose response a panic with http.ErrAbortHandler aborts
	// (Done is called before the Handler passes the panic on). A
	// panic in Done is recovered and logged; the answer has been written
	// already. req is the request net/http gave the Handler, which for a
	// request with a body is not the pointer Flow was given: a value of
	// the flow's reaches Done through the request's context or a closure,
	// not a field of the request (see Request bodies in the package
	// documentation).
	Done func(req *http.Request, o Outcome)
}

// Reply is a complete HTTP answer given by a flow as the first argument
// of its last success, by value or by pointer alike. A zero Status means
// 200; any other Status that is not a final HTTP status (200 to 599) is
// answered with a 500 InternalError, logged.
// A 204 or a 304 has no body: Body is not sent, nor a Content-Length or
// Transfer-Encoding of Header, over HTTP/1 and HTTP/2 alike. The keys of
// Header are sent in their canonical form, as [http.Header.Set] stores
// them; each replaces the values the response's header had for it. A key
// given in several spellings (content-type and Content-Type) is sent with
// the values of one, whatever the order of the map: the canonical
// spelling's, or if it is not there the spelling first in byte order
// (CONTENT-TYPE before content-type). The values of the others are
// dropped, not merged: most fields may be sent only once. The
// Content-Length sent is the length of Body, whatever Header says: a
// flow that answers with an upstream's header and a body of its own
// (changed, wrapped) sends that body whole. Header's is sent only in an
// answer to HEAD with no Body, the length of the body a GET would get,
// and none with a Transfer-Encoding in Header. Over HTTP/1, a
// Transfer-Encoding in Header is sent only if net/http frames the body
// by it: "chunked", or "identity" (the connection closed after the
// body), in any case; any other (the "trailers" of a TE field, a coding
// such as gzip, which the Handler does not apply to Body) would break
// the answer, and is dropped: the answer then has the length of Body.
// A Connection in Header does not replace the "Connection: close" of a
// request whose body read the Handler ended (see Request bodies in the
// package documentation). Over HTTP/2, which forbids them, the
// connection-specific fields of HTTP/1 in Header (Connection,
// Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Upgrade) are not
// sent, as header fields or as trailers ([http.TrailerPrefix]): a flow
// may answer with the header of an HTTP/1 upstream.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Outcome is how a request's flow ended, given to [Handler].Done.
//
// Cancelled is set when the flow did not succeed and the request's context
// had been cancelled by the time the Handler took the flow's outcome: the
// flow was cancelled, or it ended with an error of its own as the cancel
// came, before the engine saw it. Either way the request was cancelled:
// the answer is the 503 of a cancel, Code DefenseRejected, and Err the
// flow's error, even when [Handler].ErrorHeader panics on that answer
// (it loses its fields alone, its panic logged: the cancel wins over a
// failure that comes after it). An InternalError of the flow's own (a panic in a step is
// the server's bug, whoever cancelled the request) is logged all the
// same; nothing else is. The context's deadline is not a cancel but a
// Timeout; an aborted response (http.ErrAbortHandler) is no cancel
// either, nor is the cancel that net/http's HTTP/1 server makes once the
// Handler has ended a read of the body at the flow's end (see Request
// bodies in the package documentation): only a cancel that came before
// counts then.
type Outcome struct {
	Status    int       // the status written; 0 if the response was aborted (http.ErrAbortHandler)
	Code      string    // the error code answered (InternalError for an aborted response); "" on success
	Cancelled bool      // the request's context was cancelled as the flow failed (see above; its deadline is a Timeout)
	Err       error     // the flow's error: nil, an *asyncsteps.Error (the Handler's own for a result it cannot answer, a Goexit, a body over its limit or a panic in ErrorHeader), or the context's error
	Start     time.Time // when ServeHTTP began
}

// StatusOf returns the HTTP status that answers an error with the FutoIn
// code: InvalidRequest 400; Unauthorized and PleaseReauth 401;
// SecurityError 403; NotImplemented 501; ConnectError and CommError 502;
// DefenseRejected 503; Timeout 504; anything else 500. A [Handler]
// answers an InternalError caused by an [*http.MaxBytesError] as an
// InvalidRequest with 413 instead (see Request bodies in the package
// documentation).
func StatusOf(code string) int {
	switch code {
	case asyncsteps.InvalidRequest:
		return http.StatusBadRequest
	case asyncsteps.Unauthorized, asyncsteps.PleaseReauth:
		return http.StatusUnauthorized
	case asyncsteps.SecurityError:
		return http.StatusForbidden
	case asyncsteps.NotImplemented:
		return http.StatusNotImplemented
	case asyncsteps.ConnectError, asyncsteps.CommError:
		return http.StatusBadGateway
	case asyncsteps.DefenseRejected:
		return http.StatusServiceUnavailable
	case asyncsteps.Timeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	o := Outcome{Start: time.Now()}
	ended, doneCalled := false, false
	flowReq, body := flowRequest(w, req)
	defer func() {
		if !ended {
			body.giveForm(req) // again: an Await function of the flow may have called Goexit
			h.goexited(w, req, &o, doneCalled)
		}
	}()
	args, st, err := h.run(flowReq)
	body.giveForm(req)
	if testHookFlowEnded != nil {
		testHookFlowEnded()
	}
	body.closeIfEnded(w, req)
	switch {
	case err == nil:
		h.writeResult(w, req, args, &o)
	case abortedBy(err):
		// Nothing to answer, nor to flush should Done call Goexit: the
		// response is aborted either way (see abort).
		ended = true
		h.abort(req, o, err)
	case body.cancelled(req.Context()):
		o.Cancelled, o.Err, o.Code = true, err, asyncsteps.DefenseRejected
		o.Status = h.writeCancelled(w, req)
		if e := ownInternalError(req.Context(), err); e != nil {
			h.logFailure(req, e, o.Status, st)
		}
	default:
		e, status := h.errorAnswer(asFlowError(err))
		o.Err, o.Code = e, e.Code
		o.answered(h.writeError(w, req, e, e.Code, answeredInfo(e), status))
		h.logFailure(req, e, o.Status, st)
	}
	if h.Done != nil {
		doneCalled = true
		h.done(req, o)
	}
	ended = true
}

// answered sets the status of o, written for an error answer, and its
// code and error too when ErrorHeader panicked (failed): the 500 of that
// panic is what was answered.
func (o *Outcome) answered(status int, failed *asyncsteps.Error) {
	o.Status = status
	if failed != nil {
		o.Code, o.Err = asyncsteps.InternalError, failed
	}
}

// writeCancelled answers a cancelled request with the DefenseRejected of
// a cancel and returns its status. A panic in ErrorHeader, which
// errorHeader logs, loses its fields but not this answer, unlike the
// answer of another error: the cancel wins over a failure that comes
// after it, as it does over the flow's own InternalError, so that Done
// sees every cancelled request as the same 503.
func (h *Handler) writeCancelled(w http.ResponseWriter, req *http.Request) int {
	code, info, status := asyncsteps.DefenseRejected, "request cancelled", h.status(asyncsteps.DefenseRejected)
	header, _ := h.errorHeader(nil, code, info, status)
	h.writeErrorBody(w, req, code, info, status, header)
	return status
}

// testHookFlowEnded, set by a test, runs in ServeHTTP once the flow has
// ended, before its outcome is taken.
var testHookFlowEnded func()

// errorAnswer returns the error that answers the flow's error e, and its
// status: e itself, but for a request body over its limit (see
// requestTooLarge).
func (h *Handler) errorAnswer(e *asyncsteps.Error) (*asyncsteps.Error, int) {
	if tooLarge := requestTooLarge(e); tooLarge != nil {
		return tooLarge, h.statusOr(asyncsteps.InvalidRequest, http.StatusRequestEntityTooLarge)
	}
	return e, h.status(e.Code)
}

// requestTooLarge returns the InvalidRequest that answers a flow's error
// caused by an [*http.MaxBytesError], the body of the request read through
// [http.MaxBytesReader] having gone over its limit; nil for any other
// error. Only an InternalError is looked into: the code the engine gives a
// Go error that has none (see [asyncsteps.ErrorFrom]). A code the flow
// chose is answered as chosen. The Cause stays the Go error, so that
// errors.As still finds the *http.MaxBytesError.
func requestTooLarge(e *asyncsteps.Error) *asyncsteps.Error {
	if e.Code != asyncsteps.InternalError {
		return nil
	}
	m := maxBytesError(e.Cause)
	if m == nil {
		return nil
	}
	return &asyncsteps.Error{Code: asyncsteps.InvalidRequest, Info: fmt.Sprintf("request body larger than %d bytes", m.Limit), Cause: e.Cause}
}

// maxBytesError returns the *http.MaxBytesError in the chain of err, or
// nil. It walks the chain of Unwrap methods itself, as errors.As does,
// without the allocation of errors.As's target; unlike errors.As, it asks
// no As method, which would need that target. An error whose Unwrap
// panics ends the walk of its branch.
func maxBytesError(err error) (found *http.MaxBytesError) {
	defer func() {
		if recover() != nil {
			found = nil
		}
	}()
	for {
		switch e := err.(type) {
		case *http.MaxBytesError:
			return e
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, each := range e.Unwrap() {
				if m := maxBytesError(each); m != nil {
					return m
				}
			}
			return nil
		default:
			return nil
		}
	}
}

// abort ends a request whose flow panicked with http.ErrAbortHandler as
// net/http ends a handler that panics with it: with no answer and no log
// line, the connection closed (HTTP/1) or the stream reset (HTTP/2) by
// net/http on the same panic, which ServeHTTP passes on once Done has
// counted the request.
//
// A Goexit in Done ends the request's goroutine, which aborts the response
// all the same; it is logged, as a Goexit in Done always is.
func (h *Handler) abort(req *http.Request, o Outcome, err error) {
	o.Err, o.Code = asFlowError(err), asyncsteps.InternalError
	if h.Done != nil {
		returned := false
		defer func() {
			if !returned {
				h.logError(goexitInfo, "method", clip(req.Method), "path", clip(req.URL.Path), "status", 0, "answered", false)
			}
		}()
		h.done(req, o)
		returned = true
	}
	panic(http.ErrAbortHandler)
}

// abortedBy reports whether err ended the flow because one of its
// callbacks panicked with http.ErrAbortHandler: the engine, and Tool's
// recover, make the panic an InternalError caused by an
// *asyncsteps.PanicError of the value. The value itself is compared, as
// net/http compares it: a panic with an error that wraps it is a panic
// like any other, and so is an error returned, not panicked. An error in
// the chain whose methods panic is no abort: the answer is then the 500
// of an InternalError. Only the flow's InternalError can be an abort, and
// that is told first: every error answer asks (a 503 of each request an
// overload sheds), and a look down the chain costs an allocation.
func abortedBy(err error) (aborted bool) {
	if e, ok := err.(*asyncsteps.Error); !ok || e.Code != asyncsteps.InternalError {
		return false
	}
	defer func() { _ = recover() }()
	var p *asyncsteps.PanicError
	return errors.As(err, &p) && p.Value == http.ErrAbortHandler
}

// goexitInfo says what ended a request whose goroutine called Goexit.
const goexitInfo = "asynchttp: the request's goroutine ended (runtime.Goexit) in a callback"

// goexited answers a request whose goroutine ends before ServeHTTP
// returns: a callback run on it (Tool, Done, the Logger, an Await function
// run while the flow is waited for) called runtime.Goexit. net/http would
// close the connection without sending what is buffered: the answer (a
// 500 if none was written yet) is flushed now, complete since it carries
// its Content-Length. Done, unless it is what called Goexit, then sees the
// request as it sees any other.
func (h *Handler) goexited(w http.ResponseWriter, req *http.Request, o *Outcome, doneCalled bool) {
	answered, status := o.Status != 0, 0
	if !answered {
		o.Code, o.Err = asyncsteps.InternalError, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: goexitInfo}
		// Without ErrorHeader, which may be the callback that called
		// Goexit.
		status = h.status(asyncsteps.InternalError)
		h.writeErrorBody(w, req, asyncsteps.InternalError, internalInfo, status, nil)
		o.Status = status
	}
	// Flushed, and Done called, before logging: the Goexit may come from
	// the Logger itself.
	_ = http.NewResponseController(w).Flush() // the client may be gone
	if h.Done != nil && !doneCalled {
		h.done(req, *o)
	}
	h.logError(goexitInfo, "method", clip(req.Method), "path", clip(req.URL.Path), "status", status, "answered", answered)
}

// done calls h.Done. Its panic is logged, not left to net/http: that would
// close the connection before the answer written is sent.
func (h *Handler) done(req *http.Request, o Outcome) {
	defer func() {
		if v := recover(); v != nil {
			h.logError("asynchttp: Handler.Done panicked", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	h.Done(req, o)
}

// tool returns the tool of a request's flow; a panic in h.Tool fails the
// request with InternalError, as a panic in Flow does.
func (h *Handler) tool() (tool asyncsteps.Tool, err error) {
	if h.Tool == nil {
		return nil, nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = &asyncsteps.Error{Code: asyncsteps.InternalError, Info: fmt.Sprintf("asynchttp: Handler.Tool panicked: %v", v),
				Cause: &asyncsteps.PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	return h.Tool(), nil
}

// run runs the request's flow and waits for its end. It returns the
// flow's State too, which the flow has stopped using once run returns;
// nil if no flow ran (Tool panicked).
func (h *Handler) run(req *http.Request) ([]any, *asyncsteps.State, error) {
	tool, err := h.tool()
	if err != nil {
		return nil, nil, err
	}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if body := bodyOf(req); body != nil {
			// Not captured: the step of a request without a body stays as
			// small.
			body.watchEnd(as)
		}
		if h.Timeout <= 0 && h.Guard == nil {
			// Nothing to set around Flow: its steps can be this step's
			// own, a closure and a level fewer per request.
			if h.Flow != nil {
				h.Flow(as, req)
			}
			return
		}
		if h.Timeout > 0 {
			as.SetTimeout(h.Timeout)
		}
		serve := func(as asyncsteps.AsyncSteps, _ ...any) {
			if h.Flow != nil {
				h.Flow(as, req)
			}
		}
		if h.Guard != nil {
			h.Guard.Sync(as, serve)
			return
		}
		// A sub-step, not a call in this step: a Flow that returns without
		// adding steps completes its step, while this one, with a timeout
		// set, would wait for an external completion.
		as.Add(serve)
	})
	args, err := r.RunHelping(req.Context())
	return args, r.State(), err
}

// asyncStackOf returns the AsyncStack of the flow's State st, the step
// functions on the stack at the flow's last error, outermost first,
// without the Handler's own steps at its top (see handlerStep): the log
// names the application's steps. A copy: the engine shares the slice
// between the flows of a loop that fail at the same place, and a slog
// handler may keep the value past the call.
func asyncStackOf(st *asyncsteps.State) []string {
	if st == nil {
		return nil
	}
	stack := st.AsyncStack
	for len(stack) > 0 && strings.HasPrefix(stack[0], handlerStep) {
		stack = stack[1:]
	}
	return slices.Clone(stack)
}

// handlerStep begins the AsyncStack name of each step run adds around
// Flow's: the closures of Handler.run.
var handlerStep = reflect.TypeFor[Handler]().PkgPath() + ".(*Handler).run.func"

// cancelled reports whether ctx, the request's, has been cancelled, as
// the flow's outcome is taken. The flow was then cancelled, and Run
// returned an error matching ctx.Err(), or the flow ended with an error of
// its own as the cancel came, which the engine had not seen yet: the
// request is cancelled all the same, whichever came first. A deadline of
// ctx is not a cancel but a Timeout of the flow, which its error handlers
// saw, or, when it had passed before the flow started, the Timeout Run
// returns without starting it: a 504 like any other Timeout.
func cancelled(ctx context.Context) bool {
	cause := ctx.Err()
	return cause != nil && !errors.Is(cause, context.DeadlineExceeded)
}

// ownInternalError returns err, the error of a cancelled request's flow,
// if it is an InternalError that the flow raised itself as the cancel
// came (or Tool, before the flow began): a panic or a misuse, the
// server's bug whoever cancelled the request. nil for the cancel of ctx
// that the flow saw, for another code, which the cancel makes moot, and
// for a body over its limit, the client's (see requestTooLarge).
func ownInternalError(ctx context.Context, err error) *asyncsteps.Error {
	var e *asyncsteps.Error
	if errors.Is(err, ctx.Err()) || !errors.As(err, &e) || e.Code != asyncsteps.InternalError || requestTooLarge(e) != nil {
		return nil
	}
	return e
}

// asFlowError returns err as an *asyncsteps.Error. Run returns one for
// every end but a cancel (a deadline that had passed before the flow
// started is a Timeout too); any other error is an InternalError.
func asFlowError(err error) *asyncsteps.Error {
	var e *asyncsteps.Error
	if errors.As(err, &e) {
		return e
	}
	return &asyncsteps.Error{Code: asyncsteps.InternalError, Info: err.Error(), Cause: err}
}

// writeResult writes a successful flow's answer to req, and sets the
// status of o, and its code and error too when the result cannot be
// answered.
func (h *Handler) writeResult(w http.ResponseWriter, req *http.Request, args []any, o *Outcome) {
	if len(args) == 0 {
		writeBody(w, http.StatusNoContent, nil)
		o.Status = http.StatusNoContent
		return
	}
	switch r := args[0].(type) {
	case *Reply:
		if r == nil {
			// A flow that meant to reply and lost its Reply: "null" with a
			// 200 would hide the bug from the client and the server alike.
			h.writeBadResult(w, req, o, nil, "asynchttp: the flow's result is a nil *Reply")
			return
		}
		h.writeReply(w, req, r, o)
		return
	case Reply:
		// Never meant as JSON: a flow gives a Reply to set the status.
		h.writeReply(w, req, &r, o)
		return
	}
	body, err := marshal(args[0])
	if err != nil {
		h.writeBadResult(w, req, o, err, "asynchttp: result not encodable as JSON", "type", fmt.Sprintf("%T", args[0]), "err", err)
		return
	}
	writeJSON(w, http.StatusOK, body)
	o.Status = http.StatusOK
}

// writeReply writes a flow's Reply to req, and sets the status of o, and
// its code and error too when the status cannot be answered.
func (h *Handler) writeReply(w http.ResponseWriter, req *http.Request, r *Reply, o *Outcome) {
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	if !finalStatus(status) {
		// net/http panics on such a status, which would leave the client
		// without an answer; the reply's headers are not sent.
		h.writeBadResult(w, req, o, nil, "asynchttp: Reply.Status is not a final HTTP status", "status", r.Status)
		return
	}
	setFields(w.Header(), r.Header)
	if req.ProtoMajor < 2 {
		// Before sendsLength: a Transfer-Encoding dropped leaves the
		// answer the length of Body.
		keepFramingEncoding(w.Header())
	}
	if sendsLength(w.Header(), req, r) {
		// Complete even if flushed early (see goexited).
		w.Header().Set("Content-Length", strconv.Itoa(len(r.Body)))
	}
	if req.ProtoMajor >= 2 {
		// After sendsLength: a Transfer-Encoding of r's still means no
		// Content-Length of the Handler's.
		dropConnectionFields(w.Header())
	}
	writeBody(w, status, r.Body)
	o.Status = status
}

// setFields sets the fields of src in dst, each replacing dst's values of
// its name. Each key is canonical, as Header.Set stores it: a key a map
// literal wrote in lower case would go beside the Content-Length the
// Handler sets and the Content-Type net/http sniffs, each then sent twice.
// A "Connection: close" in dst (see requestBody.closeIfEnded) stays: a
// Connection of src's (an HTTP/1 upstream's "keep-alive", forwarded)
// would keep a connection whose body was left unread.
func setFields(dst, src http.Header) {
	closing := dst.Get("Connection") == "close"
	for k, v := range src {
		ck := http.CanonicalHeaderKey(k)
		if k != ck && shadowed(src, k, ck) || ck == "Connection" && closing {
			continue
		}
		dst[ck] = v
	}
}

// dropConnectionFields deletes from h, the header of an answer over
// HTTP/2, the connection-specific fields of HTTP/1 that net/http's HTTP/2
// server sends: it drops Connection itself, and a Transfer-Encoding but
// for one of "trailers". HTTP/2 forbids them, TE too in an answer (only a
// request may carry it), and a client treats the answer as malformed
// (curl and browsers fail the stream); a Reply that forwards an HTTP/1
// upstream's header has a Keep-Alive. A trailer of one of them, given
// with [http.TrailerPrefix], goes too: net/http sends an Upgrade so.
func dropConnectionFields(h http.Header) {
	for _, k := range connectionFields {
		delete(h, k)
	}
	for k := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && slices.Contains(connectionFields[:], http.CanonicalHeaderKey(name)) {
			delete(h, k)
		}
	}
}

// keepFramingEncoding leaves in h, the header of an answer over HTTP/1,
// a Reply's Transfer-Encoding only if net/http's HTTP/1 server frames the
// body by it: one field of "chunked" (the body chunked) or "identity"
// (the body ended by closing the connection), set in the lower case
// net/http compares. It sends any other beside the "chunked" it adds,
// which Go's client refuses ("too many transfer encodings"): a value of
// TE ("trailers"), or a coding the Handler does not apply to Body
// (gzip), which would misname it. Such a field is dropped.
func keepFramingEncoding(h http.Header) {
	te, ok := h["Transfer-Encoding"]
	if !ok {
		return
	}
	if len(te) == 1 {
		if v := strings.ToLower(strings.TrimSpace(te[0])); v == "chunked" || v == "identity" {
			h["Transfer-Encoding"] = []string{v} // a slice of its own: te is the Reply's
			return
		}
	}
	delete(h, "Transfer-Encoding")
}

// connectionFields are the fields dropConnectionFields deletes, in
// canonical form.
var connectionFields = [...]string{"Keep-Alive", "Proxy-Connection", "Te", "Transfer-Encoding", "Upgrade"}

// sendsLength reports whether the answer to req with r has the length of
// r.Body as its Content-Length, h being the answer's header, r's in it.
// It has, whatever r.Header says: a length that is not the body's breaks
// the answer (net/http refuses a body longer than its header announces,
// and cuts the connection after a shorter one), and a flow that answers
// with an upstream's header and a body it changed gives one. But for a
// Transfer-Encoding of r's, which frames the body itself, and for the
// Content-Length r gives an answer to HEAD without a body: the length of
// the body a GET would get.
func sendsLength(h http.Header, req *http.Request, r *Reply) bool {
	switch {
	case h.Get("Transfer-Encoding") != "":
		return false
	case req.Method == http.MethodHead && len(r.Body) == 0:
		return h.Get("Content-Length") == ""
	}
	return true
}

// shadowed reports whether the key k of h, not canonical, gives way to
// another spelling of it, ck being their canonical form: to ck itself, or
// to a spelling before k in byte order. Which one is sent must not depend
// on the order a map is ranged in. The spellings are compared without an
// allocation first: a header rarely has two.
func shadowed(h http.Header, k, ck string) bool {
	if _, ok := h[ck]; ok {
		return true
	}
	for other := range h {
		if other < k && strings.EqualFold(other, k) && http.CanonicalHeaderKey(other) == ck {
			return true
		}
	}
	return false
}

// writeBadResult answers a flow's result that cannot be answered as it
// is: a 500 InternalError, logged with msg and args, and the outcome's
// code and error, so that Done counts it as the error it is.
func (h *Handler) writeBadResult(w http.ResponseWriter, req *http.Request, o *Outcome, cause error, msg string, args ...any) {
	e := &asyncsteps.Error{Code: asyncsteps.InternalError, Info: msg, Cause: cause}
	o.Code, o.Err = asyncsteps.InternalError, e
	o.answered(h.writeError(w, req, e, e.Code, internalInfo, h.status(e.Code)))
	// Logged once answered, as any failure: a Logger that calls Goexit
	// then leaves this answer, and this outcome, to goexited.
	h.logError(msg, args...)
}

// TimeoutInfo is the info of the answer to a Timeout whose info is empty:
// the one a step's timeout raises (the engine leaves its info empty), the
// Handler's Timeout among them. The deadline of the request's context
// raises a Timeout whose info says so, answered as it is.
const TimeoutInfo = "request timed out"

// WriteError answers with the JSON error body {"error": code, "info": info}
// (none if code maps to 204 or 304) and the status h maps code to, with a
// Retry-After header on a 503 and on a 429; it returns the status. An
// empty info of Timeout is answered as [TimeoutInfo]; that of any other
// code stays empty, as the flow raised it. An info longer than 1 KiB is
// answered clipped to it and "..." (see Errors and statuses in the
// package documentation). ErrorHeader, if set, is called with an
// [*asyncsteps.Error] of code and info, and its fields are sent as set,
// whatever the protocol (w's request is not known); if it panics, the
// answer is its 500, and that status is returned. A handler that does not run flows
// can answer with it exactly as a Handler does.
func (h *Handler) WriteError(w http.ResponseWriter, code, info string) int {
	status, _ := h.writeError(w, nil, nil, code, info, h.status(code))
	return status
}

// writeError is WriteError with the status given, and e the error
// answered for ErrorHeader (nil: one of code and info), req the request
// answered (nil for WriteError's). It returns the status written, and
// the Handler's InternalError if ErrorHeader panicked, whose 500 was
// written instead.
func (h *Handler) writeError(w http.ResponseWriter, req *http.Request, e *asyncsteps.Error, code, info string, status int) (int, *asyncsteps.Error) {
	header, failed := h.errorHeader(e, code, info, status)
	if failed != nil {
		code, info, status = asyncsteps.InternalError, internalInfo, h.status(asyncsteps.InternalError)
	}
	h.writeErrorBody(w, req, code, info, status, header)
	return status, failed
}

// errorHeader returns the header fields that ErrorHeader sets for the
// answer of e (nil: an error of code and info) with status; nil if it is
// not set. A panic in it is logged and returned as an InternalError.
func (h *Handler) errorHeader(e *asyncsteps.Error, code, info string, status int) (header http.Header, failed *asyncsteps.Error) {
	if h.ErrorHeader == nil {
		return nil, nil
	}
	if e == nil {
		e = &asyncsteps.Error{Code: code, Info: info}
	}
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			h.logError("asynchttp: Handler.ErrorHeader panicked", "code", e.Code, "status", status, "panic", v, "stack", string(stack))
			header, failed = nil, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: fmt.Sprintf("asynchttp: Handler.ErrorHeader panicked: %v", v),
				Cause: &asyncsteps.PanicError{Value: v, Stack: stack}}
		}
	}()
	header = http.Header{}
	h.ErrorHeader(header, e, status)
	return header, nil
}

// writeErrorBody writes the JSON error body of code and info with status,
// the fields of header (ErrorHeader's, or nil) replacing the Handler's:
// over HTTP/2 without those that it forbids, as a Reply's (req nil: the
// protocol is not known).
func (h *Handler) writeErrorBody(w http.ResponseWriter, req *http.Request, code, info string, status int, header http.Header) {
	if info == "" && code == asyncsteps.Timeout {
		info = TimeoutInfo
	}
	info = clip(info)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		// The answers that ask the client to come back later: RFC 9110
		// gives a 503 the header, RFC 6585 a 429, and clients look for it.
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(h.RetryAfter)))
	}
	setFields(w.Header(), header)
	if req != nil && req.ProtoMajor >= 2 {
		dropConnectionFields(w.Header())
	}
	body, _ := json.Marshal(errorBody{Error: code, Info: info}) // strings always encode
	writeJSON(w, status, body)
}

type errorBody struct {
	Error string `json:"error"`
	Info  string `json:"info"`
}

// status returns the status that answers code: that of Codes, or of
// StatusOf.
func (h *Handler) status(code string) int { return h.statusOr(code, StatusOf(code)) }

// statusOr returns the status that Codes maps code to, or status if it
// does not map it.
func (h *Handler) statusOr(code string, status int) int {
	s, ok := h.Codes[code]
	switch {
	case !ok:
		return status
	case !finalStatus(s):
		h.logError("asynchttp: Handler.Codes maps a code to no final HTTP status", "code", code, "status", s)
		return http.StatusInternalServerError
	}
	return s
}

// finalStatus reports whether status can end an answer: 1xx statuses are
// informational, and net/http panics on one outside 100 to 999.
func finalStatus(status int) bool { return status >= 200 && status <= 599 }

// LogFailure logs req, answered with status for the error e, as h logs
// the error answers of its flows (see Logger): an InternalError or a 500
// at Error, a 503 at Debug, any other 5xx at Warn, a 4xx not at all. The
// line has req's method and path and e's code and info (an empty info of
// Timeout as answered, [TimeoutInfo]; the method, the path and the info
// each clipped to 1 KiB, and "...", if longer), and e's cause, if it has
// one: the Go error that e wraps, with every detail the answer leaves
// out (for a [Client]'s ConnectError or CommError, net/http's error,
// which names the upstream's URL and address). The line of an error
// caused by a panic (an [*asyncsteps.PanicError] in e's chain) logged at
// Error has the panic's stack too, as "stack". A handler that does not
// run flows can log its failures with it exactly as a Handler does.
//
// The Handler's own line for a flow's error has one more attribute, on
// the line of an InternalError or a 500, and of a Timeout or a 504:
// "async_stack", the flow's [asyncsteps.State].AsyncStack at its last
// error (the step functions on the stack then, outermost first), without
// the Handler's own steps, and only if that leaves a step. For a panic,
// it ends with the step that panicked. For a Timeout, it ends with the
// step whose SetTimeout ran out, as the engine records a timeout's stack
// where the timeout was set, not where the flow was waiting: so a step
// that bounds its own work (a call to an upstream) is named, while the
// Handler's Timeout, set by its own step, leaves no "async_stack". The
// deadline of the request's context has no step of its own: its stack
// ends with the step it timed out, the one the flow was in.
func (h *Handler) LogFailure(req *http.Request, e *asyncsteps.Error, status int) {
	h.logFailure(req, e, status, nil)
}

// logFailure is LogFailure with the State of the flow that failed with
// e, nil if there was none, for its AsyncStack. The stack is copied only
// for the lines that have it: an overload's 503s pay nothing for it.
func (h *Handler) logFailure(req *http.Request, e *asyncsteps.Error, status int, st *asyncsteps.State) {
	level, ok := failureLevel(e.Code, status)
	if !ok {
		return
	}
	info := clip(e.Info)
	if info == "" && e.Code == asyncsteps.Timeout {
		info = TimeoutInfo // as answered: the line says which timeout
	}
	args := []any{"method", clip(req.Method), "path", clip(req.URL.Path), "status", status, "code", e.Code, "info", info}
	if cause := logCause(e); cause != nil {
		args = append(args, "cause", cause)
	}
	internal := level == slog.LevelError
	if internal {
		if p := panicOf(e); p != nil {
			args = append(args, "stack", string(p.Stack))
		}
	}
	timedOut := e.Code == asyncsteps.Timeout || status == http.StatusGatewayTimeout
	if internal || timedOut {
		if stack := asyncStackOf(st); len(stack) > 0 {
			args = append(args, "async_stack", stack)
		}
	}
	h.log(level, "asynchttp: request failed", args...)
}

// panicOf returns the *asyncsteps.PanicError in the chain of e: the cause
// the engine gives the InternalError of a panic in a callback, and that
// the error an error handler raises in its place keeps. nil if there is
// none, or if a method of the chain panics.
func panicOf(e *asyncsteps.Error) (p *asyncsteps.PanicError) {
	defer func() {
		if recover() != nil {
			p = nil
		}
	}()
	if !errors.As(e, &p) {
		return nil
	}
	return p
}

// logCause returns the cause of e that LogFailure logs: e.Cause, or what
// is under the copies of e that wrap each other there. The engine gives
// the error a step failed with (a Client's, whose Cause is net/http's
// error) to the flow as an *asyncsteps.Error of its own with the same
// code and info, which a retry loop may wrap again: the text of such a
// copy is the line's code and info once more, and would hide the Go
// error under it. An *asyncsteps.Error of another code or info is logged
// as it is. The walk is bounded: a chain that loops must not hang the
// request.
func logCause(e *asyncsteps.Error) error {
	err := e.Cause
	for range maxCauseDepth {
		next, ok := err.(*asyncsteps.Error)
		if !ok || next == nil || next.Code != e.Code || next.Info != e.Info {
			break
		}
		err = next.Cause
	}
	return err
}

// clip returns info, or its first maxClipped bytes (cut before a
// character they would split) and "...": an info may carry text of any
// length from elsewhere (an upstream's answer), which neither an error
// answer nor a log line need repeat whole, once per failure. So may a
// request's method and path, the client's text of up to a megabyte
// (net/http's bound on a request line), which a log line has.
func clip(info string) string {
	if len(info) <= maxClipped {
		return info
	}
	cut := maxClipped
	for cut > maxClipped-(utf8.UTFMax-1) && !utf8.RuneStart(info[cut]) {
		cut--
	}
	if !utf8.RuneStart(info[cut]) {
		cut = maxClipped // not UTF-8 there: no character to keep whole
	}
	return info[:cut] + "..."
}

// maxClipped bounds the info of an error answer and of a failure's log
// line, and the method and path of a log line.
const maxClipped = 1 << 10

// maxCauseDepth bounds the *asyncsteps.Error causes logCause walks down.
const maxCauseDepth = 16

// failureLevel is the level at which the error answer with code and
// status is logged, and whether it is (see Handler.Logger). An
// InternalError is always, at Error: its answer sends the client to the
// log, whatever status Codes gives it.
func failureLevel(code string, status int) (slog.Level, bool) {
	switch {
	case code == asyncsteps.InternalError || status == http.StatusInternalServerError:
		return slog.LevelError, true
	case status == http.StatusServiceUnavailable:
		return slog.LevelDebug, true
	}
	return slog.LevelWarn, status > http.StatusInternalServerError
}

// logError logs an error line.
func (h *Handler) logError(msg string, args ...any) { h.log(slog.LevelError, msg, args...) }

// log logs a line at level. A logger that panics loses the line: the
// panic must not reach net/http, which would drop the answer.
func (h *Handler) log(level slog.Level, msg string, args ...any) {
	defer func() { _ = recover() }()
	logger := h.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Log(context.Background(), level, msg, args...)
}

// marshal is json.Marshal, with a panic in a MarshalJSON method returned
// as an error.
func marshal(v any) (body []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("json: MarshalJSON panicked: %v", p)
		}
	}()
	return json.Marshal(v)
}

func retryAfterSeconds(d time.Duration) int {
	if d <= 0 {
		return 1
	}
	secs := d / time.Second
	if d%time.Second != 0 {
		secs++ // rounded up without adding first, which overflows near the largest Duration
	}
	return int(secs)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1)) // complete even if flushed early (see goexited)
	writeBody(w, status, append(body, '\n'))
}

// writeBody writes status and body. A 204 or a 304 has no body, and no
// header that announces one: net/http's HTTP/1 server drops them, but its
// HTTP/2 server sends the Content-Length, and the client then waits for a
// body the stream never has (Go's fails with unexpected EOF).
func writeBody(w http.ResponseWriter, status int, body []byte) {
	if status == http.StatusNoContent || status == http.StatusNotModified {
		w.Header().Del("Content-Length")
		w.Header().Del("Transfer-Encoding")
		w.WriteHeader(status)
		return
	}
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do then
}
