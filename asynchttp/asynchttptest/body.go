package asynchttptest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// requestBody is the body of the handler's request: the client's, copied
// through a pipe by a goroutine of its own, so that the handler's reads
// end when the request does, whatever the client's body does.
type requestBody struct {
	src           io.ReadCloser // the client's
	length        int64         // the client's ContentLength; 0 if unknown
	failed        chan error    // the error of a body that is not of length; buffered
	clientTrailer http.Header
	trailer       http.Header // the handler's request's, set at the end of the body
	r             *io.PipeReader
	w             *io.PipeWriter
	copied        chan struct{} // closed when the copy has stopped
	closeSrc      sync.Once

	mu    sync.Mutex
	timer *time.Timer // ends the reads at the read deadline
}

func newRequestBody(req *http.Request) *requestBody {
	b := &requestBody{src: req.Body, clientTrailer: req.Trailer, copied: make(chan struct{}), failed: make(chan error, 1)}
	b.length = max(req.ContentLength, 0)
	b.r, b.w = io.Pipe()
	if req.Trailer != nil && req.ContentLength <= 0 {
		b.trailer = make(http.Header, len(req.Trailer))
		for k := range req.Trailer {
			b.trailer[k] = nil
		}
	}
	return b
}

// start starts the copy of the client's body, on the handler's goroutine
// so that a bubble holds it.
func (b *requestBody) start() {
	go func() {
		defer close(b.copied)
		defer b.closeSource()
		if err := b.copy(); err != nil {
			b.w.CloseWithError(io.ErrUnexpectedEOF) // no-op once aborted: the abort's error stays
			return
		}
		for k := range b.trailer { // before the EOF the handler reads
			b.trailer[k] = b.clientTrailer[k]
		}
		b.w.Close()
	}()
}

// copy copies the client's body to the handler's. A body longer or
// shorter than the client's ContentLength fails the client's request as
// net/http's client fails it, told before the handler's read ends: the
// client gets that error, not the answer of a handler that read the body
// to its end.
func (b *requestBody) copy() error {
	if b.length == 0 {
		_, err := io.Copy(b.w, b.src)
		return err
	}
	n, err := io.Copy(b.w, io.LimitReader(b.src, b.length))
	if err != nil {
		return err
	}
	extra, err := io.Copy(io.Discard, b.src)
	if err != nil {
		return err
	}
	if n+extra != b.length {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", b.length, n+extra)
		b.failed <- err
	}
	return err
}

// Read reads the body as the client sends it.
func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.ErrClosedPipe {
		err = http.ErrBodyReadAfterClose
	}
	return n, err
}

// Close closes the body: later reads fail, and the copy stops.
func (b *requestBody) Close() error {
	b.r.CloseWithError(http.ErrBodyReadAfterClose)
	return nil
}

// abort fails the handler's reads as a broken connection does, and stops
// the copy: closing the client's body ends a read of it in progress.
func (b *requestBody) abort() {
	b.w.CloseWithError(io.ErrUnexpectedEOF)
	b.closeSource()
}

// end stops the copy once the handler has returned, and waits for it.
func (b *requestBody) end() {
	b.r.CloseWithError(http.ErrBodyReadAfterClose)
	b.closeSource()
	<-b.copied
	b.setReadDeadline(time.Time{})
}

func (b *requestBody) closeSource() { b.closeSrc.Do(func() { b.src.Close() }) }

// setReadDeadline makes the handler's reads fail with
// os.ErrDeadlineExceeded from t on, for good; a zero t sets none.
func (b *requestBody) setReadDeadline(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	switch wait := time.Until(t); {
	case t.IsZero():
	case wait > 0:
		b.timer = time.AfterFunc(wait, b.expire)
	default:
		b.expire()
	}
}

// expire ends the reads in progress and those to come: closing the
// pipe is what ends a read blocked on it.
func (b *requestBody) expire() { b.w.CloseWithError(os.ErrDeadlineExceeded) }

// responseBody is the body of the Response the client is given: the
// handler's answer, streamed through a pipe or held whole. Closed before
// its end, it breaks the connection, as net/http's client does.
type responseBody struct {
	ex        *exchange
	src       io.Reader
	remaining int64 // the bytes of a body of known length not read yet; -1 if unknown
	closed    atomic.Bool
	ended     atomic.Bool // read to its end: closing it breaks nothing
}

// errClientClosed is what the handler's writes see once the client has
// closed the body before its end.
var errClientClosed = errors.New("asynchttptest: the client closed the answer's body")

func (b *responseBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.remaining == 0 { // its whole length read: the handler need not have returned
		b.ended.Store(true)
		return 0, io.EOF
	}
	n, err := b.src.Read(p)
	if b.remaining >= 0 {
		b.remaining -= int64(n)
	}
	if err == io.EOF || b.remaining == 0 {
		b.ended.Store(true)
	}
	return n, err
}

func (b *responseBody) Close() error {
	if !b.closed.Swap(true) && !b.ended.Load() {
		b.ex.abort(errClientClosed)
	}
	return nil
}
