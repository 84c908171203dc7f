package main

import (
	"reflect"
	"testing"
)

// A request's fetches share one string for their URLs: each must be the
// URL priceURL gives for its symbol, whatever the upstream's base.
func TestJobURLsArePriceURLs(t *testing.T) {
	for _, base := range []string{"http://127.0.0.1:1", "http://127.0.0.1:1/", "http://up.example/v1"} {
		g := &flowGateway{cfg: config{Upstream: base}, pricePrefix: priceURL(base, "")}
		symbols := []string{"A", "MSFT", "GOOGL", "IBM"}
		job := g.newJob(symbols)
		var got, want []string
		for i, f := range job.fetches {
			got = append(got, f.url)
			want = append(want, priceURL(base, symbols[i]))
			if f.symbol != symbols[i] || f.job != job {
				t.Errorf("fetch %d: symbol %q, job %p, want %q, %p", i, f.symbol, f.job, symbols[i], job)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("base %q: URLs %q\nwant %q", base, got, want)
		}
	}
}
