package redissync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// goCause returns the first error under err's copies of *asyncsteps.Error:
// the Go error that a handler logs.
func goCause(err error) error {
	for {
		e, ok := err.(*asyncsteps.Error)
		if !ok {
			return err
		}
		err = e.Cause
	}
}

// errorReply is an error reply of Redis, as go-redis gives it.
type errorReply string

func (r errorReply) Error() string { return string(r) }
func (errorReply) RedisError()     {}

// opError is the error of op on go-redis's connection to 10.0.0.5:6379,
// which the system call call failed with err.
func opError(op, call string, err error) error {
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 6379}
	return &net.OpError{Op: op, Net: "tcp", Addr: addr, Err: &os.SyscallError{Syscall: call, Err: err}}
}

// TestCommErrorInfos: the info of a failed round trip names the kind of
// failure, told by the error's type, in fixed words; never the address
// that the text of go-redis's error names. The cause has that text and
// the address, and unwraps to the error.
func TestCommErrorInfos(t *testing.T) {
	const addr = "10.0.0.5:6379"
	c := &Client{addr: addr}
	for _, tc := range []struct {
		err  error
		info string
	}{
		{errorReply("WRONGTYPE Operation against a key holding the wrong kind of value"), "error reply WRONGTYPE"},
		{fmt.Errorf("script: %w", errorReply("ERR user_script:1: attempt to compare nil")), "error reply ERR"},
		{errorReply("MOVED 3999 10.0.0.6:6379"), "error reply MOVED"},
		{errorReply("ERR"), "error reply ERR"},
		{errorReply("ERR Protocol error: unauthenticated multibulk length"), "error reply NOAUTH"},
		{errorReply("ERR Protocol error: unauthenticated bulk length"), "error reply NOAUTH"},
		{errorReply("ERR Protocol error: invalid multibulk length"), "error reply ERR"},
		{errorReply("not a code 10.0.0.6:6379"), "error reply"},
		{errorReply("VERYLONGERRORCODEWORD text"), "error reply"},
		{errorReply(""), "error reply"},
		{redis.ErrClosed, "client closed"},
		{fmt.Errorf("get: %w", redis.ErrPoolTimeout), "connection pool timed out"},
		{redis.ErrPoolExhausted, "connection pool exhausted"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "redis.internal", IsNotFound: true}}, "name lookup failed"},
		{opError("dial", "connect", syscall.ECONNREFUSED), "connection refused"},
		{opError("dial", "connect", syscall.EHOSTUNREACH), "host unreachable"},
		{opError("dial", "connect", syscall.ENETUNREACH), "host unreachable"},
		{context.DeadlineExceeded, "timed out"},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "timed out"},
		{context.Canceled, "cancelled"},
		{opError("read", "read", syscall.ECONNRESET), "connection reset"},
		{opError("read", "read", syscall.ECONNABORTED), "connection reset"},
		{opError("write", "write", syscall.EPIPE), "connection reset"},
		{io.EOF, "connection closed"},
		{io.ErrUnexpectedEOF, "connection closed"},
		{&net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}, "connection closed"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "TLS handshake failed"},
		{&tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")}, "TLS handshake failed"},
		{&net.OpError{Op: "remote error", Err: tls.AlertError(42)}, "TLS handshake failed"},
		{errors.New("tls: server selected unsupported protocol version 300"), "TLS handshake failed"},
		{errors.New("redis: can't parse reply from 10.0.0.5:6379"), "request failed"},
	} {
		e := c.commError(tc.err)
		if e.Code != asyncsteps.CommError || e.Info != "redis: "+tc.info {
			t.Errorf("%q: %s: %q, want CommError: %q", tc.err, e.Code, e.Info, "redis: "+tc.info)
		}
		if want := "redis " + addr + ": " + tc.err.Error(); e.Cause == nil || e.Cause.Error() != want {
			t.Errorf("%q: cause %v, want %q", tc.err, e.Cause, want)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("%q: errors.Is does not find the error under %v", tc.err, e)
		}
	}
}

// nilError is an error that panics when its text is read, as a nil
// pointer to a type whose Error reads its fields does.
type nilError struct{ text *string }

func (e *nilError) Error() string { return *e.text }

// TestCommErrorOfPanickingError: a round trip's error whose Error method
// panics (a hook of the user's redis client that returns a nil pointer
// as an error) fails the flows with an InternalError that says so. Its
// text was read on the Syncer's goroutine, and the panic ended the
// process.
func TestCommErrorOfPanickingError(t *testing.T) {
	c := &Client{addr: "10.0.0.5:6379"}
	e := c.commError(&nilError{})
	const info = "redis: reading the error of a round trip: panic: runtime error: invalid memory address or nil pointer dereference"
	if e.Code != asyncsteps.InternalError || e.Info != info {
		t.Errorf("%s: %q, want InternalError: %q", e.Code, e.Info, info)
	}
	var p *asyncsteps.PanicError
	if !errors.As(e, &p) || e.Cause.Error() != "redis 10.0.0.5:6379: panic: runtime error: invalid memory address or nil pointer dereference" {
		t.Errorf("cause %v, want the PanicError under the address", e.Cause)
	}
}

// newRefused runs New on rdb, whose address nothing listens on, and
// returns its error, failing the test unless it is the CommError
// "redis: connection refused".
func newRefused(t *testing.T, rdb redis.UniversalClient) error {
	t.Helper()
	c, err := New(context.Background(), rdb, Options{OpTimeout: 5 * time.Second})
	if c != nil {
		c.Close()
	}
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: connection refused" {
		t.Fatalf("New: %v, want CommError: redis: connection refused", err)
	}
	return err
}

// TestRefusedInfoNamesNoAddress: New, given a client that dials once and
// does not retry, fails at once where nothing listens with the CommError
// "redis: connection refused": the info does not name the address, the
// cause does, and errors.Is finds the dial's error.
func TestRefusedInfoNamesNoAddress(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // closed again: nothing listens
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	err := newRefused(t, rdb)
	var e *asyncsteps.Error
	errors.As(err, &e)
	_, port, _ := net.SplitHostPort(addr)
	if strings.Contains(e.Info, port) {
		t.Errorf("info %q names the port %s", e.Info, port)
	}
	if want := "redis " + addr + ": dial tcp " + addr + ": "; !strings.HasPrefix(e.Cause.Error(), want) {
		t.Errorf("cause %q, want it to start with %q", e.Cause, want)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(%v, ECONNREFUSED) is false", err)
	}
}
