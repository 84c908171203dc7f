package flowfuzz

import (
	"strings"
	"testing"
)

// TestModelSpecExamples pins the model to the spec's own examples and to
// rules of docs/DESIGN.md, without the engine.
func TestModelSpecExamples(t *testing.T) {
	tests := []struct {
		name string
		p    *Program
		want string
		// With hooks: the Await hooks' calls, and those after the end.
		awaitHooks, late string
	}{{
		// Spec 1.1: levels run depth first.
		name: "levels",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, Subs: []*Node{{ID: 3, Kind: KStep}}},
				{ID: 4, Kind: KStep},
			}},
			{ID: 5, Kind: KStep},
		}},
		want: "s1() s2() s3() s4() s5() -> ok()",
	}, {
		// Spec 1.2: the inner handler replaces the error, the outer
		// recovers with args for the next step.
		name: "error handlers",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 3, Action: HRethrow, Code: "E2"}},
			}, Handler: &Handler{ID: 4, Action: HRecover, Args: []int{7}}},
			{ID: 5, Kind: KStep},
		}},
		want: "s1() s2() h3:E1: h4:E2: s5(7) -> ok()",
	}, {
		// Spec 1.2.1: a handler's added steps fail; it is not run again.
		name: "steps in error handler",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 3, Action: HAdd, Steps: []*Node{
					{ID: 4, Kind: KStep, End: EError, Code: "E2", Handler: &Handler{ID: 5}},
				}}},
			}, Handler: &Handler{ID: 6}},
		}},
		want: "s1() s2() h3:E1: s4() h5:E2: h6:E2: -> err:E2:",
	}, {
		// Interleaving: two branches that each add a sub-step.
		name: "parallel interleaving",
		p: &Program{Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KStep, Subs: []*Node{{ID: 3, Kind: KStep}}},
			{ID: 4, Kind: KStep, Subs: []*Node{{ID: 5, Kind: KStep}}},
		}}}},
		want: "s2() s4() s3() s5() -> ok()",
	}, {
		// docs/DESIGN.md#timeouts: a timeout cancels the sub-steps innermost first, then
		// the step's own cancel handler, then its error handler.
		name: "timeout",
		p: &Program{Steps: []*Node{{ID: 1, Kind: KStep, Timeout: 20, Cancel: true,
			Subs: []*Node{{ID: 2, Kind: KStep, Cancel: true, Subs: []*Node{
				{ID: 3, Kind: KStep, Cancel: true, End: EExternal, At: 50},
			}}},
			Handler: &Handler{ID: 4}}}},
		want: "s1() s2() s3() c3@20 c2@20 c1@20 h4:Timeout:@20 -> err:Timeout:",
	}, {
		// docs/DESIGN.md#parallel-branches: the first error cancels the other branches.
		name: "parallel error",
		p: &Program{Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KStep, Cancel: true, End: EExternal, At: 30},
			{ID: 3, Kind: KStep, End: EExternalErr, At: 10, Code: "E1", Info: "x"},
			{ID: 4, Kind: KStep, Cancel: true, End: EWait},
		}, Handler: &Handler{ID: 5, Action: HRecover}}, {ID: 6, Kind: KStep}}},
		want: "s2() s3() s4() c2@10 c4@10 h5:E1:x@10 s6()@10 -> ok()",
	}, {
		// docs/DESIGN.md#cancel-handlers: root cancel runs cancel handlers only.
		name: "root cancel",
		p: &Program{CancelAt: 5, Steps: []*Node{{ID: 1, Kind: KStep, Cancel: true, End: EWait,
			Handler: &Handler{ID: 2, Action: HRecover}}}},
		want: "s1() c1@5 -> canceled",
	}, {
		// docs/DESIGN.md#break-and-continue: a labelled Continue, then Break outside of any loop.
		name: "loops",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRepeat, Label: "A", Count: 2, Subs: []*Node{
				{ID: 2, Kind: KRepeat, Count: 3, Subs: []*Node{{ID: 3, Kind: KStep, End: EContinue, Label: "A"}}},
			}},
			{ID: 4, Kind: KStep, End: EBreak, Handler: &Handler{ID: 5}},
		}},
		want: "L1#0 L2#0 s3() L1#1 L2#0 s3() s4() h5:LoopBreak: -> err:InternalError",
	}, {
		// docs/DESIGN.md#locks-and-limits: a Mutex(1) queues the second branch.
		name: "mutex",
		p: &Program{Mutexes: []int{1}, Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KSync, Body: &Node{ID: 3, Kind: KStep, End: EExternal, At: 10}},
			{ID: 4, Kind: KSync, Body: &Node{ID: 5, Kind: KStep, End: EExternal, At: 10}},
		}}}},
		want: "s3() s5()@10 -> ok()",
	}, {
		// A panic in a step and in its handler: InternalError with the
		// panic value as info; the sub-step added before the panic does not
		// run, the step's cancel handler does.
		name: "panics",
		p: &Program{Steps: []*Node{{ID: 1, Kind: KStep, End: EPanic, Cancel: true,
			Subs:    []*Node{{ID: 2, Kind: KStep}},
			Handler: &Handler{ID: 3, Action: HPanic}}}},
		want: "s1() c1 h3:InternalError:!p1 -> err:InternalError:!p3",
	}, {
		// docs/DESIGN.md#error-handlers for a handler that waits: its Success resumes after the
		// failed step; its Error replaces the error; its timeout raises
		// Timeout outward, never to the same handler.
		name: "waiting handlers",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 2, Action: HWait, Done: EExternal, At: 10, Args: []int{5}}},
			{ID: 3, Kind: KStep, Subs: []*Node{
				{ID: 4, Kind: KStep, End: EError, Code: "E0", Handler: &Handler{ID: 5, Action: HWait, Done: EExternalErr, At: 10, Code: "E2", Info: "x"}},
			}, Handler: &Handler{ID: 6, Action: HRecover}},
			{ID: 7, Kind: KStep, Subs: []*Node{
				{ID: 8, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 9, Action: HWait, Timeout: 20, Done: EExternal, At: 30}},
			}, Handler: &Handler{ID: 10}},
		}},
		want: "s1() h2:E1: s3(5)@10 s4()@10 h5:E0:@10 h6:E2:x@20 s7()@20 s8()@20 h9:E1:@20 h10:Timeout:@40 -> err:Timeout:",
	}, {
		// docs/DESIGN.md#timeouts: calling SetTimeout again re-arms it.
		name: "re-armed timeout",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Timeout: 50, Timeout2: 10, End: EWait, Handler: &Handler{ID: 2, Action: HRecover}},
			{ID: 3, Kind: KStep, Timeout: 10, Timeout2: 40, End: EExternal, At: 30},
		}},
		want: "s1() h2:Timeout:@10 s3()@10 -> ok()",
	}, {
		// docs/DESIGN.md#locks-and-limits: a full Mutex queue rejects at once; the Sync's
		// onerror sees DefenseRejected first.
		name: "mutex queue limit",
		p: &Program{Mutexes: []int{1}, MutexQueues: []int{1}, Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KSync, Body: &Node{ID: 3, Kind: KStep, End: EExternal, At: 10}},
			{ID: 4, Kind: KSync, Body: &Node{ID: 5, Kind: KStep}},
			{ID: 6, Kind: KSync, Body: &Node{ID: 7, Kind: KStep, Handler: &Handler{ID: 8, Action: HRecover}}},
		}}}},
		want: "s3() h8:DefenseRejected:Mutex queue limit s5()@10 -> ok()",
	}, {
		// Throttle(1, 20ms): a period starts at the first entry; queued
		// flows enter as new periods start; after idle, at once.
		name: "throttle",
		p: &Program{Throttle: &Throttle{N: 1, Period: 20, Queue: 1}, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 3, Kind: KStep}},
				{ID: 4, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 5, Kind: KStep}},
				{ID: 6, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 7, Kind: KStep, Handler: &Handler{ID: 8, Action: HRecover}}},
			}},
			{ID: 9, Kind: KStep, End: EExternal, At: 45},
			{ID: 10, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 11, Kind: KStep}},
		}},
		want: "s3() h8:DefenseRejected:Throttle queue limit s5()@20 s9()@20 s11()@65 -> ok()",
	}, {
		// Throttle(1, 10ms): branch 2 comes at 10, before the timer of
		// the period branch 12 opened, and opens the next one, whose timer
		// it arms as it enters; so branch 6's timeout, armed after that
		// at 10, falls due after the period's end at 20, which lets
		// branch 6 in first. The timer of the period that is over does
		// nothing.
		name: "throttle outrun",
		p: &Program{Throttle: &Throttle{N: 1, Period: 10, Queue: -1}, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KStep, Subs: []*Node{
					{ID: 3, Kind: KStep, End: EExternal, At: 10},
					{ID: 4, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 5, Kind: KStep}},
				}},
				{ID: 6, Kind: KStep, Subs: []*Node{
					{ID: 7, Kind: KStep, End: EExternal, At: 10},
					{ID: 8, Kind: KStep, Timeout: 10, Subs: []*Node{
						{ID: 9, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 10, Kind: KStep}},
					}, Handler: &Handler{ID: 11, Action: HRecover}},
				}},
				{ID: 12, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 13, Kind: KStep}},
			}},
		}},
		want: "s2() s6() s3() s7() s13() s5()@10 s8()@10 s10()@20 -> ok()",
	}, {
		// ForEach: slice keys are indexes, map keys in sorted order;
		// Continue and a labelled Break.
		name: "forEach",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KForEach, Count: 3, End: EContinue, At: 1, Subs: []*Node{{ID: 2, Kind: KStep}}},
			{ID: 3, Kind: KForEach, Label: "A", Map: true, Count: 3, Subs: []*Node{
				{ID: 4, Kind: KRepeat, Count: 2, Subs: []*Node{{ID: 5, Kind: KStep, End: EBreak, Label: "A"}}},
			}},
		}},
		want: "F1#0=10 s2() F1#1=11 F1#2=12 s2() F3#b=32 L4#0 s5() -> ok()",
	}, {
		// docs/DESIGN.md#retry: two CommErrors retried after the backoff,
		// the third attempt's args are the step's result; a Retryable of
		// its own does not retry E2, which goes on with its info.
		name: "retry",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRetry, Count: 3, Args: []int{7}, Retry: &RetrySpec{FailUntil: 2, Fail: EError, Code: "CommError", Backoff: 10}},
			{ID: 2, Kind: KStep},
			{ID: 3, Kind: KRetry, Count: 3, Retry: &RetrySpec{FailUntil: 3, Fail: EError, Code: "E2", Retryable: true, Backoff: -1}},
		}},
		want: "R1#0 b1:1 R1#1@10 b1:2@10 R1#2@20 s2(7)@20 R3#0@20 q3:E2@20 -> err:E2:a0",
	}, {
		// docs/DESIGN.md#cancel: a Root.Cancel from a callback is seen
		// before the next step; the step, completed, is not cancelled.
		name: "cancel from a callback",
		p: &Program{CancelFrom: 1, Steps: []*Node{
			{ID: 1, Kind: KStep, Cancel: true, End: ESuccess, Args: []int{1}},
			{ID: 2, Kind: KStep},
		}},
		want: "s1() -> canceled",
	}, {
		// docs/DESIGN.md#cancel-handlers: a cancel requested before an
		// error is raised wins. The error that follows in the callback
		// runs the cancel handlers only, innermost first, no error handler.
		name: "error after a cancel from its callback",
		p: &Program{CancelFrom: 2, Steps: []*Node{
			{ID: 1, Kind: KStep, Cancel: true, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EError, Code: "E1", Handler: &Handler{ID: 3}},
			}, Handler: &Handler{ID: 4}},
		}},
		want: "s1() s2() c2 c1 -> canceled",
	}, {
		// The same from an error handler that raises after the cancel.
		name: "handler raises after a cancel",
		p: &Program{CancelFrom: 3, Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 3, Action: HRethrow, Code: "E2"}},
			}, Handler: &Handler{ID: 4}},
		}},
		want: "s1() s2() h3:E1: -> canceled",
	}, {
		// The same from a branch that fails after the cancel: its own
		// cancel handler runs first, as for any error through it, then its
		// sibling is cancelled; the Parallel's handler does not run.
		name: "branch fails after a cancel",
		p: &Program{CancelFrom: 3, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EWait},
				{ID: 3, Kind: KStep, Cancel: true, End: EError, Code: "E1", Handler: &Handler{ID: 4}},
			}, Handler: &Handler{ID: 5}},
		}},
		want: "s2() s3() c3 c2 -> canceled",
	}, {
		// The same from a cancel handler that a timeout runs: the
		// Timeout that follows reaches no error handler.
		name: "cancel from a cancel handler during a timeout",
		p: &Program{CancelFrom: 2, CancelInCancel: true, Steps: []*Node{
			{ID: 1, Kind: KStep, Timeout: 10, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EWait},
			}, Handler: &Handler{ID: 3, Action: HRecover}},
		}},
		want: "s1() s2() c2@10 -> canceled",
	}, {
		// docs/DESIGN.md#cancel-handlers: a cancel handler that panics on
		// the path of an error replaces it.
		name: "cancel handler panics",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, CancelPanic: true, End: EError, Code: "E1"},
			}, Handler: &Handler{ID: 3}},
		}},
		want: "s1() s2() c2 h3:InternalError:!cp2 -> err:InternalError:!cp2",
	}, {
		// docs/DESIGN.md#locks-and-limits: a branch that syncs on the
		// Mutex(1) its flow holds fails with InternalError.
		name: "mutex deadlock",
		p: &Program{Mutexes: []int{1}, Steps: []*Node{
			{ID: 1, Kind: KSync, Body: &Node{ID: 2, Kind: KStep, Subs: []*Node{
				{ID: 3, Kind: KParallel, Subs: []*Node{
					{ID: 4, Kind: KSync, Body: &Node{ID: 5, Kind: KStep, Handler: &Handler{ID: 6}}},
				}},
			}}},
		}},
		want: "s2() h6:InternalError:* -> err:InternalError",
	}, {
		// docs/DESIGN.md#run-and-its-context: Run's deadline times out the
		// innermost waiting step, whose handler may recover; past it a step
		// that waits fails with Timeout at once. Its Timeout says so.
		name: "run deadline",
		p: &Program{Ctx: CtxDeadline, CtxAt: 20, Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EExternal, At: 50, Handler: &Handler{ID: 3, Action: HRecover, Args: []int{7}}},
				{ID: 4, Kind: KStep, End: EExternal, At: 10, Handler: &Handler{ID: 5}},
			}},
		}},
		want: "s1() s2() c2@20 h3:Timeout:" + RunDeadlineInfo + "@20 s4(7)@20 h5:Timeout:" + RunDeadlineInfo + "@20 -> err:Timeout:" + RunDeadlineInfo,
	}, {
		// The same: a loop through whose iteration the deadline's timeout
		// went begins no further iteration, though a handler recovered.
		name: "run deadline ends a loop",
		p: &Program{Ctx: CtxDeadline, CtxAt: 15, Steps: []*Node{
			{ID: 1, Kind: KRepeat, Count: 3, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EWait, Handler: &Handler{ID: 3, Action: HRecover}},
			}},
		}},
		want: "L1#0 s2() h3:Timeout:" + RunDeadlineInfo + "@15 -> err:Timeout:" + RunDeadlineInfo,
	}, {
		// Run's ctx cancelled: cancel handlers only.
		name: "run ctx cancel",
		p: &Program{Ctx: CtxCancel, CtxAt: 15, Steps: []*Node{
			{ID: 1, Kind: KStep, Cancel: true, End: EWait, Handler: &Handler{ID: 2, Action: HRecover}},
		}},
		want: "s1() c1@15 -> canceled",
	}, {
		// docs/DESIGN.md#locks-and-limits: an Await function cancelled in
		// a section holds its slot until it returns, after the event: the
		// flow, which goes on at once, finds the Mutex(1, no queue) full.
		name: "await holds a slot",
		p: &Program{Mutexes: []int{1}, MutexQueues: []int{0}, Steps: []*Node{
			{ID: 1, Kind: KStep, Timeout: 10, Subs: []*Node{
				{ID: 2, Kind: KSync, Body: &Node{ID: 3, Kind: KStep, Subs: []*Node{
					{ID: 4, Kind: KAwait, End: EWait},
				}}},
			}, Handler: &Handler{ID: 5, Action: HAdd, Steps: []*Node{
				{ID: 6, Kind: KSync, Body: &Node{ID: 7, Kind: KStep, Handler: &Handler{ID: 8, Action: HRecover}}},
			}}},
		}},
		want: "s1() s3() h5:Timeout:@10 h8:DefenseRejected:Mutex queue limit@10 -> ok()",
	}, {
		// An error handler that adds steps under a timeout and a cancel
		// handler of its own: the timeout fails the steps, the cancel
		// handler runs, the error goes on outward.
		name: "handler adds steps under a timeout",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EError, Code: "E1", Handler: &Handler{ID: 3, Action: HAdd, Timeout: 20, Cancel: true, Steps: []*Node{
					{ID: 4, Kind: KStep, Cancel: true, End: EWait},
				}}},
			}, Handler: &Handler{ID: 5}},
		}},
		want: "s1() s2() h3:E1: s4() c4@20 k3@20 h5:Timeout:@20 -> err:Timeout:",
	}, {
		// AwaitChan: a value sent before the step runs waits in the
		// channel and is taken at once; one sent while it waits comes
		// through the goroutine; a closed channel gives the zero value.
		name: "channels",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, End: EExternal, At: 10},
			{ID: 2, Kind: KAwait, Await: AwaitChan, End: EExternal, Args: []int{20}},
			{ID: 3, Kind: KAwait, Await: AwaitChan, End: EExternal, At: 20, Args: []int{30}},
			{ID: 4, Kind: KStep, Subs: []*Node{{ID: 5, Kind: KAwait, Await: AwaitChan, End: EExternal, At: 5, Closed: true, Args: []int{0}}}},
			{ID: 6, Kind: KStep},
		}},
		want: "s1() s4(30)@20 s6(0)@25 -> ok()",
	}, {
		// AwaitResult: a Result's error fails the step as the flow that
		// gave it would; its handler sees it.
		name: "results",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KAwait, Await: AwaitResult, End: EExternalErr, At: 10, Code: "Timeout", Info: AwaitTimeoutInfo,
				Handler: &Handler{ID: 2, Action: HRecover, Args: []int{20}}},
			{ID: 3, Kind: KAwait, Await: AwaitResult, End: EExternal, Ready: true, Args: []int{30, 31}},
			{ID: 4, Kind: KStep},
		}},
		want: "h2:Timeout:context deadline exceeded@10 s4(30,31)@10 -> ok()",
	}, {
		// docs/DESIGN.md#hooks: FlowStart first; StepError once the
		// callback that raised the error returned, a timeout's after the
		// cancel handlers of what it cancels, before the handlers the
		// error passes; a handler's new error too; FlowEnd last.
		name: "hooks see errors in order",
		p: &Program{Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KStep, Timeout: 10, Cancel: true, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EWait},
			}, Handler: &Handler{ID: 3, Action: HRethrow, Code: "E1"}},
		}},
		want: "FS s1() s2() c2@10 SE:Timeout:@10 c1@10 h3:Timeout:@10 SE:E1:@10 FE:err:E1:@10 -> err:E1:",
	}, {
		// SyncWait runs in a task of its own once the waiter is let in,
		// before it goes on; the flow let in at once is not reported.
		name: "sync wait",
		p: &Program{Hooks: true, Mutexes: []int{1}, Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KSync, Body: &Node{ID: 3, Kind: KStep, End: EExternal, At: 10}},
			{ID: 4, Kind: KSync, Body: &Node{ID: 5, Kind: KStep}},
		}}}},
		want: "FS s3() SW0:10@10 s5()@10 FE:ok@10 -> ok()",
	}, {
		// Two waiters let in at once, as a Throttle's period starts:
		// each goes on in its own SyncWait task, the first's step before
		// the second's hook, as each would without hooks.
		name: "sync wait, two let in at once",
		p: &Program{Hooks: true, Throttle: &Throttle{N: 2, Period: 10, Queue: 2}, Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 3, Kind: KStep}},
			{ID: 4, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 5, Kind: KStep}},
			{ID: 6, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 7, Kind: KStep}},
			{ID: 8, Kind: KSync, Mutex: ThrottleGate, Body: &Node{ID: 9, Kind: KStep}},
		}}}},
		want: "FS s3() s5() SW2:10@10 s7()@10 SW2:10@10 s9()@10 FE:ok@10 -> ok()",
	}, {
		// A branch that fails in a task of its own (an external error)
		// gives its slot to the waiter, whose SyncWait task is queued;
		// the Parallel goes on in that task, which has not yielded yet:
		// its handler and the next step run first. The waiter, cancelled
		// with its Parallel, has ended when its task runs: no SyncWait.
		name: "parallel goes on in the failing task",
		p: &Program{Hooks: true, Mutexes: []int{1}, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KSync, Body: &Node{ID: 3, Kind: KStep, End: EExternalErr, Code: "E0"}},
				{ID: 4, Kind: KSync, Body: &Node{ID: 5, Kind: KStep}},
			}, Handler: &Handler{ID: 6, Action: HRecover}},
			{ID: 7, Kind: KStep},
		}},
		want: "FS s3() SE:E0: h6:E0: s7() FE:ok -> ok()",
	}, {
		// The flow of an AwaitFlow has hook calls of its own; one whose
		// start is queued as the outer flow ends begins after it; its
		// FlowStart (the second's) panics: StepError sees the error, but
		// the step, cancelled before, cancelled the flow, which wins
		// (docs/DESIGN.md#hooks, "A failed start").
		name: "hooks of a sub-flow",
		p: &Program{Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KAwait, Await: AwaitFlow, End: EExternalErr, At: 10, Code: "E1", Handler: &Handler{ID: 2, Action: HRecover}},
			{ID: 3, Kind: KParallel, Subs: []*Node{
				{ID: 4, Kind: KAwait, Await: AwaitFlow, End: EWait},
				{ID: 5, Kind: KStep, End: EError, Code: "E2"},
			}},
		}},
		want: "FS FS1 SE1:E1:@10 FE1:err:E1:@10 SE:E1:@10 h2:E1:@10 s5()@10 SE:E2:@10 FE:err:E2:@10 -> err:E2:",
		late: "FS2@10 SE2:InternalError:!fs2@10 FE2:canceled@10",
	}, {
		// AwaitStart and AwaitEnd: a function cancelled by a failing
		// sibling sees context.Canceled, one cancelled by the timeout of
		// a step around it context.DeadlineExceeded.
		name: "await hooks",
		p: &Program{Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KAwait, End: EWait},
				{ID: 3, Kind: KStep, Timeout: 10, Subs: []*Node{{ID: 4, Kind: KAwait, End: EWait}}},
				{ID: 5, Kind: KAwait, End: EExternalErr, At: 5, Code: "E1"},
			}},
		}},
		want:       "FS s3() SE:E1:@5 FE:err:E1:@5 -> err:E1:",
		awaitHooks: "ae2:InternalError:* ae4:InternalError:* ae5:E1: as2 as4 as5",
	}, {
		name: "await hooks at the deadline",
		p: &Program{Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KStep, Timeout: 10, Subs: []*Node{{ID: 2, Kind: KAwait, End: EWait}}, Handler: &Handler{ID: 3, Action: HRecover}},
		}},
		want:       "FS s1() SE:Timeout:@10 h3:Timeout:@10 FE:ok@10 -> ok()",
		awaitHooks: "ae2:Timeout:context deadline exceeded as2",
	}, {
		// docs/DESIGN.md#error-info-and-last-exception: Fail raises the
		// code and info ErrorFrom maps the Go error to, with the error as
		// Cause; a handler's Error keeps that Cause (#error-handlers).
		name: "fail",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, End: EFail, Fail: FailWrapped, Code: "E1", Info: FailInfo(FailWrapped, 1),
				Handler: &Handler{ID: 2, Action: HRethrow, Code: "E2"}},
		}},
		want: "s1() h2:E1:w1: f1<-f1 -> err:E2:<-f1",
	}, {
		// A handler's Fail raises its own Go error.
		name: "handler fails",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, End: EError, Code: "E0",
				Handler: &Handler{ID: 2, Action: HFail, Fail: FailDeadline, Code: "Timeout", Info: FailInfo(FailDeadline, 2)}},
		}},
		want: "s1() h2:E0: -> err:Timeout:f2<-f2",
	}, {
		// docs/DESIGN.md#parallel-branches: Settle's branches run to
		// their ends, an error is its branch's outcome; then sees the
		// outcomes in order.
		name: "settle",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KSettle, Subs: []*Node{
				{ID: 2, Kind: KStep, Subs: []*Node{{ID: 3, Kind: KStep}}},
				{ID: 4, Kind: KStep, End: EError, Code: "E1", Info: "x"},
				{ID: 5, Kind: KStep, Subs: []*Node{{ID: 6, Kind: KStep, End: ESuccess, Args: []int{60}}}},
			}},
			{ID: 7, Kind: KStep},
		}},
		want: "s2() s4() s5() s3() s6() S1[ok=0|err:E1:x|ok=60] s7() -> ok()",
	}, {
		// The steps of Settle and of each branch take their turns: then
		// runs after the steps that store the outcomes, as a sibling
		// branch of a Parallel around it goes on.
		name: "settle turns",
		p: &Program{Steps: []*Node{{ID: 1, Kind: KParallel, Subs: []*Node{
			{ID: 2, Kind: KStep, Subs: []*Node{{ID: 3, Kind: KStep}, {ID: 4, Kind: KStep}}},
			{ID: 5, Kind: KStep, Subs: []*Node{{ID: 6, Kind: KSettle, Subs: []*Node{
				{ID: 7, Kind: KStep},
				{ID: 8, Kind: KStep, End: EFail, Fail: FailPlain, Code: "InternalError", Info: FailInfo(FailPlain, 8)},
			}}}},
			{ID: 9, Kind: KStep, Subs: []*Node{{ID: 10, Kind: KStep}, {ID: 11, Kind: KStep}, {ID: 12, Kind: KStep},
				{ID: 13, Kind: KStep}, {ID: 14, Kind: KStep}, {ID: 15, Kind: KStep}, {ID: 16, Kind: KStep}}},
		}}}},
		want: "s2() s5() s9() s3() s10() s4() s11() s12() s13() s7() s8() s14() s15() s16() S6[ok=0|err:InternalError:f8<-f8] -> ok()",
	}, {
		// A Break for a loop around Settle leaves it: the other branches
		// are cancelled, then does not run.
		name: "settle break",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRepeat, Label: "A", Count: 2, Subs: []*Node{
				{ID: 2, Kind: KSettle, Subs: []*Node{
					{ID: 3, Kind: KStep, Cancel: true, End: EExternal, At: 10},
					{ID: 4, Kind: KStep, End: EBreak, Label: "A"},
				}},
			}},
		}},
		want: "L1#0 s3() s4() c3 -> ok()",
	}, {
		// docs/DESIGN.md#first-and-quorum: the first branch to succeed
		// wins, a failed branch ended alone before it; the others are
		// cancelled in their order, then gets the winner's value.
		name: "first",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRace, Subs: []*Node{
				{ID: 2, Kind: KStep, Cancel: true, End: EExternal, At: 20, Args: []int{20}},
				{ID: 3, Kind: KStep, End: EError, Code: "E1"},
				{ID: 4, Kind: KStep, End: EExternal, At: 10, Args: []int{40}},
				{ID: 5, Kind: KStep, Subs: []*Node{{ID: 6, Kind: KStep, Cancel: true, End: EWait}}},
			}},
			{ID: 7, Kind: KStep},
		}},
		want: "s2() s3() s4() s5() s6() c2@10 c6@10 Q1[40]@10 s7()@10 -> ok()",
	}, {
		// Quorum's results come in the order the branches succeeded; a
		// branch that succeeds after the k-th has stored its result but
		// before the race is won is too late.
		name: "quorum",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRace, Need: 2, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EExternal, At: 10, Args: []int{20}},
				{ID: 3, Kind: KStep, End: ESuccess, Args: []int{30}},
				{ID: 4, Kind: KSuccessStep, Args: []int{40}},
			}},
		}},
		want: "s2() s3() Q1[30|40] -> ok()",
	}, {
		// The failure after which k can no longer be had is the step's:
		// the branch still running is cancelled, the handler sees it;
		// every branch of a First failed: the last failure.
		name: "race fails",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{{ID: 2, Kind: KRace, Need: 2, Subs: []*Node{
				{ID: 3, Kind: KStep, End: EError, Code: "E1"},
				{ID: 4, Kind: KStep, Cancel: true, End: EWait},
				{ID: 5, Kind: KStep, End: EExternalErr, At: 10, Code: "E2"},
			}}}, Handler: &Handler{ID: 6, Action: HRecover}},
			{ID: 7, Kind: KRace, Subs: []*Node{
				{ID: 8, Kind: KStep, End: EExternalErr, At: 10, Code: "E0"},
				{ID: 9, Kind: KStep, End: EError, Code: "E1"},
			}},
		}},
		want: "s1() s3() s4() s5() c4@10 h6:E2:@10 s8()@10 s9()@10 -> err:E0:",
	}, {
		// A Break for a loop around a race leaves it, as a Parallel.
		name: "race break",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KRepeat, Label: "A", Count: 2, Subs: []*Node{
				{ID: 2, Kind: KRace, Subs: []*Node{
					{ID: 3, Kind: KStep, Cancel: true, End: EExternal, At: 10},
					{ID: 4, Kind: KStep, End: EBreak, Label: "A"},
				}},
			}},
		}},
		want: "L1#0 s3() s4() c3 -> ok()",
	}, {
		// docs/DESIGN.md#foreachlimit: at most Limit items at once, a pair
		// pulled as a slot comes free; Continue ends an item as a success
		// does; the sequence runs out at a pull that finds nothing.
		name: "ForEachLimit",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KForEachLimit, Limit: 2, Count: 3, End: EContinue, At: 0, Subs: []*Node{
				{ID: 2, Kind: KStep, End: EExternal, At: 10},
			}},
			{ID: 3, Kind: KStep},
		}},
		want: "P1#0 P1#1 F1#0=10 P1#2 F1#1=11 F1#2=12 s2() s2() P1$@10 s3()@10 -> ok()",
	}, {
		// An item whose Await step a timeout ended keeps its slot until
		// the function returns: with every slot so held and no item
		// running, a pair is pulled ahead, and the step ends once the
		// sequence has run out, not waiting for the function.
		name: "ForEachLimit slots held by Await functions",
		p: &Program{Steps: []*Node{
			{ID: 1, Kind: KForEachLimit, Limit: 1, Count: 2, Subs: []*Node{
				{ID: 2, Kind: KStep, Timeout: 10, Subs: []*Node{{ID: 3, Kind: KAwait, End: EWait}},
					Handler: &Handler{ID: 4, Action: HRecover}},
			}},
		}},
		want: "P1#0 F1#0=10 s2() h4:Timeout:@10 P1#1@10 F1#1=11@10 s2()@10 h4:Timeout:@20 P1$@20 -> ok()",
	}, {
		// A Goexit in a callback ends the event: the Await function
		// cancelled before it returns, and gives its Mutex slot back,
		// before the flow goes on, which then enters without waiting
		// (no SyncWait).
		name: "Goexit ends the event",
		p: &Program{Mutexes: []int{1, 1}, Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KStep, Subs: []*Node{
				{ID: 2, Kind: KSync, Mutex: 0, Body: &Node{ID: 3, Kind: KStep, Timeout: 10,
					Subs: []*Node{{ID: 4, Kind: KAwait, End: EWait}}, Handler: &Handler{ID: 5, Action: HGoexit}}},
			}, Handler: &Handler{ID: 6, Action: HRecover}},
			{ID: 7, Kind: KSync, Mutex: 0, Body: &Node{ID: 8, Kind: KStep}},
		}},
		want:       "FS s1() s3() SE:Timeout:@10 h5:Timeout:@10 SE:InternalError:*@10 h6:InternalError:*@10 s8()@10 FE:ok@10 -> ok()",
		awaitHooks: "ae4:Timeout:context deadline exceeded as4",
	}, {
		// A SyncWait hook that panics (for Mutex 1 of max 2) fails the
		// step let in from outside, in a task queued behind the hook's of
		// the next waiter let in: both waits are reported first.
		name: "SyncWait panic fails from outside",
		p: &Program{Mutexes: []int{1, 2}, Hooks: true, Steps: []*Node{
			{ID: 1, Kind: KParallel, Subs: []*Node{
				{ID: 2, Kind: KSync, Mutex: 1, Body: &Node{ID: 3, Kind: KStep}},
				{ID: 4, Kind: KSync, Mutex: 1, Body: &Node{ID: 5, Kind: KStep}},
				{ID: 6, Kind: KSync, Mutex: 1, Body: &Node{ID: 7, Kind: KStep}},
				{ID: 8, Kind: KSync, Mutex: 1, Body: &Node{ID: 9, Kind: KStep}},
			}},
		}},
		want: "FS s3() s5() SW1:0 SW1:0 SE:InternalError:!panic: sw1 FE:err:InternalError:!panic: sw1 -> err:InternalError:!panic: sw1",
	}}
	for _, tc := range tests {
		if tc.p.CancelAt == 0 {
			tc.p.CancelAt = SafetyCancel
		}
		r := Model(tc.p)
		if got := strings.Join(r.Trace, " ") + " -> " + r.End; got != tc.want {
			t.Errorf("%s:\n got: %s\nwant: %s", tc.name, got, tc.want)
		}
		if got := strings.Join(r.AwaitHooks, " "); got != tc.awaitHooks {
			t.Errorf("%s: Await hooks\n got: %s\nwant: %s", tc.name, got, tc.awaitHooks)
		}
		if got := strings.Join(r.Late, " "); got != tc.late {
			t.Errorf("%s: hooks after the end\n got: %s\nwant: %s", tc.name, got, tc.late)
		}
	}
}
