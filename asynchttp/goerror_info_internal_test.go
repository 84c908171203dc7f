package asynchttp

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// loopingError unwraps to itself: a chain without an end.
type loopingError struct{}

func (*loopingError) Error() string   { return "looping" }
func (e *loopingError) Unwrap() error { return e }

// The answered info of each kind of error: the Go error's text, wherever
// it is in the chain, gives way to fixed words; any other info stays. A
// chain that loops ends the walk, and an error whose methods panic hides
// the info.
func TestAnsweredInfo(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 9000},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	text := refused.Error() // dial tcp 10.0.0.7:9000: connect: connection refused
	of := func(code, info string, cause error) *asyncsteps.Error {
		return &asyncsteps.Error{Code: code, Info: info, Cause: cause}
	}
	copied := of(asyncsteps.ConnectError, text, of(asyncsteps.ConnectError, text, refused)) // AwaitFlow's copy
	for _, tc := range []struct {
		name string
		err  *asyncsteps.Error
		want string
	}{
		{"Go error", of(asyncsteps.ConnectError, text, refused), "connection refused"},
		{"under the engine's copy", copied, "connection refused"},
		{"in a join", of(asyncsteps.CommError, text, errors.Join(errors.New("first"), refused)), "connection refused"},
		{"a join's text", of(asyncsteps.CommError, "first\n"+text, errors.Join(errors.New("first"), refused)), "connection refused"},
		{"Timeout", of(asyncsteps.Timeout, "i/o timeout", os.ErrDeadlineExceeded), "timed out"},
		{"no fixed words for it", of(asyncsteps.ConnectError, "odd", errors.New("odd")), "could not connect"},
		{"the context's deadline", of(asyncsteps.Timeout, "context deadline exceeded", context.DeadlineExceeded), "context deadline exceeded"},
		{"another text", of(asyncsteps.CommError, "upstream answered 502", refused), "upstream answered 502"},
		{"a deeper error's text", of(asyncsteps.CommError, "connect: connection refused", refused), "connection refused"},
		{"another code", of(asyncsteps.InvalidRequest, text, refused), text},
		{"InternalError", of(asyncsteps.InternalError, text, refused), internalInfo},
		{"no cause", of(asyncsteps.CommError, text, nil), text},
		{"a loop", of(asyncsteps.CommError, "upstream", &loopingError{}), "upstream"},
		{"Unwrap panics", of(asyncsteps.CommError, "upstream", panicky{}), "request failed"},
		{"a nil *net.OpError", of(asyncsteps.ConnectError, "upstream", (*net.OpError)(nil)), "could not connect"},
	} {
		if got := answeredInfo(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The answers that cannot carry a Go error's text, the most frequent
// (a step's Timeout, a limit's rejection, an info the flow sets), are
// told without an allocation.
func TestAnsweredInfoOfNoGoErrorAllocatesNothing(t *testing.T) {
	for _, e := range []*asyncsteps.Error{
		{Code: asyncsteps.Timeout},
		{Code: asyncsteps.DefenseRejected, Info: "Mutex queue limit", Cause: errors.New("Mutex queue limit")},
		{Code: asyncsteps.CommError, Info: "upstream answered 502 for IBM"},
	} {
		if allocs := testing.AllocsPerRun(100, func() { answeredInfo(e) }); allocs != 0 {
			t.Errorf("%v: %v allocations, want 0", e, allocs)
		}
	}
}

// A chain that loops through the error whose text is the info: the words
// are told by errors.Is and errors.As, which walk the chain to its end,
// so they must not be asked. The info is hidden, as for an error whose
// methods panic, and the answer comes.
func TestAnsweredInfoOfALoopingSource(t *testing.T) {
	answered := make(chan string, 1)
	go func() {
		answered <- answeredInfo(&asyncsteps.Error{Code: asyncsteps.CommError, Info: "looping", Cause: &loopingError{}})
	}()
	select {
	case got := <-answered:
		if want := "request failed"; got != want {
			t.Errorf("%q, want %q", got, want)
		}
	case <-time.After(10 * time.Second): // it never comes on the old code
		t.Fatal("answeredInfo hangs on a chain that loops through its source")
	}
}
