package asyncsteps_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// maxEvents bounds how many tool events a test drives, so that an engine
// that loops forever fails the test instead of hanging it.
const maxEvents = 100000

// tracer records the order in which callbacks run. It is safe for
// concurrent use so that goroutines a test starts may record too.
type tracer struct {
	mu     sync.Mutex
	events []string
}

// add records one event.
func (tr *tracer) add(event string) {
	tr.mu.Lock()
	tr.events = append(tr.events, event)
	tr.mu.Unlock()
}

// addf records one event formatted like fmt.Sprintf.
func (tr *tracer) addf(format string, args ...any) {
	tr.add(fmt.Sprintf(format, args...))
}

// String returns the events joined with ",".
func (tr *tracer) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.events, ",")
}

// step returns a step that records name and succeeds implicitly.
func (tr *tracer) step(name string) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, args ...any) { tr.add(name) }
}

// stepArgs returns a step that records name with the args it received.
func (tr *tracer) stepArgs(name string) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, args ...any) { tr.addf("%s%v", name, args) }
}

// handler returns an error handler that records "name:code" and returns
// plainly, so that unwinding goes on.
func (tr *tracer) handler(name string) asyncsteps.ErrorFunc {
	return func(as asyncsteps.AsyncSteps, code string) { tr.addf("%s:%s", name, code) }
}

// cancel returns a cancel handler that records name.
func (tr *tracer) cancel(name string) asyncsteps.CancelFunc {
	return func(as asyncsteps.AsyncSteps) { tr.add(name) }
}

// wantTrace fails the test unless the whole trace is want.
func wantTrace(t *testing.T, tr *tracer, want string) {
	t.Helper()
	if got := tr.String(); got != want {
		t.Errorf("trace\n got: %s\nwant: %s", got, want)
	}
}

// timedTrace is a trace that goroutines may add to, each line led by the
// time since the trace was made, on its clock (a Loop's, or the clock of
// a testing/synctest bubble).
type timedTrace struct {
	mu    sync.Mutex
	now   func() time.Time
	start time.Time
	lines []string
}

func newTimedTrace(now func() time.Time) *timedTrace {
	return &timedTrace{now: now, start: now()}
}

// logf adds a line, as fmt.Sprintf(format, args...) after the time.
func (tr *timedTrace) logf(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf("%v: "+format, append([]any{tr.now().Sub(tr.start)}, args...)...))
}

// want fails the test unless the lines so far are want.
func (tr *timedTrace) want(t *testing.T, want []string) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	wantLines(t, tr.lines, want)
}

// wantLines fails the test unless got is want, line by line.
func wantLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// newFlow returns a root on a fresh TestTool.
func newFlow(opts ...asyncsteps.Option) (*asyncsteps.Root, *asyncsteps.TestTool) {
	tt := asyncsteps.NewTestTool()
	return asyncsteps.New(append([]asyncsteps.Option{asyncsteps.WithTool(tt)}, opts...)...), tt
}

// drive runs the tool until no event is left, like tt.Run, but fails the
// test instead of looping forever.
func drive(t *testing.T, tt *asyncsteps.TestTool) {
	t.Helper()
	for n := 0; tt.NextEvent(); n++ {
		if n > maxEvents {
			t.Fatalf("still running after %d events", maxEvents)
		}
	}
}

// run starts r through Promise, drives tt until no event is left and returns
// the one Result the flow produced.
func run(t *testing.T, r *asyncsteps.Root, tt *asyncsteps.TestTool) asyncsteps.Result {
	t.Helper()
	ch := r.Promise()
	drive(t, tt)
	return result(t, ch)
}

// result returns the Result waiting in ch and checks that it is the only one.
func result(t *testing.T, ch <-chan asyncsteps.Result) asyncsteps.Result {
	t.Helper()
	var res asyncsteps.Result
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("Promise channel closed without a Result")
		}
		res = r
	default:
		t.Fatal("the flow did not end: no Result")
	}
	select {
	case r, ok := <-ch:
		if ok {
			t.Errorf("a second Result: %+v", r)
		}
	default:
	}
	return res
}

// noResult fails the test if the flow already produced a Result.
func noResult(t *testing.T, ch <-chan asyncsteps.Result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("the flow ended early with %+v", r)
	default:
	}
}

// wantSuccess fails the test unless res is a success with exactly args.
func wantSuccess(t *testing.T, res asyncsteps.Result, args ...any) {
	t.Helper()
	if res.Err != nil {
		t.Errorf("Result.Err = %v, want nil", res.Err)
	}
	wantArgs(t, "Result.Args", res.Args, args...)
}

// wantArgs fails the test unless got holds exactly want, with the same
// dynamic types. An empty want accepts nil or an empty slice.
func wantArgs(t *testing.T, what string, got []any, want ...any) {
	t.Helper()
	if !sameArgs(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func sameArgs(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if fmt.Sprintf("%#v", got[i]) != fmt.Sprintf("%#v", want[i]) {
			return false
		}
	}
	return true
}

// wantError fails the test unless err is an *asyncsteps.Error with exactly
// code and info.
func wantError(t *testing.T, err error, code, info string) {
	t.Helper()
	e := asError(t, err)
	if e == nil {
		return
	}
	if e.Code != code || e.Info != info {
		t.Errorf("error = {Code: %q, Info: %q}, want {Code: %q, Info: %q}", e.Code, e.Info, code, info)
	}
}

// wantCode fails the test unless err is an *asyncsteps.Error with code; the
// info is not checked.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if e := asError(t, err); e != nil && e.Code != code {
		t.Errorf("error code = %q (info %q), want %q", e.Code, e.Info, code)
	}
}

func asError(t *testing.T, err error) *asyncsteps.Error {
	t.Helper()
	var e *asyncsteps.Error
	if !errors.As(err, &e) {
		t.Errorf("error = %#v, want an *asyncsteps.Error", err)
		return nil
	}
	return e
}

// stopwatch returns a function that gives the virtual time of tt elapsed
// since stopwatch was called.
func stopwatch(tt *asyncsteps.TestTool) func() time.Duration {
	start := tt.Now()
	return func() time.Duration { return tt.Now().Sub(start) }
}

// waitFor waits for ch to be closed by a goroutine the test started.
func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the goroutine did not finish")
	}
}

// expectPanic fails the test unless f panics.
func expectPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
