package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A flag value the command cannot work with stops it at start with exit
// status 2 and a log line naming the flag, that one only, and its value, before it listens or starts
// anything; the defaults are accepted.
func TestBadFlagValuesExitWithStatus2(t *testing.T) {
	if _, err := parseFlags(nil); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cases := []struct {
		args []string
		want string // in the error logged
	}{
		{[]string{"-loops", "-1"}, `"-loops=-1: want from 0 to 1024"`},
		{[]string{"-loops", "100000000"}, `"-loops=100000000: want from 0 to 1024"`},
		{[]string{"-retry-after", "2562047h"}, `"-retry-after=2562047h0m0s: want from 0s to 24h0m0s"`},
		{[]string{"-upstream-latency", "2562047h"}, `"-upstream-latency=2562047h0m0s: want from 0s to 1h0m0s"`},
		{[]string{"-burst", "5"}, "-burst needs -rate"},
		{[]string{"-upstream", "http://127.0.0.1:9090/?key=1"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "http://127.0.0.1:9090/api#x"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "http://127.0.0.1:9090/api?"}, "want a base URL with no query or fragment"},
		{[]string{"-upstream", "unix:///tmp/upstream.sock"}, `want an http:// or https:// URL with a host`},
		{[]string{"-rate", "1e18"}, `invalid value "1e18" for flag -rate`},
		{[]string{"-concurrent", "0"}, `"-concurrent=0: want at least 1"`},
		{[]string{"-queue", "-1"}, `"-queue=-1: want at least 0"`},
		{[]string{"-rate", "-1"}, `"-rate=-1: want at least 0"`},
		{[]string{"-burst", "-1", "-rate", "5"}, `"-burst=-1: want at least 0"`},
		{[]string{"-retries", "-1"}, `"-retries=-1: want from 0 to 100"`},
		{[]string{"-retries", "9223372036854775807"}, `"-retries=9223372036854775807: want from 0 to 100"`},
		{[]string{"-max-symbols", "0"}, `"-max-symbols=0: want from 1 to 100"`},
		{[]string{"-max-symbols", "1000000"}, `"-max-symbols=1000000: want from 1 to 100"`},
		{[]string{"-timeout", "0s"}, `"-timeout=0s: want a positive duration"`},
		{[]string{"-timeout", "-1s"}, `"-timeout=-1s: want a positive duration"`},
		{[]string{"-attempt-timeout", "-250ms"}, `"-attempt-timeout=-250ms: want a positive duration"`},
		{[]string{"-grace", "-1s"}, `"-grace=-1s: want at least 0s"`},
		{[]string{"-retry-after", "-1s"}, `"-retry-after=-1s: want from 0s to 24h0m0s"`},
		{[]string{"-upstream-latency", "-5ms"}, `"-upstream-latency=-5ms: want from 0s to 1h0m0s"`},
		{[]string{"-upstream-fail", "1.5"}, "-upstream-fail=1.5: want a share from 0 to 1"},
		{[]string{"-upstream-fail", "NaN"}, "-upstream-fail=NaN: want a share from 0 to 1"},
		{[]string{"-upstream", "127.0.0.1:9090"}, `want an http:// or https:// URL with a host`},
		{[]string{"-upstream", "http://"}, `want an http:// or https:// URL with a host`},
		{[]string{"-otlp-endpoint", "localhost:4318"}, `-otlp-endpoint=\"localhost:4318\": want an http:// or https:// URL with a host`},
		{[]string{"-otlp-endpoint", "grpc://127.0.0.1:4317"}, `want an http:// or https:// URL with a host`},
		{[]string{"-otlp-endpoint", "http://u:hunter2@127.0.0.1:4318/?x=1"}, `-otlp-endpoint=\"http://u:***@127.0.0.1:4318/?x=1\": want a URL with no query or fragment`},
		{[]string{"-otlp-endpoint", "http://127.0.0.1:4318#x"}, `want a URL with no query or fragment`},
		{[]string{"-otlp-endpoint", "http://u:hunter2@127.0.0.1:4318"}, `-otlp-endpoint=\"http://u:***@127.0.0.1:4318\": want a URL with no user or password, which would not be sent: set OTEL_EXPORTER_OTLP_HEADERS`},
		{[]string{"-otlp-endpoint", "https://token@collector.example/v1/traces"}, `want a URL with no user or password`},
		{[]string{"-impl", "threads"}, `-impl=\"threads\": want flows or plain`},
		{[]string{"-log-level", "verbose"}, `-log-level=\"verbose\": want debug, info, warn or error"`},
		{[]string{"-log-level", "INFO"}, `-log-level=\"INFO\": want debug, info, warn or error"`},
		{[]string{"-log-level", ""}, `-log-level=\"\": want debug, info, warn or error"`},
		{[]string{"-log-format", "logfmt"}, `-log-format=\"logfmt\": want text or json"`},
		{[]string{"-log-format", "JSON"}, `-log-format=\"JSON\": want text or json"`},
		{[]string{"-redis-ttl", "0s"}, `"-redis-ttl=0s: want from 100ms to 24h0m0s"`},
		{[]string{"-redis-ttl", "1ns"}, `"-redis-ttl=1ns: want from 100ms to 24h0m0s"`},
		{[]string{"-redis-ttl", "2562047h47m16s"}, `"-redis-ttl=2562047h47m16s: want from 100ms to 24h0m0s"`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		// A port out of range, or a name, is a bad value, not a failure to
		// listen.
		{[]string{"-addr", "127.0.0.1:99999"}, `-addr=\"127.0.0.1:99999\": want a port from 0 to 65535"`},
		{[]string{"-addr", "127.0.0.1:http"}, `-addr=\"127.0.0.1:http\": want a port from 0 to 65535"`},
		{[]string{"-addr", "127.0.0.1"}, `-addr=\"127.0.0.1\": want host:port"`},
		// A port out of range in an address dialled: refused at start, not
		// dialled and failed at each request (or, for Redis, at the
		// connection, "redis: timed out").
		{[]string{"-upstream", "http://127.0.0.1:99999/"}, `-upstream=\"http://127.0.0.1:99999/\": want a port from 1 to 65535"`},
		{[]string{"-upstream", "https://u:hunter2@quotes.example:0"}, `-upstream=\"https://u:***@quotes.example:0\": want a port from 1 to 65535"`},
		{[]string{"-otlp-endpoint", "http://127.0.0.1:431800"}, `-otlp-endpoint=\"http://127.0.0.1:431800\": want a port from 1 to 65535"`},
		{[]string{"-redis", "127.0.0.1:637900"}, `-redis=\"127.0.0.1:637900\": want a port from 1 to 65535"`},
		{[]string{"-redis", "127.0.0.1:"}, `-redis=\"127.0.0.1:\": want a port from 1 to 65535"`},
		{[]string{"-redis", "127.0.0.1"}, `-redis=\"127.0.0.1\": want host:port, or redis://`},
		{[]string{"-redis", "redis://:hunter2@127.0.0.1:99999/0"}, `-redis=\"redis://:***@127.0.0.1:99999/0\": want a port from 1 to 65535"`},
		{[]string{"-redis", "rediss://cache.example:0"}, `-redis=\"rediss://cache.example:0\": want a port from 1 to 65535"`},
		// Bad -redis URLs, shown with their password as "***".
		{[]string{"-redis", "redis://:hunter2@127.0.0.1:6379/x"}, `-redis=\"redis://:***@127.0.0.1:6379/x\": redis: invalid database number: \"x\"`},
		{[]string{"-redis", "redis://u:hunter2@127.0.0.1:6379/-1"}, `-redis=\"redis://u:***@127.0.0.1:6379/-1\": the database number must be at least 0`},
		{[]string{"-redis", "redis://:hunter2@127.0.0.1:6379?timeout=1s"}, `-redis=\"redis://:***@127.0.0.1:6379?timeout=1s\": redis: unexpected option: timeout`},
		{[]string{"-redis", "tcp://127.0.0.1:6379"}, `-redis=\"tcp://127.0.0.1:6379\": want host:port, or redis://[user[:password]@]host[:port][/db] (rediss:// for TLS; unix://[user[:password]@]/path/to/redis.sock[?db=N] for a unix socket)`},
		// go-redis would ignore the host, and dial /redis.sock.
		{[]string{"-redis", "unix://:hunter2@run/redis.sock"}, `-redis=\"unix://:***@run/redis.sock\": want unix:///path/to/redis.sock, the socket's absolute path after the third slash`},
		{[]string{"-redis", "unix://"}, `-redis=\"unix://\": want unix:///path/to/redis.sock, the socket's absolute path after the third slash`},
		{[]string{"-redis", "unix:///run/redis.sock?db=-1"}, `-redis=\"unix:///run/redis.sock?db=-1\": the database number must be at least 0`},
		{[]string{"-redis", "unix:///run/redis.sock?timeout=1s"}, `-redis=\"unix:///run/redis.sock?timeout=1s\": redis: unexpected option: timeout`},
		// Taken for host:port, it would be dialled over TCP, and fail only
		// once the gateway has waited for Redis.
		{[]string{"-redis", "unix:/run/redis.sock"}, `-redis=\"unix:/run/redis.sock\": want host:port, or redis://[user[:password]@]host[:port][/db] (rediss:// for TLS; unix://[user[:password]@]/path/to/redis.sock[?db=N] for a unix socket)`},
		{[]string{"-redis", "127.0.0.1:6379/0"}, `-redis=\"127.0.0.1:6379/0\": want host:port, or redis://`},
		// A certificate is always verified.
		{[]string{"-redis", "rediss://:hunter2@cache.example?skip_verify=true"}, `-redis=\"rediss://:***@cache.example?skip_verify=true\": skip_verify is refused: a rediss:// server's certificate is always verified; SSL_CERT_FILE names the CA that signed it`},
		{[]string{"-redis", "rediss://cache.example?skip_verify=false"}, `skip_verify is refused`},
		{[]string{"-redis", "redis://cache.example?skip_verify=true"}, `skip_verify is refused`},
		{[]string{"-redis", "redis://:hunter2@"}, `-redis=\"redis://:***@\": want host:port, or redis://`},
		{[]string{"-redis", "redis://127.0.0.1:6379/0#main"}, `-redis=\"redis://127.0.0.1:6379/0#main\": want no fragment (#)`},
		{[]string{"-redis", "redis://127.0.0.1:bad"}, `-redis=\"redis://127.0.0.1:bad\": invalid port \":bad\" after host`},
		// A reserved character of a password would make part of it the host,
		// path, query or fragment; url.Parse's errors quote the whole URL.
		{[]string{"-redis", "redis://:hunter2#1@127.0.0.1:6379"}, `-redis=\"redis://:***@127.0.0.1:6379\": the user or password has a reserved character (/ ? #): percent-encode it (%2F %3F %23)`},
		{[]string{"-redis", "redis://u:1/hunter2@127.0.0.1:6379"}, `-redis=\"redis://u:***@127.0.0.1:6379\": the user or password has a reserved character`},
		{[]string{"-redis", "redis://:hunter2%zz@127.0.0.1:6379"}, `-redis=\"redis://:***@127.0.0.1:6379\": the user or password is not valid in a URL: percent-encode its reserved characters`},
		{[]string{"-redis", ":hunter2@127.0.0.1:6379"}, "-redis: a user or password needs the URL form: want host:port, or redis://"},
		// Arguments, and the flags after them, would be ignored.
		{[]string{"-debug", "false"}, `unexpected argument \"false\": the command takes flags only, and a boolean flag its value as -debug=false`},
		{[]string{"-impl", "plain", "quotes", "-loops", "4"}, `unexpected argument \"quotes\"`},
		// Flags that the others would make ignored.
		{[]string{"-impl", "plain", "-loops", "4"}, "-loops would have no effect: the plain gateway has no event loops"},
		{[]string{"-upstream", "http://127.0.0.1:9090", "-impl", "plain", "-loops", "2"}, "-loops would have no effect: the plain gateway has no event loops"},
		{[]string{"-upstream", "http://127.0.0.1:9090", "-upstream-latency", "5ms", "-seed", "7"},
			"-seed, -upstream-latency would have no effect: they set the embedded upstream, which -upstream replaces"},
		{[]string{"-upstream", "http://127.0.0.1:9090", "-upstream-fail", "0"},
			"-upstream-fail would have no effect: they set the embedded upstream, which -upstream replaces"},
		{[]string{"-serve-upstream", "-impl", "flows", "-timeout", "2s", "-seed", "3"},
			"-impl, -timeout would have no effect: -serve-upstream serves the embedded upstream alone, not the gateway"},
		{[]string{"-serve-upstream", "-otlp-endpoint", "http://127.0.0.1:4318"},
			"-otlp-endpoint would have no effect: -serve-upstream serves the embedded upstream alone, not the gateway"},
		{[]string{"-serve-upstream", "-upstream", "http://127.0.0.1:9090"},
			"-upstream would have no effect: -serve-upstream serves the embedded upstream alone, not the gateway"},
		{[]string{"-serve-upstream", "-redis", "127.0.0.1:6379", "-debug", "-loops", "1"},
			"-debug, -loops, -redis would have no effect: -serve-upstream serves the embedded upstream alone, not the gateway"},
		{[]string{"-redis-prefix", "shop"}, "-redis-prefix would have no effect: they set the limits shared through -redis, which is not given"},
		{[]string{"-retries", "0", "-retry-backoff", "100ms"}, "-retry-backoff would have no effect: -retries=0 makes no retry to wait before"},
		{[]string{"-redis-ttl", "5s", "-redis-prefix", "shop"},
			"-redis-prefix, -redis-ttl would have no effect: they set the limits shared through -redis, which is not given"},
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
		if strings.Contains(string(out), "hunter2") {
			t.Errorf("%q: the password hunter2 is in the output:\n%s", c.args, out)
		}
	}
}

// The flags each mode uses are accepted together, and so is a flag given
// its default value where it has an effect.
func TestFlagCombinationsInEffectAreAccepted(t *testing.T) {
	for _, args := range [][]string{
		{"-serve-upstream", "-addr", "127.0.0.1:9090", "-grace", "1s", "-upstream-latency", "1ms", "-upstream-fail", "0", "-seed", "3"},
		{"-serve-upstream", "-log-level", "debug", "-log-format", "json"},
		{"-impl", "plain", "-log-level", "error", "-log-format", "text"},
		{"-log-level", "warn"},
		{"-upstream", "http://127.0.0.1:9090", "-impl", "plain", "-timeout", "2s", "-debug"},
		{"-upstream", "http://127.0.0.1:9090", "-loops", "2"},
		{"-impl", "flows", "-loops", "2", "-upstream-latency", "1ms", "-seed", "2"},
		{"-impl", "plain", "-upstream-fail", "0"},
		{"-otlp-endpoint", "http://127.0.0.1:4318", "-impl", "plain"},
		{"-otlp-endpoint", "https://collector.example/v1/traces", "-loops", "2"},
		{"-redis", "127.0.0.1:6379", "-redis-prefix", "shop", "-redis-ttl", "5s"},
		{"-redis", "redis://alice:hunter2@127.0.0.1:6379/2", "-redis-prefix", "shop"},
		{"-redis", "rediss://cache.example?dial_timeout=3s"},
		{"-redis", "unix:///run/redis/redis.sock", "-redis-prefix", "shop"},
		{"-redis", "unix://alice:hunter2@/run/redis.sock?db=2&pool_size=4"},
		{"-redis", "[::1]:6379"},
		{"-retries", "1", "-retry-backoff", "100ms"},
		{"-retries", "0", "-timeout", "2s"},
		{"-redis", "redis://cache.example"},
		{"-upstream", "https://quotes.example/api"},
		{"-upstream", "http://[::1]:65535/"},
	} {
		if _, err := parseFlags(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// An -upstream refused at start is named in the error without the
// password of its user information, as the probe's warning names it: the
// error is logged. One that does not parse hides all after its user up
// to the last "@", as -redis does.
func TestBadUpstreamErrorShowsNoPassword(t *testing.T) {
	for _, c := range []struct{ upstream, want string }{
		{"http://gw:s3cret@127.0.0.1:9090/?key=1", `-upstream="http://gw:***@127.0.0.1:9090/?key=1": want a base URL with no query or fragment`},
		{"ftp://gw:s3cret@127.0.0.1:9090", `-upstream="ftp://gw:***@127.0.0.1:9090": want an http:// or https:// URL with a host`},
		{"http://gw@127.0.0.1:9090/#x", `-upstream="http://gw@127.0.0.1:9090/#x": want a base URL with no query or fragment`},
		{"http://gw:s3cret@[::1", `-upstream="http://gw:***@[::1": want an http:// or https:// URL with a host`},
		{"127.0.0.1:9090", `-upstream="127.0.0.1:9090": want an http:// or https:// URL with a host`},
	} {
		err := validateUpstreamURL(c.upstream)
		if err == nil || err.Error() != c.want {
			t.Errorf("validateUpstreamURL(%q) = %v, want %s", c.upstream, err, c.want)
		}
	}
}

// -h describes the command in its first line, then lists the flags, and
// exits 0.
func TestHelpDescribesTheCommandFirst(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS=-h")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("-h: %v, want exit status 0; output:\n%s", err, out)
	}
	want := "asyncsteps-demo: a quote gateway that serves each GET /quote?symbols=A,B,C as one asyncsteps flow, fetching the prices from an upstream in parallel\n\n" +
		"Usage of asyncsteps-demo:\n  -addr string\n"
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("-h printed:\n%s\nwant it to begin with:\n%s", out, want)
	}
}

// -log-level sets the least level logged, -log-format the lines' form;
// the defaults are info and text.
func TestLogFlagsSetLevelAndFormat(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.logLevel != "info" || o.logFormat != "text" {
		t.Fatalf("defaults: -log-level %q, -log-format %q, %v; want info, text", o.logLevel, o.logFormat, err)
	}
	// Each line's time, which varies, is left out of the comparison.
	times := regexp.MustCompile(`time=\S+ |"time":"[^"]+",`)
	for _, c := range []struct {
		level, format, want string
	}{
		{"debug", "text", "level=DEBUG msg=d n=1\nlevel=INFO msg=i n=2\nlevel=WARN msg=w n=3\nlevel=ERROR msg=e n=4\n"},
		{"info", "text", "level=INFO msg=i n=2\nlevel=WARN msg=w n=3\nlevel=ERROR msg=e n=4\n"},
		{"warn", "text", "level=WARN msg=w n=3\nlevel=ERROR msg=e n=4\n"},
		{"error", "text", "level=ERROR msg=e n=4\n"},
		{"warn", "json", `{"level":"WARN","msg":"w","n":3}` + "\n" + `{"level":"ERROR","msg":"e","n":4}` + "\n"},
	} {
		var out strings.Builder
		logger := newLogger(&out, c.level, c.format)
		logger.Debug("d", "n", 1)
		logger.Info("i", "n", 2)
		logger.Warn("w", "n", 3)
		logger.Error("e", "n", 4)
		if got := times.ReplaceAllString(out.String(), ""); got != c.want {
			t.Errorf("-log-level=%s -log-format=%s logged:\n%s\nwant:\n%s", c.level, c.format, got, c.want)
		}
	}
}

// The command logs with -log-format from its first line after the flags:
// a failure to listen is one JSON object, at exit status 1.
func TestMainLogsInTheFormatOfItsFlag(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join([]string{"-addr", "256.0.0.1:1", "-log-format", "json"}, "\n"))
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("%v, want exit status 1; output:\n%s", err, out)
	}
	want := regexp.MustCompile(`^\{"time":"[^"]+","level":"ERROR","msg":"listen","err":"listen tcp: lookup 256\.0\.0\.1[^"]*"\}\n$`)
	if logs := string(exit.Stderr); !want.MatchString(logs) {
		t.Errorf("logged:\n%s\nwant one line matching %s", logs, want)
	}
}

// The README's table of flags names every flag, in a row that gives its
// default (a string's, unquoted; "0" and "" read as in the table).
func TestREADMEListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // flag: its row
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		names, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, name := range strings.Split(names, ", ") {
			rows[strings.Trim(name, "`")] = line
		}
	}
	var o options
	newFlagSet(&o).VisitAll(func(f *flag.Flag) {
		row, ok := rows["-"+f.Name]
		switch {
		case !ok:
			t.Errorf("-%s is not in the README's table of flags", f.Name)
		case f.DefValue != "" && f.DefValue != "false" && !strings.Contains(row, "`"+f.DefValue+"`"):
			t.Errorf("-%s: the README's row does not give its default %q:\n%s", f.Name, f.DefValue, row)
		}
	})
}
