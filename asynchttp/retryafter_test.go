package asynchttp_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// RetryAfter reads both forms of the header, seconds and an HTTP date
// (in its three formats), relative to the flow's clock; anything else
// asks for nothing.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC)
	for _, c := range []struct {
		header string
		wait   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"120", 2 * time.Minute, true},
		{" 2 ", 2 * time.Second, true},
		{"0", 0, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"99999999999999999999999", math.MaxInt64, true},
		{"Sun, 01 Mar 2026 12:00:03 GMT", 2500 * time.Millisecond, true},
		{"Sunday, 01-Mar-26 12:00:03 GMT", 2500 * time.Millisecond, true},
		{"Sun Mar  1 12:00:03 2026", 2500 * time.Millisecond, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true}, // past
		{"-1", 0, false},
		{"1.5", 0, false},
		{"2s", 0, false},
		{"tomorrow", 0, false},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Retry-After", c.header)
		}
		wait, ok := asynchttp.RetryAfter(h, now)
		if wait != c.wait || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.header, wait, ok, c.wait, c.ok)
		}
	}
}
