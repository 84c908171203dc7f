package asyncsteps

import (
	"context"
	"fmt"
	"slices"

	"github.com/asyncsteps/asyncsteps/internal/misuse"
)

// This file holds the generic helpers that carry typed results through a
// flow: a typed Await with its continuation ([AwaitThen]), a typed
// continuation of any step ([Then]), a fan-out that collects its branches'
// results in order ([Gather]), or each branch's result or error
// ([Settle]), or the first results to come ([First], [Quorum]), their
// branches over a slice ([Branches]), and a typed [Run]. Like those of
// await.go, they are built on the public API (Go methods cannot have type
// parameters), so they behave like hand-written steps.
//
// The helpers of await.go bring Go values into a flow as untyped success
// args: [AwaitChan] a channel's value, [AwaitResult] and [AwaitFlow] the
// result of another flow; [Arg] reads such args back. The helpers here
// keep the type from end to end instead: [AwaitThen] is [AsyncSteps.Await]
// for a func returning (T, error), [Then] is a step that reads its input
// with Arg's rule, [Gather] is [AsyncSteps.Parallel] with its branches'
// results, [Settle] with their results or errors, and [Run] is [Root.Run]
// with a typed result. A Then after
// AwaitChan or AwaitResult gives their values a type too.
//
// They share one rule to read a result from success args, the rule of
// [Arg] for the first one: no args is the zero T (so an error handler may
// recover with a plain Success()), a first arg that is a T is the value,
// and anything else fails the step with InternalError, since a step that
// gives a value of the wrong type is a bug, not an outcome.

// AwaitThen adds a step that runs fn on its own goroutine, like
// [AsyncSteps.Await], then calls then, on the loop, with the value fn
// returned. onerror is the error handler of fn's step: it sees fn's error
// (mapped to a code as Await maps it), and may recover with
// as.Success(fallback), a T, whose value then receives in place of fn's.
//
// With a nil then, the value is the result of the added step, for the
// next step at the same level, a [Gather] branch or [Run]: AwaitThen is
// then a typed Await. A nil fn is a misuse, as a nil function given to
// Await: "AwaitThen: nil function".
//
// The added step holds fn's step followed by then's, so that on the value
// returned by [AsyncSteps.Parallel] AwaitThen adds one branch. An error in
// then goes to the handlers around the added step, not to onerror.
func AwaitThen[T any](as AsyncSteps, fn func(ctx context.Context) (T, error), then func(as AsyncSteps, v T), onerror ...ErrorFunc) AsyncSteps {
	if fn == nil {
		return refuseNil(as, "AwaitThen", "AwaitThen: nil function")
	}
	if refusedExtraHandlers(as, "AwaitThen", onerror) {
		return as
	}
	onerr := firstHandler(onerror)
	await := func(ctx context.Context) (any, error) { return fn(ctx) }
	return as.Add(func(as AsyncSteps, _ ...any) {
		runsForAwait(as, fn)
		as.Await(await, onerr)
		as.Add(thenStep("AwaitThen", then))
	})
}

// Then adds a step that calls f with the first success arg of the previous
// step at the same level, as a T: the typed form of a step that reads
// its args with [Arg]. The arg is read as Arg reads it, except that no
// args is the zero T (so that an error handler may recover with a plain
// Success()); an arg of another type fails the step with InternalError.
// onerror is the added step's error handler. A nil f is a misuse, as a
// nil function given to Await: "Then: nil function".
func Then[T any](as AsyncSteps, f func(as AsyncSteps, v T), onerror ...ErrorFunc) AsyncSteps {
	if f == nil {
		return refuseNil(as, "Then", "Then: nil function")
	}
	if refusedExtraHandlers(as, "Then", onerror) {
		return as
	}
	return as.Add(thenStep("Then", f), onerror...)
}

// runsFor records that the running step of as runs fn, a function of the
// user's given to a helper, for AsyncStack to name it in place of the
// helper's own step function (docs/DESIGN.md#error-info-and-last-exception);
// a nil fn leaves the step out, as one of the helper's own. It is called
// first thing in the step, before the step can fail.
func runsFor(as AsyncSteps, fn any) {
	h := stepOf(as)
	if h == nil {
		return // not a step of this package: it records no stack
	}
	pc := engineStep
	if fn != nil {
		if p := funcPC(fn); p != 0 { // 0: a nil function of some type
			pc = p
		}
	}
	h.f.rareFields().user = pc
}

// runsForAwait records that the running step of as is a helper's own,
// left out of AsyncStack, and that the Await step it adds runs fn, a
// function of the user's, through a closure of the helper's: AsyncStack
// names fn for that step (see frameRare.awaitUser).
func runsForAwait(as AsyncSteps, fn any) {
	runsFor(as, nil)
	if h := stepOf(as); h != nil {
		h.f.rareFields().awaitUser = funcPC(fn)
	}
}

// thenStep returns a step that reads its first arg as a T and calls f with
// it, or succeeds with it when f is nil. call names the helper for the
// info of a type mismatch.
func thenStep[T any](call string, f func(as AsyncSteps, v T)) StepFunc {
	return func(as AsyncSteps, args ...any) {
		runsFor(as, f)
		v, ok := firstValue[T](args)
		if !ok {
			as.Error(InternalError, mismatch[T](call+": the step's result", args[0]))
		}
		if f == nil {
			as.Success(v)
			return
		}
		f(as, v)
	}
}

// Gather adds a step that runs branches in parallel, as the branches of
// [AsyncSteps.Parallel] (each gets an AsyncSteps to add its steps to),
// then calls then, on the loop, with their results in the order of
// branches. A nil then passes them on, as [AwaitThen]'s passes its value:
// they are the result of the added step, the slice its one success arg,
// for the next step at the same level (a Then[[]T]) or [Run] (Run[[]T]):
//
//	asyncsteps.Gather[float64](r, nil, asyncsteps.Branches(symbols, fetch)...)
//	prices, err := asyncsteps.Run[[]float64](ctx, r)
//
// A branch's result is the first success arg of its last step, read as
// [Then] reads its arg: typically the value of an [AwaitThen] with a nil
// then, or what a branch's error handler recovered with. Branches whose
// results differ in type are gathered as any (Gather[any]), each result
// asserted to its type in then; a failed assertion there is a panic, an
// InternalError of then's step.
//
// The failure of a branch is the failure of the Parallel: the first error
// cancels the other branches, their results are dropped, then does not run
// and the error unwinds from the added step to the handlers around it: to
// handle it there, call Gather inside a step with an error handler. A
// result of the wrong type is such an error (InternalError).
//
// The results are collected per execution: a Root that runs again, or its
// Clone, starts from an empty slice. Gather keeps a copy of branches, as
// they were given: the caller may fill its slice again (for the next
// fan-out) before the step runs. With no branch, then gets an empty
// slice at once. A nil branch is a misuse, as a nil function given to
// Await: "Gather: nil branch 1" (counting from 0).
func Gather[T any](as AsyncSteps, then func(as AsyncSteps, vs []T), branches ...func(as AsyncSteps)) AsyncSteps {
	if info := nilBranch("Gather", branches); info != "" {
		return refuseNil(as, "Gather", info)
	}
	branches = slices.Clone(branches) // see nilBranch
	return as.Add(func(as AsyncSteps, _ ...any) {
		runsFor(as, nil)
		results := make([]T, len(branches))
		p := as.Parallel()
		for i, b := range branches {
			p.Add(gatherBranch("Gather", b, i, results, nil))
		}
		as.Add(func(as AsyncSteps, _ ...any) { thenOrPass(as, then, results) })
	})
}

// thenOrPass calls then with the result of a fan-out, or, when then is
// nil, makes it the step's result, as AwaitThen does with its value: in
// the step then would have run in, at no cost of its own.
func thenOrPass[R any](as AsyncSteps, then func(as AsyncSteps, r R), r R) {
	runsFor(as, then)
	if then == nil {
		as.Success(r)
		return
	}
	then(as, r)
}

// gatherBranch returns the step of branch i of a Gather (or of a race,
// call naming the helper): b's steps, then a step that stores their
// result in results[i] or, with in set (a race's), in results[*in], while
// *in counts fewer than len(results) (a branch that succeeds in the turn
// the race is won is too late). b runs from a step of its own, so that it
// may add steps, call Success or Error directly, or wait. AsyncStack
// names b once, for the branch's step, as for a branch added with Add:
// the steps inside it are the helper's own.
func gatherBranch[T any](call string, b func(as AsyncSteps), i int, results []T, in *int) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		runsFor(as, b)
		as.Add(func(as AsyncSteps, _ ...any) {
			runsFor(as, nil)
			b(as)
		})
		as.Add(func(as AsyncSteps, args ...any) {
			runsFor(as, nil)
			v, ok := firstValue[T](args)
			if !ok {
				as.Error(InternalError, mismatch[T](fmt.Sprintf("%s: the result of branch %d", call, i), args[0]))
			}
			switch {
			case in == nil:
				results[i] = v
			case *in < len(results):
				results[*in] = v
				*in++
			}
		})
	}
}

// Branches returns one branch per item, for [Gather], [Settle], [First]
// or [Quorum]: branch i calls f with items[i]. It is the loop that builds
// the branches of a fan-out over a slice; Gather and Settle then give the
// results in the slice's order:
//
//	asyncsteps.Gather(as, then, asyncsteps.Branches(symbols, fetch)...)
//
// A nil f gives nil branches, which each of those helpers reports as a
// misuse ("Gather: nil branch 0"); no items, no branch. For an iter.Seq,
// collect it first (slices.Collect): a Parallel starts all its branches
// at once, so it holds them all anyway; a long or endless sequence goes
// to [ForEachLimit], K at a time.
func Branches[V any](items []V, f func(as AsyncSteps, v V)) []func(as AsyncSteps) {
	branches := make([]func(as AsyncSteps), len(items))
	if f == nil {
		return branches
	}
	for i, v := range items {
		branches[i] = func(as AsyncSteps) { f(as, v) }
	}
	return branches
}

// nilBranch returns the misuse info of a fan-out (named call) given a nil
// branch, or "" when none is nil. The branches checked are the ones that
// run: the caller then keeps a copy of them, not the slice, which its own
// caller may reuse (a buffer of branches filled again for the next
// fan-out) before the step runs.
func nilBranch(call string, branches []func(as AsyncSteps)) string {
	for i, b := range branches {
		if b == nil {
			return fmt.Sprintf("%s: nil branch %d", call, i)
		}
	}
	return ""
}

// Settled is the outcome of one branch of Settle: its result, or its error.
type Settled[T any] struct {
	Value T
	// Err is nil when the branch succeeded. Assign it to an error only
	// when it is not nil: an error holding a nil *Error is not nil.
	Err *Error
}

// Settle adds a step that runs branches in parallel, as [Gather] does,
// each to its end: the error of a branch is its outcome, not the step's,
// and does not cancel the other branches. then runs once, on the loop,
// with the outcomes in the order of branches; a nil then makes them the
// result of the added step, as Gather's results (a Then[[]Settled[T]]
// after it reads them). A branch that succeeded has Err nil and its result
// in Value, read as Gather reads it: the first success arg of its last
// step, as [Then] reads its arg. A branch that failed has the zero T and
// in Err the *Error that would have ended the flow had the branch been the
// whole flow: code, info and, in Cause, the Go error or panic under it as
// the flow's errors keep it (the error of an [AsyncSteps.Await] function
// or of [Fail], a panic's *PanicError), whatever raised it: Error, a
// panic, its own timeout, a misuse. A result of the wrong type is that
// branch's error, an InternalError worded as Gather's ("Settle: the result
// of branch 1 is string, want int").
//
// A branch's error is caught by an error handler of Settle's around the
// branch's steps, as one of the caller's would catch it: the StepError
// hook is told of it, and the State keeps it (ErrorInfo, LastException,
// AsyncStack) as any error a handler recovered from. What is not an error
// of a branch is not caught. A cancel of the added step (a timeout around
// it or the deadline of Run's context, [Root.Cancel], a failed sibling of
// a Parallel around it) cancels every branch, as for Gather, and then
// does not run. Once Run's deadline has passed, a step that waits fails
// with Timeout at once (see [Root.Run]): a Settle that an error handler
// starts then, as a fallback, is not cancelled, but each of its branches
// that waits has Timeout as its outcome, each that does not its result,
// and then runs with them, where a Gather fails with that Timeout as a
// whole (see the example). A Break or Continue that a branch raises for a loop around
// Settle leaves it as it leaves a Gather or Parallel branch: the other
// branches are cancelled, then does not run, and the loop takes it (a
// loop inside the branch takes its own first).
//
// The outcomes are collected per execution, as Gather's results are, and
// Settle keeps a copy of branches as Gather does. With no branch, then
// gets an empty slice at once. A nil branch is a misuse, as for Gather:
// "Settle: nil branch 1" (counting from 0).
func Settle[T any](as AsyncSteps, then func(as AsyncSteps, rs []Settled[T]), branches ...func(as AsyncSteps)) AsyncSteps {
	if info := nilBranch("Settle", branches); info != "" {
		return refuseNil(as, "Settle", info)
	}
	branches = slices.Clone(branches) // see nilBranch
	return as.Add(func(as AsyncSteps, _ ...any) {
		runsFor(as, nil)
		outcomes := make([]Settled[T], len(branches))
		guards := make([]guarded, len(branches))
		p := as.Parallel()
		for i, b := range branches {
			p.Add(settleBranch(b, i, outcomes, &guards[i]))
		}
		as.Add(func(as AsyncSteps, _ ...any) { thenOrPass(as, then, outcomes) })
	})
}

// settleBranch returns the step of branch i of a Settle: b's steps, whose
// error settleCaught turns into their result, then a step that stores
// their outcome in outcomes[i]. It is gatherBranch with an error handler
// on b's steps, which costs no allocation of its own: the handler, which
// needs no index, is a plain function, and the step with it is g, an
// element of one slice for all the branches.
func settleBranch[T any](b func(as AsyncSteps), i int, outcomes []Settled[T], g *guarded) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		runsFor(as, b)
		*g = guarded{impl: StepFunc(func(as AsyncSteps, _ ...any) {
			runsFor(as, nil)
			b(as)
		}), onerror: settleCaught}
		addGuarded(as, g)
		as.Add(func(as AsyncSteps, args ...any) {
			runsFor(as, nil)
			if len(args) == 1 {
				if c, ok := args[0].(caughtError); ok {
					outcomes[i].Err = c.err
					return
				}
			}
			v, ok := firstValue[T](args)
			if !ok {
				settleMismatch(as, &outcomes[i].Err, mismatch[T](fmt.Sprintf("Settle: the result of branch %d", i), args[0]))
				return
			}
			outcomes[i].Value = v
		})
	}
}

// addGuarded adds g's step with its handler, as as.Add(fn, onerror) does,
// but in g, which the caller allocated, not in an allocation of its own.
// A decorator's Add is called as usual, since it may wrap the step.
func addGuarded(as AsyncSteps, g *guarded) {
	if h, ok := as.(host); ok && h.adding() {
		h.push(step{impl: g})
		return
	}
	as.Add(g.impl.(StepFunc), g.onerror)
}

// caughtError is the result that settleCaught recovers with: a type of
// this package, so that no branch's own result can be taken for it.
type caughtError struct{ err *Error }

// settleCaught is the error handler of a Settle branch's steps: it
// recovers with the error as their result, but for a Break or Continue,
// which goes on to its loop as from a Gather branch (a loop inside the
// branch would have taken it before).
func settleCaught(as AsyncSteps, code string) {
	if code == LoopBreak || code == LoopCont {
		return
	}
	as.Success(caughtError{handledError(as, code)})
}

// settleMismatch raises the InternalError info of a branch's result of
// the wrong type in a step of its own, so that it is an error of the flow
// as Gather's is (hooks, State and AsyncStack see it), and keeps it in
// *slot. The closures are made only on this path.
func settleMismatch(as AsyncSteps, slot **Error, info string) {
	as.Add(func(as AsyncSteps, _ ...any) {
		runsFor(as, nil)
		as.Error(InternalError, info)
	}, func(as AsyncSteps, code string) {
		*slot = handledError(as, code)
		as.Success()
	})
}

// handledError returns the *Error that the error handler running on as
// handles: the engine's own, with its info and Cause, or, on an
// AsyncSteps of another package, one made of code and the State. Every
// error is recorded in the State before its handlers run, so
// LastException is this error's: the *Error itself, or its Cause, which
// may be an *Error of another code (an *Error with an empty code that an
// Await function returned is an InternalError).
func handledError(as AsyncSteps, code string) *Error {
	if h := stepOf(as); h != nil && h.f.err != nil {
		return h.f.err
	}
	st := as.State()
	if e, ok := st.LastException.(*Error); ok && e.Code == code {
		return e
	}
	return &Error{Code: code, Info: st.ErrorInfo, Cause: st.LastException}
}

// refuseNil reports the nil function that a helper was given, info naming
// the helper and the argument (or another wrong argument: more than one
// error handler), as a misuse of as, up front, as
// [AsyncSteps.Await] and [Retry] do: in a step, the callback is aborted and
// the step fails with InternalError; on a Root, its next execution fails
// before any step runs. A decorator (see [Unwrapper]) reports it on what it
// wraps, as Retry does: its Error on a Root or on the value Parallel
// returns would name Error instead. An AsyncSteps of another package has
// no misuse of its own: its Error stands for it, as in Retry.
func refuseNil(as AsyncSteps, helper, info string) AsyncSteps {
	h, ok := as.(host)
	if !ok {
		if h = unwrapHost(as); h == nil {
			as.Error(InternalError, info)
			return as
		}
	}
	if !h.adding() {
		h.addRefused(helper) // as the step it would have added
		return as
	}
	h.misuse(info)
	return as
}

// refusedExtraHandlers reports more than one error handler given to
// helper, a function that adds one step with them, as refuseNil does, and
// whether it did. Checked here, not left to the Add the helper makes, so
// that the info names the helper the caller called.
func refusedExtraHandlers(as AsyncSteps, helper string, onerror []ErrorFunc) bool {
	info := misuse.ExtraArgs(helper, "error handler", len(onerror))
	if info == "" {
		return false
	}
	refuseNil(as, helper, info)
	return true
}

// Run runs r like [Root.Run] and returns its result as a T: the first
// success arg of the flow's last step, read as [Then] reads its arg (no
// args is the zero T). A result of another type is an *Error with code
// InternalError; the flow has ended then, its result dropped.
func Run[T any](ctx context.Context, r *Root) (T, error) {
	var zero T
	args, err := r.Run(ctx)
	if err != nil {
		return zero, err
	}
	v, ok := firstValue[T](args)
	if !ok {
		return zero, &Error{Code: InternalError, Info: mismatch[T]("Run: the flow's result", args[0])}
	}
	return v, nil
}

// firstValue reads args[0] as a T: no args is the zero T; ok is false when
// args[0] is not a T.
func firstValue[T any](args []any) (v T, ok bool) {
	if len(args) == 0 {
		return v, true
	}
	return Arg[T](args, 0)
}

// mismatch is the info of a result of the wrong type.
// The name of T is taken from a *T, which also names an interface type.
func mismatch[T any](what string, got any) string {
	return fmt.Sprintf("%s is %T, want %s", what, got, fmt.Sprintf("%T", (*T)(nil))[1:])
}

// First adds a step that runs branches in parallel, as [Gather] does, and
// calls then, on the loop, with the result of the first branch to succeed,
// read as Gather reads a branch's result; with a nil then, that result is
// the added step's, as Gather's results are. That success ends the step:
// the other branches are cancelled as the siblings of a failed branch are
// (their cancel handlers run, the contexts of their Await functions are
// cancelled) and no error is raised for it, so no error handler, StepError
// hook or State sees one. It is the first answer of a hedged call or of
// replicas asked at once:
//
//	asyncsteps.First[string](as, nil, fetchFrom(primary), fetchFrom(replica))
//
// A branch that fails ends alone, as a branch of [Settle]: its error is
// raised, told to the StepError hook and kept in the State as any error,
// and the others go on. When every branch has failed, the step fails with
// the error of the last one, which unwinds from the added step to the
// handlers around it as Gather's error does: the one that made a success
// impossible, after which nothing was left to wait for, as Quorum's is
// (the State holds it then, as the handlers see it); to handle it there,
// call First inside a step with an error handler. A Break or Continue
// that a branch raises for a loop around First leaves it as it leaves a
// Gather. A cancel of the added step (a timeout around it, the deadline
// of Run's context, [Root.Cancel]) cancels every branch, as for Gather,
// and then does not run.
//
// The race is the engine's, not a Parallel added through as: on a
// decorator (see [Unwrapper]) it is added to the AsyncSteps the decorator
// wraps, as [ForEachLimit]'s step is, so the branches receive this
// package's AsyncSteps, where Gather's get what the decorator's Parallel
// gives, and then gets what the decorator's Add gives its steps. An
// AsyncSteps of another package that is no Unwrapper cannot hold the
// race, and its Error reports that ("First: T is not an AsyncSteps of
// this package").
//
// First keeps a copy of branches as Gather does. No branch or a nil
// branch is a misuse, as for Gather: "First: no branches", "First: nil
// branch 1" (counting from 0).
func First[T any](as AsyncSteps, then func(as AsyncSteps, v T), branches ...func(as AsyncSteps)) AsyncSteps {
	if info := raceMisuse("First", branches, 1); info != "" {
		return refuseNil(as, "First", info)
	}
	if then == nil {
		return race(as, "First", 1, then, passFirst[T], slices.Clone(branches))
	}
	return race(as, "First", 1, then, func(as AsyncSteps, vs []T) { then(as, vs[0]) }, slices.Clone(branches))
}

// passFirst makes the one result of a First the step's result: First's
// then when the caller's is nil.
func passFirst[T any](as AsyncSteps, vs []T) { as.Success(vs[0]) }

// Quorum adds a step that runs branches in parallel, as [First] does, and
// succeeds as soon as k of them have succeeded: then gets their results,
// read as Gather reads them, in the order they succeeded (a nil then
// makes them the added step's result, as for Gather), and the other
// branches are cancelled, as First's losers are. A failed branch ends
// alone, as in First, until k successes can no longer be had: the step
// fails then with that branch's error, the branches still running are
// cancelled, as the siblings of a failed Gather branch are. First is a
// Quorum of 1; a Quorum of every branch runs as Gather does (its first
// failure is the step's), but then gets the results in the order they
// came, not in the branches' order. Any k successes make it, whatever
// their results: k equal answers (a vote) are not a Quorum's to count
// (see "The first answer, or K of N" in docs/FROM-ERRGROUP.md). Break,
// Continue, a cancel of the step, an error handler around it, a
// decorator, the copy of branches and the misuse of no branch or a nil
// branch are as for First; k must be from 1 to the number of branches
// ("Quorum: k must be from 1 to 3, the number of branches (4 given)").
func Quorum[T any](as AsyncSteps, k int, then func(as AsyncSteps, vs []T), branches ...func(as AsyncSteps)) AsyncSteps {
	if info := raceMisuse("Quorum", branches, k); info != "" {
		return refuseNil(as, "Quorum", info)
	}
	return race(as, "Quorum", k, then, then, slices.Clone(branches))
}

// raceMisuse returns the misuse info of a First or Quorum (named call)
// given no branch, a nil branch, or a k out of range; "" when there is
// none.
func raceMisuse(call string, branches []func(as AsyncSteps), k int) string {
	if len(branches) == 0 {
		return call + ": no branches"
	}
	if info := nilBranch(call, branches); info != "" {
		return info
	}
	if k < 1 || k > len(branches) {
		return fmt.Sprintf("%s: k must be from 1 to %d, the number of branches (%d given)", call, len(branches), k)
	}
	return ""
}

// race adds the step of a First or Quorum (call) that needs k of branches:
// a race of the engine's (see raceDef), whose k first results then gets,
// or, when then is nil, the step's result. user is the function of the
// user's that then calls, for AsyncStack (nil when then passes the result
// on).
func race[T any](as AsyncSteps, call string, k int, user any, then func(as AsyncSteps, vs []T), branches []func(as AsyncSteps)) AsyncSteps {
	return as.Add(func(as AsyncSteps, _ ...any) {
		runsFor(as, nil)
		p := addRace(as, call, k)
		if p == nil {
			return
		}
		results, in := make([]T, k), 0
		for i, b := range branches {
			p.Add(gatherBranch(call, b, i, results, &in))
		}
		as.Add(func(as AsyncSteps, _ ...any) {
			runsFor(as, user)
			if then == nil {
				as.Success(results)
				return
			}
			then(as, results)
		})
	})
}
