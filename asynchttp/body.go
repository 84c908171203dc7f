package asynchttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// requestBody is the Body of the request a Handler gives its flow when the
// request has a body: the request's own, which the flow's end ends. A read
// of the body waits for the client and ignores the context of the Await
// function that reads it, and the request's goroutine, which runs that
// function (see [asyncsteps.Root.RunHelping]), answers only once it has
// returned: a slow client would hold the answer for as long as it holds
// the read. So as the flow ends, however it ends, the reads of a body it
// began to read and did not read whole end: one in progress with the
// connection's read deadline, any later one at once (see Request bodies in
// the package documentation).
type requestBody struct {
	req  http.Request // the flow's request: the request's, with this Body
	body io.ReadCloser
	w    http.ResponseWriter
	// atEnd is what watchEnd gives the engine: end, as the flow ends.
	atEnd toolinfo.FlowEnd
	// state counts the reads in progress, with the bits below.
	state atomic.Uint32
	// deadlineSet is set by end when it set the connection's read
	// deadline, and cancelledFirst if the request's context had been
	// cancelled then (see cancelled). Both are written on the flow's loop
	// before its outcome is delivered, and read once RunHelping returns.
	deadlineSet, cancelledFirst bool
}

// The bits of requestBody.state above the count of reads in progress.
const (
	bodyRead  = 1 << 29 // a read has begun
	bodyEOF   = 1 << 30 // a read returned io.EOF: the body is read whole
	bodyEnded = 1 << 31 // the flow has ended: later reads fail
)

// errBodyEnded is what a read of the body returns once the flow has ended:
// the Await function that reads it has had its context cancelled, and
// what it returns is dropped.
var errBodyEnded = errors.New("asynchttp: request body read after its flow ended")

// testHookBodyRead, set by a test, runs in requestBody.Read once the
// request's body has returned from a read, before the read counts as done.
var testHookBodyRead func()

// flowRequest returns the request to give the flow that serves req, and
// its requestBody; req itself, and nil, when req has no body, at no cost.
// Over HTTP/1, net/http gives a request without a body http.NoBody; over
// HTTP/2 a body of its own, whose ContentLength, 0, tells it.
func flowRequest(w http.ResponseWriter, req *http.Request) (*http.Request, *requestBody) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
		return req, nil
	}
	b := &requestBody{req: *req, body: req.Body, w: w}
	b.req.Body = b
	return &b.req, b
}

// bodyOf returns the requestBody of req if flowRequest made req, else nil.
func bodyOf(req *http.Request) *requestBody {
	if b, ok := req.Body.(*requestBody); ok && &b.req == req {
		return b
	}
	return nil
}

// watchEnd has end run as the flow of as, whose first step calls it,
// ends: the engine keeps it beside what package cabi has it run there, in
// a flow whose Go steps were given to C.
func (b *requestBody) watchEnd(as asyncsteps.AsyncSteps) {
	b.atEnd.Fn = b.end
	toolinfo.AtFlowEnd(as, &b.atEnd)
}

// Read reads the request's body, unless the flow has ended.
func (b *requestBody) Read(p []byte) (int, error) {
	for {
		s := b.state.Load()
		if s&bodyEnded != 0 {
			return 0, errBodyEnded
		}
		if b.state.CompareAndSwap(s, (s+1)|bodyRead) {
			break
		}
	}
	n, err := b.body.Read(p)
	if testHookBodyRead != nil {
		testHookBodyRead()
	}
	if err == io.EOF {
		b.state.Or(bodyEOF)
	}
	if b.state.Add(^uint32(0))&bodyEnded != 0 && err != nil && err != io.EOF {
		err = errBodyEnded // the deadline's, not the client's
	}
	return n, err
}

// Close closes the request's body.
func (b *requestBody) Close() error { return b.body.Close() }

// end ends the reads of the body as the flow ends, inside the engine on
// the flow's loop, before its outcome is delivered: a cancel of the
// request's context that the deadline brings about (see cancelled) comes
// too late to change it. A body the flow began to read and did not read
// whole is abandoned: a read in progress ends with the connection's read
// deadline (which a ResponseWriter that has none, an
// httptest.ResponseRecorder or a wrapper without Unwrap, leaves running),
// and over HTTP/1 the deadline fails net/http's discard of the rest once
// the flow is answered, which would wait for the client: the connection
// is closed after the answer instead (see closeIfEnded). A body read
// whole needs nothing; one never read is net/http's to discard, as for
// any handler. Any read that starts later fails at once.
func (b *requestBody) end() {
	s := b.state.Or(bodyEnded)
	if s&bodyRead == 0 || s&(bodyEOF|bodyEnded) != 0 {
		return
	}
	b.cancelledFirst = cancelled(b.req.Context())
	b.deadlineSet = setReadDeadline(b.w, time.Now())
}

// setReadDeadline sets the read deadline of w and reports whether it did.
// A panic in a ResponseWriter's method (a middleware's) is its failure:
// it runs inside the engine, which must not see it.
func setReadDeadline(w http.ResponseWriter, t time.Time) (set bool) {
	defer func() {
		if recover() != nil {
			set = false
		}
	}()
	return http.NewResponseController(w).SetReadDeadline(t) == nil
}

// cancelled reports whether the request of ctx was cancelled as its flow
// ended (see the function cancelled), b being its requestBody or nil.
// Once end has set the connection's read deadline, a cancel that comes
// after is the Handler's own: over HTTP/1, net/http cancels the request's
// context when a read of the connection fails, as the one the deadline
// ends does. Only a cancel that came before counts then.
func (b *requestBody) cancelled(ctx context.Context) bool {
	if b != nil && b.deadlineSet {
		return b.cancelledFirst
	}
	return cancelled(ctx)
}

// giveForm gives req what the flow parsed of the form of its copy
// (ParseForm, ParseMultipartForm, FormValue), as if the flow had been
// given req: net/http removes the temporary files of a multipart form
// once the handler returns only through the request it gave the handler,
// and Done, given req, sees the form.
func (b *requestBody) giveForm(req *http.Request) {
	if b != nil {
		req.Form, req.PostForm, req.MultipartForm = b.req.Form, b.req.PostForm, b.req.MultipartForm
	}
}

// closeIfEnded asks net/http to close an HTTP/1 connection after the
// answer once end has set its read deadline. The read the deadline failed
// cancelled the connection's context, which every later request of the
// connection would be given; net/http itself closes it only if its
// discard of the body fails, which a read that had just got the body's
// last bytes as the deadline came leaves nothing to fail.
func (b *requestBody) closeIfEnded(w http.ResponseWriter, req *http.Request) {
	if b != nil && b.deadlineSet && req.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}
