package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A flag value the command cannot work with stops it at start with exit
// status 2 and a log line naming the flag, before it listens or starts
// anything; the defaults are accepted.
func TestBadFlagValuesExitWithStatus2(t *testing.T) {
	if _, err := parseFlags(nil); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cases := []struct {
		args []string
		want string // in the error logged
	}{
		{[]string{"-loops", "-1"}, "-loops must be from 0 (one per core) to 1024"},
		{[]string{"-loops", "100000000"}, "-loops must be from 0 (one per core) to 1024"},
		{[]string{"-retry-after", "2562047h"}, "-retry-after must be at most 24h0m0s, -upstream-latency at most 1h0m0s"},
		{[]string{"-upstream-latency", "2562047h"}, "-retry-after must be at most 24h0m0s, -upstream-latency at most 1h0m0s"},
		{[]string{"-burst", "5"}, "-burst needs -rate"},
		{[]string{"-upstream", "http://127.0.0.1:9090/?key=1"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "http://127.0.0.1:9090/api#x"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "http://127.0.0.1:9090/api?"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "unix:///tmp/upstream.sock"}, `want an http:// or https:// URL with a host`},
		{[]string{"-rate", "1e18"}, `invalid value "1e18" for flag -rate`},
		{[]string{"-concurrent", "0"}, "-concurrent must be at least 1"},
		{[]string{"-queue", "-1"}, "-queue, -rate and -burst at least 0"},
		{[]string{"-retries", "-1"}, "-retries from 0 to 100"},
		{[]string{"-retries", "9223372036854775807"}, "-retries from 0 to 100"},
		{[]string{"-max-symbols", "0"}, "-max-symbols must be from 1 to 100"},
		{[]string{"-max-symbols", "1000000"}, "-max-symbols must be from 1 to 100"},
		{[]string{"-timeout", "0s"}, "-timeout and -attempt-timeout must be positive"},
		{[]string{"-timeout", "-1s"}, "-timeout and -attempt-timeout must be positive"},
		{[]string{"-attempt-timeout", "-250ms"}, "-timeout and -attempt-timeout must be positive"},
		{[]string{"-grace", "-1s"}, "-grace, -retry-after and -upstream-latency must be at least 0"},
		{[]string{"-retry-after", "-1s"}, "-grace, -retry-after and -upstream-latency must be at least 0"},
		{[]string{"-upstream-latency", "-5ms"}, "-grace, -retry-after and -upstream-latency must be at least 0"},
		{[]string{"-upstream-fail", "1.5"}, "-upstream-fail=1.5: want a share from 0 to 1"},
		{[]string{"-upstream-fail", "NaN"}, "-upstream-fail=NaN: want a share from 0 to 1"},
		{[]string{"-upstream", "127.0.0.1:9090"}, `want an http:// or https:// URL with a host`},
		{[]string{"-upstream", "http://"}, `want an http:// or https:// URL with a host`},
		{[]string{"-impl", "threads"}, `-impl=\"threads\": want flows or plain`},
		{[]string{"-redis-ttl", "0s"}, "-redis-ttl must be from 100ms to 24h0m0s"},
		{[]string{"-redis-ttl", "1ns"}, "-redis-ttl must be from 100ms to 24h0m0s"},
		{[]string{"-redis-ttl", "2562047h47m16s"}, "-redis-ttl must be from 100ms to 24h0m0s"},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	}
	for _, c := range cases {
		// An address that cannot be listened on: a value let through
		// would exit with status 1, not 2.
		args := append([]string{"-addr", "256.0.0.1:1"}, c.args...)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 ||
			!strings.Contains(string(out), `msg="bad flags"`) || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %v, want exit status 2 and %q logged; output:\n%s", c.args, err, c.want, out)
		}
	}
}
