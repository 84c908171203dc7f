package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
	"github.com/redis/go-redis/v9"
)

// clusterOptions are the flags that share the gateway's limits with the
// other instances of a fleet through one Redis server (-redis): the
// configured concurrency and rate then hold for the whole fleet, not per
// instance.
type clusterOptions struct {
	Addr     string        // -redis: host:port, or a redis://, rediss:// or unix:// URL; "": the instance runs alone
	Password string        // REDIS_PASSWORD: Redis's password, unless the URL of Addr has one
	Prefix   string        // the key prefix: instances with the same one share their limits
	TTL      time.Duration // the lease of a concurrency slot: a killed instance's slots come back after it
}

// redisPasswordEnv names the environment variable that gives Redis's
// password: the process's arguments, where a URL's password would be,
// can be read by every user of the machine (ps).
const redisPasswordEnv = "REDIS_PASSWORD"

// redisTarget is the Redis that -redis and REDIS_PASSWORD name.
type redisTarget struct {
	options *redis.Options // to connect with, the password in place
	shown   string         // -redis as logs and errors name it: a URL's password as "***"
	source  string         // where the password came from: "the -redis URL", "REDIS_PASSWORD" or "" (none)
	ignored bool           // REDIS_PASSWORD was set, and the URL's password won
}

// redisForms are the values -redis takes, for the errors that refuse one.
const redisForms = "want host:port, or redis://[user[:password]@]host[:port][/db] (rediss:// for TLS; unix://[user[:password]@]/path/to/redis.sock[?db=N] for a unix socket)"

// target returns the Redis of o. A URL is read by go-redis's ParseURL,
// whose options it takes too (?dial_timeout=3s, ...) but skip_verify
// (see parseRedisURL); host:port is used as it is, its port checked. The
// password of a URL wins over REDIS_PASSWORD: the command line is the
// more explicit of the two, as redis-cli's -a wins over REDISCLI_AUTH.
func (o clusterOptions) target() (redisTarget, error) {
	if !strings.Contains(o.Addr, "://") {
		if strings.Contains(o.Addr, "@") {
			// Dialled as it is, it would be in every error, password included.
			return redisTarget{}, errors.New("-redis: a user or password needs the URL form: " + redisForms)
		}
		if strings.Contains(o.Addr, "/") {
			// No host or port has one: a URL mistyped (unix:/run/redis.sock)
			// would be dialled over TCP, and fail only once the gateway
			// has waited for Redis, with "redis: timed out".
			return redisTarget{}, fmt.Errorf("-redis=%q: %s", o.Addr, redisForms)
		}
		_, port, err := net.SplitHostPort(o.Addr)
		if err != nil {
			return redisTarget{}, fmt.Errorf("-redis=%q: %s", o.Addr, redisForms)
		}
		if err := dialPortError("redis", o.Addr, port); err != nil {
			return redisTarget{}, err
		}
		t := redisTarget{options: &redis.Options{Addr: o.Addr}, shown: o.Addr}
		return t.withPassword(o.Password), nil
	}
	u, err := parseRedisURL(o.Addr)
	if err != nil {
		return redisTarget{}, err
	}
	t := redisTarget{shown: redactedURL(u)}
	if t.options, err = redis.ParseURL(o.Addr); err != nil {
		// Its errors name a path, a query or a database number, never the
		// user information, which parseRedisURL found where ParseURL does.
		return redisTarget{}, fmt.Errorf("-redis=%q: %v", t.shown, err)
	}
	if t.options.DB < 0 {
		return redisTarget{}, fmt.Errorf("-redis=%q: the database number must be at least 0", t.shown)
	}
	if _, ok := u.User.Password(); ok {
		t.source, t.ignored = "the -redis URL", o.Password != ""
		return t, nil
	}
	return t.withPassword(o.Password), nil
}

// withPassword returns t with password, REDIS_PASSWORD's, if set.
func (t redisTarget) withPassword(password string) redisTarget {
	if password != "" {
		t.options.Password, t.source = password, redisPasswordEnv
	}
	return t
}

// parseRedisURL parses s, a -redis URL, and checks what ParseURL would
// let through or get wrong: a scheme other than redis, rediss and unix;
// no host, or, for unix, a host (ParseURL ignores it: unix://run/redis.sock
// would dial /redis.sock); a fragment (ParseURL ignores it); skip_verify,
// which would turn off the verification of a rediss:// server's
// certificate, the one thing that keeps the password from whoever can
// answer in its name: a private CA is given with SSL_CERT_FILE instead;
// a port out of range (see dialPortError). Its errors show s with the
// password of its user information as "***", and never quote
// url.Parse's error, which holds s whole.
func parseRedisURL(s string) (*url.URL, error) {
	shown := redactedUserinfo(s)
	_, rest, _ := strings.Cut(s, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.HasPrefix(rest, "/") && strings.ContainsAny(rest[:at], "/?#") {
		// A "/", "?" or "#" of the password, not percent-encoded, ends the
		// host early: url.Parse would read part of the password as the
		// host, path, query or fragment, and connect elsewhere. (An "@"
		// of the password is read right: the host follows the last one.)
		// A URL whose authority is empty (unix:///run/redis@6379.sock)
		// has no user: its "@" is the path's or the query's.
		return nil, fmt.Errorf("-redis=%q: the user or password has a reserved character (/ ? #): percent-encode it (%%2F %%3F %%23)", shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		if _, err := url.Parse(shown); err != nil {
			return nil, fmt.Errorf("-redis=%q: %v", shown, errors.Unwrap(err))
		}
		return nil, fmt.Errorf("-redis=%q: the user or password is not valid in a URL: percent-encode its reserved characters", shown)
	}
	unix := u.Scheme == "unix"
	switch {
	case unix && (u.Host != "" || u.Path == ""):
		return nil, fmt.Errorf("-redis=%q: want unix:///path/to/redis.sock, the socket's absolute path after the third slash", shown)
	case !unix && (u.Scheme != "redis" && u.Scheme != "rediss" || u.Hostname() == ""):
		return nil, fmt.Errorf("-redis=%q: %s", shown, redisForms)
	case strings.Contains(s, "#"):
		return nil, fmt.Errorf("-redis=%q: want no fragment (#)", shown)
	case u.Query().Has("skip_verify"):
		return nil, fmt.Errorf("-redis=%q: skip_verify is refused: a rediss:// server's certificate is always verified; SSL_CERT_FILE names the CA that signed it", shown)
	}
	if port := u.Port(); !unix && port != "" { // none: 6379
		if err := dialPortError("redis", shown, port); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// redactedUserinfo returns s, a URL that may not parse, with the password
// of its user information, up to the last "@", replaced by "***": it may
// hide more than the password of a URL that does parse, never less.
func redactedUserinfo(s string) string {
	scheme, rest, found := strings.Cut(s, "://")
	at := strings.LastIndex(rest, "@")
	if !found || at < 0 {
		return s
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return s
	}
	return scheme + "://" + user + ":***" + rest[at:]
}

// connectCluster connects to the Redis of o. It fails with redissync's
// CommError when Redis does not answer, prefixed with the address, which
// the error's info does not name: the operator who reads why the gateway
// did not start must learn which Redis it could not reach; when Redis
// refuses the credentials, it says so and where the password came from.
// The function it returns closes the client, and logs at Warn what the
// client's Close reports: the leases it could not give back (Redis lost
// or stalled as the gateway stops), which other instances cannot take
// until their TTL runs out.
func connectCluster(ctx context.Context, o clusterOptions, logger *slog.Logger) (*redissync.Client, func(), error) {
	t, err := o.target()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(t.options)
	c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: o.Prefix})
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("connecting to Redis at %s: %w%s", t.shown, err, t.authHint(err))
	}
	return c, func() {
		if err := c.Close(); err != nil {
			logger.Warn("leases left in Redis until their TTL runs out", "err", err, "ttl", o.TTL)
		}
		rdb.Close()
	}, nil
}

// redisLogger takes what go-redis logs rather than returns (why each dial
// of a lost Redis failed) into the gateway's log, at Warn: go-redis's own
// logger writes lines of text to the standard error, whatever
// -log-format and -log-level, which a pipeline reading the JSON lines of
// -log-format json cannot read. go-redis has one logger for the whole
// process, which tells no client from another: it is set once, and
// logs to the gateway that started last among those that run (see
// logRedisTo). Setting it at each start would race with the goroutines
// of a client that logs meanwhile, and leave a stopped gateway's log in
// place.
type redisLogger struct{}

// redisLogs are the logs of the gateways that run with -redis, in the
// order they started, for redisLogger.
var redisLogs struct {
	once    sync.Once
	mu      sync.Mutex
	running []*slog.Logger
}

// logRedisTo makes logger the one go-redis's lines go to, until release
// is called, or until another gateway's start takes them while it runs.
// With no gateway running, they go to slog's default logger.
func logRedisTo(logger *slog.Logger) (release func()) {
	redisLogs.once.Do(func() { redis.SetLogger(redisLogger{}) })
	redisLogs.mu.Lock()
	redisLogs.running = append(redisLogs.running, logger)
	redisLogs.mu.Unlock()
	return func() {
		redisLogs.mu.Lock()
		defer redisLogs.mu.Unlock()
		if i := slices.Index(redisLogs.running, logger); i >= 0 {
			redisLogs.running = slices.Delete(redisLogs.running, i, i+1)
		}
	}
}

// Printf logs go-redis's line, as it formats it, as the detail of a Warn
// line "redis client".
func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	logger := slog.Default()
	redisLogs.mu.Lock()
	if n := len(redisLogs.running); n > 0 {
		logger = redisLogs.running[n-1]
	}
	redisLogs.mu.Unlock()
	logger.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// authHint returns what to add to err, the failure to connect to t, when
// Redis refused the connection for its credentials; "" otherwise.
func (t redisTarget) authHint(err error) string {
	var e *asyncsteps.Error
	if !errors.As(err, &e) {
		return ""
	}
	switch e.Info {
	case "redis: error reply NOAUTH":
		return ": Redis wants a password: give it in the -redis URL or in " + redisPasswordEnv
	case "redis: error reply WRONGPASS":
		if t.source == "" {
			return ": Redis refused the user or the password"
		}
		return ": Redis refused the user or the password of " + t.source
	}
	return ""
}

// clusterLimit is newLimit's limit shared through Redis: a Limiter named
// "quote", or, when there is no rate limit, a Mutex named as that
// Limiter's concurrency limit, "quote/concurrent", so that instances with
// and without -rate (a rolling restart that adds it) share -concurrent.
func clusterLimit(c *redissync.Client, o limitOptions) asyncsteps.Syncer {
	if o.Rate > 0 {
		return redisLostIs503{c.NewLimiter("quote", redissync.LimiterOptions{
			Concurrent: o.Concurrent, MaxQueue: o.Queue, Rate: o.Rate, Period: o.period(), Burst: o.Burst, TTL: o.TTL,
		})}
	}
	return redisLostIs503{c.NewMutex("quote/concurrent", redissync.MutexOptions{Max: o.Concurrent, MaxQueue: o.Queue, TTL: o.TTL})}
}

// redisLostIs503 is a limit shared through Redis whose failure to let a
// request in, Redis lost, is a DefenseRejected (503 with Retry-After):
// the gateway cannot keep its limits for now, and the client may come
// back. Left as it is, it would be a CommError ("redis: timed out"), a
// 502 that tells clients about the gateway's insides and reads as the
// upstream failing. An error after the request entered (the upstream's)
// passes as it is. One closure more per request, in fleet mode only.
type redisLostIs503 struct{ asyncsteps.Syncer }

// redisLostInfo is the info of the 503 that answers a request the shared
// limits could not let in.
const redisLostInfo = "the shared limits are unavailable"

func (l redisLostIs503) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	entered := false
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		l.Syncer.Sync(as, func(as asyncsteps.AsyncSteps, args ...any) {
			entered = true
			f(as, args...)
		}, onerror...)
	}, func(as asyncsteps.AsyncSteps, code string) {
		if !entered && code == asyncsteps.CommError {
			as.Error(asyncsteps.DefenseRejected, redisLostInfo)
		}
	})
}
