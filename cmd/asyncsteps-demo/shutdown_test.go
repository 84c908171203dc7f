package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// A client that sends requests and never reads the answers blocks its
// connection's write, which no context ends: the shutdown still ends, by
// closing that connection closeDelay after the grace period, and serve
// returns nil.
func TestShutdownClosesConnectionsNotRead(t *testing.T) {
	entered := make(chan struct{}, 1)
	chunk := make([]byte, 64<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		for range 1024 { // 64 MiB: far more than the sockets buffer
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	ln, stop, logs, served := serveInBackground(t, h, 50*time.Millisecond)
	defer stop()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-entered
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(closeDelay + 10*time.Second):
		t.Fatal("serve did not return: the shutdown waits for a client that does not read")
	}
	if !strings.Contains(logs.String(), `msg="closing the connections whose clients do not read their answers" after=1s`) {
		t.Errorf("log:\n%s", logs)
	}
}

// The server closes idle keep-alive connections and bounds the wait for
// a request's headers; it does not bound a request's reading (net/http
// would cancel requests served longer than that), nor its writing, which
// the routes bound but for the profiles (TestClientThatDoesNotReadIsDropped),
// and net/http's own answers too (TestClientThatDoesNotReadNetHTTPAnswerIsDropped).
func TestServerBoundsIdleConnections(t *testing.T) {
	srv := newServer(http.NotFoundHandler(), context.Background(), slog.New(slog.DiscardHandler))
	if srv.IdleTimeout != 2*time.Minute || srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("IdleTimeout %v, ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v; want 2m, 5s, 0, 0",
			srv.IdleTimeout, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
}

// A request that announces a body it never sends is answered all the
// same, and its connection closed, bodyWait after its headers: with an
// Expect: 100-continue, after the answer, or without, before it (net/http
// reads what is left of the body before it answers). A body that comes
// is read, and the connection serves the next request.
func TestServerAnswersRequestsWhoseBodyNeverComes(t *testing.T) {
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, req.URL.RawQuery)
	}), context.Background(), slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Type: text/plain; charset=utf-8\r\n"
	for _, c := range []struct{ name, request, want string }{
		{"no body", "GET /?1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", answer + "Connection: close\r\n\r\n1"},
		{"no body, chunked", "GET /?1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", answer + "Connection: close\r\n\r\n1"},
		{"no body after 100-continue", "GET /?1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", answer + "Connection: close\r\n\r\n1"},
		{"a body, then a request", "GET /?1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /?2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			answer + "\r\n1" + answer + "Connection: close\r\n\r\n2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(bodyWait + 10*time.Second))
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Errorf("%v after %q", err, got)
			}
			if s := dateHeader.ReplaceAllString(string(got), ""); s != c.want {
				t.Errorf("got %q, want %q", s, c.want)
			}
		})
	}
}

// -serve-upstream: a price request still waiting for its latency when the
// grace period ends is answered 503, which the gateway retries, not the
// empty 200 that net/http sends for a handler that writes nothing, which
// the gateway would take for a broken upstream (502, not retried).
func TestServeUpstreamAnswers503AfterGrace(t *testing.T) {
	o, err := parseFlags([]string{"-serve-upstream", "-upstream-latency", "1h", "-upstream-fail", "0", "-grace", "10ms"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, o, ln, slog.New(slog.DiscardHandler)) }()
	got := getAsync(url + "/price?symbol=AAPL")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var c upstreamCounters
		getJSON(t, url+"/counters", &c)
		if c.InFlight == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the price request never arrived: %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	wantAnswer(t, <-got, http.StatusServiceUnavailable, "", "shutting down\n")
	if err := <-ran; err != nil {
		t.Errorf("run: %v", err)
	}
}

// A signal while the command starts, before it serves, stops it as one
// while it serves does: run returns nil (exit status 0), not the failure
// of the step it stopped, here the connection to Redis.
func TestRunStoppedWhileStartingIsNoFailure(t *testing.T) {
	o, err := parseFlags([]string{"-redis", closedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	stop() // the signal came before Redis answered
	logs := &syncBuffer{}
	if err := run(ctx, o, ln, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Errorf("run: %v, want nil", err)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="stopped before serving"`) {
		t.Errorf("log:\n%s", logs)
	}
}

// A second signal during the grace period ends the process at once, with
// the status a shell gives a process killed by it, the request in flight
// left unanswered: SIGTERM's 143, and SIGINT's 130 even when SIGINT was
// ignored at the process's start (nohup, a shell script's background),
// which giving the signal back its default action would restore.
func TestMainSecondSignalEndsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		sig    syscall.Signal
		status int
		shell  string // runs the program as "$0"
	}{
		{"SIGTERM", syscall.SIGTERM, 143, `exec "$0"`},
		{"SIGINT ignored at start", syscall.SIGINT, 130, `trap '' INT; exec "$0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			arrived := make(chan struct{}, 2)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				arrived <- struct{}{}
				<-req.Context().Done()
			}))
			t.Cleanup(up.Close) // after the program is killed, which holds its requests
			args := []string{"-addr", "127.0.0.1:0", "-upstream", up.URL, "-grace", "1h", "-timeout", "2h", "-attempt-timeout", "1h"}
			cmd := exec.Command("sh", "-c", c.shell, os.Args[0])
			cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))
			p := startCommand(t, cmd)
			got := getAsync(p.url + "/quote?symbols=AAPL")
			<-arrived // the probe's
			<-arrived // the request's
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(p.logs.String(), `msg="shutting down" grace=1h0m0s`) {
				if time.Now().After(deadline) {
					t.Fatalf("no shutdown logged:\n%s", p.logs)
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(sameStopRequest) // or it is the first one again
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			// Its line read before Wait, which closes the pipe it comes by.
			want := fmt.Sprintf(`level=WARN msg="second signal: exiting at once" signal=%s status=%d`, c.sig.String(), c.status)
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.logs.String(), want); {
				if time.Now().After(deadline) {
					t.Fatalf("no exit logged 10s after a second %v; log:\n%s\nwant a line with %s", c.sig, p.logs, want)
				}
				time.Sleep(time.Millisecond)
			}
			err := p.cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != c.status {
				t.Errorf("after a second %v: %v, want exit status %d; log:\n%s", c.sig, err, c.status, p.logs)
			}
			if a := <-got; !strings.HasPrefix(a.body, "error: ") {
				t.Errorf("the request in flight got %+v, want no answer", a)
			}
		})
	}
}

// A signal that comes less than sameStopRequest after the first is the
// same request to stop, as timeout(1) sends it to its command and then to
// the command's process group: logged, and no second signal. The first
// that comes later is the second.
func TestSignalAgainAtOnceIsTheSameStop(t *testing.T) {
	first := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	var clock time.Time
	signals := make(chan os.Signal, 3)
	arrive := func(sig os.Signal, after time.Duration) {
		clock = first.Add(after)
		signals <- sig
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime}))
	done := make(chan os.Signal)
	arrive(syscall.SIGTERM, 0)
	arrive(syscall.SIGINT, sameStopRequest-time.Nanosecond)
	go func() { done <- secondSignal(signals, first, func() time.Time { return clock }, logger) }()
	for !strings.Contains(logs.String(), "signal=interrupt") {
		time.Sleep(time.Millisecond)
	}
	arrive(syscall.SIGINT, sameStopRequest)
	if sig := <-done; sig != syscall.SIGINT {
		t.Errorf("second signal %v, want interrupt", sig)
	}
	want := `level=INFO msg="signal again at once: the same request to stop" signal=terminated` + "\n" +
		`level=INFO msg="signal again at once: the same request to stop" signal=interrupt` + "\n"
	if got := logs.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

// When the grace period is over, the log line that says so gives the
// number of requests it cancels: those still in a handler.
func TestShutdownLogsTheRequestsLeft(t *testing.T) {
	const requests = 3
	entered := make(chan struct{}, requests)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		entered <- struct{}{}
		<-req.Context().Done() // ends only when cancelled
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ln, stop, logs, served := serveInBackground(t, h, 10*time.Millisecond)
	defer stop()
	answered := make(chan int, requests)
	for range requests {
		go func() {
			resp, err := http.Get("http://" + ln.Addr().String())
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
	}
	for range requests {
		<-entered
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	for range requests {
		if status := <-answered; status != http.StatusServiceUnavailable {
			t.Errorf("a request cancelled: %d, want 503", status)
		}
	}
	if want := `level=WARN msg="grace period over: cancelling the requests left" n=3`; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %s", logs, want)
	}
}

// With -shutdown-delay, the gateway answers /readyz 503 from the signal
// on, and still serves for the delay: a load balancer polling the probe
// sees it and stops sending requests before the listener closes. A quote
// asked meanwhile is served. Then serve shuts down and returns nil.
func TestShutdownDelayServesOnNotReady(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			url, _, gw, shutdown := delayedShutdownGateway(t, impl, time.Second, 3*time.Second)
			if got := <-getAsync(url + "/readyz"); got.status != http.StatusOK {
				t.Fatalf("/readyz before the signal: %d %s", got.status, got.body)
			}
			served := shutdown()
			for deadline := time.Now().Add(5 * time.Second); !gw.stopping.Load(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("serve did not mark the gateway stopping as its shutdown began")
				}
			}
			want := errBody("ShuttingDown", "the gateway is shutting down")
			if got := <-getAsync(url + "/readyz"); got.status != http.StatusServiceUnavailable || got.body != want {
				t.Errorf("/readyz during the delay: %d %s, want 503 %s", got.status, got.body, want)
			}
			if got := <-getAsync(url + "/quote?symbols=AAPL"); got.status != http.StatusOK {
				t.Errorf("a quote during the delay: %d %s, want 200", got.status, got.body)
			}
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// serveInBackground serves h on a loopback port with grace, as the
// command does, until stop; served gives serve's result, logs its log.
func serveInBackground(t *testing.T, h http.Handler, grace time.Duration) (ln net.Listener, stop context.CancelFunc, logs *syncBuffer, served <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	result := make(chan error, 1)
	go func() {
		result <- serve(ctx, ln, h, grace, slog.New(slog.NewTextHandler(logs, nil)), nil)
	}()
	return ln, stop, logs, result
}

// At shutdown the flows gateway closes its loops, then waits until the
// upstream requests of the flows it cancelled have returned, and logs how
// long that took. A request cancelled as the grace period ends (as serve
// cancels it) asks for AAPL and MSFT: AAPL's upstream call, the flow's
// first Await function, runs on the request's goroutine, which its answer
// waits for; MSFT's on a goroutine of a loop, which nothing waited for
// before the loops closed. When MSFT's call heeds its context, the wait
// takes no time (the bubble's clock stands still) and leaves no goroutine
// behind; when it ignores its context for 300ms, the close waits for it
// that long. When it ignores its context for an hour, the close gives up
// after loopsWait, says so, and returns while that call still runs, the
// one goroutine left, until it returns.
func TestShutdownWaitsForTheUpstreamCallsOfItsLoops(t *testing.T) {
	for _, c := range []struct {
		name string
		deaf time.Duration // how long MSFT's call ignores its context
		log  string
	}{
		{"heeding", 0, `level=INFO msg="loops closed: every Await function has returned" took=0s`},
		{"ignoring its context within the bound", 300 * time.Millisecond,
			`level=INFO msg="loops closed: every Await function has returned" took=300ms`},
		{"ignoring its context", time.Hour,
			`level=WARN msg="loops closed: Await functions still running, exiting without them" after=1s err="context deadline exceeded"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				before := bubbleGoroutines()
				up := &stallingUpstream{arrived: make(chan string, 2), deaf: map[string]time.Duration{"MSFT": c.deaf}}
				cfg := testConfig()
				cfg.Upstream = "http://upstream.invalid" // up answers, with no I/O in the bubble
				logs := &syncBuffer{}
				logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime}))
				gw, closeGateway := newGatewayWith("flows", cfg, logger, &http.Client{Transport: up})
				base, cancelAll := context.WithCancelCause(context.Background())
				rec := httptest.NewRecorder()
				served := make(chan struct{})
				go func() {
					defer close(served)
					gw.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/quote?symbols=AAPL,MSFT", nil).WithContext(base))
				}()
				<-up.arrived
				<-up.arrived
				cancelAll(errShutdown)
				<-served
				wantAnswer(t, answer{rec.Code, rec.Header().Get("Retry-After"), rec.Body.String()},
					http.StatusServiceUnavailable, "1", errBody("DefenseRejected", "request cancelled"))
				start := time.Now()
				closeGateway()
				if took, want := time.Since(start), min(c.deaf, loopsWait); took != want {
					t.Errorf("the close took %v, want %v", took, want)
				}
				if got := logs.String(); got != c.log+"\n" {
					t.Errorf("log:\n%s\nwant:\n%s", got, c.log)
				}
				synctest.Wait() // the goroutines Wait waited for have exited
				left := 0
				if c.deaf > loopsWait {
					left = 1 // the goroutine running MSFT's call
				}
				if n := bubbleGoroutines(); n != before+left {
					t.Errorf("%d goroutines in the bubble after the close, %d before; want %d more", n, before, left)
				}
				time.Sleep(c.deaf) // MSFT's call returns; the bubble ends once its goroutine has
			})
		})
	}
}

// stallingUpstream answers the gateway's upstream requests in a
// testing/synctest bubble, without I/O: it sends each request's symbol
// on arrived, then waits for the request's context to end and fails it,
// after ignoring that context for deaf[symbol].
type stallingUpstream struct {
	arrived chan string
	deaf    map[string]time.Duration
}

func (u *stallingUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	symbol := req.URL.Query().Get("symbol")
	u.arrived <- symbol
	time.Sleep(u.deaf[symbol])
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// bubbleGoroutines counts the goroutines of the calling goroutine's
// testing/synctest bubble.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), ", synctest bubble ")
}
