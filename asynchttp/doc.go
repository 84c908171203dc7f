// Package asynchttp serves HTTP requests with flows and makes HTTP requests
// from steps: the net/http integration of package asyncsteps. It gives:
//
//   - [Handler], an [http.Handler] that serves each request with one flow,
//     on the tool its Tool function picks (typically the next loop of an
//     [asyncsteps.LoopGroup]). The flow lives as long as the request: when
//     the client goes away, or the server cancels the request's context,
//     the flow is cancelled and its cancel handlers run. The response is
//     written once, after the flow has fully stopped, from the flow's
//     result: the first argument of its last success becomes the JSON
//     body, an error that ends the flow a JSON error answer.
//   - [Client], whose steps make outgoing HTTP requests, each cancelled
//     with its step: by a step timeout, a failed parallel sibling, or the
//     cancellation of the flow (its client gone). Transport errors become
//     the FutoIn codes ConnectError and CommError, which error handlers and
//     [asyncsteps.Retry] test; with [ServerError] as its Check, so does
//     an upstream's 5xx answer.
//   - HTTP statuses from FutoIn error codes: [StatusOf] maps the standard
//     codes (InvalidRequest to 400, DefenseRejected to 503, Timeout to
//     504, ...), [Handler].Codes the application's own.
//
// ExampleHandler serves requests on an [asyncsteps.LoopGroup];
// ExampleClient retries a failing upstream; ExampleClient_syncJob is an
// API client that pages through a listing and fetches its items within
// an upstream's limits, honouring its Retry-After ([RetryAfter]) in
// every job ([asyncsteps.Limiter.Hold]).
//
// # Errors and statuses
//
// A flow that ends with an [*asyncsteps.Error] is answered with the JSON
// body {"error": code, "info": info} and the status of its code. An
// application's own failure gets a status of its own through a code of its
// own. A step raises it with as.Error(code, info); an
// [asyncsteps.AsyncSteps.Await] function (a database query, say) returns
// a Go error whose type has a FutoInCode method (an
// [asyncsteps.FutoInCoder]), whose text becomes the info:
//
//	type NotFoundError struct{ ID string }
//
//	func (e *NotFoundError) Error() string      { return "no user " + e.ID }
//	func (e *NotFoundError) FutoInCode() string { return "NotFound" }
//
// and the Handler's Codes gives the code its status:
//
//	h := &asynchttp.Handler{
//		Codes: map[string]int{"NotFound": http.StatusNotFound}, // {"error":"NotFound","info":"no user 7"}, 404
//		Flow:  serveUser, // returns a *NotFoundError from an Await function, or calls as.Error("NotFound", ...)
//	}
//
// A code that neither Codes nor [StatusOf] knows is a 500, logged. A plain
// Go error (errors.New, fmt.Errorf) returned by an Await function has no
// code: [asyncsteps.ErrorFrom] makes it an InternalError (unless it is a
// network error or a context's deadline), answered 500, its text logged,
// not shown to the client. A panic or a wrong use of the API in a step is
// an InternalError like any other: a 500 answer, logged with log/slog,
// never a crashed process or a request left without an answer. The
// exception is net/http's own: a panic with [http.ErrAbortHandler] aborts
// the response, as in any handler. ExampleHandler_applicationErrors shows
// an application's codes, ExampleStatusOf the standard ones.
//
// Some answers need header fields that only the application knows: a 401
// (Unauthorized, PleaseReauth) must carry a WWW-Authenticate challenge,
// whose scheme and realm are the application's. [Handler].ErrorHeader
// sets them from the error answered and its status
// (ExampleHandler_errorHeader); without it a 401 has none.
//
// The info answered is the error's, but for three cases:
//
//   - An InternalError's info is logged, not shown: the client reads
//     "internal error, see the server log".
//   - A Timeout with an empty info (a step's timeout leaves it empty, the
//     engine's contract, the Handler's Timeout among them) is answered
//     with [TimeoutInfo], so that the client is told what ended its
//     request. A timeout of the flow's own reads the same, though the
//     request's time was not up: a Retry whose attempts all ran out of
//     their [asyncsteps.RetryOptions] Timeout answers "request timed out"
//     too. To tell the client which limit passed, an error handler around
//     the call raises the Timeout again with an info of its own when the
//     one it handles has none (as.Error(asyncsteps.Timeout, "upstream
//     timed out") when as.State().ErrorInfo is empty); the Handler's
//     Timeout never reaches that handler. The deadline of the request's context raises a Timeout
//     whose info says so, "the flow's context deadline passed", answered
//     as it is: the answer and the log line tell the request's budget
//     from a limit of the Handler's or the flow's.
//   - A ConnectError, CommError or Timeout whose info is the text of a Go
//     error in its Cause chain, which is what [asyncsteps.ErrorFrom]
//     makes of a network error that an Await function returns (a
//     *net.OpError, the *url.Error of the flow's own http.Client: "dial
//     tcp 10.0.0.7:9000: connect: connection refused"), is answered with
//     the fixed words for the kind of failure that a [Client]'s info ends
//     with ("connection refused", "timed out": see [RequestError]), since
//     that text names the address or the URL the server connects to. The
//     log line has both.
//
// Any other info is answered as it is, an empty one empty (the flow that
// raised its code without one chose to): one the flow sets
// (as.Error(CommError, "upstream answered 502 for IBM")), even of a Go
// error's text ("fetch: "+err.Error()), a Client's, the text of an
// [asyncsteps.FutoInCoder] (the program's own type chose its code), and
// "context deadline exceeded", which names nothing. An error handler that
// raises the error again (as.Error(code, as.State().ErrorInfo)), of its
// code or another, is answered the same way: the engine gives the error a
// handler raises the Go cause of the error it handles (see
// [asyncsteps.Error]).
//
// Whatever its source, an info longer than 1 KiB is answered as its first
// 1 KiB, cut before a character it would split, and "...", as the log
// line has it: a flow may raise text of any length from elsewhere (an
// upstream's error page), which the client need not read whole.
//
// # Outgoing requests
//
// A [Client]'s request runs through [asyncsteps.AsyncSteps.Await], off the
// flow's loop (in a Handler's flow, on the goroutine of the request being
// served when that one is free: see [asyncsteps.Root.RunHelping]), with a
// context that is cancelled the moment its step is. Transport errors
// become the FutoIn codes ConnectError (the connection could not be made)
// and CommError (anything after that), so that error handlers and retry
// loops test codes, not Go error types. Their info names the kind of
// failure in fixed words ("asynchttp: GET: connection refused"), not the
// URL, host or address that the Go error's text names: a Handler answers
// that info to its client, and logs the Go error, kept as the Cause, for
// the operator (see [RequestError]). An answer is the step's success,
// whatever its status, unless the Client's Check makes it an error:
// [ServerError] makes a 5xx a CommError, whose Cause, a [*StatusError],
// keeps the answer for an error handler or a Retry's Delay (its
// Retry-After). A URL that does not parse, or a
// request net/http refuses to send (a URL of another scheme than http and
// https, or without a host), is the program's mistake: an InternalError,
// which a Handler answers 500 and logs. A flow that builds a URL from its
// client's input checks it itself and raises InvalidRequest.
//
// Any [asyncsteps.Syncer] ([asyncsteps.Mutex], [asyncsteps.Throttle],
// [asyncsteps.Limiter], or one of another package) can guard a whole
// handler ([Handler].Guard) or each outgoing request ([Client].Guard).
// A Limiter that rejects a flow raises DefenseRejected, which the Handler
// answers with 503 (or 429, if [Handler].Codes says so) and a Retry-After
// header.
//
// # Request bodies
//
// Reading a request's Body waits for the client, and a step that did
// would hold up every flow of its loop until the client had sent it all.
// Read it in an [asyncsteps.AsyncSteps.Await] function, which a Handler
// runs on the request's goroutine when that one is free, with its size
// bounded (by [http.MaxBytesReader] in a middleware around the Handler,
// say).
//
// A read of the body ignores the function's context, and the answer
// waits for the function the request's goroutine runs (see
// [Handler].Timeout): a client that sends its body slowly, or stops,
// would hold the answer past the flow's end. So the Handler ends the
// reads of the body as the flow ends, however it ends (a timeout, an
// error, a parallel sibling's failure, the request's context cancelled,
// or a success that left a read running): a read in progress returns at
// once, by the read deadline of the connection (HTTP/1) or of the stream
// (HTTP/2), and any read that starts later fails at once. The function
// then sees an error from Read, "asynchttp: request body read after its
// flow ended"; its context is done by then, and what it returns goes
// nowhere: the answer is the flow's, a 504 at the Handler's Timeout.
// Over HTTP/1 the connection of a body so left unread is closed after
// the answer, rather than read to its end for the next request. A body
// the flow read whole is not touched; one it never began to read is
// net/http's, as in any handler: net/http reads up to 256 KiB of it
// before it sends the answer, within the server's ReadTimeout, to keep
// the connection. For that, the flow is given a request of its own whose
// Body wraps the request's (a shallow copy, made only for a request with
// a body); the form the flow parses there (ParseForm,
// ParseMultipartForm) is given to the request as the flow ends, so that
// net/http removes the temporary files of a multipart form, and Done
// sees the form. Nothing else the flow sets on its request reaches the
// one Done is given: a value the flow wants Done to see goes in the
// context (a holder that a middleware put there before the Handler) or
// in a closure, not in a field of the request; and the two requests are
// told to be the same by their context, which they share, not by their
// pointer. A ResponseWriter without a read deadline (an
// httptest.ResponseRecorder, a middleware's wrapper without an Unwrap
// method: see [http.ResponseController]) leaves the read in progress
// running to its end; only the later reads fail.
//
// A body over the limit, its *http.MaxBytesError returned by the
// function as it came, is an InternalError caused by it, which the Handler
// answers with a 413 Request Entity Too Large, the code InvalidRequest and
// the info "request body larger than N bytes", not logged (or with the
// status Codes maps InvalidRequest to, if it does). The body is the
// client's mistake, not the server's, and InvalidRequest is the FutoIn
// code of a request refused as it is: the same code whatever the status,
// for a client that reads the code. An error with another code is
// answered as that code, whatever its cause. net/http meant
// MaxBytesReader for request bodies, and so does the Handler: a flow that
// bounds another body (an upstream's) bounds it with a [Client]'s MaxBody
// or an [io.LimitReader], or gives its own code to the error, since an
// InternalError caused by a MaxBytesError is answered 413 whichever reader
// raised it.
//
// # Concurrency
//
// A Handler and a Client are safe for concurrent use once set up; do not
// change their fields while they serve. The Flow function and the steps it
// adds run on the flow's loop; the request they are given may be read
// there but must not be kept after the flow ends. Its Body is the
// exception: read it in an Await function (see Request bodies above).
//
// # Testing on virtual time
//
// A Client's requests are Await functions, which run on goroutines that
// an [asyncsteps.TestTool] does not wait for. Test a Handler whose flow
// makes them in a [testing/synctest] bubble instead, on an
// [asyncsteps.Loop] made and closed inside the bubble: the step timeouts,
// a Retry's backoff and the Handler's Timeout then run on the bubble's
// clock, which moves only when every goroutine in the bubble waits. The
// upstreams must answer in memory: a goroutine that waits on a network
// connection does not count as waiting in a bubble, so with an
// httptest.Server the clock never moves and the test hangs. Package
// [github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest] serves an
// http.Handler so, as net/http would over a socket: the handler on a
// goroutine of its own, its request's context cancelled when the
// Client's step is, both bodies streamed. Give the Client its http.Client:
//
//	loop := asyncsteps.NewLoop() // inside synctest.Test's function
//	defer loop.Close()
//	upstream := &asynchttptest.Transport{Handler: slowUpstream} // waits on time.After or r.Context()
//	c := &asynchttp.Client{HTTP: upstream.Client(), Check: asynchttp.ServerError}
//	// ... Run a flow on loop that calls c.Get in a Retry; time.Since(start) is exact
//	upstream.Wait() // the requests the flow cancelled have ended too
//
// The same Transport serves a Handler under test, or serve it with
// Handler.ServeHTTP and an httptest.ResponseRecorder. Call the
// Transport's Wait (or synctest.Wait) before reading what an upstream
// saw: the answer does not wait for the requests its flow cancelled (a
// timed-out attempt, a sibling's failure, the client gone) to return.
// TestServiceOnVirtualTime, in this package's virtualtime_test.go, tests
// a fan-out to two upstreams that way: the answers, the virtual times and
// every upstream call exact, with retries, a shared Limiter and a client
// that goes away; asynchttptest's TestExampleRetriesOnVirtualTime, a
// client flow's retries under a per-attempt timeout.
package asynchttp
