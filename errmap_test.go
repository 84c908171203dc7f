package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// quotaError says its own FutoIn code.
type quotaError struct{ left int }

func (e *quotaError) Error() string      { return fmt.Sprintf("quota exhausted, %d left", e.left) }
func (e *quotaError) FutoInCode() string { return asyncsteps.DefenseRejected }

// silentCoder has a FutoInCode method that says nothing.
type silentCoder struct{}

func (silentCoder) Error() string      { return "no code" }
func (silentCoder) FutoInCode() string { return "" }

// workerPanic is a panic a worker recovered, with the worker's number: an
// error type of a user that embeds the *PanicError, and so its methods.
type workerPanic struct {
	*asyncsteps.PanicError
	worker int
}

// ErrorFrom maps each kind of Go error to its code, keeps err.Error() as
// info (an *Error keeps its own) and the original as Cause.
func TestErrorFromMapsGoErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	quota := &quotaError{left: 0}
	for _, tc := range []struct {
		name string
		err  error
		code string
		info string
	}{
		{"*Error", &asyncsteps.Error{Code: asyncsteps.Unauthorized, Info: "bad token"}, asyncsteps.Unauthorized, "bad token"},
		{"wrapped *Error", fmt.Errorf("login: %w", &asyncsteps.Error{Code: asyncsteps.Unauthorized, Info: "bad token"}), asyncsteps.Unauthorized, "bad token"},
		{"FutoInCoder", quota, asyncsteps.DefenseRejected, "quota exhausted, 0 left"},
		{"wrapped FutoInCoder", fmt.Errorf("upload: %w", quota), asyncsteps.DefenseRejected, "upload: quota exhausted, 0 left"},
		{"FutoInCoder without a code", silentCoder{}, asyncsteps.InternalError, "no code"},
		{"context.DeadlineExceeded", context.DeadlineExceeded, asyncsteps.Timeout, "context deadline exceeded"},
		{"wrapped deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), asyncsteps.Timeout, "query: context deadline exceeded"},
		{"dial refused", refused, asyncsteps.ConnectError, "dial tcp: connect: connection refused"},
		{"bare ECONNREFUSED", syscall.ECONNREFUSED, asyncsteps.ConnectError, "connection refused"},
		{"host unreachable", fmt.Errorf("connect: %w", syscall.EHOSTUNREACH), asyncsteps.ConnectError, "connect: no route to host"},
		{"DNS error", &net.DNSError{Err: "no such host", Name: "upstream.invalid", IsNotFound: true}, asyncsteps.ConnectError, "lookup upstream.invalid: no such host"},
		{"read reset", reset, asyncsteps.CommError, "read tcp: read: connection reset by peer"},
		{"bare EPIPE", fmt.Errorf("write: %w", syscall.EPIPE), asyncsteps.CommError, "write: broken pipe"},
		{"aborted", syscall.ECONNABORTED, asyncsteps.CommError, "software caused connection abort"},
		{"closed connection", net.ErrClosed, asyncsteps.CommError, net.ErrClosed.Error()},
		{"plain error", errors.New("disk full"), asyncsteps.InternalError, "disk full"},
		{"context.Canceled", context.Canceled, asyncsteps.InternalError, "context canceled"},
		{"panic of an *Error", &asyncsteps.PanicError{Value: &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}},
			asyncsteps.InternalError, "panic: CommError: reset"},
		{"panic of a deadline", &asyncsteps.PanicError{Value: context.DeadlineExceeded},
			asyncsteps.InternalError, "panic: context deadline exceeded"},
		// A panic wrapped by another error is a panic still, its value not
		// looked into: a panic a goroutine of the Await function recovered.
		{"wrapped panic of an *Error", fmt.Errorf("worker: %w", &asyncsteps.PanicError{Value: &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}}),
			asyncsteps.InternalError, "worker: panic: CommError: reset"},
		{"wrapped panic of a deadline", fmt.Errorf("worker: %w", &asyncsteps.PanicError{Value: context.DeadlineExceeded}),
			asyncsteps.InternalError, "worker: panic: context deadline exceeded"},
		{"joined panic of a FutoInCoder", errors.Join(errors.New("batch"), &asyncsteps.PanicError{Value: quota}),
			asyncsteps.InternalError, "batch\npanic: quota exhausted, 0 left"},
		// A panic embedded in an error type of a user is a panic still:
		// the *Error its value is does not give its code.
		{"embedded panic of an *Error", fmt.Errorf("pool: %w", &workerPanic{
			PanicError: &asyncsteps.PanicError{Value: &asyncsteps.Error{Code: asyncsteps.LoopBreak, Info: "done"}}, worker: 3}),
			asyncsteps.InternalError, "pool: panic: LoopBreak: done"},
		// Of joined errors, the first that holds an *Error or a panic decides.
		{"joined panic, then *Error", errors.Join(&asyncsteps.PanicError{Value: "boom"}, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}),
			asyncsteps.InternalError, "panic: boom\nCommError: reset"},
		{"joined *Error, then panic", errors.Join(&asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}, &asyncsteps.PanicError{Value: "boom"}),
			asyncsteps.CommError, "reset"},
		// An *Error that wraps a panic chose its code.
		{"*Error caused by a panic", fmt.Errorf("db: %w", &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset",
			Cause: &asyncsteps.PanicError{Value: "boom"}}), asyncsteps.CommError, "reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asyncsteps.ErrorFrom(tc.err)
			if got.Code != tc.code || got.Info != tc.info {
				t.Errorf("ErrorFrom(%v) = %q %q, want %q %q", tc.err, got.Code, got.Info, tc.code, tc.info)
			}
			if got.Cause != tc.err || !errors.Is(got, tc.err) {
				t.Errorf("Cause = %v, want the original %v", got.Cause, tc.err)
			}
		})
	}
	if asyncsteps.ErrorFrom(nil) != nil {
		t.Error("ErrorFrom(nil) is not nil")
	}
}

// Real errors from net/http over loopback reach the error handler of an
// Await step with their code; LastException keeps the original, so
// errors.As finds the *net.OpError under the *url.Error.
func TestAwaitMapsRealNetworkErrors(t *testing.T) {
	// A port that refuses: listened on, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := "http://" + ln.Addr().String()
	ln.Close()
	// A server that accepts and hangs up before answering.
	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangup.Close()
	go func() {
		for {
			c, err := hangup.Accept()
			if err != nil {
				return
			}
			io.ReadAtLeast(c, make([]byte, 1), 1) // the request has come
			c.Close()
		}
	}()
	// A server that answers late.
	slow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})}
	go srv.Serve(slow)
	defer srv.Close()
	defer close(done)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(url string) asyncsteps.AwaitFunc {
		return func(ctx context.Context) (any, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return nil, err
			}
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
	}
	for _, tc := range []struct {
		name    string
		url     string
		timeout time.Duration // Run's deadline
		code    string
		netOp   string // the Op of the *net.OpError found in LastException, if any
	}{
		{"connection refused", refusing, 0, asyncsteps.ConnectError, "dial"},
		{"hang-up", "http://" + hangup.Addr().String(), 0, asyncsteps.CommError, ""},
		{"Run deadline", "http://" + slow.Addr().String(), 50 * time.Millisecond, asyncsteps.Timeout, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Await(get(tc.url), func(as asyncsteps.AsyncSteps, code string) {
				exc := as.State().LastException
				var op *net.OpError
				tr.addf("onerror:%s:%v", code, errors.As(exc, &op) && op.Op == tc.netOp)
				as.Success("fallback")
			})
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			args, err := r.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantArgs(t, "Run args", args, "fallback")
			wantTrace(t, &tr, fmt.Sprintf("onerror:%s:%v", tc.code, tc.netOp != ""))
		})
	}
}

// AwaitResult maps the error of another flow's Result the same way.
func TestAwaitResultMapsGoErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	ch := make(chan asyncsteps.Result, 1)
	ch <- asyncsteps.Result{Err: fmt.Errorf("fetch: %w", refused)}
	r, tt := newFlow()
	var tr tracer
	asyncsteps.AwaitResult(r, ch, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("onerror:%s:%s:%v", code, as.State().ErrorInfo, errors.Is(as.State().LastException, syscall.ECONNREFUSED))
	})
	res := run(t, r, tt)
	wantError(t, res.Err, asyncsteps.ConnectError, "fetch: dial tcp: connection refused")
	wantTrace(t, &tr, "onerror:ConnectError:fetch: dial tcp: connection refused:true")
}

// A connection's read deadline is a timeout: the "i/o timeout" of
// os.ErrDeadlineExceeded, what a client with SetDeadline per request (a
// database or cache driver) returns, maps to Timeout as a dial timeout
// and a context's deadline do, not to CommError.
func TestErrorFromMapsADeadlineOfAConnectionToTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(-time.Second)) // passed: Read fails at once
	_, readErr := c.Read(make([]byte, 1))
	if !errors.Is(readErr, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v, want an i/o timeout", readErr)
	}
	for _, err := range []error{readErr, os.ErrDeadlineExceeded, fmt.Errorf("GET key: %w", readErr)} {
		got := asyncsteps.ErrorFrom(err)
		if got.Code != asyncsteps.Timeout || got.Info != err.Error() || got.Cause != err {
			t.Errorf("ErrorFrom(%v) = %q %q (cause %v), want Timeout, its text, itself", err, got.Code, got.Info, got.Cause)
		}
	}
}

// A file's error is not a network error: the syscall.Errno under an
// *fs.PathError has the methods of a net.Error (Timeout, Temporary), but
// a missing file is an InternalError, not a CommError that Retry would
// retry. A net.Error further down the chain, or joined after it, still
// makes a CommError.
func TestErrorFromMapsAFileErrorToInternalError(t *testing.T) {
	dir := t.TempDir()
	_, missing := os.Open(dir + "/missing")
	exists := os.Mkdir(dir, 0o700)
	if !errors.Is(missing, os.ErrNotExist) || !errors.Is(exists, os.ErrExist) {
		t.Fatalf("Open = %v, Mkdir = %v: want ENOENT, EEXIST", missing, exists)
	}
	timedOut := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{missing, asyncsteps.InternalError},
		{exists, asyncsteps.InternalError},
		{fmt.Errorf("load config: %w", missing), asyncsteps.InternalError},
		{errors.Join(missing, timedOut), asyncsteps.CommError},
		{timedOut, asyncsteps.CommError},
	} {
		if got := asyncsteps.ErrorFrom(tc.err); got.Code != tc.code || got.Cause != tc.err {
			t.Errorf("ErrorFrom(%v) = %q (cause %v), want %q", tc.err, got.Code, got.Cause, tc.code)
		}
	}
}
