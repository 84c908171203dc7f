package asynchttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A 204 or a 304 has no body: it is answered without one and without the
// headers that announce one, over HTTP/1 and HTTP/2 alike, whatever the
// Reply or the error answer carried. net/http's HTTP/2 server sent the
// Content-Length the Handler set, and a client then waited for a body the
// stream never had: Go's client failed with unexpected EOF.
func TestHandlerAnswersNoBodyStatusesWithoutALength(t *testing.T) {
	loop := newLoop(t)
	reply := func(r *asynchttp.Reply) func(as asyncsteps.AsyncSteps, _ *http.Request) {
		return func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(r) }
	}
	cases := []struct {
		name   string
		flow   func(as asyncsteps.AsyncSteps, _ *http.Request)
		status int
	}{
		{"no argument", func(asyncsteps.AsyncSteps, *http.Request) {}, 204},
		{"Reply 204", reply(&asynchttp.Reply{Status: 204}), 204},
		{"Reply 204 with a body", reply(&asynchttp.Reply{Status: 204, Body: []byte("lost")}), 204},
		{"Reply 304 with a body", reply(&asynchttp.Reply{Status: 304, Body: []byte("lost")}), 304},
		{"Reply 304 with a length", reply(&asynchttp.Reply{Status: 304, Header: http.Header{"Content-Length": {"4"}}}), 304},
		{"error mapped to 204", fail("Gone", "lost"), 204},
		{"error mapped to 304", fail("Unchanged", "lost"), 304},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, c := range cases {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				h := &asynchttp.Handler{
					Flow:  c.flow,
					Tool:  func() asyncsteps.Tool { return loop },
					Codes: map[string]int{"Gone": 204, "Unchanged": 304},
				}
				srv, client, _ := serveProto(t, h, proto)
				resp, body, err := getAll(t, client, srv.URL)
				length, hasLength := resp.Header["Content-Length"]
				if resp.Proto != proto || resp.StatusCode != c.status || err != nil || len(body) != 0 || hasLength {
					t.Errorf("%s %d, body %q (%v), Content-Length %q; want %s %d, no body, no Content-Length",
						resp.Proto, resp.StatusCode, body, err, length, proto, c.status)
				}
			})
		}
	}
}

// A Reply's header keys are sent in their canonical form, as Header.Set
// would store them: a key written in lower case in a map literal was sent
// beside the Content-Length the Handler sets and the Content-Type net/http
// sniffs, each field then twice over in the answer.
func TestHandlerCanonicalizesTheKeysOfAReply(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(&asynchttp.Reply{
				Header: http.Header{"content-type": {"text/csv"}, "content-length": {"4"}, "x-id": {"7"}},
				Body:   []byte("a,b\n"),
			})
		},
		Tool: func() asyncsteps.Tool { return loop },
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, body, err := getAll(t, srv.Client(), srv.URL)
	got := map[string][]string{}
	for _, k := range []string{"Content-Type", "Content-Length", "X-Id"} {
		got[k] = resp.Header[k]
	}
	want := map[string][]string{"Content-Type": {"text/csv"}, "Content-Length": {"4"}, "X-Id": {"7"}}
	if err != nil || body != "a,b\n" || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("body %q (%v), header %v; want %q, %v", body, err, got, "a,b\n", want)
	}
}

// A key given in several spellings is sent with the values of one, the
// same on every answer: the canonical spelling's, or else the one first
// in byte order. The map's order picked one at random.
func TestHandlerPicksOneSpellingOfAReplyKey(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(&asynchttp.Reply{
				Header: http.Header{
					"content-type": {"text/csv"}, "Content-Type": {"text/plain"}, "CONTENT-TYPE": {"text/html"},
					"x-id": {"lower"}, "X-ID": {"upper"}, "x-Id": {"mixed"},
				},
				Body: []byte("a,b\n"),
			})
		},
		Tool: func() asyncsteps.Tool { return loop },
	}
	want := "map[Content-Type:[text/plain] X-Id:[upper]]"
	for i := range 64 { // each of two spellings first in a map's order, 2^-64 to miss it
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		got := fmt.Sprint(map[string][]string{"Content-Type": rec.Header()["Content-Type"], "X-Id": rec.Header()["X-Id"]})
		if got != want {
			t.Fatalf("answer %d: header %s, want %s", i, got, want)
		}
	}
}

// HTTP/2 forbids the connection-specific fields of HTTP/1 (RFC 9113,
// section 8.2.2) and a client treats an answer that has one as malformed:
// curl fails with PROTOCOL_ERROR, browsers alike. net/http's HTTP/2
// server drops Connection and Transfer-Encoding only, and a flow that
// answers with an upstream's header forwards an HTTP/1 upstream's
// Keep-Alive. Over HTTP/2, TLS or h2c, a Reply is answered without
// Keep-Alive, Proxy-Connection and Upgrade; over HTTP/1 they are sent as
// given (a 426 needs its Upgrade).
func TestHandlerSendsNoConnectionFieldsOverHTTP2(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(&asynchttp.Reply{
				Header: http.Header{ // as an HTTP/1 upstream answered
					"Connection": {"keep-alive"}, "Keep-Alive": {"timeout=5, max=100"}, "Proxy-Connection": {"keep-alive"},
					"Upgrade": {"h2c"}, "X-Id": {"7"},
				},
				Body: []byte("ok"),
			})
		},
		Tool: func() asyncsteps.Tool { return loop },
	}
	fields := func(resp *http.Response) string {
		got := map[string][]string{}
		for _, k := range []string{"Keep-Alive", "Proxy-Connection", "Upgrade", "X-Id"} {
			if v, ok := resp.Header[k]; ok {
				got[k] = v
			}
		}
		return fmt.Sprint(got)
	}
	h2 := "map[X-Id:[7]]"
	for _, c := range []struct{ proto, want string }{
		{"HTTP/1.1", "map[Keep-Alive:[timeout=5, max=100] Proxy-Connection:[keep-alive] Upgrade:[h2c] X-Id:[7]]"},
		{"HTTP/2.0", h2},
	} {
		srv, client, _ := serveProto(t, h, c.proto)
		resp, body, err := getAll(t, client, srv.URL)
		if resp.Proto != c.proto || err != nil || body != "ok" || fields(resp) != c.want {
			t.Errorf("%s: body %q (%v), fields %s; want %s, %q, %s", resp.Proto, body, err, fields(resp), c.proto, "ok", c.want)
		}
	}
	t.Run("h2c", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		defer srv.Close()
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		resp, body, err := getAll(t, &http.Client{Transport: tr}, srv.URL)
		if resp.Proto != "HTTP/2.0" || err != nil || body != "ok" || fields(resp) != h2 {
			t.Errorf("%s: body %q (%v), fields %s; want HTTP/2.0, %q, %s", resp.Proto, body, err, fields(resp), "ok", h2)
		}
	})
}

// The rest of RFC 9113's list is dropped over HTTP/2 too, which net/http's
// HTTP/2 server sent: TE, which only a request may carry, a
// Transfer-Encoding of "trailers" (the one value it lets through), and a
// trailer of one of the fields, given with http.TrailerPrefix, which it
// sends after the body (Upgrade: it drops the others). An ordinary trailer
// is sent.
func TestHandlerSendsNoTEOrConnectionTrailerOverHTTP2(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(&asynchttp.Reply{
				Header: http.Header{
					"Te": {"gzip"}, "Transfer-Encoding": {"trailers"},
					http.TrailerPrefix + "Upgrade": {"h2c"}, http.TrailerPrefix + "keep-alive": {"timeout=5"},
					http.TrailerPrefix + "X-Sum": {"1"}, "X-Id": {"7"},
				},
				Body: []byte("ok"),
			})
		},
		Tool: func() asyncsteps.Tool { return loop },
	}
	srv, client, _ := serveProto(t, h, "HTTP/2.0")
	resp, body, err := getAll(t, client, srv.URL)
	header := fmt.Sprint(map[string][]string{"Te": resp.Header["Te"], "Transfer-Encoding": resp.Header["Transfer-Encoding"], "X-Id": resp.Header["X-Id"]})
	trailer := fmt.Sprint(resp.Trailer)
	if resp.Proto != "HTTP/2.0" || err != nil || body != "ok" || header != "map[Te:[] Transfer-Encoding:[] X-Id:[7]]" || trailer != "map[X-Sum:[1]]" {
		t.Errorf("%s: body %q (%v), header %s, trailer %s; want HTTP/2.0, %q, only X-Id, only X-Sum", resp.Proto, body, err, header, trailer, "ok")
	}
}
