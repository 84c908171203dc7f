package asyncsteps_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A queue's value in these tests: "name:ms", an item that takes ms of
// the flow's clock, or "name:fail", one that fails with CommError.
func chanItem(tr *tracer, tt *asyncsteps.TestTool) func(as steps, v string) {
	return func(as steps, v string) {
		name, what, _ := strings.Cut(v, ":")
		traceAt(tr, tt, "start "+name)
		as.Add(func(as steps, _ ...any) {
			if what == "fail" {
				as.Error(asyncsteps.CommError, name+" failed")
			}
			ms, _ := strconv.Atoi(what)
			h := as.Tool().Deferred(time.Duration(ms)*msec, func() { as.Success() })
			as.SetCancel(func(steps) {
				h.Cancel()
				traceAt(tr, tt, "cancel "+name)
			})
		})
		as.Add(func(steps, ...any) { traceAt(tr, tt, "end "+name) })
	}
}

// Before ForEachChan: a consumer of a channel with at most 2 items in
// flight was 2 branches that each loop over AwaitChan. A closed channel
// gives the zero value, so the values had to be pointers (nil: closed);
// each idle branch holds a goroutine of its own waiting on the channel;
// and an item is a step of its branch's loop, not a branch of its own.
func TestChannelConsumerBeforeForEachChan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan *string, 10)
		process := chanItem(&tr, tt)
		p := r.Parallel()
		for range 2 {
			p.Loop(func(as steps) {
				asyncsteps.AwaitChan(as, ch)
				asyncsteps.Then(as, func(as steps, v *string) {
					if v == nil {
						as.Break() // closed
					}
					process(as, *v)
				})
			})
		}
		r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
		send := func(v string) { ch <- &v; synctest.Wait() }
		res := r.Promise()
		tt.Advance(0)
		synctest.Wait() // both branches wait, each on a goroutine
		send("a:30")
		tt.Advance(5 * msec)
		send("b:10")
		tt.Advance(10 * msec)
		close(ch)
		synctest.Wait()
		tt.Run()
		wantSuccess(t, result(t, res))
		wantTrace(t, &tr, "start a@0s,start b@5ms,end b@15ms,end a@30ms,after@30ms")
	})
}

// The values are received in the channel's order, at most limit items
// running: those that arrive while the slots are full wait in the
// channel and are received, on the loop, as a slot comes free; an empty
// channel is waited for without blocking the loop; a close with items in
// flight ends the step once they have ended. The step gives no args.
func TestForEachChanRunsAtMostLimitItemsAsValuesArrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan string, 10)
		send := func(v string) { ch <- v; synctest.Wait() }
		r.Add(func(as steps, _ ...any) {
			asyncsteps.ForEachChan(as, ch, 2, chanItem(&tr, tt))
		}).Add(func(as steps, args ...any) {
			traceAt(&tr, tt, fmt.Sprint("after ", args))
		})
		send("a:30")
		send("b:10")
		send("c:25") // the slots are full: c waits in ch
		res := r.Promise()
		tt.Advance(15 * msec)
		send("d:3")
		tt.Advance(25 * msec) // to 40ms: the channel is empty from 30ms
		synctest.Wait()
		noResult(t, res)
		tt.Advance(10 * msec)
		send("e:10") // at 50ms, to the goroutine that waits
		tt.Advance(5 * msec)
		close(ch) // at 55ms, with e in flight
		synctest.Wait()
		tt.Run()
		wantSuccess(t, result(t, res))
		wantTrace(t, &tr, "start a@0s,start b@0s,end b@10ms,start c@10ms,"+
			"end a@30ms,start d@30ms,end d@33ms,end c@35ms,start e@50ms,end e@60ms,after []@60ms")
		if tt.HasEvents() {
			t.Errorf("%d events left on the tool", tt.Pending())
		}
	})
}

// Values still in a closed channel are received, and an already closed
// empty channel ends the step at once.
func TestForEachChanClosedChannel(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		trace  string
	}{
		{"empty", nil, "after@0s"},
		{"with values", []string{"a:20", "b:10", "c:5"},
			"start a@0s,start b@0s,end b@10ms,start c@10ms,end c@15ms,end a@20ms,after@20ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			ch := make(chan string, len(c.values))
			for _, v := range c.values {
				ch <- v
			}
			close(ch)
			asyncsteps.ForEachChan(r, ch, 2, chanItem(&tr, tt))
			r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
			wantSuccess(t, run(t, r, tt))
			wantTrace(t, &tr, c.trace)
		})
	}
}

// An item's error is the step's: the items running are cancelled, the
// goroutine that waits for the channel ends, nothing more is received
// (a later value stays in the channel), and onerror, then the handlers
// around the step, see the error.
func TestForEachChanItemErrorStopsReceiving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan string, 10)
		send := func(v string) { ch <- v; synctest.Wait() }
		r.Add(func(as steps, _ ...any) {
			asyncsteps.ForEachChan(as, ch, 3, chanItem(&tr, tt), func(as steps, code string) {
				traceAt(&tr, tt, "onerror "+code+": "+as.State().ErrorInfo)
			})
			as.Add(tr.step("not after a failure"))
		}, func(as steps, code string) {
			traceAt(&tr, tt, "outer "+code)
			as.Success("recovered")
		})
		res := r.Promise()
		send("a:30")
		tt.Advance(5 * msec)
		send("b:fail")
		tt.Advance(0)
		synctest.Wait()
		send("c:5") // after the step has ended
		wantSuccess(t, result(t, res), "recovered")
		wantTrace(t, &tr, "start a@0s,start b@5ms,cancel a@5ms,onerror CommError: b failed@5ms,outer CommError@5ms")
		if n := len(ch); n != 1 {
			t.Errorf("%d values left in the channel, want 1: c", n)
		}
		if tt.HasEvents() {
			t.Errorf("%d events left on the tool", tt.Pending())
		}
	})
}

// A cancel while the step waits on an empty channel, with no item or with
// one running, ends the flow: the running item's and the outer cancel
// handlers run, the goroutine that waits ends (synctest.Test would fail
// on one left blocked), and a value sent later stays in the channel.
func TestForEachChanCancelWhileWaiting(t *testing.T) {
	for _, c := range []struct {
		name, trace string
		values      []string
	}{
		{"no item running", "outer cancel@10ms", nil},
		{"an item running", "start a@0s,cancel a@10ms,outer cancel@10ms", []string{"a:30"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				ch := make(chan string, 10)
				for _, v := range c.values {
					ch <- v
				}
				r.Add(func(as steps, _ ...any) {
					as.SetCancel(func(steps) { traceAt(&tr, tt, "outer cancel") })
					asyncsteps.ForEachChan(as, ch, 2, chanItem(&tr, tt))
				})
				res := r.Promise()
				tt.Advance(10 * msec)
				synctest.Wait()
				r.Cancel()
				tt.Run()
				synctest.Wait()
				ch <- "late:1"
				if err := result(t, res).Err; err == nil || !strings.Contains(err.Error(), "canceled") {
					t.Errorf("Result.Err = %v, want a cancel", err)
				}
				wantTrace(t, &tr, c.trace)
				if n := len(ch); n != 1 {
					t.Errorf("%d values left in the channel, want 1", n)
				}
			})
		})
	}
}

// A timeout around the step while it waits on an empty channel times it
// out as a whole; the handler around it recovers.
func TestForEachChanTimeoutWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan string)
		r.Add(func(as steps, _ ...any) {
			as.SetTimeout(20 * msec)
			asyncsteps.ForEachChan(as, ch, 2, chanItem(&tr, tt))
		}, func(as steps, code string) {
			traceAt(&tr, tt, "outer "+code)
			as.Success()
		})
		res := r.Promise()
		tt.Advance(0)
		synctest.Wait()
		tt.Run()
		wantSuccess(t, result(t, res))
		wantTrace(t, &tr, "outer Timeout@20ms")
	})
}

// An unlabelled Break in an item stops receiving: the goroutine that
// waits ends, the items running go on to their end, the step then
// succeeds, and the values sent later stay in the channel. Continue ends
// its item only.
func TestForEachChanBreakAndContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan string, 10)
		ch <- "a:30"
		ch <- "continue"
		ch <- "break"
		process := chanItem(&tr, tt)
		r.Add(func(as steps, _ ...any) {
			asyncsteps.ForEachChan(as, ch, 3, func(as steps, v string) {
				switch v {
				case "continue":
					traceAt(&tr, tt, "continue")
					as.Continue()
				case "break":
					as.Add(func(as steps, _ ...any) {
						traceAt(&tr, tt, "break")
						as.Break()
					})
					return
				}
				process(as, v)
			})
		}).Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
		res := r.Promise()
		tt.Advance(0)
		synctest.Wait()
		ch <- "late:1"
		tt.Run()
		wantSuccess(t, result(t, res))
		wantTrace(t, &tr, "start a@0s,continue@0s,break@0s,end a@30ms,after@30ms")
		if n := len(ch); n != 1 {
			t.Errorf("%d values left in the channel, want 1", n)
		}
	})
}

// The step waits on an empty channel without blocking its Loop: another
// flow of the loop runs meanwhile, on time. Close ends the waiting flow,
// whether a Promise waits for it or nothing refers to it but the
// goroutine that waits (its unhandled-error function gets the error),
// and leaves no goroutine behind.
func TestForEachChanOnALoop(t *testing.T) {
	for _, promise := range []bool{true, false} {
		t.Run(fmt.Sprint("promise=", promise), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				start := time.Now()
				unhandled := make(chan *asyncsteps.Error, 1)
				r := asyncsteps.New(asyncsteps.WithTool(loop),
					asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { unhandled <- err }))
				ch := make(chan int)
				var tr tracer
				asyncsteps.ForEachChan(r, ch, 2, func(as steps, v int) {
					tr.addf("item %d at %v", v, time.Since(start))
				})
				var res <-chan asyncsteps.Result
				if promise {
					res = r.Promise()
				} else {
					r.Execute()
				}
				other := asyncsteps.New(asyncsteps.WithTool(loop))
				other.Add(func(as steps, _ ...any) {
					as.Tool().Deferred(10*msec, func() { as.Success() })
					as.WaitExternal()
				})
				if _, err := other.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				tr.addf("other at %v", time.Since(start))
				ch <- 1
				synctest.Wait()
				loop.Close()
				var err error
				if promise {
					err = (<-res).Err
				} else {
					err = <-unhandled
				}
				wantError(t, err, asyncsteps.InternalError, "the flow's loop is closed")
				wantTrace(t, &tr, "other at 10ms,item 1 at 10ms")
			})
		})
	}
}

// A nil channel or function, or a limit below 1, is a misuse.
func TestForEachChanMisuse(t *testing.T) {
	item := func(steps, int) {}
	checkLimitMisuses(t, []limitMisuseCase{
		{"nil channel", func(as steps) { asyncsteps.ForEachChan(as, nil, 1, item) }, "ForEachChan: nil channel"},
		{"nil function", func(as steps) { asyncsteps.ForEachChan[int](as, make(chan int), 1, nil) }, "ForEachChan: nil function"},
		{"zero limit", func(as steps) { asyncsteps.ForEachChan(as, make(chan int), 0, item) },
			"ForEachChan: limit must be at least 1 (0 given)"},
		{"two handlers", func(as steps) {
			asyncsteps.ForEachChan(as, make(chan int), 1, item, func(steps, string) {}, func(steps, string) {})
		}, "ForEachChan: more than one error handler (2 given)"},
		{"another AsyncSteps", func(as steps) { asyncsteps.ForEachChan(decorated{as}, make(chan int), 1, item) },
			"ForEachChan: asyncsteps_test.decorated is not an AsyncSteps of this package"},
	})
}

// The deadline of Run's context, passing while the step waits on an empty
// channel, times the step out; the goroutine that waits ends.
func TestForEachChanRunDeadlineWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		ch := make(chan int)
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.ForEachChan(r, ch, 2, func(steps, int) {})
		ctx, cancel := context.WithTimeout(context.Background(), 20*msec)
		defer cancel()
		start := time.Now()
		_, err := r.Run(ctx)
		wantError(t, err, asyncsteps.Timeout, deadlineInfo)
		if d := time.Since(start); d != 20*msec {
			t.Errorf("the flow took %v, want 20ms", d)
		}
	})
}

// ResetEvents keeps a value handed to the step, queued on the TestTool:
// it is the flow's own work, not the test's.
func TestForEachChanResetEventsKeepsAnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		ch := make(chan string, 1)
		asyncsteps.ForEachChan(r, ch, 1, chanItem(&tr, tt))
		res := r.Promise()
		tt.Advance(0)
		synctest.Wait()
		ch <- "a:5"
		synctest.Wait()
		tt.ResetEvents()
		close(ch)
		tt.Advance(0)
		synctest.Wait()
		tt.Run()
		wantSuccess(t, result(t, res))
		wantTrace(t, &tr, "start a@0s,end a@5ms")
	})
}

// An item whose Await function outlives it keeps its slot, as in
// ForEachLimit, but nothing is received ahead while every slot is held: a
// value that arrives meanwhile stays in the channel and starts once the
// function has returned; so does a close, which ends the step then.
func TestForEachChanAwaitFunctionHoldsTheSlot(t *testing.T) {
	for _, closeIt := range []bool{false, true} {
		t.Run(fmt.Sprint("close=", closeIt), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				start := time.Now()
				var tr tracer
				at := func(event string) { tr.addf("%s@%v", event, time.Since(start)) }
				stuck := make(chan struct{})
				ch := make(chan string, 1)
				ch <- "a"
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				asyncsteps.ForEachChan(r, ch, 1, func(as steps, v string) {
					at("start " + v)
					if v != "a" {
						return
					}
					as.Add(func(as steps, _ ...any) {
						as.SetTimeout(10 * msec)
						as.Await(func(context.Context) (any, error) {
							<-stuck // deaf to its context
							at("a's function returns")
							return nil, nil
						})
					}, func(as steps, code string) {
						at("a " + code)
						as.Success()
					})
				})
				r.Add(func(steps, ...any) { at("after") })
				res := r.Promise()
				time.Sleep(15 * msec)
				if closeIt {
					close(ch)
				} else {
					ch <- "b"
					synctest.Wait()
					go func() { time.Sleep(5 * msec); close(ch) }()
				}
				synctest.Wait()
				time.Sleep(5 * msec)
				close(stuck)
				wantSuccess(t, <-res)
				synctest.Wait()
				want := "start a@0s,a Timeout@10ms,a's function returns@20ms,after@20ms"
				if !closeIt {
					want = "start a@0s,a Timeout@10ms,a's function returns@20ms,start b@20ms,after@20ms"
				}
				wantTrace(t, &tr, want)
			})
		})
	}
}

// While every slot is held by the Await function of an ended item, the
// step receives nothing: the values stay in the channel, for a consumer
// with a free slot, and a cancel, or Run's deadline, that ends the step
// meanwhile loses none of them. Receiving one ahead, as ForEachLimit
// pulls a pair ahead, took a job that no slot could run, and dropped it.
func TestForEachChanReceivesNothingWhileEverySlotIsHeld(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		t.Run(fmt.Sprint("deadline=", deadline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				stuck := make(chan struct{})
				ch := make(chan string, 3)
				ch <- "a"
				ch <- "b"
				ch <- "c"
				var items []string
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				asyncsteps.ForEachChan(r, ch, 1, func(as steps, v string) {
					items = append(items, v)
					as.Add(func(as steps, _ ...any) {
						as.SetTimeout(10 * msec)
						as.Await(func(context.Context) (any, error) {
							<-stuck // deaf to its context
							return nil, nil
						})
					}, func(as steps, code string) { as.Success() })
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*msec)
				defer cancel()
				if !deadline {
					ctx = context.Background()
				}
				res := make(chan error, 1)
				go func() { _, err := r.Run(ctx); res <- err }()
				time.Sleep(15 * msec)
				synctest.Wait()
				if n := len(ch); n != 2 {
					t.Errorf("at 15ms, with the slot held: %d values in the channel, want 2", n)
				}
				if !deadline {
					r.Cancel()
				}
				err := <-res
				close(stuck)
				synctest.Wait()
				if deadline {
					wantError(t, err, asyncsteps.Timeout, deadlineInfo)
				} else if err == nil || !strings.Contains(err.Error(), "canceled") {
					t.Errorf("Run: %v, want a cancel", err)
				}
				if n := len(ch); n != 2 || fmt.Sprint(items) != "[a]" {
					t.Errorf("items %v, %d values left in the channel; want [a], 2", items, n)
				}
			})
		})
	}
}

// On a decorator the step is added to the AsyncSteps it wraps, in order
// with the steps added through the decorator, and the items get this
// package's AsyncSteps; AsyncStack names the item's function.
func TestForEachChanOnADecoratorAndItsStack(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	ch := make(chan int, 3)
	ch <- 0
	ch <- 1
	ch <- 2
	close(ch)
	r.Add(func(as steps, _ ...any) {
		d := unwrapping{as}
		d.Add(tr.step("first"))
		asyncsteps.ForEachChan(d, ch, 1, func(as steps, i int) {
			_, decorated := as.(unwrapping)
			tr.addf("item %d decorated %v", i, decorated)
			forEachLimitFailsAt2(as, i, 0)
		}).Add(tr.step("not after a failure"))
	})
	wantError(t, run(t, r, tt).Err, "Failed", "")
	wantTrace(t, &tr, "first,item 0 decorated false,item 1 decorated false,item 2 decorated false")
	stack := r.State().AsyncStack
	if len(stack) != 2 || !strings.HasPrefix(stack[1], "github.com/asyncsteps/asyncsteps_test.TestForEachChanOnADecoratorAndItsStack.func") {
		t.Errorf("AsyncStack = %q, want the step's function and the item's", stack)
	}
}
