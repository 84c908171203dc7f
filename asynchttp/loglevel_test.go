package asynchttp_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// The Logger's level for a failed answer says whether someone should
// look: Error for a 500, Debug for a 503 (load shed as designed, which
// must not flood the log under overload), Warn for the other 5xx. Answers
// under 500 are not logged.
func TestFailedAnswersAreLoggedAtTheirLevel(t *testing.T) {
	loop := newLoop(t)
	for _, c := range []struct {
		code   string
		status int
		level  string // "" for no line
	}{
		{asyncsteps.InternalError, http.StatusInternalServerError, "ERROR"},
		{"UnmappedCode", http.StatusInternalServerError, "ERROR"},
		{asyncsteps.DefenseRejected, http.StatusServiceUnavailable, "DEBUG"},
		{asyncsteps.CommError, http.StatusBadGateway, "WARN"},
		{asyncsteps.Timeout, http.StatusGatewayTimeout, "WARN"},
		{asyncsteps.NotImplemented, http.StatusNotImplemented, "WARN"},
		{asyncsteps.InvalidRequest, http.StatusBadRequest, ""},
	} {
		t.Run(c.code, func(t *testing.T) {
			var mu sync.Mutex
			var buf bytes.Buffer
			h := &asynchttp.Handler{
				Tool:   func() asyncsteps.Tool { return loop },
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(c.code, "why") },
				Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}
			status, _, _ := serve(t, h)
			mu.Lock()
			logs := buf.String()
			mu.Unlock()
			if status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
			want := ""
			if c.level != "" {
				want = "level=" + c.level + ` msg="asynchttp: request failed" method=GET path=/ status=` + itoa(c.status) + " code=" + c.code
			}
			lines := strings.Count(logs, "\n")
			if want == "" && lines != 0 || want != "" && (lines != 1 || !strings.Contains(logs, want)) {
				t.Errorf("log %q, want %q (one line, or none if empty)", logs, want)
			}
			// A handler that runs no flow logs the same line through
			// LogFailure.
			mu.Lock()
			buf.Reset()
			mu.Unlock()
			h.LogFailure(httptest.NewRequest(http.MethodGet, "/", nil), &asyncsteps.Error{Code: c.code, Info: "why"}, c.status)
			mu.Lock()
			direct := buf.String()
			mu.Unlock()
			if want == "" && direct != "" || want != "" && (strings.Count(direct, "\n") != 1 || !strings.Contains(direct, want)) {
				t.Errorf("LogFailure logged %q, want %q (one line, or none if empty)", direct, want)
			}
		})
	}
}

// An InternalError is logged at Error whatever status Codes maps it to:
// its answer tells the client to see the server log, and a panic mapped
// to a 4xx was logged nowhere, one mapped to 503 only at Debug.
func TestInternalErrorIsLoggedWhateverItsStatus(t *testing.T) {
	loop := newLoop(t)
	for _, status := range []int{http.StatusBadRequest, http.StatusServiceUnavailable} {
		t.Run(itoa(status), func(t *testing.T) {
			logger, logs := logged()
			h := &asynchttp.Handler{
				Tool:  func() asyncsteps.Tool { return loop },
				Codes: map[string]int{asyncsteps.InternalError: status},
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
					as.Add(func(asyncsteps.AsyncSteps, ...any) { panic("boom") })
				},
				Logger: logger,
			}
			got, _, body := serve(t, h)
			if got != status || body != internalAnswer {
				t.Errorf("got %d %q, want %d %q", got, body, status, internalAnswer)
			}
			want := `level=ERROR msg="asynchttp: request failed" method=GET path=/ status=` + itoa(status) + " code=InternalError info=boom"
			if lines := strings.Count(logs(), "\n"); lines != 1 || !strings.Contains(logs(), want) {
				t.Errorf("log %q, want one line with %q", logs(), want)
			}
		})
	}
}
