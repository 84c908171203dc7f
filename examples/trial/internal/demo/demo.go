// Package demo is what the two versions of the trial service share: the
// upstreams they call (on httptest servers on 127.0.0.1), the call itself,
// the reply, and the driver that sends the same requests to either version
// and prints what comes back. Only the handlers differ.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// timeout is the per-request timeout of both handlers, in nanoseconds.
// Drive sets it: long enough for every call but the one that must time
// out, so that the output does not depend on how loaded the machine is.
var timeout atomic.Int64

// Timeout returns the per-request timeout of both handlers.
func Timeout() time.Duration { return time.Duration(timeout.Load()) }

// Timeouts Drive uses: for the case that must time out, and for the rest.
const (
	shortTimeout = 100 * time.Millisecond
	longTimeout  = time.Minute
)

// StockLimit is how many calls to the stock upstream each service lets run
// at once.
const StockLimit = 2

// client keeps connections open for the load: the default keeps two per
// host, and the load would open and close one per request.
var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// Upstreams are the two services the handlers fan out to:
//
//	/price?item=X  answers "12.50 EUR"; 500 for item "broken"
//	/stock?item=X  answers "7 in stock" after 2 ms; 404 for item "unknown";
//	               for item "slow", nothing until the caller gives up
type Upstreams struct {
	price, stock *httptest.Server
	running      atomic.Int32 // stock calls running now
	peak         atomic.Int32 // the most stock calls seen running at once
}

// StartUpstreams starts both upstreams; Close stops them.
func StartUpstreams() *Upstreams {
	u := &Upstreams{}
	u.price = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("item") == "broken" {
			http.Error(w, "price database down", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "12.50 EUR")
	}))
	u.stock = httptest.NewServer(http.HandlerFunc(u.serveStock))
	return u
}

func (u *Upstreams) serveStock(w http.ResponseWriter, r *http.Request) {
	n := u.running.Add(1)
	defer u.running.Add(-1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	switch r.URL.Query().Get("item") {
	case "unknown":
		http.NotFound(w, r)
	case "slow":
		<-r.Context().Done()
	default:
		time.Sleep(2 * time.Millisecond)
		fmt.Fprint(w, "7 in stock")
	}
}

// Close stops the upstreams.
func (u *Upstreams) Close() {
	u.price.Close()
	u.stock.Close()
}

// Get calls the upstream at path ("/price" or "/stock") for item and
// returns its answer; an answer other than 200 OK is an error.
func (u *Upstreams) Get(ctx context.Context, path, item string) (string, error) {
	base := u.price.URL
	if path == "/stock" {
		base = u.stock.URL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?item="+item, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", path, resp.Status)
	}
	return string(body), nil
}

// Reply is the answer of the service for item.
func Reply(item, price, stock string) string {
	return fmt.Sprintf("%s: %s, %s", item, price, stock)
}

// Write writes body, or the error: 504 for a timeout, 502 for anything
// else.
func Write(w http.ResponseWriter, body string, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		http.Error(w, "timeout", http.StatusGatewayTimeout)
	case err != nil:
		http.Error(w, "upstream failed", http.StatusBadGateway)
	default:
		fmt.Fprintln(w, body)
	}
}

// Want is what Drive prints for a correct service.
const Want = `load: 200 requests, 10 at once: 200 answered 200
stock upstream: at most 2 calls at once
GET ?item=tea: 200 tea: 12.50 EUR, 7 in stock
GET ?item=broken: 200 broken: price unknown, 7 in stock
GET ?item=unknown: 502 upstream failed
GET ?item=slow: 504 timeout
stock upstream: no call left running
`

// Drive serves handler on 127.0.0.1 and sends it a load of requests from
// several goroutines at once, then one request per case, and prints to out
// the answers and what the stock upstream saw. The load comes first and
// meets no timeout, so that every stock call it makes is one its caller
// still waits for.
func Drive(out io.Writer, u *Upstreams, handler http.Handler) error {
	srv := httptest.NewServer(handler)
	defer srv.Close()
	timeout.Store(int64(longTimeout))
	const requests, concurrent = 200, 10
	ok, err := load(srv.URL+"/?item=tea", requests, concurrent)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "load: %d requests, %d at once: %d answered 200\n", requests, concurrent, ok)
	fmt.Fprintf(out, "stock upstream: %s\n", u.peakText())
	for _, item := range []string{"tea", "broken", "unknown", "slow"} {
		if item == "slow" {
			timeout.Store(int64(shortTimeout))
		}
		code, body, err := get(srv.URL + "/?item=" + item)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "GET ?item=%s: %d %s\n", item, code, body)
	}
	fmt.Fprintf(out, "stock upstream: %s\n", u.leftText())
	return nil
}

func (u *Upstreams) peakText() string {
	if p := u.peak.Load(); p > StockLimit {
		return fmt.Sprintf("%d calls at once, above the limit of %d", p, StockLimit)
	}
	return fmt.Sprintf("at most %d calls at once", StockLimit)
}

// leftText waits a little for the stock calls given up by their callers
// to return, and says whether any is left running.
func (u *Upstreams) leftText() string {
	for range 1000 { // up to 10 s, for a loaded machine
		if u.running.Load() == 0 {
			return "no call left running"
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Sprintf("%d left running", u.running.Load())
}

func get(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// load sends n requests to url from concurrent goroutines and counts the
// 200 answers.
func load(url string, n, concurrent int) (int, error) {
	var ok atomic.Int32
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range concurrent {
		wg.Go(func() {
			for range next {
				code, _, err := get(url)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				if code == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return int(ok.Load()), firstErr
}
