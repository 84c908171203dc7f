package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// runLogged runs the command's run with args on a loopback port until the
// test ends, and returns its URL and its log lines so far once it serves,
// with no time attribute.
func runLogged(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	url, end := startRun(t, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime})), args...)
	t.Cleanup(func() {
		if err := end(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="gateway serving"`) {
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %s", logs)
		}
		time.Sleep(time.Millisecond)
	}
	return url, logs
}

// startRun runs the command's run with args in this process, as main
// does, on a loopback listener, logging to logger. It returns the URL and
// end, which stops the command as SIGTERM does and returns run's error.
func startRun(t *testing.T, logger *slog.Logger, args ...string) (url string, end func() error) {
	t.Helper()
	o, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, o, ln, logger) }()
	return "http://" + ln.Addr().String(), func() error {
		stop()
		return <-ran
	}
}

// noTime leaves the time out of a log line, for tests that compare lines.
func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// closedPort returns a loopback address that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// An -upstream that nothing listens on is named by a warning at start; the
// gateway serves all the same, answering 502 ConnectError after the
// retries.
func TestUnreachableUpstreamIsLoggedAtStart(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			addr := closedPort(t)
			url, logs := runLogged(t, "-impl", impl, "-upstream", "http://"+addr)
			refused := `Get "http://` + addr + `/price?symbol=AAPL": dial tcp ` + addr + `: connect: connection refused`
			wantLines := []string{
				`level=WARN msg="upstream probe failed, serving anyway" upstream=http://` + addr + ` err="` + strings.ReplaceAll(refused, `"`, `\"`) + `"`,
				`level=INFO msg="gateway serving" addr=` + strings.TrimPrefix(url, "http://") + ` impl=` + impl +
					` try="curl 'http://` + strings.TrimPrefix(url, "http://") + `/quote?symbols=AAPL,MSFT,GOOG'"`,
			}
			if got := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
				t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
			}
			g := &testGateway{t: t, url: url}
			// The answer names the failure, not the upstream: that is for the
			// log.
			wantReply(t, "GET /quote", g.exchange(http.MethodGet, "/quote?symbols=AAPL"),
				jsonReply(502, errBody("ConnectError", "asynchttp: GET: connection refused")))
		})
	}
}

// An upstream that answers the probe with a price is not warned about;
// one that answers with another status is, and one that does not know the
// symbol probed with a hint: a wrong base URL answers 404.
func TestUpstreamProbeJudgesTheAnswer(t *testing.T) {
	const failed = `level=WARN msg="upstream probe failed, serving anyway" upstream=%s `
	for _, c := range []struct {
		status int
		warn   string
	}{
		{http.StatusOK, ""},
		{http.StatusNotFound, `level=WARN msg="upstream probe: AAPL is an unknown symbol, serving anyway: check the base URL" upstream=%s` + "\n"},
		{http.StatusServiceUnavailable, failed + `err="GET %s/price?symbol=AAPL: status 503"` + "\n"},
	} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.WriteHeader(c.status)
		}))
		// The probe waits min(-attempt-timeout, 1s): the default 250ms is
		// short for a loaded machine, where a late answer would be warned
		// about as a failure.
		_, logs := runLogged(t, "-upstream", up.URL, "-attempt-timeout", "10s", "-timeout", "20s")
		warn := strings.ReplaceAll(c.warn, "%s", up.URL)
		if first, _, _ := strings.Cut(logs.String(), `level=INFO msg="gateway serving"`); first != warn {
			t.Errorf("upstream answering %d: log before serving %q, want %q", c.status, first, warn)
		}
		up.Close()
	}
}

// The password of an -upstream's user information, which net/http sends
// to it, is in no log line: the probe's warning gives it as net/http's
// errors do, "***", whatever failed.
func TestUpstreamProbeLogsNoPassword(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != "gw" || pass != "s3cret" {
			t.Errorf("the upstream got the credentials %q, %q, %v", user, pass, ok)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer up.Close()
	withUser := strings.Replace(up.URL, "http://", "http://gw:s3cret@", 1)
	redacted := strings.Replace(up.URL, "http://", "http://gw:***@", 1)
	for _, c := range []struct{ name, upstream, warn string }{
		{"an answer of another status", withUser,
			`upstream=` + redacted + ` err="GET ` + redacted + `/price?symbol=AAPL: status 503"`},
		{"no answer", "http://gw:s3cret@" + closedPort(t), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, logs := runLogged(t, "-upstream", c.upstream, "-attempt-timeout", "10s", "-timeout", "20s")
			first, _, _ := strings.Cut(logs.String(), `level=INFO msg="gateway serving"`)
			if strings.Contains(first, "s3cret") || !strings.Contains(first, "upstream=http://gw:***@") || !strings.Contains(first, c.warn) {
				t.Errorf("log before serving %q, want the password as *** and %q", first, c.warn)
			}
		})
	}
}

// An upstream that answers the probe with 101 Switching Protocols, which
// the probe did not ask for, and keeps the connection open, delays the
// start by no more than any other answer: the probe reads no body past
// its Content-Length, and warns of the status.
func TestUpstreamProbeOfASwitchOfProtocols(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { switchProtocols(w) }))
	defer up.Close()
	_, logs := runLogged(t, "-upstream", up.URL, "-attempt-timeout", "10s", "-timeout", "20s")
	want := `level=WARN msg="upstream probe failed, serving anyway" upstream=` + up.URL + ` err="GET ` + up.URL + `/price?symbol=AAPL: status 101"` + "\n"
	if first, _, _ := strings.Cut(logs.String(), `level=INFO msg="gateway serving"`); first != want {
		t.Errorf("log before serving %q, want %q", first, want)
	}
}
