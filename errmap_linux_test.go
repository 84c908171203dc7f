package asyncsteps_test

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The errors of a socket used without the net package (a raw dialer, a
// driver on golang.org/x/sys) are a bare syscall.Errno, or one under an
// *os.SyscallError: no *net.OpError says they come from a network. The
// Errnos only a socket gives are network errors still: a connection
// refused, or a host or network that cannot be reached, a ConnectError;
// one reset, broken, not connected or timed out by TCP, a CommError (all
// were, before a file's Errnos were told apart from a network's, and
// ETIMEDOUT, ENOTCONN, ENETRESET and ENETDOWN had become InternalErrors).
// A file's Errno (ENOENT) is not one. The errors are real ones on
// loopback where a socket gives them at once; the others are made as a
// raw dialer makes them.
func TestErrorFromMapsRawSocketErrors(t *testing.T) {
	refused, notConn, pipe := rawSocketErrors(t)
	for _, tc := range []struct {
		name string
		err  error
		code string
	}{
		{"connect refused", refused, asyncsteps.ConnectError},
		{"shutdown not connected", notConn, asyncsteps.CommError},
		{"send after shutdown", pipe, asyncsteps.CommError},
		{"connect timed out", os.NewSyscallError("connect", syscall.ETIMEDOUT), asyncsteps.CommError},
		{"bare ETIMEDOUT", syscall.ETIMEDOUT, asyncsteps.CommError},
		{"network down", os.NewSyscallError("connect", syscall.ENETDOWN), asyncsteps.ConnectError},
		{"network reset", os.NewSyscallError("recvfrom", syscall.ENETRESET), asyncsteps.CommError},
		{"timed out, under a read", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}, asyncsteps.CommError},
		{"missing file", os.NewSyscallError("open", syscall.ENOENT), asyncsteps.InternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asyncsteps.ErrorFrom(tc.err)
			if got.Code != tc.code || got.Info != tc.err.Error() || got.Cause != tc.err {
				t.Errorf("ErrorFrom(%v) = %q %q (cause %v), want %q, its text, itself", tc.err, got.Code, got.Info, got.Cause, tc.code)
			}
			var se *os.SyscallError
			if errors.As(tc.err, &se) && !errors.As(got, &se) {
				t.Errorf("errors.As(ErrorFrom(%v), *os.SyscallError) = false", tc.err)
			}
		})
	}
}

// rawSocketErrors returns the errors a raw TCP socket gets on loopback,
// as os.NewSyscallError wraps them: a connect to a port nobody listens
// on (ECONNREFUSED), a shutdown of a socket never connected (ENOTCONN),
// and a send after its own shutdown for writing (EPIPE).
func rawSocketErrors(t *testing.T) (refused, notConn, pipe error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	closedPort := mustClosedPort(t)
	sock := func() int {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return fd
	}
	loopback := func(port int) *syscall.SockaddrInet4 {
		return &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	}
	refused = os.NewSyscallError("connect", syscall.Connect(sock(), loopback(closedPort)))
	notConn = os.NewSyscallError("shutdown", syscall.Shutdown(sock(), syscall.SHUT_RDWR))
	fd := sock()
	if err := syscall.Connect(fd, loopback(port)); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := syscall.Shutdown(fd, syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	pipe = os.NewSyscallError("sendto", syscall.Sendto(fd, []byte("x"), syscall.MSG_NOSIGNAL, nil))
	for _, c := range []struct {
		err   error
		errno syscall.Errno
	}{{refused, syscall.ECONNREFUSED}, {notConn, syscall.ENOTCONN}, {pipe, syscall.EPIPE}} {
		if !errors.Is(c.err, c.errno) {
			t.Fatalf("got %v, want %v", c.err, c.errno)
		}
	}
	return refused, notConn, pipe
}

// mustClosedPort returns a loopback port that was listened on and is
// closed: a connect to it is refused.
func mustClosedPort(t *testing.T) int {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}
