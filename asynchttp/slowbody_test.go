package asynchttp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// readBodyFlow reads the request's body whole in an Await function, on the
// request's goroutine, and answers its length.
func readBodyFlow(as asyncsteps.AsyncSteps, req *http.Request) {
	as.Await(func(context.Context) (any, error) {
		b, err := io.ReadAll(req.Body)
		return len(b), err
	})
}

// postPartly sends, over a connection of its own to srv, a POST that
// announces a body of 10 bytes and sends 2 of them, and returns the
// connection, which then waits, with its reader.
func postPartly(t *testing.T, srv *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // before srv.Close, which waits for the request
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n01"); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// rawAnswer is an answer read from a connection: its status and body,
// whether it said "Connection: close", and whether the server then closed
// the connection.
type rawAnswer struct {
	status            int
	body              string
	saidClose, closed bool
}

// readRawAnswer reads the answer to the request sent on conn (see
// readHTTP1Answer), then whether the server closed conn after it.
func readRawAnswer(t *testing.T, conn net.Conn, r *bufio.Reader) rawAnswer {
	t.Helper()
	a := readHTTP1Answer(t, conn, r)
	return rawAnswer{a.status, a.body, a.saidClose, closedAfter(conn, r)}
}

// A flow that ends while its Await function, on the request's goroutine,
// reads a body that the client sends slowly is answered at once: the
// Handler ends the read. The answer waited for the client (here forever)
// however the flow ended: its Timeout, a sibling's failure, or the
// request's context cancelled. The connection, whose body is left unread,
// is closed after the answer.
func TestHandlerEndsASlowBodyReadWithItsFlow(t *testing.T) {
	loop := newLoop(t)
	upstreamDown := func(reading <-chan struct{}) asyncsteps.AwaitFunc {
		return func(context.Context) (any, error) {
			<-reading
			return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream down"}
		}
	}
	// readingBody reads the body whole, and says on reading when it has
	// read the first bytes, before it reads the rest.
	readingBody := func(req *http.Request, reading chan<- struct{}) asyncsteps.AwaitFunc {
		return func(context.Context) (any, error) {
			if _, err := io.ReadFull(req.Body, make([]byte, 2)); err != nil {
				return nil, err
			}
			close(reading)
			b, err := io.ReadAll(req.Body)
			return 2 + len(b), err
		}
	}
	cases := []struct {
		name     string
		timeout  time.Duration
		flow     func(as asyncsteps.AsyncSteps, req *http.Request)
		cancel   bool // the flow of cancelWhenReading, in place of flow
		status   int
		body     string
		code     string
		canceled bool
	}{
		{"Timeout", 100 * time.Millisecond, readBodyFlow, false,
			504, `{"error":"Timeout","info":"request timed out"}`, asyncsteps.Timeout, false},
		{"sibling failure", 0, func(as asyncsteps.AsyncSteps, req *http.Request) {
			reading := make(chan struct{})
			p := as.Parallel()
			p.Await(readingBody(req, reading))
			p.Await(upstreamDown(reading))
		}, false, 502, `{"error":"CommError","info":"upstream down"}`, asyncsteps.CommError, false},
		{"sibling failure recovered", 0, func(as asyncsteps.AsyncSteps, req *http.Request) {
			reading := make(chan struct{})
			p := as.Parallel(func(as asyncsteps.AsyncSteps, _ string) { as.Success("without the body") })
			p.Await(readingBody(req, reading))
			p.Await(upstreamDown(reading))
		}, false, 200, `"without the body"`, "", false},
		{"cancel", 0, nil, true,
			503, `{"error":"DefenseRejected","info":"request cancelled"}`, asyncsteps.DefenseRejected, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			var h http.Handler = &asynchttp.Handler{
				Tool: func() asyncsteps.Tool { return loop }, Timeout: c.timeout,
				Flow: c.flow, Done: outs.done, Logger: logger,
			}
			if c.cancel {
				h = cancelWhenReading(h.(*asynchttp.Handler))
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close) // after the client's connection is closed, which ends a read left running
			conn, r := postPartly(t, srv)
			got := readRawAnswer(t, conn, r)
			want := rawAnswer{c.status, c.body + "\n", true, true}
			if got != want {
				t.Errorf("answer %+v, want %+v", got, want)
			}
			waitFor(t, func() bool { return len(outs.get()) == 1 }, func() string { return "no Outcome" })
			o := outs.get()[0]
			if o.Status != c.status || o.Code != c.code || o.Cancelled != c.canceled {
				t.Errorf("Outcome %+v, want status %d, code %q, Cancelled %v", o, c.status, c.code, c.canceled)
			}
			if c.status != 200 && c.status != 503 && !strings.Contains(logs(), "status="+itoa(c.status)) {
				t.Errorf("logged %q, want the %d", logs(), c.status)
			}
		})
	}
}

// cancelWhenReading returns h with a middleware that gives each request
// a context of its own, which h's flow cancels once its Await function
// has read the first bytes of the body, before it reads the rest: a
// server's cancel of a request whose client is slow, which net/http's
// HTTP/1 server does not see while the body is read. The cancel ends the
// flow as the function waits for the rest or is about to.
func cancelWhenReading(h *asynchttp.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		hh := *h
		hh.Flow = func(as asyncsteps.AsyncSteps, req *http.Request) {
			as.Await(func(context.Context) (any, error) {
				if _, err := io.ReadFull(req.Body, make([]byte, 2)); err != nil {
					return nil, err
				}
				cancel()
				b, err := io.ReadAll(req.Body)
				return 2 + len(b), err
			})
		}
		hh.ServeHTTP(w, req.WithContext(ctx))
	})
}

// Over HTTP/2 the Handler ends the read of its stream's body alone: the
// 504 comes at Timeout, and the connection serves the next request.
func TestHandlerEndsASlowBodyReadOverHTTP2(t *testing.T) {
	loop := newLoop(t)
	var outs outcomes
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop }, Timeout: 100 * time.Millisecond,
		Flow: readBodyFlow, Done: outs.done, Logger: slog.New(slog.DiscardHandler),
	}
	srv, client, _ := serveProto(t, h, "HTTP/2.0")
	body, send := io.Pipe()
	t.Cleanup(func() { send.Close() }) // before srv.Close, which waits for the request
	go io.WriteString(send, "01")      // of the 10 bytes announced
	// The deadline only keeps a broken server from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 10
	var conns []bool
	trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { conns = append(conns, c.Reused) }}
	resp, err := client.Do(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":"Timeout","info":"request timed out"}` + "\n"
	if resp.Proto != "HTTP/2.0" || resp.StatusCode != 504 || string(answer) != want || err != nil {
		t.Errorf("%s %d %q (%v), want HTTP/2.0 504 %q", resp.Proto, resp.StatusCode, answer, err, want)
	}
	req, _ = http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, srv.URL, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatalf("next request: %v", err)
	}
	answer, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(answer) != "0\n" || fmt.Sprint(conns) != "[false true]" {
		t.Errorf("next request answered %d %q, connections reused %v; want 200 %q, [false true]", resp.StatusCode, answer, conns, "0\n")
	}
	o := outs.get()
	if len(o) != 2 || o[0].Status != 504 || o[0].Code != asyncsteps.Timeout || o[0].Cancelled {
		t.Errorf("Outcomes %+v, want a 504 Timeout not cancelled first", o)
	}
}

// A body the flow reads whole ends no read, nor does one it does not
// read (net/http discards it, as for any handler): the connection of
// HTTP/1 serves the next request, after an error answer as after a
// success.
func TestHandlerKeepsTheConnectionOfABodyReadWhole(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop }, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler),
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			if req.URL.Path != "/ignore" {
				readBodyFlow(as, req)
			}
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				if req.URL.Path != "/" {
					as.Error(asyncsteps.CommError, "upstream down")
				}
			})
		},
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	for _, path := range []string{"/fail", "/", "/ignore", "/fail"} {
		if _, err := io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n0123456789"); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		if want := map[string]int{"/": 204, "/fail": 502, "/ignore": 502}[path]; resp.StatusCode != want || resp.Close {
			t.Errorf("%s answered %d, closing %v; want %d on a connection kept", path, resp.StatusCode, resp.Close, want)
		}
	}
}

// slowReader gives one byte a second, of n.
type slowReader struct{ n int }

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(time.Second)
	r.n--
	p[0] = '0'
	return 1, nil
}

// A ResponseWriter without a read deadline (a ResponseRecorder, a wrapper
// that does not unwrap) leaves the read in progress at the flow's end
// running, but the next one fails at once: the 504 of a Timeout of 100ms
// comes at the end of the read then running, after 1s, not once the
// client has sent the whole body, after 10s. The flow's function, whose
// context is done by then and whose result goes nowhere, reads an error
// of the Handler's.
func TestHandlerEndsTheBodyWithoutADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var read []string // what each read of the flow's function returned
		h := &asynchttp.Handler{
			Tool: func() asyncsteps.Tool { return loop }, Timeout: 100 * time.Millisecond,
			Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
				as.Await(func(context.Context) (any, error) {
					for {
						n, err := req.Body.Read(make([]byte, 4))
						read = append(read, fmt.Sprint(n, " ", err))
						if err != nil {
							return nil, err
						}
					}
				})
			},
			Logger: slog.New(slog.DiscardHandler),
		}
		start := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", &slowReader{10}))
		if took := time.Since(start); w.Code != 504 || took != time.Second {
			t.Errorf("answered %d after %v, want 504 after 1s", w.Code, took)
		}
		want := "[1 <nil> 0 asynchttp: request body read after its flow ended]"
		if fmt.Sprint(read) != want {
			t.Errorf("reads %v, want %s", read, want)
		}
	})
}

// A flow that parses a multipart form whose file goes to a temporary file
// (ParseMultipartForm with no memory for files) leaves no file behind
// once the request is served, over HTTP/1 and HTTP/2: net/http removes
// the temporary files of the form of the request it gave the handler, not
// of the flow's copy. Done sees the form the flow parsed. Before, the
// flow's copy kept the form, and every such upload left a file in the
// temporary directory for good.
func TestHandlerLeavesNoTemporaryFileOfAMultipartForm(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			loop := newLoop(t)
			var doneForm []string
			h := &asynchttp.Handler{
				Tool: func() asyncsteps.Tool { return loop },
				Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
					as.Await(func(context.Context) (any, error) {
						if err := req.ParseMultipartForm(0); err != nil {
							return nil, err
						}
						return len(req.MultipartForm.File["upload"]), nil
					})
				},
				Done: func(req *http.Request, _ asynchttp.Outcome) {
					if req.MultipartForm != nil {
						doneForm = append(doneForm, req.FormValue("name"))
					}
				},
			}
			srv, client, _ := serveProto(t, h, proto)
			var form bytes.Buffer
			mw := multipart.NewWriter(&form)
			mw.WriteField("name", "report")
			fw, _ := mw.CreateFormFile("upload", "report.txt")
			io.WriteString(fw, strings.Repeat("0123456789", 100))
			mw.Close()
			resp, err := client.Post(srv.URL, mw.FormDataContentType(), &form)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(answer) != "1\n" {
				t.Errorf("answered %d %q, want 200 %q", resp.StatusCode, answer, "1\n")
			}
			srv.Close() // waits for the request's end, where net/http removes the files
			if files, _ := os.ReadDir(tmp); len(files) != 0 {
				t.Errorf("%d temporary files left: %v", len(files), files)
			}
			if fmt.Sprint(doneForm) != "[report]" {
				t.Errorf("Done saw the form values %v, want [report]", doneForm)
			}
		})
	}
}
