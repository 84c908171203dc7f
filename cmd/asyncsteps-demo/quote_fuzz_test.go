package main

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/asyncsteps/asyncsteps"
)

// parseQuote, on any query: the symbols asked, each once, in the order
// first asked, or an InvalidRequest whose info is short and valid UTF-8
// (a JSON body's, which echoes no long query), exactly when the query does not parse, names no
// symbol, a malformed one or more than maxSymbols.
func FuzzParseQuote(f *testing.F) {
	for _, seed := range []string{
		"symbols=AAPL,MSFT", "symbols=AAPL&symbols=MSFT,AAPL", "symbols=%41APL", "symbols=A+B", "symbols=%FF",
		"symbols=\xff\xfe", "symbols=\xc3\xa9" + strings.Repeat("\xe2\x82\xac", 10), "symbols=AAPL;MSFT", "symbols=%",
		"symbols=,,", "symbols=AA,AB,AC&symbols=AB,AD", "x=1&symbols=IBM",
	} {
		f.Add(seed)
	}
	// The longest info: a malformed symbol clipped to 16 bytes, each
	// quoted as \xNN at worst.
	const maxSymbols, maxInfo = 3, 120
	f.Fuzz(func(t *testing.T, query string) {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/quote", RawQuery: query}}
		symbols, bad := parseQuote(req, maxSymbols)
		want, wantOK := referenceSymbols(query, maxSymbols)
		if bad == nil {
			if !wantOK || !slices.Equal(symbols, want) {
				t.Fatalf("%q: symbols %q, want %q (ok %v)", query, symbols, want, wantOK)
			}
			return
		}
		switch {
		case wantOK:
			t.Fatalf("%q: %v, want the symbols %q", query, bad, want)
		case bad.Code != asyncsteps.InvalidRequest || symbols != nil:
			t.Fatalf("%q: %q and %v, want an InvalidRequest alone", query, symbols, bad)
		case len(bad.Info) > maxInfo || !utf8.ValidString(bad.Info):
			t.Fatalf("%q: info %q: want at most %d bytes of UTF-8", query, bad.Info, maxInfo)
		}
	})
}

// referenceSymbols is what parseQuote answers query with, told the long
// way: every entry of every symbols parameter, duplicates dropped; ok is
// false when that is not a list of 1 to maxSymbols well-formed symbols.
func referenceSymbols(query string, maxSymbols int) (symbols []string, ok bool) {
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil, false
	}
	var all []string
	for _, list := range values["symbols"] {
		all = append(all, strings.Split(list, ",")...)
	}
	for _, s := range all {
		switch {
		case s == "":
		case !isSymbol(s):
			return nil, false
		case !slices.Contains(symbols, s):
			symbols = append(symbols, s)
		}
	}
	return symbols, len(symbols) >= 1 && len(symbols) <= maxSymbols
}
