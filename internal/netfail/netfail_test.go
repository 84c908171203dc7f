package netfail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// Kind tells each kind by the types in the chain, EPIPE with the resets,
// and "" for what it does not know, a cancel included.
func TestKind(t *testing.T) {
	op := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: &os.SyscallError{Syscall: op, Err: err}}
	}
	for _, tc := range []struct {
		err  error
		kind string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.internal", IsNotFound: true}}, NameLookup},
		{op("connect", syscall.ECONNREFUSED), Refused},
		{op("connect", syscall.EHOSTUNREACH), Unreachable},
		{op("connect", syscall.ENETUNREACH), Unreachable},
		{context.DeadlineExceeded, TimedOut},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, TimedOut},
		// A *url.Error's Timeout looks at its own Err only.
		{&url.Error{Op: "Get", URL: "http://x", Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)}, TimedOut},
		{op("read", syscall.ECONNRESET), Reset},
		{op("read", syscall.ECONNABORTED), Reset},
		{op("write", syscall.EPIPE), Reset},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, TLSHandshake},
		{&tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")}, TLSHandshake},
		{&net.OpError{Op: "remote error", Err: tls.AlertError(42)}, TLSHandshake},
		{errors.New("tls: server selected unsupported protocol version 300"), TLSHandshake},
		{io.EOF, Closed},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), Closed},
		{&net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}, Closed},
		{nil, ""},
		{context.Canceled, ""},
		{errors.New("10.0.0.5:6379 is draining"), ""},
	} {
		if got := Kind(tc.err); got != tc.kind {
			t.Errorf("Kind(%q) = %q, want %q", tc.err, got, tc.kind)
		}
	}
}
