package redissync

import (
	"errors"
	"fmt"
	"testing"
)

// replyError is an error reply of Redis, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// A FailOpen Throttle fails closed only on a reply that says its key or
// script is wrong, or that Redis does not let its client in; a reply
// that says Redis cannot serve now, also wrapped in a script error as
// Redis 6 does, leaves it failing open.
func TestRefusedByRedis(t *testing.T) {
	for _, c := range []struct {
		msg     string
		refused bool
	}{
		{"WRONGTYPE Operation against a key holding the wrong kind of value", true},
		{"ERR user_script:6: attempt to compare nil with number script: 2f1c..., on @user_script:6.", true},
		{"ERR Error running script (call to f_2f1c...): @user_script:5: WRONGTYPE Operation against a key holding the wrong kind of value", true},
		{"ERR Error running script (call to f_2f1c...): @user_script:9: @user_script: 9: -READONLY You can't write against a read only replica. ", false},
		{"ERR Error running script (call to f_2f1c...): @user_script:9: @user_script: 9: -OOM command not allowed when used memory > 'maxmemory'. ", false},
		{"READONLY You can't write against a read only replica. script: 2f1c..., on @user_script:9.", false},
		{"LOADING Redis is loading the dataset in memory", false},
		{"ERR unknown command 'EVALSHA'", false},
		{"NOAUTH Authentication required.", true},
		{"ERR Protocol error: unauthenticated multibulk length", true},
		{"ERR Protocol error: unauthenticated bulk length", true},
		{"ERR Protocol error: invalid multibulk length", false},
		{"WRONGPASS invalid username-password pair or user is disabled.", true},
		{"NOPERM User default has no permissions to run the 'evalsha' command", true},
		{"NOPERMISSION is no code of Redis", false},
		{"CROSSSLOT Keys in request don't hash to the same slot", true},
	} {
		if got := refusedByRedis(fmt.Errorf("round trip: %w", replyError(c.msg))); got != c.refused {
			t.Errorf("refusedByRedis(%q) = %v, want %v", c.msg, got, c.refused)
		}
	}
	if refusedByRedis(errors.New("dial tcp: connection refused")) {
		t.Error("a transport error is taken as refused")
	}
}
