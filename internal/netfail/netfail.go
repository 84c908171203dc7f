// Package netfail names the kind of a network failure in fixed words: the
// one classifier of transport failures that asynchttp and redissync add
// their own words to. The words never name an address, a host or a URL,
// which the text of a Go network error does: the packages answer them to
// clients that must not learn where the server connects.
package netfail

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// The kinds of failure Kind tells.
const (
	NameLookup  = "name lookup failed"
	Refused     = "connection refused"
	Unreachable = "host unreachable"
	TimedOut    = "timed out"
	// Reset is a connection the peer reset. EPIPE is one: a write to a
	// TCP connection fails with it once the peer's reset has come (the
	// peer closed, the first write drew its RST), the same event
	// ECONNRESET reports.
	Reset = "connection reset"
	// Closed is an end of input where more was due, or a connection
	// closed under the read or write.
	Closed       = "connection closed"
	TLSHandshake = "TLS handshake failed"
	// Unnamed is the failure none of the kinds tells.
	Unnamed = "request failed"
)

// Kind names the kind of network failure err is, told by the types in
// err's chain, or "" if it is none of the kinds. It does not name the
// cancellation of a context: what a cancel means is the caller's to say.
// Kind(nil) is "".
func Kind(err error) string {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &dns):
		return NameLookup
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return TimedOut
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return Reset
	case tlsFailure(err):
		return TLSHandshake
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return Closed
	}
	return ""
}

// tlsFailure reports whether err says the TLS handshake failed: the
// peer's certificate was refused, or the peer refused ours (an alert it
// sent), or it spoke no TLS at all. crypto/tls gives most of its other
// failures no type: their text starts with "tls: ".
func tlsFailure(err error) bool {
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	var op *net.OpError
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &op) && op.Op == "remote error" || strings.HasPrefix(err.Error(), "tls: ")
}
