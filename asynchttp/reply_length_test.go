package asynchttp_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// The Content-Length of a Reply's answer is that of its Body, whatever
// its Header says: a proxy flow that answers with an upstream's header
// and a body it changed kept the upstream's length, and net/http then
// refused the body longer than announced (the client read no byte of it,
// then an unexpected EOF) or cut the connection after a shorter one. Done
// had a 200 and nothing was logged. Only an answer to HEAD with no Body
// keeps the Reply's length, that of the body it does not send.
func TestHandlerSendsTheLengthOfAReplysBody(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"price":1}`)
	}))
	defer upstream.Close()
	client := &asynchttp.Client{HTTP: upstream.Client()}
	// The flow proxies the upstream's answer, its body wrapped.
	proxy := func(as asyncsteps.AsyncSteps, _ *http.Request) {
		client.Get(as, upstream.URL)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
			as.Success(&asynchttp.Reply{Status: resp.StatusCode, Header: resp.Header, Body: fmt.Appendf(nil, `{"quote":%s}`, resp.Body)})
		})
	}
	reply := func(r asynchttp.Reply) func(as asyncsteps.AsyncSteps, _ *http.Request) {
		return func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(r) }
	}
	ten := []byte("0123456789")
	loop := newLoop(t)
	for _, tc := range []struct {
		name, method string
		flow         func(as asyncsteps.AsyncSteps, req *http.Request)
		length, body string
	}{
		{"proxy, body changed", http.MethodGet, proxy, "21", `{"quote":{"price":1}}`},
		{"announced shorter", http.MethodGet, reply(asynchttp.Reply{Header: http.Header{"Content-Length": {"5"}}, Body: ten}), "10", string(ten)},
		{"announced longer", http.MethodGet, reply(asynchttp.Reply{Header: http.Header{"content-length": {"20"}}, Body: ten}), "10", string(ten)},
		{"announced, no body", http.MethodGet, reply(asynchttp.Reply{Header: http.Header{"Content-Length": {"1234"}}}), "0", ""},
		{"announced not a number", http.MethodGet, reply(asynchttp.Reply{Header: http.Header{"Content-Length": {"ten"}}, Body: ten}), "10", string(ten)},
		{"HEAD, announced, no body", http.MethodHead, reply(asynchttp.Reply{Header: http.Header{"Content-Length": {"1234"}}}), "1234", ""},
		{"HEAD, announced shorter", http.MethodHead, reply(asynchttp.Reply{Header: http.Header{"Content-Length": {"5"}}, Body: ten}), "10", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			h := &asynchttp.Handler{Flow: tc.flow, Tool: func() asyncsteps.Tool { return loop }, Logger: logger, Done: outs.done}
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, err := http.NewRequest(tc.method, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			_, err = body.ReadFrom(resp.Body)
			resp.Body.Close()
			got := fmt.Sprintf("%d %q %q %v", resp.StatusCode, resp.Header["Content-Length"], body.String(), err)
			if want := fmt.Sprintf("200 [%q] %q <nil>", tc.length, tc.body); got != want {
				t.Errorf("answer %s, want %s", got, want)
			}
			if o := outs.get(); len(o) != 1 || o[0].Status != http.StatusOK || o[0].Code != "" {
				t.Errorf("outcomes %+v, want one of status 200", o)
			}
			if l := logs(); l != "" {
				t.Errorf("log %q, want none", l)
			}
		})
	}
}

// Over HTTP/1, net/http frames an answer by a Transfer-Encoding that a
// handler sets only if it is "chunked" or "identity", spelt so; it sends
// any other beside its own "chunked", and the answer is broken: Go's
// client fails with "too many transfer encodings", and "trailers" (a
// value of TE, not a coding) or a coding the Handler does not apply
// (gzip) misnames the body. A Reply's Transfer-Encoding is sent only as
// net/http frames it, "Chunked" spelt as net/http knows it; any other is
// dropped, and the answer has the length of Body. Over HTTP/2 none is
// sent (TestHandlerSendsNoTEOrConnectionTrailerOverHTTP2).
func TestHandlerSendsOnlyATransferEncodingThatFramesTheBody(t *testing.T) {
	loop := newLoop(t)
	for _, tc := range []struct {
		name string
		te   []string
		want string // the answer's Content-Length, Transfer-Encoding, and whether it closes the connection
	}{
		{"trailers", []string{"trailers"}, `["2"] [] false`},
		{"gzip", []string{"gzip"}, `["2"] [] false`},
		{"gzip, chunked", []string{"gzip, chunked"}, `["2"] [] false`},
		{"two fields", []string{"gzip", "chunked"}, `["2"] [] false`},
		{"chunked", []string{"chunked"}, `[] ["chunked"] false`},
		{"Chunked", []string{" Chunked"}, `[] ["chunked"] false`},
		{"identity", []string{"identity"}, `[] [] true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			h := &asynchttp.Handler{
				Tool: func() asyncsteps.Tool { return loop }, Logger: logger, Done: outs.done,
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
					as.Success(&asynchttp.Reply{Header: http.Header{"Transfer-Encoding": tc.te, "X-Id": {"7"}}, Body: []byte("ok")})
				},
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, body, err := getAll(t, srv.Client(), srv.URL)
			got := fmt.Sprintf("%d %q %q %v %q %q %v", resp.StatusCode, body, resp.Header["X-Id"], err,
				resp.Header["Content-Length"], resp.TransferEncoding, resp.Close)
			if want := `200 "ok" ["7"] <nil> ` + tc.want; got != want {
				t.Errorf("answer %s, want %s", got, want)
			}
			if o := outs.get(); len(o) != 1 || o[0].Status != http.StatusOK || o[0].Code != "" {
				t.Errorf("outcomes %+v, want one of status 200", o)
			}
			if l := logs(); l != "" {
				t.Errorf("log %q, want none", l)
			}
		})
	}
}
