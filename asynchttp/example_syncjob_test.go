package asynchttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// page is one answer of the provider's listing; item one item's details.
type (
	page struct {
		Items []string `json:"items"`
		Next  string   `json:"next"` // the cursor of the next page; "": the last
	}
	item struct {
		Name string `json:"name"`
	}
)

// busyAnswer is a 429 or 503 answer: a CommError, retried, that carries
// the wait its Retry-After asks for.
type busyAnswer struct {
	status int
	wait   time.Duration // 0: none asked
}

func (e *busyAnswer) Error() string      { return fmt.Sprint("provider answered ", e.status) }
func (e *busyAnswer) FutoInCode() string { return asyncsteps.CommError }

// holder is a Guard that can keep every request out until a time:
// asyncsteps.Throttle and asyncsteps.Limiter.
type holder interface{ Hold(until time.Time) }

// attemptTimeout bounds each attempt of a request, its wait for the
// limits included; maxHold bounds how long a Retry-After holds every
// job's requests. A hold as long as an attempt would time out every
// request waiting for it, and no hold can be lifted: an upstream's "wait
// a day" must not stop every job for a day. A request sent as a shorter
// hold ends may be answered 429 again: it holds the limits again.
const (
	attemptTimeout = 5 * time.Second
	maxHold        = 2 * time.Second
)

// getJSON adds the steps that GET url, retried, and pass its JSON answer
// to then. A 429 or 503 is retried after its Retry-After, another 5xx or
// a transport error after a backoff, a 4xx not at all. A Retry-After
// holds the Client's Guard too, for maxHold at most, so that every job
// waits, not only the request that was answered so.
func getJSON[T any](as asyncsteps.AsyncSteps, c *asynchttp.Client, url string, then func(as asyncsteps.AsyncSteps, v T)) {
	asyncsteps.Retry(as, asyncsteps.RetryOptions{
		Attempts: 4,
		Timeout:  attemptTimeout,
		Delay: func(n int, err error) time.Duration {
			if busy := (*busyAnswer)(nil); errors.As(err, &busy) && busy.wait > 0 {
				return busy.wait // one past the job's deadline fails the job at once
			}
			return time.Duration(n) * 100 * time.Millisecond
		},
	}, func(as asyncsteps.AsyncSteps, _ int) {
		c.Get(as, url)
		asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) {
			switch s := resp.StatusCode; {
			case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
				now := as.Tool().Now()
				wait, _ := asynchttp.RetryAfter(resp.Header, now)
				if h, ok := c.Guard.(holder); ok && wait > 0 {
					h.Hold(now.Add(min(wait, maxHold)))
				}
				asyncsteps.Fail(as, &busyAnswer{status: s, wait: wait})
			case s >= 500:
				as.Error(asyncsteps.CommError, fmt.Sprint("provider answered ", s))
			case s != http.StatusOK:
				as.Error(asyncsteps.InvalidRequest, fmt.Sprint("provider answered ", s))
			}
			var v T // here a 200: Fail and Error above end the callback
			if err := json.Unmarshal(resp.Body, &v); err != nil {
				asyncsteps.Fail(as, err) // an InternalError, not retried
			}
			as.Success(v)
		})
	})
	asyncsteps.Then(as, then)
}

// syncJob adds the steps of one job: the listing's pages one after the
// other, then every item's details, at most 4 at once, then a summary.
func syncJob(as asyncsteps.AsyncSteps, c *asynchttp.Client, base string) {
	var ids []string
	cursor := ""
	as.Loop(func(as asyncsteps.AsyncSteps) {
		getJSON(as, c, base+"/items?cursor="+url.QueryEscape(cursor), func(as asyncsteps.AsyncSteps, p page) {
			ids = append(ids, p.Items...)
			if cursor = p.Next; cursor == "" {
				as.Break("pages")
			}
		})
	}, "pages")
	var names []string
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { // ids are known once the pages are in
		names = make([]string, len(ids))
		asyncsteps.ForEachLimit(as, slices.All(ids), 4, func(as asyncsteps.AsyncSteps, i int, id string) {
			getJSON(as, c, base+"/items/"+id, func(as asyncsteps.AsyncSteps, it item) { names[i] = it.Name })
		})
	})
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Success(fmt.Sprintf("%d items: %s", len(names), strings.Join(names, " ")))
	})
}

// An outbound API client: a job pages through a provider's listing, then
// fetches each item's details, 4 at a time, all within the provider's
// limits shared by every job (10 requests within any second, one each
// 100ms, and 8 in flight), and honours a 429's Retry-After within the
// job's budget, holding every job's requests until then (2s at most).
// The provider here answers its first request for item c with a 429 that
// asks for a second.
func ExampleClient_syncJob() {
	pages := map[string]page{"": {Items: []string{"a", "b", "c"}, Next: "p2"}, "p2": {Items: []string{"d", "e"}}}
	askedToWait := false
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, isItem := strings.CutPrefix(req.URL.Path, "/items/")
		switch {
		case !isItem:
			fmt.Printf("page %q\n", req.URL.Query().Get("cursor"))
			json.NewEncoder(w).Encode(pages[req.URL.Query().Get("cursor")])
		case id == "c" && !askedToWait: // one request for c at a time
			askedToWait = true
			fmt.Println("item c: 429, retry after 1s")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			json.NewEncoder(w).Encode(item{Name: strings.ToUpper(id)})
		}
	}))
	defer provider.Close()

	limits := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{ // one for every job
		Concurrent: 8, MaxQueue: 100, // requests in flight, and waiting for a slot
		Rate: 1, Period: 100 * time.Millisecond, // 10 a second: never more within any second
		Burst: asyncsteps.Unlimited, // the requests waiting for the rate: not rate.Limiter's burst
	})
	c := &asynchttp.Client{HTTP: provider.Client(), Guard: limits}
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the job's budget
	defer cancel()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	syncJob(r, c, provider.URL)
	summary, err := asyncsteps.Run[string](ctx, r)
	fmt.Println(summary, err)
	// Output:
	// page ""
	// page "p2"
	// item c: 429, retry after 1s
	// 5 items: A B C D E <nil>
}
