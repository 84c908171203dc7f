package asynchttptest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
)

// Transport is an [http.RoundTripper] that serves each request with
// Handler in memory, as net/http's server and client would over a
// socket:
//
//   - The handler runs on a goroutine of its own per request. Its request
//     is a server's (RequestURI, Host, RemoteAddr "192.0.2.1:1234",
//     HTTP/1.1, a User-Agent if the client set none, TLS set for an https
//     URL), with a context of its own, not the client's: cancelled when
//     the client's is (its timeout, its cancel), when the client closes
//     the answer's body before its end, and when the handler returns.
//   - The request's body is streamed to the handler as the client's body
//     gives it; its reads fail with io.ErrUnexpectedEOF once the client
//     has gone, as when a connection breaks. A read deadline set through
//     [http.ResponseController] fails them with [os.ErrDeadlineExceeded]
//     once it passes, for good: the deadline cannot be moved back. The
//     handler may read the body after it has sent its answer, full
//     duplex always (EnableFullDuplex succeeds). A ResponseController
//     cannot Hijack the connection, nor set a write deadline: those
//     return [http.ErrNotSupported].
//   - The answer is sent as net/http sends it: its header as it was at
//     WriteHeader (or at the first Write or Flush), with a Date and, for
//     a body, a sniffed Content-Type unless the handler set one (or set
//     the key to nil); sent when the handler returns, flushes, or has
//     written more than 2 KiB. A handler that returns having written no
//     more gets a Content-Length; any other answer is chunked
//     (ContentLength -1), its trailers (declared with a "Trailer" header,
//     or keyed with [http.TrailerPrefix]) set in the Response's Trailer
//     at the end of its body. A body that stops short of the
//     Content-Length the handler set ends with io.ErrUnexpectedEOF, and a
//     Write past it fails with [http.ErrContentLength]. Answers to HEAD,
//     and 1xx, 204 and 304 answers, have no body; they and those of a
//     Content-Length of 0 have [http.NoBody] for their Body.
//   - The answer's body is streamed: a handler that writes slowly, or
//     never finishes, holds the client's read until the client's context
//     ends it, with the context's error; a body of the Content-Length
//     the handler set ends at that length. Writes wait for the client's
//     reads, as over a socket whose buffers are full, and fail once the
//     client has gone.
//   - A handler that panics, or calls runtime.Goexit, breaks the
//     connection: the client gets io.EOF if no answer was sent, else a
//     body that ends with io.ErrUnexpectedEOF. The panic is logged with
//     its stack, as net/http's server logs it, but for
//     [http.ErrAbortHandler].
//
// It does not do what the client's side of net/http's transport adds:
// no compression (the request has no Accept-Encoding of the transport's
// own), no proxy, no connection reuse, no 1xx answers (skipped, as the
// client skips them). A request whose body is longer or shorter than its
// ContentLength fails with net/http's client's error, unless the handler
// answered before it read the body to its end; the handler's read of it
// ends with io.ErrUnexpectedEOF, as when the client breaks the
// connection. A request whose URL has a scheme other than http
// and https, or no host, fails with net/http's transport's error; with
// a nil Handler, every request fails.
//
// The zero Transport has no Handler. A Transport is safe for concurrent
// use; it must not be copied once used.
type Transport struct {
	// Handler serves the requests.
	Handler http.Handler

	// Not a sync.WaitGroup: one that a request in a synctest bubble
	// counted is tied to that bubble until a Wait sees it at zero, and a
	// request outside it (another test's, with a Transport they share)
	// ends the process with a fatal error; and the Wait of one declared at
	// package level does not block durably, so the bubble's clock stops.
	// A sync.Cond's Wait blocks durably, and binds to no bubble.
	mu      sync.Mutex
	once    sync.Once // sets ended.L
	ended   sync.Cond // broadcast when running falls to 0
	running int       // the requests that have not ended whole
}

// Client returns an [http.Client] that sends its requests through t.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }

// Wait waits until every request t has served has ended: its handler
// returned, and the copy of its body to the handler stopped. A handler
// that ignores its request's context and never returns makes Wait wait
// for ever, as it would make an httptest.Server's Close. (The goroutine
// of a cancel, or of a read deadline, may be ending still: see the
// package's doc.)
//
// A Transport may serve tests in several bubbles, and outside any, in
// turn, with no Wait between them: one declared at package level, say.
func (t *Transport) Wait() {
	t.lock()
	defer t.mu.Unlock()
	for t.running > 0 {
		t.ended.Wait()
	}
}

// lock locks t.mu, the lock of t.ended.
func (t *Transport) lock() {
	t.once.Do(func() { t.ended.L = &t.mu })
	t.mu.Lock()
}

// serve runs ex on a goroutine of its own, counted until it has ended.
func (t *Transport) serve(ex *exchange) {
	t.lock()
	t.running++
	t.mu.Unlock()
	go func() {
		defer t.end()
		ex.serve(t.Handler)
	}()
}

// end counts a request ended, and wakes the Waits once none is left.
func (t *Transport) end() {
	t.lock()
	defer t.mu.Unlock()
	if t.running--; t.running == 0 {
		t.ended.Broadcast()
	}
}

// RoundTrip serves req with t's Handler and returns its answer, once the
// handler has sent it (see [Transport]), or the error of req's context
// if that ends first.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.refuse(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	ex := newExchange(req)
	t.serve(ex)
	select {
	case a := <-ex.answer:
		select {
		case err := <-ex.bodyFailed(): // told first, whichever the select took
			if a.resp != nil {
				a.resp.Body.Close()
			}
			ex.abort(err)
			return nil, err
		default:
		}
		return a.resp, a.err
	case err := <-ex.bodyFailed():
		ex.abort(err)
		return nil, err
	case <-ctx.Done():
		ex.abort(ctx.Err())
		return nil, ctx.Err()
	}
}

// bodyFailed returns the channel of the error of a request's body not of
// its ContentLength; nil, which never delivers, for a request without a
// body.
func (ex *exchange) bodyFailed() <-chan error {
	if ex.body == nil {
		return nil
	}
	return ex.body.failed
}

// refuse returns the error of a request t cannot serve, with the text
// net/http's transport gives it.
func (t *Transport) refuse(req *http.Request) error {
	switch {
	case t.Handler == nil:
		return errors.New("asynchttptest: Transport without a Handler")
	case req.URL == nil:
		return errors.New("http: nil Request.URL")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("unsupported protocol scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("http: no Host in request URL")
	}
	return nil
}

// closeBody closes the body of req, which a RoundTripper must do even
// when it sends nothing.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// remoteAddr is the address the handler's requests come from: the one
// httptest.NewRequest gives, from the range kept for documentation.
const remoteAddr = "192.0.2.1:1234"

// exchange is one request and its answer: what the client's goroutine,
// the handler's and those that cancel the request share. Its pipes and
// its context are safe for concurrent use; the rest is set before the
// handler starts.
type exchange struct {
	req    *http.Request // the client's
	answer chan answer   // the answer, or the error, sent once; buffered

	ctx      context.Context // the handler's request's
	cancel   context.CancelFunc
	unlink   func() bool    // stops the client's context from aborting
	body     *requestBody   // nil for a request without a body
	out      *io.PipeReader // the answer's body, when streamed
	outWrite *io.PipeWriter
}

// answer is what RoundTrip returns.
type answer struct {
	resp *http.Response
	err  error
}

func newExchange(req *http.Request) *exchange {
	ex := &exchange{req: req, answer: make(chan answer, 1)}
	// The handler's context is not the client's, as over a socket: a
	// deadline of the client's does not reach the server, which learns
	// only that the client went away.
	ex.ctx, ex.cancel = context.WithCancel(context.Background())
	ex.out, ex.outWrite = io.Pipe()
	if req.Body != nil && req.Body != http.NoBody {
		ex.body = newRequestBody(req)
	}
	ex.unlink = context.AfterFunc(req.Context(), func() { ex.abort(req.Context().Err()) })
	return ex
}

// abort ends the exchange as a broken connection does, err being what
// the client's reads of the answer's body return: the handler's context
// is cancelled, its reads of the request's body and its writes of the
// answer's fail.
func (ex *exchange) abort(err error) {
	ex.cancel()
	ex.outWrite.CloseWithError(err)
	if ex.body != nil {
		ex.body.abort()
	}
}

// serve runs h on the handler's request, then sends what it answered.
// The end runs deferred: a handler that calls runtime.Goexit (t.FailNow)
// ends the goroutine, which must break the connection still, as a panic
// does, not leave the client waiting for an answer.
func (ex *exchange) serve(h http.Handler) {
	r := ex.serverRequest()
	w := &responseWriter{ex: ex, req: r, header: make(http.Header), declared: -1}
	if ex.body != nil {
		ex.body.start()
	}
	returned := false
	defer func() {
		if returned {
			w.finish()
		} else {
			logPanic(r, recover()) // nil after a Goexit
			w.broken()
		}
		ex.cancel() // as net/http's server, once the handler has returned
		if ex.body != nil {
			ex.body.end()
		}
		ex.unlink()
	}()
	h.ServeHTTP(w, r)
	returned = true
}

// logPanic logs v, the value a handler of r panicked with, with its
// stack, as net/http's server does, but for http.ErrAbortHandler.
func logPanic(r *http.Request, v any) {
	if v != nil && v != http.ErrAbortHandler {
		log.Printf("asynchttptest: panic serving %s %s: %v\n%s", r.Method, r.RequestURI, v, debug.Stack())
	}
}

// clientOwnFields are the header fields net/http's client writes from the
// request's other fields (Host, ContentLength, TransferEncoding,
// Trailer), never from its Header.
var clientOwnFields = []string{"Host", "Content-Length", "Transfer-Encoding", "Trailer"}

// serverRequest returns the request the handler is given: the client's
// as a server reads it.
func (ex *exchange) serverRequest() *http.Request {
	req := ex.req
	uri := req.URL.RequestURI()
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		u = &url.URL{Path: req.URL.Path}
	}
	header := req.Header.Clone()
	if header == nil {
		header = make(http.Header)
	}
	for _, k := range clientOwnFields {
		delete(header, k)
	}
	if _, ok := header["User-Agent"]; !ok {
		header.Set("User-Agent", "Go-http-client/1.1")
	}
	if req.Close && !asksClose(header) { // as net/http's client writes it
		header.Add("Connection", "close")
	}
	r := &http.Request{
		Method: req.Method, URL: u, RequestURI: uri,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Host: req.Host, RemoteAddr: remoteAddr, Body: http.NoBody,
		Close: asksClose(header),
	}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	if req.URL.Scheme == "https" {
		r.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, ServerName: req.URL.Hostname()}
	}
	switch {
	case ex.body != nil && req.ContentLength > 0: // its trailers, if any, not sent
		r.Body, r.ContentLength = ex.body, req.ContentLength
		header.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	case ex.body != nil: // of unknown length: chunked, with its trailers
		r.Body, r.ContentLength, r.TransferEncoding, r.Trailer = ex.body, -1, []string{"chunked"}, ex.body.trailer
	case r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch:
		header.Set("Content-Length", "0")
	}
	return r.WithContext(ex.ctx)
}
