package asynchttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// The hard cases of ExampleClient_syncJob, on virtual time: its syncJob
// runs on a Loop in a testing/synctest bubble against a provider that
// answers in memory on the bubble's clock (a network socket would keep
// the clock from moving), so that the pacing, the waits and every request
// are exact.

// provider answers the listing and the items as ExampleClient_syncJob's
// does, each request after its latency, and logs each request as
// "20ms-40ms /items?cursor=p2 200" (or "cancelled", "error").
type provider struct {
	start   time.Time
	latency time.Duration
	pages   map[string]page
	// replies overrides the answers to a request ("/items/c"), call by
	// call; past its end the request is answered as usual.
	replies map[string][]reply

	mu    sync.Mutex
	calls map[string]int
	log   []string
}

type reply struct {
	status     int
	retryAfter func(now time.Time) string // the header's value; nil: none
	err        error                      // a transport error, in place of an answer
}

func newProvider(latency time.Duration, pages map[string]page, replies map[string][]reply) *provider {
	return &provider{start: time.Now(), latency: latency, pages: pages, replies: replies, calls: map[string]int{}}
}

func (p *provider) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.URL.Path
	if req.URL.RawQuery != "" {
		key += "?" + req.URL.RawQuery
	}
	p.mu.Lock()
	n := p.calls[key]
	p.calls[key]++
	p.mu.Unlock()
	begin := time.Since(p.start)
	rep := reply{status: http.StatusOK}
	if script := p.replies[key]; n < len(script) {
		rep = script[n]
	}
	t := time.NewTimer(p.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		p.record("%v-%v %s cancelled", begin, time.Since(p.start), key)
		return nil, req.Context().Err()
	}
	if rep.err != nil {
		p.record("%v-%v %s error", begin, time.Since(p.start), key)
		return nil, rep.err
	}
	resp := &http.Response{StatusCode: rep.status, Header: http.Header{}, Request: req}
	if rep.retryAfter != nil {
		resp.Header.Set("Retry-After", rep.retryAfter(time.Now()))
	}
	body := []byte("{}")
	if id, isItem := strings.CutPrefix(req.URL.Path, "/items/"); rep.status == http.StatusOK && isItem {
		body, _ = json.Marshal(item{Name: strings.ToUpper(id)})
	} else if rep.status == http.StatusOK {
		body, _ = json.Marshal(p.pages[req.URL.Query().Get("cursor")])
	}
	resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	p.record("%v-%v %s %d", begin, time.Since(p.start), key, rep.status)
	return resp, nil
}

func (p *provider) record(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, fmt.Sprintf(format, args...))
}

// requests returns the log, by the time each request began, then by key.
func (p *provider) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	begins := func(s string) time.Duration {
		d, _ := time.ParseDuration(s[:strings.IndexByte(s, '-')])
		return d
	}
	log := slices.Clone(p.log)
	slices.SortStableFunc(log, func(a, b string) int {
		if c := begins(a) - begins(b); c != 0 {
			return int(c)
		}
		return strings.Compare(a, b)
	})
	return log
}

// jobRun is how a job ended: its summary or error, when, and the requests.
type jobRun struct {
	summary  string
	err      error
	took     time.Duration
	requests []string
}

// runJob runs syncJob against p under a fresh Limiter of the provider's
// limits, within budget, and cancels it after cancelAt if that is not 0.
// It waits for the requests the job cancelled to return before reading
// the log.
func runJob(p *provider, budget, cancelAt time.Duration) jobRun {
	return runJobOn(providerClient(p), p, budget, cancelAt)
}

// providerClient returns a Client of p under a fresh Limiter of the
// provider's limits.
func providerClient(p *provider) *asynchttp.Client {
	return &asynchttp.Client{HTTP: &http.Client{Transport: p}, Guard: asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 8, MaxQueue: 100, Rate: 5, Period: 500 * time.Millisecond, Burst: asyncsteps.Unlimited,
	})}
}

// runJobOn is runJob with the Client c, whose limits other jobs may share.
func runJobOn(c *asynchttp.Client, p *provider, budget, cancelAt time.Duration) jobRun {
	loop := asyncsteps.NewLoop() // made in the bubble: on the bubble's clock
	defer loop.Close()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if cancelAt > 0 {
		time.AfterFunc(cancelAt, cancel) // the shutdown
	}
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	syncJob(r, c, "http://provider.test")
	summary, err := asyncsteps.Run[string](ctx, r)
	took := time.Since(p.start)
	synctest.Wait()
	return jobRun{summary, err, took, p.requests()}
}

// wantJob fails the test unless the job ended as want says.
func wantJob(t *testing.T, got jobRun, summary, err string, took time.Duration, requests ...string) {
	t.Helper()
	gotErr := "<nil>"
	if got.err != nil {
		gotErr = got.err.Error()
	}
	if got.summary != summary || gotErr != err || got.took != took {
		t.Errorf("job: %q, %s after %v; want %q, %s after %v", got.summary, gotErr, got.took, summary, err, took)
	}
	if !slices.Equal(got.requests, requests) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got.requests, "\n"), strings.Join(requests, "\n"))
	}
}

var threePages = map[string]page{
	"":   {Items: []string{"a", "b"}, Next: "p2"},
	"p2": {Items: []string{"c", "d"}, Next: "p3"},
	"p3": {Items: []string{"e"}},
}

// The pages one after the other, then the items 4 at a time, within 5
// requests per 500ms: the 3 pages and items a and b take the first
// period's 5 entries, so c, d (and e, once a's slot is free) wait for
// the next period.
func TestSyncJobPagesThenItemsWithinTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := runJob(newProvider(20*time.Millisecond, threePages, nil), time.Minute, 0)
		wantJob(t, got, "5 items: A B C D E", "<nil>", 520*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items?cursor=p2 200",
			"40ms-60ms /items?cursor=p3 200",
			"60ms-80ms /items/a 200",
			"60ms-80ms /items/b 200",
			"500ms-520ms /items/c 200",
			"500ms-520ms /items/d 200",
			"500ms-520ms /items/e 200")
	})
}

// The Throttle's pacing: 12 items, 4 at a time, enter 5 per period of
// 500ms, each period beginning as the one before ends: e to h enter as
// the second period begins, i as e's slot comes free, within it; j, k
// and l wait for the third.
func TestSyncJobThrottlePacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ids := strings.Split("a b c d e f g h i j k l", " ")
		got := runJob(newProvider(10*time.Millisecond, map[string]page{"": {Items: ids}}, nil), time.Minute, 0)
		want := []string{"0s-10ms /items?cursor= 200"}
		for i, begin := range []string{"10ms", "10ms", "10ms", "10ms", "500ms", "500ms", "500ms", "500ms", "510ms", "1s", "1s", "1s"} {
			d, _ := time.ParseDuration(begin)
			want = append(want, fmt.Sprintf("%v-%v /items/%s 200", d, d+10*time.Millisecond, ids[i]))
		}
		wantJob(t, got, "12 items: A B C D E F G H I J K L", "<nil>", time.Second+10*time.Millisecond, want...)
	})
}

func after(s string) func(time.Time) string { return func(time.Time) string { return s } }

// A 429 with Retry-After: 2 is retried exactly 2s after its answer, not
// after the backoff; the item in flight meanwhile goes on.
func TestSyncJobHonoursRetryAfterSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a", "b"}}},
			map[string][]reply{"/items/a": {{status: 429, retryAfter: after("2")}}})
		wantJob(t, runJob(p, time.Minute, 0), "2 items: A B", "<nil>", 2060*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 429",
			"20ms-40ms /items/b 200",
			"2.04s-2.06s /items/a 200")
	})
}

// A 429's Retry-After holds the shared limits: item e, which takes b's
// slot as b is answered at 40ms and would enter as the next period
// begins at 500ms, waits with a for the 2s the 429 asks for.
func TestSyncJobRetryAfterHoldsTheOtherRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a", "b", "c", "d", "e"}}},
			map[string][]reply{"/items/a": {{status: 429, retryAfter: after("2")}}})
		wantJob(t, runJob(p, time.Minute, 0), "5 items: A B C D E", "<nil>", 2060*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 429",
			"20ms-40ms /items/b 200",
			"20ms-40ms /items/c 200",
			"20ms-40ms /items/d 200",
			"2.04s-2.06s /items/a 200",
			"2.04s-2.06s /items/e 200")
	})
}

// A Retry-After that is an HTTP date waits until that date: the answer
// at 40ms names 00:00:03 of the bubble's clock, a wait of 2.96s.
func TestSyncJobHonoursRetryAfterDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		date := func(now time.Time) string {
			return now.Truncate(time.Second).Add(3 * time.Second).Format(http.TimeFormat)
		}
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a"}}},
			map[string][]reply{"/items/a": {{status: 503, retryAfter: date}}})
		wantJob(t, runJob(p, time.Minute, 0), "1 items: A", "<nil>", 3020*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 503",
			"3s-3.02s /items/a 200")
	})
}

// A Retry-After beyond the job's budget fails the job at once with the
// 429, its error the *busyAnswer: not a Timeout once the budget is spent.
// The other item in flight is cancelled.
func TestSyncJobRetryAfterBeyondTheBudgetFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a", "b"}}},
			map[string][]reply{"/items/a": {{status: 429, retryAfter: after("60")}}})
		got := runJob(p, 10*time.Second, 0)
		wantJob(t, got, "", "CommError: provider answered 429", 40*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 429",
			"20ms-40ms /items/b 200")
		if busy := (*busyAnswer)(nil); !errors.As(got.err, &busy) || busy.wait != time.Minute {
			t.Errorf("error %#v, want the *busyAnswer of a 1m wait", got.err)
		}
	})
}

// A Retry-After longer than an attempt's Timeout holds the shared limits
// for maxHold only: the other items' attempts, whose Timeout covers their
// wait for the limits, would all time out under a hold of its length (25s
// failed the job with a Timeout at 20.64s, where it waits 25s for a
// alone). Item e waits with the hold, 2s; a waits the 25s.
func TestSyncJobLongRetryAfterHoldsTheOthersAtMostMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a", "b", "c", "d", "e"}}},
			map[string][]reply{"/items/a": {{status: 429, retryAfter: after("25")}}})
		wantJob(t, runJob(p, time.Minute, 0), "5 items: A B C D E", "<nil>", 25060*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 429",
			"20ms-40ms /items/b 200",
			"20ms-40ms /items/c 200",
			"20ms-40ms /items/d 200",
			"2.04s-2.06s /items/e 200",
			"25.04s-25.06s /items/a 200")
	})
}

// No hold can be lifted: a Retry-After of a day, which fails the job that
// got it at once, holds the next job on the same limits for maxHold, not
// for the day (that job failed with a Timeout, nothing sent).
func TestSyncJobRetryAfterOfADayHoldsTheNextJobAtMostMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a", "b"}}},
			map[string][]reply{"/items/a": {{status: 429, retryAfter: after("86400")}}})
		c := providerClient(p)
		wantJob(t, runJobOn(c, p, 10*time.Second, 0), "", "CommError: provider answered 429", 40*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items/a 429",
			"20ms-40ms /items/b 200")
		p.log = nil
		wantJob(t, runJobOn(c, p, time.Minute, 0), "2 items: A B", "<nil>", 2080*time.Millisecond,
			"2.04s-2.06s /items?cursor= 200",
			"2.06s-2.08s /items/a 200",
			"2.06s-2.08s /items/b 200")
	})
}

// A 5xx without Retry-After and a transport error are retried after the
// backoff (100ms, then 200ms); a 4xx other than 429 is not retried.
func TestSyncJobRetriesServerErrorsNotClientErrors(t *testing.T) {
	t.Run("5xx and transport", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a"}}},
				map[string][]reply{"/items/a": {{status: 500}, {err: errors.New("connection reset")}}})
			wantJob(t, runJob(p, time.Minute, 0), "1 items: A", "<nil>", 380*time.Millisecond,
				"0s-20ms /items?cursor= 200",
				"20ms-40ms /items/a 500",
				"140ms-160ms /items/a error",
				"360ms-380ms /items/a 200")
		})
	})
	t.Run("404", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newProvider(20*time.Millisecond, map[string]page{"": {Items: []string{"a"}}},
				map[string][]reply{"/items/a": {{status: 404}}})
			wantJob(t, runJob(p, time.Minute, 0), "", "InvalidRequest: provider answered 404", 40*time.Millisecond,
				"0s-20ms /items?cursor= 200",
				"20ms-40ms /items/a 404")
		})
	})
}

// A job cancelled (the shutdown) while a page is in flight stops at
// once: the request is cancelled, no further page is asked for, and the
// job ends with context.Canceled.
func TestSyncJobCancelledMidPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := runJob(newProvider(20*time.Millisecond, threePages, nil), time.Minute, 30*time.Millisecond)
		wantJob(t, got, "", "context canceled", 30*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-30ms /items?cursor=p2 cancelled")
		if !errors.Is(got.err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", got.err)
		}
	})
}

// A job cancelled while its items run and wait for the rate gives the
// shared limits back: its requests in flight are cancelled, those
// waiting leave the Throttle's queue, and the next job, on the same
// Limiter, gets the next period's entries, not the cancelled job's.
func TestSyncJobCancelledMidItemsLeavesTheLimitsToTheNextJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider(20*time.Millisecond, threePages, nil)
		c := providerClient(p)
		first := runJobOn(c, p, time.Minute, 70*time.Millisecond)
		wantJob(t, first, "", "context canceled", 70*time.Millisecond,
			"0s-20ms /items?cursor= 200",
			"20ms-40ms /items?cursor=p2 200",
			"40ms-60ms /items?cursor=p3 200",
			"60ms-70ms /items/a cancelled",
			"60ms-70ms /items/b cancelled")
		p.log = nil
		second := runJobOn(c, p, time.Minute, 0)
		wantJob(t, second, "5 items: A B C D E", "<nil>", 1020*time.Millisecond,
			"500ms-520ms /items?cursor= 200",
			"520ms-540ms /items?cursor=p2 200",
			"540ms-560ms /items?cursor=p3 200",
			"560ms-580ms /items/a 200",
			"560ms-580ms /items/b 200",
			"1s-1.02s /items/c 200",
			"1s-1.02s /items/d 200",
			"1s-1.02s /items/e 200")
	})
}

// On a real connection: a job cancelled (Root.Cancel, the shutdown)
// while the provider serves its second page ends at once, the provider
// sees that request's context end (the connection closed), and no
// further request comes.
func TestSyncJobCancelledMidPageOnLoopback(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	inPage2, gone := make(chan struct{}), make(chan struct{})
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cursor := req.URL.Query().Get("cursor")
		mu.Lock()
		seen = append(seen, req.URL.String())
		mu.Unlock()
		if cursor == "p2" {
			close(inPage2)
			<-req.Context().Done() // the client went away
			close(gone)
			return
		}
		json.NewEncoder(w).Encode(threePages[cursor])
	}))
	defer provider.Close()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	syncJob(r, &asynchttp.Client{HTTP: provider.Client()}, provider.URL)
	go func() { <-inPage2; r.Cancel() }()
	_, err := r.Run(context.Background())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider did not see the request cancelled")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/items?cursor=", "/items?cursor=p2"}; !slices.Equal(seen, want) {
		t.Errorf("provider saw %q, want %q", seen, want)
	}
}
