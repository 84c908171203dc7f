package asyncsteps_test

// The hooks of FuzzFlows' programs with Program.Hooks: they trace their
// calls for the model to predict (see ff.FlowStartEvent and the others).

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
	ff "github.com/asyncsteps/asyncsteps/internal/flowfuzz"
)

// awaitCall is what the Await hooks saw of a call of an Await function:
// the KAwait it is of (set by the function), and AwaitEnd's calls.
type awaitCall struct {
	id   int
	ends []string
}

type (
	flowKey  struct{}
	awaitKey struct{}
)

// hooks returns hooks that trace their calls (see ff.FlowStartEvent and
// the others): those on the tool's goroutine as events, AwaitStart and
// AwaitEnd, on the functions' goroutines, in awaitCalls.
func (x *flowRun) hooks() *asyncsteps.Hooks {
	return &asyncsteps.Hooks{
		FlowStart: func(ctx context.Context) context.Context {
			k := x.flowsBegun
			x.flowsBegun++
			x.hookEvent(ff.FlowStartEvent(k))
			if x.p.FlowStartPanics(k) {
				x.failedStart, x.failedCtx = k, ctx // its StepError and FlowEnd get ctx
				panic(ff.FlowStartPanicValue(k))
			}
			return context.WithValue(ctx, flowKey{}, k)
		},
		FlowEnd: func(ctx context.Context, err error) {
			end := "ok"
			if err != nil {
				end = x.endString(asyncsteps.Result{Err: err})
			}
			x.hookEvent(ff.FlowEndEvent(x.flowOf(ctx), end))
		},
		StepError: func(ctx context.Context, err *asyncsteps.Error) {
			x.hookEvent(ff.StepErrorEvent(x.flowOf(ctx), err.Code, err.Info, isPanic(err)))
		},
		AwaitStart: func(ctx context.Context) context.Context {
			c := &awaitCall{}
			x.awaitMu.Lock()
			x.awaitCalls = append(x.awaitCalls, c)
			x.awaitMu.Unlock()
			return context.WithValue(ctx, awaitKey{}, c)
		},
		AwaitEnd: func(ctx context.Context, err *asyncsteps.Error) {
			c, _ := ctx.Value(awaitKey{}).(*awaitCall)
			if c == nil {
				x.violation("AwaitEnd without the context AwaitStart returned")
				return
			}
			end := "ok"
			if err != nil {
				end = strings.TrimPrefix(ff.StepErrorEvent(0, err.Code, err.Info, isPanic(err)), "SE:")
			}
			x.awaitMu.Lock()
			c.ends = append(c.ends, end)
			id := c.id
			x.awaitMu.Unlock()
			if err == nil && x.p.AwaitEndPanics(id) {
				panic(ff.AwaitEndPanicValue(id))
			}
		},
		SyncWait: func(obj asyncsteps.Syncer, waited time.Duration) {
			gate := x.gateOf(obj)
			x.hookEvent(ff.SyncWaitEvent(gate, waited.Milliseconds()))
			if x.p.SyncWaitPanics(gate) {
				panic(ff.SyncWaitPanicValue(gate))
			}
		},
	}
}

// hookEvent records the call of a hook on the tool's goroutine: in the
// trace, or, once the flow has ended, in late.
func (x *flowRun) hookEvent(ev string) {
	if x.ended {
		x.late = append(x.late, ff.AtTime(ev, x.tt.Now().Sub(x.start).Milliseconds()))
		return
	}
	x.event(ev)
}

// flowOf returns the number FlowStart gave the flow whose context is ctx.
// A flow whose FlowStart failed has the context it was given, which, for
// one of AwaitFlow, holds the number of the flow that awaits it: ctx
// itself tells it.
func (x *flowRun) flowOf(ctx context.Context) int {
	if x.failedStart > 0 && ctx == x.failedCtx {
		return x.failedStart
	}
	k, ok := ctx.Value(flowKey{}).(int)
	switch {
	case ok:
	case x.failedStart > 0:
		k = x.failedStart
	default:
		x.violation("a hook got a context FlowStart did not return")
	}
	return k
}

// isPanic reports whether err is the InternalError of a recovered panic,
// whose info is the panic's value (see endString).
func isPanic(err *asyncsteps.Error) bool {
	pe, ok := err.Cause.(*asyncsteps.PanicError)
	return ok && err.Code == asyncsteps.InternalError && (err.Info == panicInfo(pe) || err.Info == pe.Error())
}

// gateOf returns the index of the Syncer obj in ff.SyncWaitEvent.
func (x *flowRun) gateOf(obj asyncsteps.Syncer) int {
	switch {
	case x.throttle != nil && obj == x.rateGate:
		return ff.ThrottleGate
	case x.limiter != nil && obj == x.limitGate:
		return ff.LimiterGate
	}
	for i, m := range x.mutexes {
		if obj == asyncsteps.Syncer(m) {
			return i
		}
	}
	for key := range ff.KeyedKeys {
		if x.keyed != nil && obj == x.keyed.Key(key) {
			return ff.KeyedGate + key
		}
	}
	x.violation("SyncWait got a Syncer %T of no Sync of the program", obj)
	return -1
}

// awaitHookCalls returns the calls of the Await hooks in the run, sorted
// (see ff.Result.AwaitHooks): each call of a function is one AwaitStart
// and, once it has returned, one AwaitEnd.
func (x *flowRun) awaitHookCalls() []string {
	x.awaitMu.Lock()
	defer x.awaitMu.Unlock()
	var calls []string
	for _, c := range x.awaitCalls {
		if c.id == 0 {
			x.violation("AwaitStart without a call of an Await function")
		}
		if len(c.ends) != 1 {
			x.violation("Await function of %d: AwaitEnd called %d times", c.id, len(c.ends))
		}
		calls = append(calls, ff.AwaitStartEvent(c.id))
		for _, e := range c.ends {
			calls = append(calls, ff.AwaitEndEvent(c.id, e))
		}
	}
	slices.Sort(calls)
	return calls
}
