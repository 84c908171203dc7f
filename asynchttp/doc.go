// Package asynchttp serves HTTP requests with flows and makes HTTP requests
// from steps: the net/http integration of package asyncsteps.
//
// A [Handler] runs one flow per request, on the tool its Tool function
// picks (typically the next loop of an [asyncsteps.LoopGroup]). The flow
// lives as long as the request: when the client goes away, or the server
// cancels the request's context, the flow is cancelled and its cancel
// handlers run. The response is written once, after the flow has fully
// stopped, from the flow's result: the first argument of its last success
// becomes the body, and an [*asyncsteps.Error] becomes a JSON error answer
// whose status follows the error code (see [StatusOf]). A panic or a wrong
// use of the API in a step is an InternalError like any other: a 500
// answer, logged with log/slog, never a crashed process or a request left
// without an answer. The exception is net/http's own: a panic with
// [http.ErrAbortHandler] aborts the response, as in any handler.
//
// The info of an error answer is the error's, with three exceptions: an
// InternalError's is logged, not shown to the client; a Timeout's, which
// a step's timeout leaves empty (the engine's contract), is
// [TimeoutInfo], so that the client is told what ended its request
// whichever time limit passed; and the text of a Go error, which
// [asyncsteps.ErrorFrom] makes the info of the ConnectError, CommError
// or Timeout that a network error returned by an Await function raises
// ("dial tcp 10.0.0.7:9000: connect: connection refused"), is logged and
// answered in fixed words ("connection refused"), since it names where
// the server connects (see [Handler]). Any other empty info is answered
// empty: the flow that raised its code without one chose to.
//
// A [Client] adds steps that make outgoing HTTP requests. A request runs
// through [asyncsteps.AsyncSteps.Await], off the flow's loop (in a
// Handler's flow, on the goroutine of the request being served when that
// one is free: see [asyncsteps.Root.RunHelping]), with a context that is
// cancelled the moment its step is: by a step timeout, a failed parallel
// sibling, or the cancellation of the flow (a client gone).
// Transport errors become the FutoIn codes ConnectError (the connection
// could not be made) and CommError (anything after that), so that error
// handlers and retry loops test codes, not Go error types. Their info
// names the kind of failure in fixed words ("asynchttp: GET: connection
// refused"), not the URL, host or address that the Go error's text
// names: a Handler answers that info to its client, and logs the Go
// error, kept as the Cause, for the operator (see [RequestError]). A
// URL that does not parse, or a request net/http refuses to send (a URL
// of another scheme than http and https, or without a host), is the
// program's mistake: an InternalError, which a Handler answers 500 and
// logs. A flow that builds a URL from its client's input checks it
// itself and raises InvalidRequest.
//
// Any [asyncsteps.Syncer] ([asyncsteps.Mutex], [asyncsteps.Throttle],
// [asyncsteps.Limiter], or one of another package) can guard a whole
// handler ([Handler].Guard) or each outgoing request ([Client].Guard).
// A Limiter that rejects a flow raises DefenseRejected, which the Handler
// answers with 503 (or 429, if [Handler].Codes says so) and a Retry-After
// header.
//
// # Concurrency
//
// A Handler and a Client are safe for concurrent use once set up; do not
// change their fields while they serve. The Flow function and the steps it
// adds run on the flow's loop; the request they are given may be read
// there but must not be kept after the flow ends. Its Body is the
// exception: reading it waits for the client, and a step that did would
// hold up every flow of its loop until the client had sent it all. Read
// it in an [asyncsteps.AsyncSteps.Await] function, which a Handler runs
// on the request's goroutine when that one is free, with its size bounded
// (by [http.MaxBytesReader] in a middleware around the Handler, say): a
// body over the limit, its *http.MaxBytesError returned by the function,
// is answered 413 (see [Handler]).
//
// # Testing on virtual time
//
// A Client's requests are Await functions, which run on goroutines that
// an [asyncsteps.TestTool] does not wait for. Test a Handler whose flow
// makes them in a [testing/synctest] bubble instead, on an
// [asyncsteps.Loop] made and closed inside the bubble: the step timeouts,
// a Retry's backoff and the Handler's Timeout then run on the bubble's
// clock, which moves only when every goroutine in the bubble waits. Give
// the Client an http.Client whose Transport answers in memory, waiting
// on a timer or on the request's context: a goroutine that waits on a
// network connection does not count as waiting in a bubble, so with an
// httptest.Server the clock never moves and the test hangs. Serve with
// Handler.ServeHTTP and an httptest.ResponseRecorder, and call
// synctest.Wait before reading what the upstream saw: the answer does not
// wait for the requests its flow cancelled (a timed-out attempt, a
// sibling's failure, the client gone) to return. TestServiceOnVirtualTime,
// in this package's virtualtime_test.go, tests a fan-out to two upstreams
// that way: the answers, the virtual times and every upstream call exact,
// with retries, a shared Limiter and a client that goes away.
package asynchttp
