package asynchttptest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// timeline logs events at the bubble's time since its start.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	log   []event
}

type event struct {
	at   time.Duration
	what string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.log = append(tl.log, event{time.Since(tl.start), fmt.Sprintf(format, args...)})
}

// lines returns the events in the order of their times; those of one
// instant, which the scheduler orders as it likes, in the order of
// their text.
func (tl *timeline) lines() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	events := slices.Clone(tl.log)
	slices.SortStableFunc(events, func(a, b event) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return strings.Compare(a.what, b.what)
	})
	var lines []string
	for _, e := range events {
		lines = append(lines, fmt.Sprintf("%v %s", e.at, e.what))
	}
	return lines
}

// inBubble runs f in a synctest bubble, waits for the requests it made
// to end, and checks the timeline against the one f wants, and that no
// goroutine of the Transport is left.
func inBubble(t *testing.T, f func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string) {
	synctest.Test(t, func(t *testing.T) {
		tr := &asynchttptest.Transport{}
		tl := newTimeline()
		want := f(t, tr, tl)
		tr.Wait()
		synctest.Wait() // the goroutines of context.AfterFunc and time.AfterFunc
		if got := tl.lines(); !slices.Equal(got, want) {
			t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := transportGoroutines(); n != 0 {
			t.Errorf("%d goroutines of the Transport left", n)
		}
	})
}

// transportGoroutines counts the goroutines running the Transport's
// code: a handler's, a copy of a request's body, the function that
// breaks an exchange when the client's context ends, a read deadline's.
func transportGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "asynchttptest.(*") || strings.Contains(g, "asynchttptest.newExchange") {
			n++
		}
	}
	return n
}

// A handler slower than the client's timeout: the client's request ends
// with its timeout, at the virtual instant it falls due, and the handler
// sees its request's context cancelled then.
func TestTransportClientTimeoutEndsASlowHandler(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(time.Second):
				tl.add("handler answers")
				io.WriteString(w, "late")
			case <-r.Context().Done():
				tl.add("handler: %v", context.Cause(r.Context()))
			}
		})
		c := &http.Client{Transport: tr, Timeout: 100 * time.Millisecond}
		_, err := c.Get("http://upstream.test/slow")
		var ne net.Error
		tl.add("client: timeout=%v", errors.As(err, &ne) && ne.Timeout())
		return []string{"100ms client: timeout=true", "100ms handler: context canceled"}
	})
}

// A handler that streams its answer: the client reads each flushed part
// as it is sent, and its cancel ends the read in progress, with its
// context's error, and the handler's next write.
func TestTransportStreamsTheAnswerUntilTheClientCancels(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "tick %d\n", i); err != nil {
					tl.add("handler write: %v, context: %v", err, r.Context().Err())
					return
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					tl.add("handler flush: %v, context: %v", err, r.Context().Err())
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(250*time.Millisecond, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://upstream.test/ticks", nil)
		resp, err := tr.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewReader(resp.Body)
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				tl.add("client read: %v", err)
				break
			}
			tl.add("client read %q", line)
		}
		return []string{`0s client read "tick 0\n"`, `100ms client read "tick 1\n"`, `200ms client read "tick 2\n"`,
			"250ms client read: context canceled",
			"300ms handler flush: io: read/write on closed pipe, context: context canceled"}
	})
}

// A client that closes the answer's body before its end breaks the
// connection: the handler's context is cancelled at once, its next write
// fails.
func TestTransportBodyClosedEarlyCancelsTheHandler(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			tl.add("handler: %v", r.Context().Err())
			time.Sleep(10 * time.Millisecond)
			_, err := io.WriteString(w, "second") // held in the connection's buffer
			tl.add("handler write: %v, flush: %v", err, http.NewResponseController(w).Flush())
		})
		resp, err := tr.Client().Get("http://upstream.test/")
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, len("first"))
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		resp.Body.Close()
		return []string{"50ms handler: context canceled", "60ms handler write: <nil>, flush: io: read/write on closed pipe"}
	})
}

// The request's body is streamed: the handler reads each part as the
// client sends it; the client's cancel ends the handler's read in
// progress as a broken connection does.
func TestTransportStreamsTheRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cancelAt time.Duration
		want     []string
	}{
		{"whole", time.Hour, []string{`0s handler read "a"`, `100ms handler read "b"`,
			`200ms client: "done" <nil>`, "200ms handler read: EOF"}},
		{"client gone", 150 * time.Millisecond, []string{`0s handler read "a"`, `100ms handler read "b"`,
			"150ms client: context canceled", "150ms handler read: unexpected EOF, context: context canceled",
			"200ms client write: io: read/write on closed pipe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
				tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p := make([]byte, 10)
					for {
						n, err := r.Body.Read(p)
						if err != nil {
							if r.Context().Err() != nil {
								err = fmt.Errorf("%w, context: %v", err, r.Context().Err())
							}
							tl.add("handler read: %v", err)
							break
						}
						tl.add("handler read %q", p[:n])
					}
					io.WriteString(w, "done")
				})
				body, send := io.Pipe()
				sent := make(chan struct{})
				go func() {
					defer close(sent)
					for _, part := range []string{"a", "b"} {
						io.WriteString(send, part)
						time.Sleep(100 * time.Millisecond)
					}
					if _, err := send.Write(nil); err != nil {
						tl.add("client write: %v", err)
					}
					send.Close()
				}()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(tc.cancelAt, cancel)
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://upstream.test/", body)
				resp, err := tr.Client().Do(req)
				if err != nil {
					tl.add("client: %v", errors.Unwrap(err))
				} else {
					answer, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					tl.add("client: %q %v", answer, err)
				}
				<-sent
				return tc.want
			})
		})
	}
}

// A read deadline set with http.ResponseController ends the handler's
// read in progress when it passes, though the client sends nothing.
func TestTransportReadDeadlineEndsTheBodysRead(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
				t.Error(err)
			}
			_, err := io.ReadAll(r.Body)
			tl.add("handler read: deadline=%v", errors.Is(err, os.ErrDeadlineExceeded))
			w.WriteHeader(http.StatusRequestTimeout)
		})
		body, send := io.Pipe() // never written
		defer send.Close()
		resp, err := tr.Client().Post("http://upstream.test/", "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tl.add("client: %s", resp.Status)
		return []string{"50ms client: 408 Request Timeout", "50ms handler read: deadline=true"}
	})
}

// A handler that panics breaks the connection: the client gets io.EOF.
// A request the Transport cannot send fails with net/http's error.
func TestTransportErrors(t *testing.T) {
	tr := &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	})}
	for _, tc := range []struct{ url, want string }{
		{"http://upstream.test/", `Get "http://upstream.test/": EOF`},
		{"ftp://upstream.test/", `Get "ftp://upstream.test/": unsupported protocol scheme "ftp"`},
		{"http:///p", `Get "http:///p": http: no Host in request URL`},
	} {
		if _, err := tr.Client().Get(tc.url); err == nil || err.Error() != tc.want {
			t.Errorf("Get %s: %v, want %s", tc.url, err, tc.want)
		}
	}
	var zero asynchttptest.Transport
	if _, err := zero.Client().Get("http://upstream.test/"); err == nil ||
		err.Error() != `Get "http://upstream.test/": asynchttptest: Transport without a Handler` {
		t.Errorf("zero Transport: %v", err)
	}
	tr.Wait()
}

// A handler that calls runtime.Goexit (t.FailNow in a handler, say)
// breaks the connection at once, as a panic does: the client gets io.EOF
// if no answer was sent, else a body that ends with
// io.ErrUnexpectedEOF, not the end of its timeout; the copy of the
// request's body stops.
func TestTransportHandlerGoexitBreaksTheConnection(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/after-answer" {
				io.WriteString(w, "part")
				w.(http.Flusher).Flush()
			}
			runtime.Goexit()
		})
		c := &http.Client{Transport: tr, Timeout: time.Second}
		_, err := c.Post("http://upstream.test/before-answer", "text/plain", io.MultiReader(strings.NewReader("body")))
		tl.add("client before the answer: %v", err)
		resp, err := c.Get("http://upstream.test/after-answer")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tl.add("client after the answer: %q %v", body, err)
		return []string{
			`0s client after the answer: "part" unexpected EOF`,
			`0s client before the answer: Post "http://upstream.test/before-answer": EOF`,
		}
	})
}

// A handler may enable full duplex through http.ResponseController, as
// over HTTP/1 since Go 1.21: it reads the request's body after it has
// sent its answer, which a Transport always allows. Hijack and write
// deadlines are not supported.
func TestTransportResponseControllerFeatures(t *testing.T) {
	tr := &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		fmt.Fprintf(w, "full duplex: %v; ", rc.EnableFullDuplex())
		fmt.Fprintf(w, "flush: %v; ", rc.Flush())
		body, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "read %q %v; ", body, err)
		_, _, err = rc.Hijack()
		fmt.Fprintf(w, "hijack: %v; write deadline: %v", err, rc.SetWriteDeadline(time.Now().Add(time.Hour)))
	})}
	resp, err := tr.Client().Post("http://upstream.test/", "text/plain", strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.Wait()
	want := `full duplex: <nil>; flush: <nil>; read "ping" <nil>; hijack: feature not supported; write deadline: feature not supported`
	if string(got) != want || err != nil {
		t.Errorf("answer %q %v\nwant   %q", got, err, want)
	}
}

// A handler that sets a Content-Length and flushes the whole body, then
// goes on working: the client's read of the body ends at its length, as
// net/http's client ends it, not when the handler returns.
func TestTransportBodyOfItsLengthEndsBeforeTheHandler(t *testing.T) {
	inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
		tr.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush()
			time.Sleep(time.Second) // logs, cleans up
			tl.add("handler returns, context: %v", r.Context().Err())
		})
		resp, err := tr.Client().Get("http://upstream.test/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		tl.add("client read %q %v", body, err)
		resp.Body.Close()
		return []string{`0s client read "ok" <nil>`, "1s handler returns, context: <nil>"}
	})
}
