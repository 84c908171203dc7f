package asynchttptest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// responseWriter is the handler's http.ResponseWriter; net/http's
// server's rules are named in Transport's doc. Its methods are called on
// the handler's goroutine only, as for any ResponseWriter.
type responseWriter struct {
	ex       *exchange
	req      *http.Request // the handler's
	header   http.Header   // the handler's
	sent     http.Header   // the header as WriteHeader found it
	status   int           // 0 until WriteHeader
	declared int64         // the Content-Length the handler set; -1 if none
	written  int64
	buf      []byte         // the body held until the answer is sent
	resp     *http.Response // the answer, once sent
	stream   *bufio.Writer  // the answer's body, once sent streamed: net/http's connection's buffer
}

// bufferBeforeChunking is what net/http's server holds of a body before
// it sends the answer chunked.
const bufferBeforeChunking = 2048

// connectionBuffer is what net/http's server holds of an answer sent
// before it writes it to the connection: a handler's writes reach the
// client when it fills, when the handler flushes, or when it returns.
const connectionBuffer = 4096

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // net/http's
	}
	if w.status != 0 || code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		return // a superfluous call, or an informational answer the client skips
	}
	w.status = code
	w.sent = w.header.Clone()
	if cl := w.sent.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.declared = v
		}
		// An invalid one is left in the header, as net/http's server
		// leaves it: no Content-Length of its own is added, and the
		// answer is chunked, which drops it.
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declared >= 0 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	if w.resp == nil {
		w.buf = append(w.buf, p...)
		if len(w.buf) <= bufferBeforeChunking {
			return len(p), nil
		}
		if err := w.send(false); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if w.stream == nil {
		return len(p), nil // a HEAD's body, discarded
	}
	return w.stream.Write(p)
}

// Flush sends the answer, if not sent yet, and what the handler has
// written of its body.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush, for [http.ResponseController]: it returns the
// error of a client gone.
func (w *responseWriter) FlushError() error {
	if w.resp == nil {
		if err := w.send(false); err != nil {
			return err
		}
	}
	if w.stream == nil {
		return nil
	}
	return w.stream.Flush()
}

// SetReadDeadline sets the deadline of the reads of the request's body,
// for [http.ResponseController].
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	if w.ex.body != nil {
		w.ex.body.setReadDeadline(t)
	}
	return nil
}

// EnableFullDuplex, for [http.ResponseController], succeeds: the
// handler may read the request's body after it has sent its answer, as a
// Transport always allows.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// bodyAllowed reports whether an answer of status may have a body.
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

// suppressedFields are the header fields net/http's server does not send
// in an answer of status, which has no body.
func suppressedFields(status int) []string {
	switch {
	case status == http.StatusNotModified:
		return []string{"Content-Type", "Content-Length", "Transfer-Encoding"}
	case !bodyAllowed(status):
		return []string{"Content-Length", "Transfer-Encoding"}
	}
	return nil
}

// finish ends the answer once the handler has returned.
func (w *responseWriter) finish() {
	if w.resp == nil {
		w.send(true)
		return
	}
	if w.stream == nil {
		return
	}
	if w.stream.Flush() != nil {
		return // the client has gone
	}
	if w.declared >= 0 && w.written < w.declared {
		w.ex.outWrite.CloseWithError(io.ErrUnexpectedEOF)
		return
	}
	w.setTrailer()
	w.ex.outWrite.Close()
}

// broken ends the answer of a handler that panicked or called
// runtime.Goexit: net/http's server closes the connection. What the
// handler wrote since its last flush is lost (net/http's server may
// send a part of it, which a Transport does not tell apart).
func (w *responseWriter) broken() {
	if w.resp == nil {
		w.ex.answer <- answer{err: io.EOF}
		return
	}
	w.ex.outWrite.CloseWithError(io.ErrUnexpectedEOF)
}

// send sends the answer to the client, with what the handler has written
// of its body; done says that the handler has returned. The error is
// that of a client gone before it had read what the handler wrote.
func (w *responseWriter) send(done bool) error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	h := w.sent
	trailers := false
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			delete(h, k)
			trailers = true
		}
	}
	if _, ok := h["Trailer"]; ok {
		trailers = true
	}
	_, hasTE := h["Transfer-Encoding"]
	identity := hasTE && h.Get("Transfer-Encoding") == "identity"
	switch {
	case hasTE && !identity && w.declared >= 0: // net/http's server drops the length
		delete(h, "Content-Length")
		w.declared = -1
	case identity && w.declared >= 0: // and the identity, given a length
		delete(h, "Transfer-Encoding")
	}
	allowed, head := bodyAllowed(w.status), w.req.Method == http.MethodHead
	for _, k := range suppressedFields(w.status) {
		delete(h, k)
	}
	if _, ok := h["Content-Type"]; !ok && !hasTE && allowed && len(w.buf) > 0 {
		h.Set("Content-Type", http.DetectContentType(w.buf))
	}
	for k, v := range h {
		if len(v) == 0 {
			delete(h, k) // a key set to nil is not written
		}
	}
	if _, ok := h["Date"]; !ok {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	if _, ok := h["Content-Length"]; !ok && done && !trailers && !hasTE && allowed && (!head || len(w.buf) > 0) {
		h.Set("Content-Length", strconv.Itoa(len(w.buf)))
		w.declared = int64(len(w.buf))
	}
	w.resp = &http.Response{
		Status: statusLine(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Request: w.ex.req, ContentLength: w.declared, Body: http.NoBody,
	}
	switch {
	case head:
	case !allowed:
		w.resp.ContentLength = 0
	case w.declared == 0: // net/http's client gives an empty body so
	case done:
		w.resp.Body = &responseBody{ex: w.ex, src: w.heldBody(), remaining: w.declared}
	default:
		w.resp.Body = &responseBody{ex: w.ex, src: w.ex.out, remaining: w.declared}
		w.stream = bufio.NewWriterSize(w.ex.outWrite, connectionBuffer)
	}
	held := w.buf
	w.buf = nil
	switch {
	case w.resp.Body != http.NoBody && w.resp.ContentLength < 0 && identity:
		delete(h, "Transfer-Encoding") // its end is the connection's
		w.resp.Close = true
	case w.resp.Body != http.NoBody && w.resp.ContentLength < 0:
		w.chunked()
	}
	w.closeOnRequest()
	if done {
		w.setTrailer()
	}
	w.ex.answer <- answer{resp: w.resp}
	if w.stream == nil {
		return nil
	}
	// Written once the client has the answer: a body held longer than
	// the buffer waits for the client's reads.
	_, err := w.stream.Write(held)
	return err
}

// closeOnRequest sets the answer's Close, and drops its Connection
// field, when the handler asked the connection closed, as net/http's
// client reads such an answer.
func (w *responseWriter) closeOnRequest() {
	if asksClose(w.resp.Header) {
		w.resp.Close = true
		delete(w.resp.Header, "Connection")
	}
}

// asksClose reports whether h's Connection field has the token "close".
func asksClose(h http.Header) bool {
	for _, v := range h["Connection"] {
		for token := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "close") {
				return true
			}
		}
	}
	return false
}

// heldBody returns the reader of the body the handler wrote whole before
// it returned: one that stops short of its Content-Length ends with
// io.ErrUnexpectedEOF.
func (w *responseWriter) heldBody() io.Reader {
	held := strings.NewReader(string(w.buf))
	if w.declared > int64(len(w.buf)) {
		return io.MultiReader(held, failingReader{io.ErrUnexpectedEOF})
	}
	return held
}

// chunked makes the answer's header what net/http's client makes of a
// chunked one: the Transfer-Encoding in the Response's field, and the
// trailers declared in its Trailer, without values until the body ends.
func (w *responseWriter) chunked() {
	h := w.resp.Header
	w.resp.TransferEncoding = []string{"chunked"}
	h.Del("Transfer-Encoding")
	h.Del("Content-Length")
	declared, ok := h["Trailer"]
	if !ok {
		return
	}
	h.Del("Trailer")
	for _, v := range declared {
		for k := range strings.SplitSeq(v, ",") {
			switch k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				if w.resp.Trailer == nil {
					w.resp.Trailer = make(http.Header)
				}
				w.resp.Trailer[k] = nil
			}
		}
	}
}

// setTrailer sets the values of the answer's trailers, as net/http's
// client does once it has read the chunked body's end: those of the
// keys declared, from the handler's header as it is now, and those keyed
// with http.TrailerPrefix.
func (w *responseWriter) setTrailer() {
	if len(w.resp.TransferEncoding) == 0 {
		return // a body of known length has no trailers
	}
	for k := range w.resp.Trailer {
		if v, ok := w.header[k]; ok {
			w.resp.Trailer[k] = v
		}
	}
	for k, v := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if w.resp.Trailer == nil {
				w.resp.Trailer = make(http.Header)
			}
			w.resp.Trailer[http.CanonicalHeaderKey(name)] = v
		}
	}
}

// statusLine returns the Status of an answer of code, as net/http's
// client reads it.
func statusLine(code int) string {
	if text := http.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return fmt.Sprintf("%d status code %d", code, code)
}

// failingReader fails every read with its error.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
