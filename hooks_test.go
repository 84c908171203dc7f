package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

type ctxKey struct{}

// recorder is a set of hooks that writes what they see to a trace, with
// the flow's name, which FlowStart puts in the flow's context.
type recorder struct {
	mu    sync.Mutex
	trace []string
	next  int
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.trace, "\n")
}

func name(ctx context.Context) any { return ctx.Value(ctxKey{}) }

func (r *recorder) hooks() *asyncsteps.Hooks {
	return &asyncsteps.Hooks{
		FlowStart: func(ctx context.Context) context.Context {
			r.next++
			n := fmt.Sprintf("flow%d", r.next)
			r.add("start %s", n)
			return context.WithValue(ctx, ctxKey{}, n)
		},
		FlowEnd:   func(ctx context.Context, err error) { r.add("end %v: %v", name(ctx), err) },
		StepError: func(ctx context.Context, err *asyncsteps.Error) { r.add("error %v: %v", name(ctx), err) },
		AwaitStart: func(ctx context.Context) context.Context {
			r.add("await %v", name(ctx))
			return context.WithValue(ctx, ctxKey{}, fmt.Sprint(name(ctx), "/await"))
		},
		AwaitEnd: func(ctx context.Context, err *asyncsteps.Error) { r.add("awaited %v: %v", name(ctx), err) },
	}
}

func TestHooksSeeFlowsErrorsAndAwaits(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	rec := &recorder{}
	tt.SetHooks(rec.hooks())
	ctx := context.Background()

	ok := asyncsteps.New(asyncsteps.WithTool(tt))
	ok.Await(func(ctx context.Context) (any, error) {
		rec.add("fn sees %v", name(ctx))
		return 1, nil
	})
	ok.Add(func(as steps, _ ...any) {
		as.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, "down") },
			func(as steps, code string) { as.Error(asyncsteps.InvalidRequest, "replaced") })
	}, func(as steps, code string) { as.Success() })
	ok.Repeat(2, func(as steps, i int) { as.Break() })
	if _, err := ok.Run(ctx); err != nil {
		t.Fatal(err)
	}

	failed := asyncsteps.New(asyncsteps.WithTool(tt))
	failed.Await(func(context.Context) (any, error) { return nil, errors.New("no route") })
	failed.Run(ctx)

	timedOut := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
	timedOut.Add(func(as steps, _ ...any) { as.SetTimeout(time.Second) })
	timedOut.Execute()
	tt.Run()

	cancelled := asyncsteps.New(asyncsteps.WithTool(tt))
	cancelled.Add(func(as steps, _ ...any) { as.WaitExternal() })
	cctx, cancel := context.WithCancel(ctx)
	tt.Immediate(cancel)
	cancelled.Run(cctx)

	panicked := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
	panicked.Add(func(as steps, _ ...any) { panic("boom") })
	panicked.Execute()
	tt.Run()

	want := `start flow1
await flow1
fn sees flow1/await
awaited flow1/await: <nil>
error flow1: CommError: down
error flow1: InvalidRequest: replaced
end flow1: <nil>
start flow2
await flow2
awaited flow2/await: InternalError: no route
error flow2: InternalError: no route
end flow2: InternalError: no route
start flow3
error flow3: Timeout
end flow3: Timeout
start flow4
end flow4: context canceled
start flow5
error flow5: InternalError: boom
end flow5: InternalError: boom`
	if got := rec.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// A flow is observed by the hooks its tool had when it began: a flow that
// began before SetHooks is not observed, one that began before hooks were
// removed is observed to its end.
func TestHooksObserveFlowsThatBeganWithThem(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	rec := &recorder{}
	wait := func() (*asyncsteps.Root, <-chan asyncsteps.Result) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Add(func(as steps, _ ...any) { as.Error("Late") })
		})
		ch := r.Promise()
		tt.Advance(0) // begin
		return r, ch
	}
	_, before := wait()
	tt.SetHooks(rec.hooks())
	_, during := wait()
	tt.SetHooks(nil)
	_, after := wait()
	tt.Run()
	for _, ch := range []<-chan asyncsteps.Result{before, during, after} {
		<-ch
	}
	want := "start flow1\nerror flow1: Late\nend flow1: Late"
	if got := rec.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// SyncWait reports how long a flow waited in a queue, on the tool's
// clock; flows let in at once are not reported.
func TestHooksSyncWait(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	rec := &recorder{}
	m := asyncsteps.NewMutex(1)
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	kind := func(obj asyncsteps.Syncer) string {
		switch obj {
		case m:
			return "mutex"
		case th:
			return "throttle"
		}
		return fmt.Sprintf("%T", obj)
	}
	tt.SetHooks(&asyncsteps.Hooks{SyncWait: func(obj asyncsteps.Syncer, d time.Duration) {
		rec.add("%s waited %v", kind(obj), d)
	}})
	hold := func(as steps, _ ...any) {
		as.SetTimeout(time.Hour)
		as.Tool().Deferred(30*time.Millisecond, func() { as.Success() })
	}
	var chs []<-chan asyncsteps.Result
	for range 3 {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(m, hold)
		chs = append(chs, r.Promise())
	}
	tt.Run()
	for range 2 {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(th, func(as steps, _ ...any) {})
		chs = append(chs, r.Promise())
	}
	tt.Run()
	for _, ch := range chs {
		if res := <-ch; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	want := "mutex waited 30ms\nmutex waited 60ms\nthrottle waited 100ms"
	if got := rec.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// A Loop reports its queue length at each pass, and its lag: a callback
// queued behind one that takes 20 ms waits at least that long.
func TestHooksLoopPassAndLag(t *testing.T) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	var mu sync.Mutex
	maxQueued, maxLag := 0, time.Duration(0)
	l.SetHooks(&asyncsteps.Hooks{
		LoopPass: func(got *asyncsteps.Loop, n int) {
			if got != l {
				t.Errorf("LoopPass for another loop")
			}
			mu.Lock()
			maxQueued = max(maxQueued, n)
			mu.Unlock()
		},
		LoopLag: func(_ *asyncsteps.Loop, lag time.Duration) {
			mu.Lock()
			maxLag = max(maxLag, lag)
			mu.Unlock()
		},
	})
	set := make(chan struct{})
	l.Immediate(func() { close(set) }) // runs after the hooks are set
	<-set
	release := make(chan struct{})
	l.Immediate(func() { <-release }) // hold the loop while the next two queue
	l.Immediate(func() { time.Sleep(20 * time.Millisecond) })
	done := make(chan struct{})
	l.Immediate(func() { close(done) })
	close(release)
	<-done
	// The lag probe was queued behind the two callbacks, so after done:
	// a callback scheduled now runs after it.
	after := make(chan struct{})
	l.Immediate(func() { close(after) })
	<-after
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	if maxQueued < 2 {
		t.Errorf("largest queue length seen %d, want at least 2", maxQueued)
	}
	if maxLag < 20*time.Millisecond {
		t.Errorf("largest lag seen %v, want at least 20ms", maxLag)
	}
}

// A TestTool calls no LoopPass or LoopLag (docs/DESIGN.md#hooks): it has
// no loop to pass over, and its lag would be of virtual time. The flow's
// own hooks run.
func TestHooksTestToolCallsNoLoopHooks(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var calls []string
	tt.SetHooks(&asyncsteps.Hooks{
		FlowStart: func(ctx context.Context) context.Context { calls = append(calls, "FlowStart"); return ctx },
		LoopPass:  func(*asyncsteps.Loop, int) { calls = append(calls, "LoopPass") },
		LoopLag:   func(*asyncsteps.Loop, time.Duration) { calls = append(calls, "LoopLag") },
	})
	tt.Immediate(func() {})
	tt.Deferred(time.Second, func() {})
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Minute)
		tt.Deferred(time.Millisecond, func() { as.Success() })
	})
	r.Execute()
	tt.Run()
	if got := strings.Join(calls, ","); got != "FlowStart" {
		t.Errorf("hooks called: %s, want FlowStart", got)
	}
}

// LoopGroup.SetHooks sets the hooks on every loop of the group.
func TestHooksOnEveryLoopOfAGroup(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	var mu sync.Mutex
	started := map[bool]int{} // by whether the flow ran on the first loop
	first := g.Loops()[0]
	g.SetHooks(&asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
		mu.Lock()
		started[first.IsSameThread()]++
		mu.Unlock()
		return ctx
	}})
	for range 4 {
		if _, err := g.New().Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if started[true] != 2 || started[false] != 2 {
		t.Errorf("flows observed on the first loop and on the other: %d and %d, want 2 and 2", started[true], started[false])
	}
}

// A flow that never begins, started under an ended context (cancelled, or
// past its deadline, which Run returns as a Timeout) or on a closed Loop,
// meets no hook: not even FlowEnd, though its Result is an error.
func TestHooksDoNotSeeAFlowThatNeverBegins(t *testing.T) {
	rec := &recorder{}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	passed, cancelPassed := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPassed()
	l := asyncsteps.NewLoop()
	defer l.Close()
	l.SetHooks(rec.hooks())
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(as steps, _ ...any) {})
	if _, err := r.Run(ended); !errors.Is(err, context.Canceled) {
		t.Errorf("Run under an ended context: %v", err)
	}
	var e *asyncsteps.Error
	if _, err := r.Run(passed); !errors.As(err, &e) || e.Code != asyncsteps.Timeout {
		t.Errorf("Run past its deadline: %v, want a Timeout", err)
	}
	l.Close()
	r = asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(as steps, _ ...any) {})
	if res := <-r.Promise(); res.Err == nil {
		t.Errorf("a flow on a closed Loop succeeded")
	}
	if got := rec.String(); got != "" {
		t.Errorf("trace:\n%s\nwant none", got)
	}
}
