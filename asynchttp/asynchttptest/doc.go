// Package asynchttptest serves HTTP requests in memory, for tests on
// virtual time: [Transport] is an [http.RoundTripper] that answers each
// request with an [http.Handler], with no socket between them.
//
// A goroutine that waits on a network connection is not durably blocked
// in a [testing/synctest] bubble, so with an httptest.Server the bubble's
// clock never moves and the test hangs. A Transport waits on channels
// only: give it to the [http.Client] of an asynchttp.Client (or of any
// code under test), make the loops inside the bubble, and every
// step timeout, retry backoff and slow upstream runs on the bubble's
// clock, each duration exact, in no wall-clock time.
//
// The handler is served as over a socket, the way net/http's server and
// client would give it: on a goroutine of its own per request, its
// request's context cancelled when the client's is, when the client
// closes the answer's body before its end, and when the handler returns;
// both bodies streamed, so that a handler that writes slowly, or never
// finishes, holds the client's read until its timeout or cancel ends it;
// the status, header, Content-Length, sniffed Content-Type, Date and
// trailers as net/http sets them (see [Transport]). The handler may be an
// asynchttp.Handler: its flows then run on the loop its Tool gives, in
// the bubble too, and the read deadline it sets to end the reads of a
// request's body works as over HTTP/1.
//
// A test of a client flow on virtual time, TestExampleRetriesOnVirtualTime
// in this package's example_test.go (a test, not an Example:
// synctest.Test needs the test's *testing.T), goes so:
//
//	synctest.Test(t, func(t *testing.T) {
//		start := time.Now()
//		upstream := &asynchttptest.Transport{Handler: script} // waits on time.After or r.Context()
//		loop := asyncsteps.NewLoop() // made in the bubble: its timers are on its clock
//		defer loop.Close()
//		c := &asynchttp.Client{HTTP: upstream.Client(), Check: asynchttp.ServerError} // a 5xx is retried
//		r := asyncsteps.New(asyncsteps.WithTool(loop))
//		asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 3, Timeout: 100 * time.Millisecond, Backoff: backoff}, attempt)
//		answer, err := asyncsteps.Run[string](context.Background(), r)
//		took := time.Since(start) // exact: 180ms, as the script, the timeouts and the backoff make it
//		upstream.Wait()           // the attempts the flow cancelled have ended too
//	})
//
// [Transport.Wait] waits until every handler started has returned and
// the copy of every request's body has stopped, for a test that checks
// what the handlers did once the client stopped waiting for them. The
// short goroutines that break a request its client cancelled, or end a
// read at its deadline, may be ending still: a test that counts
// goroutines calls synctest.Wait after it, in a bubble.
//
// A test that drives its flows with an asyncsteps.TestTool can use a
// Transport too, as a fast upstream without a socket, but not on virtual
// time: the requests run in Await functions, on goroutines that a
// TestTool does not wait for, and a handler that waits on a timer waits
// on the real clock. Test such flows on a Loop in a synctest bubble.
package asynchttptest
