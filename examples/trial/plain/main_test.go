package main

import (
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps/examples/trial/internal/demo"
)

// The service answers every case and the load as demo.Want says, over real
// HTTP on 127.0.0.1, and keeps the stock upstream within its limit.
func TestServiceOutput(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != demo.Want {
		t.Errorf("output:\n%s\nwant:\n%s", got, demo.Want)
	}
}
