package asynchttp

import (
	"context"
	"errors"
	"net/url"

	"github.com/asyncsteps/asyncsteps"
)

// internalInfo is the info that answers an InternalError, whose own info
// is logged, not shown.
const internalInfo = "internal error, see the server log"

// answeredInfo returns the info that answers the flow's error e: e.Info,
// but for an InternalError (internalInfo) and for the text of a Go error
// (see goErrorInfo).
func answeredInfo(e *asyncsteps.Error) string {
	switch e.Code {
	case asyncsteps.InternalError:
		return internalInfo
	case asyncsteps.ConnectError, asyncsteps.CommError, asyncsteps.Timeout:
		if info, ok := goErrorInfo(e); ok {
			return info
		}
	}
	return e.Info
}

// goErrorInfo returns the fixed words that answer e, a ConnectError,
// CommError or Timeout, in place of its info, and true, when that info is
// the text of a Go error in e's Cause chain: what [asyncsteps.ErrorFrom]
// gives a network error that an Await function returns (a *net.OpError,
// the *url.Error of an http.Client of its own). That text names the
// address, the URL, the host the server connects to, which the client
// must not learn: the words are those a Client's info ends with (see
// [RequestError]), "connection refused" say, told by the Go error.
//
// Any other info is answered as it is: one a flow sets itself
// (as.Error(CommError, "upstream answered 502 for IBM")), a Client's own,
// and "context deadline exceeded", the text of the context's error that
// a Timeout has when an Await function returns it, which names nothing.
// So is the text of an error whose type gives its code, a
// [asyncsteps.FutoInCoder]: the program's own type chose the code, and
// its text with it; but for the URL that net/http's *url.Error adds
// around the error of an http.Client's own code, which goes, as in a
// Client's info (see RequestError). The engine keeps the Go error as the Cause of the
// error the flow ends with, under the copies it and a retry loop make, and
// under an error that an error handler raises in place of the one it
// handles (as.Error(code, as.State().ErrorInfo)).
// The chain is walked as errors.Is walks it, joined errors included, up
// to maxInfoSources errors. An error in it whose methods panic hides the
// info, and so does one whose own tree does not end within as many
// errors (a chain that loops): the fixed words of the code answer.
func goErrorInfo(e *asyncsteps.Error) (info string, hidden bool) {
	if e.Info == "" || e.Cause == nil || e.Info == context.DeadlineExceeded.Error() {
		return "", false
	}
	defer func() {
		if recover() != nil {
			info, hidden = unnamedFailure(e.Code), true
		}
	}()
	budget := maxInfoSources
	source := infoSource(e.Cause, e.Info, &budget)
	switch {
	case source == nil:
		return "", false
	case !ends(source):
		// The words are told by errors.Is and errors.As, which walk
		// the whole tree of source: one that loops is hidden unread.
		return unnamedFailure(e.Code), true
	case codedBy(source):
		if _, ok := source.(*url.Error); ok {
			// The text of the error that an http.Client's own code (its
			// RoundTripper) returned, without the URL net/http adds: as
			// a Client's info.
			return unwrapURL(source).Error(), true
		}
		return "", false
	}
	return failure(source, e.Code), true
}

// maxInfoSources bounds the errors goErrorInfo compares with an info: a
// chain that loops must not hang the request.
const maxInfoSources = 32

// infoSource returns the first error in the tree of err whose text is
// info, among the *budget errors it looks at; nil if none is. An
// *asyncsteps.Error is not compared: its text is its code and its info.
func infoSource(err error, info string, budget *int) error {
	return walkTree(err, budget, func(err error) bool {
		_, coded := err.(*asyncsteps.Error)
		return !coded && err.Error() == info
	})
}

// ends reports whether the tree of err, joined errors included, ends
// within maxInfoSources errors, as errors.Is and errors.As walk it.
func ends(err error) bool {
	budget := maxInfoSources
	walkTree(err, &budget, func(error) bool { return false })
	return budget >= 0
}

// walkTree returns the first error of the tree of err, walked as errors.Is
// walks it, that found accepts, among at most *budget errors; nil if none
// is. *budget is below 0 after the walk if the tree goes on past it.
func walkTree(err error, budget *int, found func(error) bool) error {
	for err != nil {
		if *budget--; *budget < 0 {
			return nil
		}
		if found(err) {
			return err
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, each := range e.Unwrap() {
				if source := walkTree(each, budget, found); source != nil || *budget < 0 {
					return source
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// codedBy reports whether a FutoInCoder in the chain of err gives a code:
// the code [asyncsteps.ErrorFrom] gives err, with its text as info.
func codedBy(err error) bool {
	var coder asyncsteps.FutoInCoder
	return errors.As(err, &coder) && coder.FutoInCode() != ""
}
