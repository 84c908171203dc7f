package asynchttp_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// Whatever error a flow raises, and whatever status Codes maps its code
// to (0: Codes does not map it), the Handler answers, over a real connection, with a final status
// (the one mapped, or a 500 for a status that is not final) and, but for
// a 204 or a 304, the JSON body {"error": code, "info": ...} of its
// Content-Length, and a Retry-After exactly on a 503 and a 429.
func FuzzHandlerAnswersAnyError(f *testing.F) {
	loop := asyncsteps.NewLoop()
	f.Cleanup(loop.Close)
	type flowError struct {
		code, info string
		status     int
	}
	errs := make(chan flowError, 1)
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Logger: slog.New(slog.DiscardHandler),
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			e := <-errs
			as.Error(e.code, e.info)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// A Handler's Codes are set before it serves: one Handler per
		// request, sharing the loop.
		e := <-errs
		errs <- e
		each := *h
		if e.status != 0 {
			each.Codes = map[string]int{e.code: e.status}
		}
		each.ServeHTTP(w, req)
	}))
	f.Cleanup(srv.Close)
	for _, seed := range []flowError{
		{"CommError", "upstream", 0}, {"Mine", "why", 418}, {"Mine", "", 204}, {"Mine", "x", 304}, {"Mine", "x", 100},
		{"Mine", "x", 600}, {"Mine", "x", -1}, {"Mine", "x", 429}, {"DefenseRejected", "full", 0}, {"Timeout", "", 0},
		{"InternalError", "secret", 0}, {"\xff\n", "\x00\"", 200}, {"", "", 0},
	} {
		f.Add(seed.code, seed.info, seed.status)
	}
	f.Fuzz(func(t *testing.T, code, info string, status int) {
		if code == "" {
			t.Skip("an error needs a code") // as.Error with none is a misuse, an InternalError: tested elsewhere
		}
		errs <- flowError{code, info, status}
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("body: %v", err)
		}
		want := status
		if status == 0 {
			want = asynchttp.StatusOf(code)
		}
		if want < 200 || want > 599 {
			want = http.StatusInternalServerError
		}
		if resp.StatusCode != want {
			t.Errorf("%q %q mapped to %d: status %d, want %d", code, info, status, resp.StatusCode, want)
		}
		if (want == 503 || want == 429) != (resp.Header.Get("Retry-After") != "") {
			t.Errorf("status %d with Retry-After %q", want, resp.Header.Get("Retry-After"))
		}
		if want == 204 || want == 304 {
			if len(body) != 0 || resp.Header.Get("Content-Length") != "" {
				t.Errorf("status %d with body %q, Content-Length %q", want, body, resp.Header.Get("Content-Length"))
			}
			return
		}
		var got struct{ Error, Info string }
		if err := json.Unmarshal(body, &got); err != nil || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Fatalf("body %q (Content-Length %q): %v", body, resp.Header.Get("Content-Length"), err)
		}
		if wantCode := string([]rune(code)); got.Error != wantCode { // each invalid UTF-8 byte a U+FFFD, as in JSON
			t.Errorf("error %q, want %q", got.Error, wantCode)
		}
	})
}
