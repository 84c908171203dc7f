package asynchttptest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// The answers a Transport gives are net/http's: each handler here is
// served once by an httptest.Server through net/http's client, once by a
// Transport, and the two Responses, summed up, must be the same.
func TestTransportAnswersAsNetHTTP(t *testing.T) {
	large := strings.Repeat("a", 3000)
	for _, tc := range []struct {
		name    string
		method  string
		handler http.HandlerFunc
	}{
		{"small body", "GET", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }},
		{"typed", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "{}")
		}},
		{"header changed after WriteHeader", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Early", "1")
			w.WriteHeader(http.StatusAccepted)
			w.Header().Set("X-Late", "1")
			io.WriteString(w, "x")
		}},
		{"larger than the buffer", "GET", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, large) }},
		{"flushed", "GET", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		}},
		{"nothing written", "GET", func(w http.ResponseWriter, r *http.Request) {}},
		{"flushed at a Content-Length of 0", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "0")
			w.(http.Flusher).Flush()
		}},
		{"404 without a body", "GET", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }},
		{"204", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); err != http.ErrBodyNotAllowed {
				panic(err)
			}
		}},
		{"informational first", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "x")
		}},
		{"declared trailer", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Sum, X-Unset")
			io.WriteString(w, "abc")
			w.Header().Set("X-Sum", "3")
		}},
		{"prefixed trailer", "GET", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "abc")
			w.(http.Flusher).Flush()
			w.Header().Set(http.TrailerPrefix+"X-Late", "1")
		}},
		{"short of its Content-Length", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "abc")
		}},
		{"past its Content-Length", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2")
			if _, err := io.WriteString(w, "abc"); err != http.ErrContentLength {
				panic(err)
			}
			io.WriteString(w, "ab")
		}},
		{"Content-Type suppressed", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			io.WriteString(w, "<html>")
		}},
		{"Connection close", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "x")
		}},
		{"invalid Content-Length", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "abc")
			io.WriteString(w, "x")
		}},
		{"Transfer-Encoding set", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Transfer-Encoding", "chunked")
			io.WriteString(w, "x")
		}},
		{"Transfer-Encoding identity", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Transfer-Encoding", "identity")
			io.WriteString(w, "x")
		}},
		{"Transfer-Encoding identity with a Content-Length", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Transfer-Encoding", "identity")
			w.Header().Set("Content-Length", "1")
			io.WriteString(w, "x")
		}},
		{"204 with a length", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(http.StatusNoContent)
		}},
		{"304 with a type", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(http.StatusNotModified)
		}},
		{"Date set", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
			io.WriteString(w, "x")
		}},
		{"Content-Length and Transfer-Encoding", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1")
			w.Header().Set("Transfer-Encoding", "chunked")
			io.WriteString(w, "x")
		}},
		{"HEAD with a Content-Length", "HEAD", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
		}},
		{"HEAD", "HEAD", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }},
		{"HEAD without a body", "HEAD", func(w http.ResponseWriter, r *http.Request) {}},
		{"unknown status", "GET", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(799) }},
		{"aborted before the answer", "GET", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "lost")
			panic(http.ErrAbortHandler)
		}},
		{"aborted in the body", "GET", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b") // buffered, lost
			panic(http.ErrAbortHandler)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			want := summary(srv.Client(), tc.method, srv.URL)
			tr := &asynchttptest.Transport{Handler: tc.handler}
			got := summary(tr.Client(), tc.method, "http://upstream.test")
			tr.Wait()
			if got != want {
				t.Errorf("Transport:\n%s\nnet/http:\n%s", got, want)
			}
		})
	}
}

// summary sends a request with c and sums up its Response, read whole:
// every field a client reads, the Date's value left out.
func summary(c *http.Client, method, url string) string {
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Sprintf("error io.EOF=%v", errors.Is(err, io.EOF))
	}
	defer resp.Body.Close()
	noBody := resp.Body == http.NoBody
	body, err := io.ReadAll(resp.Body)
	date := resp.Header.Get("Date") != ""
	resp.Header.Del("Date")
	return fmt.Sprintf("%q %s CL=%d TE=%v Close=%v\nheader %s date=%v\nbody %q err=%v NoBody=%v\ntrailer %s",
		resp.Status, resp.Proto, resp.ContentLength, resp.TransferEncoding, resp.Close,
		sorted(resp.Header), date, body, err, noBody, sorted(resp.Trailer))
}

func sorted(h http.Header) string {
	if h == nil {
		return "nil"
	}
	var kv []string
	for k, v := range h {
		kv = append(kv, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, " ") + "}"
}

// The handler's request is the one net/http's server reads: each request
// here is sent to an httptest.Server and to a Transport, and what the
// handler saw of it must be the same (but for its host and remote
// address).
func TestTransportRequestAsNetHTTP(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		h := r.Header.Clone()
		h.Del("Accept-Encoding") // the client's transport's own
		fmt.Fprintf(w, "%s %q %s CL=%d TE=%v tls=%v close=%v\nheader %s\nbody %q err=%v\ntrailer %s",
			r.Method, r.RequestURI, r.Proto, r.ContentLength, r.TransferEncoding, r.TLS != nil, r.Close,
			sorted(h), body, err, sorted(r.Trailer))
	})
	type request struct {
		method, target string
		body           func() io.Reader
		trailer        http.Header
		header         http.Header // set as it is, beside X-Mine
		close          bool        // the request's Close
	}
	for _, tc := range []struct {
		name string
		req  request
	}{
		{"GET with a query", request{"GET", "/a/b?x=1&y=%20", nil, nil, nil, false}},
		{"POST of known length", request{"POST", "/p", func() io.Reader { return strings.NewReader("abc") }, nil, nil, false}},
		{"POST of unknown length", request{"POST", "/p", func() io.Reader { return io.MultiReader(strings.NewReader("abc")) }, nil, nil, false}},
		{"POST without a body", request{"POST", "/p", nil, nil, nil, false}},
		{"PUT with trailers", request{"PUT", "/p", func() io.Reader { return io.MultiReader(strings.NewReader("abc")) }, http.Header{"X-Sum": {"3"}}, nil, false}},
		{"PUT of known length with trailers", request{"PUT", "/p", func() io.Reader { return strings.NewReader("abc") }, http.Header{"X-Sum": {"3"}}, nil, false}},
		{"Connection close", request{"GET", "/", nil, nil, http.Header{"Connection": {"close"}}, false}},
		{"Close", request{"GET", "/", nil, nil, nil, true}},
		{"fields the client writes itself", request{"POST", "/p", func() io.Reader { return strings.NewReader("abc") }, nil,
			http.Header{"Host": {"other.test"}, "Content-Length": {"7"}, "Transfer-Encoding": {"chunked"}, "Trailer": {"X-Sum"}}, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := func(c *http.Client, base string) string {
				var body io.Reader
				if tc.req.body != nil {
					body = tc.req.body()
				}
				req, _ := http.NewRequest(tc.req.method, base+tc.req.target, body)
				req.Header.Set("X-Mine", "1")
				for k, v := range tc.req.header {
					req.Header[k] = v
				}
				req.Close = tc.req.close
				if tc.req.trailer != nil {
					req.Trailer = http.Header{}
					for k := range tc.req.trailer {
						req.Trailer[k] = nil
					}
					req.Body = trailerBody{req.Body, req.Trailer, tc.req.trailer}
				}
				resp, err := c.Do(req)
				if err != nil {
					return err.Error()
				}
				defer resp.Body.Close()
				answer, _ := io.ReadAll(resp.Body)
				return string(answer)
			}
			srv := httptest.NewServer(echo)
			defer srv.Close()
			want := send(srv.Client(), srv.URL)
			tr := &asynchttptest.Transport{Handler: echo}
			got := send(tr.Client(), "http://upstream.test")
			tr.Wait()
			if got != want {
				t.Errorf("Transport:\n%s\nnet/http:\n%s", got, want)
			}
		})
	}
}

// trailerBody sets the request's trailers as its body ends, as a client
// that sends trailers does.
type trailerBody struct {
	io.ReadCloser
	trailer, values http.Header
}

func (b trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		for k, v := range b.values {
			b.trailer[k] = v
		}
	}
	return n, err
}

// A request whose body is longer or shorter than its ContentLength fails
// with net/http's client's error; the handler's read of its body ends
// with io.ErrUnexpectedEOF, as when the client breaks the connection.
func TestTransportRequestContentLengthMismatch(t *testing.T) {
	echo := func(read chan<- string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			read <- fmt.Sprintf("%q %v", body, err)
			io.WriteString(w, "read")
		}
	}
	for _, declared := range []int64{2, 5} {
		send := func(c *http.Client, base string) string {
			req, _ := http.NewRequest("POST", base+"/p", io.NopCloser(strings.NewReader("abc")))
			req.ContentLength = declared
			resp, err := c.Do(req)
			if err != nil {
				return strings.Replace(err.Error(), base, "URL", 1)
			}
			resp.Body.Close()
			return resp.Status
		}
		srv := httptest.NewServer(echo(make(chan string, 10)))
		want := send(srv.Client(), srv.URL)
		srv.Close()
		read := make(chan string, 1)
		tr := &asynchttptest.Transport{Handler: echo(read)}
		got := send(tr.Client(), "http://upstream.test")
		tr.Wait()
		if got != want {
			t.Errorf("ContentLength %d: Transport: %s\nnet/http: %s", declared, got, want)
		}
		if r := <-read; !strings.HasSuffix(r, " unexpected EOF") {
			t.Errorf("ContentLength %d: the handler read %s, want io.ErrUnexpectedEOF", declared, r)
		}
	}
}
