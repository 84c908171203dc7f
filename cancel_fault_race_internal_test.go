package asyncsteps

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// A cancel handler's fault in a level an error unwinds through, with a
// Cancel from another goroutine landing once the handler has ended, before
// the unwinding looks for a cancel (the hook forces it there): the cancel
// wins at that level, so no handler sees the fault, which is logged once,
// as when the cancel came first. Before, callCancel decided whether to log
// before that look, found no cancel, and the fault was lost but for
// LastException; after a Goexit, the window ran to the next goroutine's
// look.
func TestCancelHandlerFaultUnderALateCancelIsLogged(t *testing.T) {
	for _, c := range []struct {
		name, want string
		fault      func()
	}{
		{"panic", `msg="asyncsteps: panic in cancel handler" panic="in cancel"`, func() { panic("in cancel") }},
		{"Goexit", `msg="asyncsteps: runtime.Goexit in cancel handler"`, runtime.Goexit},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := captureLog(t)
			var trace []string
			l := NewLoop() // a Loop goes on with a new goroutine
			defer l.Close()
			r := New(WithTool(l))
			onceHook(t, &testHookUnwindStopCheck, func() {
				done := make(chan struct{})
				go func() { // another goroutine's Cancel, landing now
					r.Cancel()
					close(done)
				}()
				<-done
			})
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Add(func(as AsyncSteps, _ ...any) {
					as.SetCancel(func(AsyncSteps) {
						trace = append(trace, "cancel")
						c.fault()
					})
					as.Error("E")
				})
			}, func(_ AsyncSteps, code string) { trace = append(trace, "outer "+code) })

			if _, err := r.Run(context.Background()); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v, want context.Canceled", err)
			}
			if got := strings.Join(trace, ","); got != "cancel" {
				t.Errorf("trace %q, want %q", got, "cancel")
			}
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", log, c.want)
			}
		})
	}
}

// As TestCancelHandlerFaultUnderAWinningCancelIsLogged, with a StepError
// hook that calls runtime.Goexit as it is told of the cancel handler's
// panic: the unwinding goes on from the next goroutine, where the cancel
// wins, and the panic is logged there, once.
func TestCancelHandlerFaultIsLoggedPastAStepErrorHookThatExits(t *testing.T) {
	log := captureLog(t)
	var trace []string
	l := NewLoop()
	defer l.Close()
	l.SetHooks(&Hooks{StepError: func(_ context.Context, err *Error) {
		trace = append(trace, "steperror "+err.Error())
		if err.Info == "in cancel" {
			runtime.Goexit()
		}
	}})
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.Add(func(as AsyncSteps, _ ...any) {
			as.SetCancel(func(AsyncSteps) { panic("in cancel") })
			r.Cancel()
			as.Error("E")
		})
	}, func(_ AsyncSteps, code string) { trace = append(trace, "outer "+code) })

	if _, err := r.Run(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if got, want := strings.Join(trace, ","), "steperror E,steperror InternalError: in cancel"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if want := `msg="asyncsteps: panic in cancel handler" panic="in cancel"`; len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("the engine logged:\n%s\nwant %s, once", log, want)
	}
}

// A cancel handler's fault in a level an error unwinds through, found with
// no cancel requested, and the loop closed before the next goroutine goes
// on with the unwinding, after the handler's Goexit or that of the
// StepError hook told of the fault: the flow ends with "the flow's loop is
// closed", no handler sees the fault, which is logged once, as the Close
// drops its unwinding. So when a Cancel lands once the handler has ended,
// before the Close (the hook forces it there). Before, only a cancel
// requested as the handler ended had the fault logged.
func TestCancelHandlerFaultIsLoggedAsTheLoopDropsItsUnwinding(t *testing.T) {
	const goexit = `msg="asyncsteps: runtime.Goexit in cancel handler"`
	for _, c := range []struct {
		name, want string
		close      func(l *Loop, r *Root) // as the handler's Goexit has queued the unwinding
		hook       bool                   // the handler panics; a StepError hook closes the loop and exits
	}{
		{"Close", goexit, func(l *Loop, _ *Root) { l.Close() }, false},
		{"Cancel then Close", goexit, func(l *Loop, r *Root) {
			done := make(chan struct{})
			go func() { // another goroutine's Cancel, landing now
				r.Cancel()
				close(done)
			}()
			<-done
			l.Close()
		}, false},
		{"Close by the StepError hook", `msg="asyncsteps: panic in cancel handler" panic="in cancel"`, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := captureLog(t)
			var trace []string
			l := NewLoop()
			r := New(WithTool(l))
			fault := runtime.Goexit
			if c.hook {
				fault = func() { panic("in cancel") }
				l.SetHooks(&Hooks{StepError: func(_ context.Context, err *Error) {
					if err.Info == "in cancel" {
						l.Close()
						runtime.Goexit()
					}
				}})
			} else {
				onceHook(t, &testHookCancelFaultQueued, func() { c.close(l, r) })
			}
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Add(func(as AsyncSteps, _ ...any) {
					as.SetCancel(func(AsyncSteps) {
						trace = append(trace, "cancel")
						fault()
					})
					as.Error("E")
				})
			}, func(_ AsyncSteps, code string) { trace = append(trace, "outer "+code) })

			res := <-r.Promise()
			<-l.Done()
			if e, ok := res.Err.(*Error); !ok || e.Code != InternalError || e.Info != "the flow's loop is closed" {
				t.Fatalf("Result: %v, want InternalError: the flow's loop is closed", res.Err)
			}
			if got := strings.Join(trace, ","); got != "cancel" {
				t.Errorf("trace %q, want %q", got, "cancel")
			}
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", log, c.want)
			}
		})
	}
}

// Two faulting cancel handlers in consecutive levels an error unwinds
// through: the outer one's fault replaces the inner one's, which no
// handler has seen and now never will, so it is logged as it is
// replaced, before the outer one's, also when the outer handler calls
// Goexit. Under a cancel that the outer handler requests, the cancel wins
// over the outer fault, logged too; so under one that a StepError hook
// told of the inner fault requests before its Goexit. With no cancel, the
// error handler around sees the outer fault only: the inner one is logged
// all the same. Before, the inner fault was logged only when the hook's
// Goexit lay between them, under a cancel.
func TestCancelHandlerFaultReplacedByAnOuterOneIsLogged(t *testing.T) {
	const (
		inner  = `msg="asyncsteps: panic in cancel handler" panic=inner`
		outer  = `msg="asyncsteps: panic in cancel handler" panic=outer`
		goexit = `msg="asyncsteps: runtime.Goexit in cancel handler"`
	)
	for _, c := range []struct {
		name string
		// cancelIn requests a cancel: "outer", the outer handler; "hook", a
		// StepError hook told of the inner fault, which then calls Goexit.
		cancelIn   string
		outerExits bool // the outer handler calls Goexit rather than panic
		trace      string
		logs       []string
	}{
		{"a cancel of the outer handler", "outer", false, "inner cancel,outer cancel", []string{inner, outer}},
		{"a cancel of the outer handler, which exits", "outer", true, "inner cancel,outer cancel", []string{inner, goexit}},
		{"a cancel of a hook that exits", "hook", false, "inner cancel,outer cancel", []string{inner, outer}},
		{"no cancel", "", false, "inner cancel,outer cancel,handler InternalError", []string{inner}},
		{"no cancel, the outer handler exits", "", true, "inner cancel,outer cancel,handler InternalError", []string{inner}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := captureLog(t)
			var trace []string
			l := NewLoop()
			defer l.Close()
			var r *Root
			if c.cancelIn == "hook" {
				l.SetHooks(&Hooks{StepError: func(_ context.Context, err *Error) {
					if err.Info == "inner" {
						r.Cancel()
						runtime.Goexit()
					}
				}})
			}
			r = New(WithTool(l))
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Add(func(as AsyncSteps, _ ...any) {
					as.SetCancel(func(AsyncSteps) {
						trace = append(trace, "outer cancel")
						if c.cancelIn == "outer" {
							r.Cancel()
						}
						if c.outerExits {
							runtime.Goexit()
						}
						panic("outer")
					})
					as.Add(func(as AsyncSteps, _ ...any) {
						as.SetCancel(func(AsyncSteps) {
							trace = append(trace, "inner cancel")
							panic("inner")
						})
						as.Error("E")
					})
				})
			}, func(as AsyncSteps, code string) {
				trace = append(trace, "handler "+code)
				as.Success()
			})

			res := <-r.Promise()
			if c.cancelIn != "" && !errors.Is(res.Err, context.Canceled) {
				t.Fatalf("Result: %v, want context.Canceled", res.Err)
			} else if c.cancelIn == "" && res.Err != nil {
				t.Fatalf("Result: %v, want nil", res.Err)
			}
			if got := strings.Join(trace, ","); got != c.trace {
				t.Errorf("trace %q, want %q", got, c.trace)
			}
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			ok := len(lines) == len(c.logs)
			for i := 0; ok && i < len(lines); i++ {
				ok = strings.Contains(lines[i], c.logs[i])
			}
			if !ok {
				t.Errorf("the engine logged:\n%s\nwant, in order:\n%s", log, strings.Join(c.logs, "\n"))
			}
		})
	}
}

// A Parallel branch's cancel handler panics as the branch's error unwinds
// through it, with no error handler in the branch: its fault climbs to the
// Parallel unseen. A sibling's cancel handler, run as the Parallel cancels
// the other branches, calls Goexit. If it closes the loop first, the Close
// drops the cancel job queued for the next goroutine, and with it the
// unwinding of the branch's fault, which no handler ever sees: it is
// logged, once, as the job is dropped, after the Goexit (before, only the
// Goexit was). Else the job goes on and the error handler around sees the
// fault, which is not logged. Either way nothing is left held for it.
func TestBranchCancelFaultIsLoggedAsTheLoopDropsTheSiblingsCancel(t *testing.T) {
	const goexit = `msg="asyncsteps: runtime.Goexit in cancel handler"`
	for _, c := range []struct {
		name  string
		close bool
		trace string
		logs  []string
	}{
		{"Close", true, "branch cancel,sibling cancel", []string{goexit, `msg="asyncsteps: panic in cancel handler" panic=branch`}},
		{"no Close", false, "branch cancel,sibling cancel,outer InternalError", []string{goexit}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := captureLog(t)
			var trace []string
			l := NewLoop()
			defer l.Close()
			r := New(WithTool(l))
			r.Add(func(as AsyncSteps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as AsyncSteps, _ ...any) {
					as.SetCancel(func(AsyncSteps) {
						trace = append(trace, "sibling cancel")
						if c.close {
							l.Close()
						}
						runtime.Goexit()
					})
				})
				p.Add(func(as AsyncSteps, _ ...any) {
					as.SetCancel(func(AsyncSteps) {
						trace = append(trace, "branch cancel")
						panic("branch")
					})
					as.Error("E")
				})
			}, func(as AsyncSteps, code string) {
				trace = append(trace, "outer "+code)
				as.Success()
			})

			res := <-r.Promise()
			if !c.close && res.Err != nil {
				t.Fatalf("Result: %v, want nil", res.Err)
			} else if e, ok := res.Err.(*Error); c.close && (!ok || e.Code != InternalError || e.Info != "the flow's loop is closed") {
				t.Fatalf("Result: %v, want InternalError: the flow's loop is closed", res.Err)
			}
			if got := strings.Join(trace, ","); got != c.trace {
				t.Errorf("trace %q, want %q", got, c.trace)
			}
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			ok := len(lines) == len(c.logs)
			for i := 0; ok && i < len(lines); i++ {
				ok = strings.Contains(lines[i], c.logs[i])
			}
			if !ok {
				t.Errorf("the engine logged:\n%s\nwant, in order:\n%s", log, strings.Join(c.logs, "\n"))
			}
		})
	}
}
