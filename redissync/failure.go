package redissync

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/netfail"
	"github.com/redis/go-redis/v9"
)

// commError is the error of a flow whose round trip failed, and of New
// when Redis cannot be reached: CommError, or InternalError when the round
// trip panicked, as for a callback. Its info is "redis: " and the kind of
// failure in fixed words (see failure), never the server's address nor
// go-redis's text, which names it ("dial tcp 10.0.0.5:6379: connect:
// connection refused"): an asynchttp.Handler guarded by a Syncer answers
// the info to its client, who must not learn where the server's Redis
// is. Cause is an error whose text has both, for the logs, and which
// unwraps to err, so that errors.Is and errors.As find err's chain.
func (c *Client) commError(err error) (e *asyncsteps.Error) {
	defer func() {
		if v := recover(); v != nil {
			// An error whose methods panic (a nil pointer returned as an
			// error by a hook of the user's redis client): the process
			// must go on. Its text would panic again: the cause holds the
			// panic instead.
			p := &asyncsteps.PanicError{Value: v, Stack: debug.Stack()}
			e = &asyncsteps.Error{Code: asyncsteps.InternalError,
				Info: "redis: reading the error of a round trip: " + p.Error(), Cause: c.withAddr(p)}
		}
	}()
	cause := c.withAddr(err) // reads err's text here, where a panic is recovered
	if p, ok := err.(*asyncsteps.PanicError); ok {
		return &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "redis: " + p.Error(), Cause: cause}
	}
	return &asyncsteps.Error{Code: asyncsteps.CommError, Info: "redis: " + failure(err), Cause: cause}
}

// addrError is the cause of a commError: the error of go-redis (or the
// panic of a round trip) with the address of the server, which the info
// leaves out.
type addrError struct {
	text string // "redis ADDR: " and err's text
	err  error
}

// withAddr returns err as the cause of a commError. It reads err's text
// at once: a method of err that panics must do so in commError, which
// recovers, not in whatever logs the cause later.
func (c *Client) withAddr(err error) *addrError {
	return &addrError{text: "redis " + c.addr + ": " + err.Error(), err: err}
}

func (e *addrError) Error() string { return e.text }

func (e *addrError) Unwrap() error { return e.err }

// failure names the kind of failure of err in fixed words, told by the
// types in err's chain: "error reply" and the reply's error code (Redis
// refused the call: "error reply WRONGTYPE"), "client closed" (the go-redis
// client was closed), "connection pool timed out", "connection pool
// exhausted", "cancelled" (New's context), else the network's kind of
// failure as netfail names it ("connection refused", "timed out", ...), or
// else "request failed".
func failure(err error) string {
	var reply redis.Error
	switch {
	case errors.As(err, &reply):
		return replyFailure(reply)
	case errors.Is(err, redis.ErrClosed):
		return "client closed"
	case errors.Is(err, redis.ErrPoolTimeout):
		return "connection pool timed out"
	case errors.Is(err, redis.ErrPoolExhausted):
		return "connection pool exhausted"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	if kind := netfail.Kind(err); kind != "" {
		return kind
	}
	return netfail.Unnamed
}

// replyFailure names an error reply of Redis by its error code, the first
// word of its text ("WRONGTYPE Operation against a key holding the wrong
// kind of value"): a word of Redis's own set, in capitals. The rest is
// left out: it can name a key, a line of the script, or, for MOVED and
// ASK, the address of another node. Redis's refusal of a long call to a
// client that has not authenticated is named NOAUTH (see
// unauthenticatedReply), as its refusal of a short one is.
func replyFailure(reply redis.Error) string {
	msg := reply.Error()
	if unauthenticatedReply(msg) {
		return "error reply NOAUTH"
	}
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || len(code) > maxReplyCode || strings.TrimLeft(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return "error reply"
	}
	return "error reply " + code
}

// unauthenticatedReply reports whether msg is Redis's refusal of a call
// that a client which has not authenticated may not make at all: more than
// ten arguments ("ERR Protocol error: unauthenticated multibulk length"),
// or one longer than 16 KiB ("... unauthenticated bulk length"). Redis
// refuses it as it reads it, before it reads the command, so with a
// protocol error rather than NOAUTH, and closes the connection. A Mutex's
// round trip has more than ten arguments: the refusal of its password is
// this one.
func unauthenticatedReply(msg string) bool {
	return strings.HasPrefix(msg, "ERR Protocol error: unauthenticated ")
}

// maxReplyCode bounds the error code replyFailure names: Redis's are
// short words (CLUSTERDOWN, NOREPLICAS).
const maxReplyCode = 16
