package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The passwords of the tests' Redis servers: the default user's, with
// characters a URL must percent-encode, and the ACL user alice's.
const (
	testRedisPassword = "Zq81x@K/9#p"
	testAlicePassword = "alice-Hb37pV"
	testWrongPassword = "wrong-Tt90aa"
)

// userinfo returns the user information of a URL with user and password,
// percent-encoded, and the "@" that ends it.
func userinfo(user, password string) string {
	return url.UserPassword(user, password).String() + "@"
}

// startAuthRedis starts a redis-server whose default user has
// testRedisPassword, and with a user alice, of testAlicePassword, who may
// do everything; it returns its address and a client of its default user.
func startAuthRedis(t *testing.T, args ...string) (string, *redis.Client) {
	t.Helper()
	addr, _ := startRedisServerWith(t, 0, append([]string{"--requirepass", testRedisPassword,
		"--user", "alice", "on", ">" + testAlicePassword, "~*", "&*", "+@all"}, args...)...)
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: testRedisPassword})
	t.Cleanup(func() { admin.Close() })
	return addr, admin
}

// wantNoPassword fails t if out holds any of the tests' passwords, as
// given or percent-encoded.
func wantNoPassword(t *testing.T, what, out string) {
	t.Helper()
	for _, pw := range []string{testRedisPassword, testAlicePassword, testWrongPassword, url.UserPassword("", testRedisPassword).String()[1:]} {
		if strings.Contains(out, pw) {
			t.Errorf("%s: the password %q is in the output:\n%s", what, pw, out)
		}
	}
}

// startProgramEnv is startProgram with env added to the environment.
func startProgramEnv(t *testing.T, env []string, args ...string) *program {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(env, "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))...)
	return startCommand(t, cmd)
}

// runProgramEnv runs the command with args and env added to the
// environment until it exits, and returns its output and exit status.
func runProgramEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(env, "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// A gateway reaches a Redis with a password, or an ACL user, with the
// password in the -redis URL or in REDIS_PASSWORD (the URL's wins, with a
// warning), and selects the URL's database. Its log names the Redis with
// the URL's password as "***", and holds no password.
func TestRedisCredentials(t *testing.T) {
	addr, admin := startAuthRedis(t)
	cases := []struct {
		name   string
		redis  string // -redis
		env    string // REDIS_PASSWORD
		shown  string // the -redis of the start log
		warned bool   // REDIS_PASSWORD is ignored
		alice  bool   // alice's connections are all on database 3
	}{
		{name: "password in the URL", redis: "redis://" + userinfo("", testRedisPassword) + addr,
			shown: "redis://:***@" + addr},
		{name: "REDIS_PASSWORD with host:port", redis: addr, env: testRedisPassword, shown: addr},
		{name: "ACL user in the URL, password in REDIS_PASSWORD", redis: "redis://alice@" + addr + "/3", env: testAlicePassword,
			shown: "redis://alice@" + addr + "/3", alice: true},
		{name: "the URL's password wins", redis: "redis://" + userinfo("alice", testAlicePassword) + addr + "/3", env: testWrongPassword,
			shown: "redis://alice:***@" + addr + "/3", warned: true, alice: true},
	}
	for _, c := range cases {
		p := startProgramEnv(t, []string{redisPasswordEnv + "=" + c.env}, "-addr", "127.0.0.1:0",
			"-upstream-fail", "0", "-upstream-latency", "1ms", "-redis", c.redis, "-redis-prefix", "auth")
		wantQuote(t, c.name, p.url)
		if c.alice {
			wantAliceOnDB3(t, c.name, admin)
		}
		p.stop(t)
		logs := p.logs.String()
		if want := `msg="limits shared through Redis" redis=` + c.shown + " "; !strings.Contains(logs, want) {
			t.Errorf("%s: the log does not say %q:\n%s", c.name, want, logs)
		}
		const warning = `level=WARN msg="REDIS_PASSWORD is ignored: the -redis URL has a password, which wins"`
		if strings.Contains(logs, warning) != c.warned {
			t.Errorf("%s: warned that REDIS_PASSWORD is ignored: %v, want %v:\n%s", c.name, !c.warned, c.warned, logs)
		}
		wantNoPassword(t, c.name, logs)
	}
}

// wantQuote fails t unless the gateway at base answers a quote.
func wantQuote(t *testing.T, what, base string) {
	t.Helper()
	resp, err := http.Get(base + "/quote?symbols=AAPL")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := quotesBody("AAPL"); resp.StatusCode != 200 || string(body) != want {
		t.Errorf("%s: got %d %q, want 200 %q", what, resp.StatusCode, body, want)
	}
}

// wantAliceOnDB3 fails t unless the Redis of admin has connections of
// alice, all on database 3.
func wantAliceOnDB3(t *testing.T, what string, admin *redis.Client) {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(list) {
		if strings.Contains(line, " user=alice ") {
			n++
			if !strings.Contains(line, " db=3 ") {
				t.Errorf("%s: alice's connection is not on database 3: %s", what, line)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no connection of alice:\n%s", what, list)
	}
}

// A gateway whose credentials Redis refuses does not start: it exits 1,
// and says that Redis refused them and where the password came from,
// naming no password.
func TestRedisCredentialsRefusedAtStart(t *testing.T) {
	addr, _ := startAuthRedis(t)
	const prefix = `level=ERROR msg=stopped err="connecting to Redis at `
	cases := []struct {
		redis, env, want string
	}{
		{addr, "", prefix + addr + `: CommError: redis: error reply NOAUTH: Redis wants a password: give it in the -redis URL or in REDIS_PASSWORD"`},
		{"redis://" + userinfo("", testWrongPassword) + addr, "",
			prefix + "redis://:***@" + addr + `: CommError: redis: error reply WRONGPASS: Redis refused the user or the password of the -redis URL"`},
		{addr, testWrongPassword,
			prefix + addr + `: CommError: redis: error reply WRONGPASS: Redis refused the user or the password of REDIS_PASSWORD"`},
		{"redis://alice@" + addr, testRedisPassword, // the default user's password
			prefix + "redis://alice@" + addr + `: CommError: redis: error reply WRONGPASS: Redis refused the user or the password of REDIS_PASSWORD"`},
		{"redis://alice@" + addr, "", // go-redis sends a user only with a password
			prefix + "redis://alice@" + addr + `: CommError: redis: error reply NOAUTH: Redis wants a password: give it in the -redis URL or in REDIS_PASSWORD"`},
	}
	for _, c := range cases {
		out, status := runProgramEnv(t, []string{redisPasswordEnv + "=" + c.env}, "-addr", "127.0.0.1:0", "-redis", c.redis)
		if status != 1 || !strings.Contains(out, c.want) {
			t.Errorf("-redis %s, REDIS_PASSWORD %q: exit status %d, want 1 and %s; output:\n%s", c.redis, c.env, status, c.want, out)
		}
		wantNoPassword(t, c.redis, out)
	}
}

// target reads host:port as it is and a URL with ParseURL, and takes the
// password from REDIS_PASSWORD unless the URL has one.
func TestRedisTarget(t *testing.T) {
	cases := []struct {
		addr, env string
		want      redis.Options // Addr, Username, Password, DB; TLS: see tls
		tls       bool          // TLS with the host as ServerName
		shown     string
		source    string
		ignored   bool
	}{
		{addr: "redis:6379", want: redis.Options{Addr: "redis:6379"}, shown: "redis:6379"},
		{addr: "redis:6379", env: "pw", want: redis.Options{Addr: "redis:6379", Password: "pw"}, shown: "redis:6379", source: "REDIS_PASSWORD"},
		{addr: "redis://h", want: redis.Options{Addr: "h:6379"}, shown: "redis://h"},
		{addr: "redis://u:p%40ss@h:7000/2", want: redis.Options{Addr: "h:7000", Username: "u", Password: "p@ss", DB: 2},
			shown: "redis://u:***@h:7000/2", source: "the -redis URL"},
		{addr: "redis://u:p%40ss@h:7000/2", env: "pw", want: redis.Options{Addr: "h:7000", Username: "u", Password: "p@ss", DB: 2},
			shown: "redis://u:***@h:7000/2", source: "the -redis URL", ignored: true},
		{addr: "redis://:p@ss@h:7000", want: redis.Options{Addr: "h:7000", Password: "p@ss"}, shown: "redis://:***@h:7000", source: "the -redis URL"},
		{addr: "redis://:pw@h:7000", want: redis.Options{Addr: "h:7000", Password: "pw"}, shown: "redis://:***@h:7000", source: "the -redis URL"},
		{addr: "redis://u@h:7000/1", env: "pw", want: redis.Options{Addr: "h:7000", Username: "u", Password: "pw", DB: 1},
			shown: "redis://u@h:7000/1", source: "REDIS_PASSWORD"},
		{addr: "rediss://u:pw@cache.example:6380/0", want: redis.Options{Addr: "cache.example:6380", Username: "u", Password: "pw"},
			tls: true, shown: "rediss://u:***@cache.example:6380/0", source: "the -redis URL"},
		{addr: "REDIS://[::1]:7000?dial_timeout=3s", want: redis.Options{Addr: "[::1]:7000", DialTimeout: 3 * time.Second},
			shown: "redis://[::1]:7000?dial_timeout=3s"},
		{addr: "unix:///run/redis.sock", want: redis.Options{Network: "unix", Addr: "/run/redis.sock"}, shown: "unix:///run/redis.sock"},
		{addr: "unix://alice@/run/redis.sock?db=2", env: "pw", want: redis.Options{Network: "unix", Addr: "/run/redis.sock", Username: "alice", Password: "pw", DB: 2},
			shown: "unix://alice@/run/redis.sock?db=2", source: "REDIS_PASSWORD"},
		{addr: "unix://alice:p%40ss@/run/redis.sock?dial_timeout=3s", want: redis.Options{Network: "unix", Addr: "/run/redis.sock", Username: "alice", Password: "p@ss", DialTimeout: 3 * time.Second},
			shown: "unix://alice:***@/run/redis.sock?dial_timeout=3s", source: "the -redis URL"},
		// An "@" after the third slash is the path's: there is no user.
		{addr: "unix:///run/redis@6379.sock?db=1", want: redis.Options{Network: "unix", Addr: "/run/redis@6379.sock", DB: 1},
			shown: "unix:///run/redis@6379.sock?db=1"},
	}
	for _, c := range cases {
		got, err := clusterOptions{Addr: c.addr, Password: c.env}.target()
		if err != nil {
			t.Errorf("%q, REDIS_PASSWORD %q: %v", c.addr, c.env, err)
			continue
		}
		o := got.options
		if o.Addr != c.want.Addr || o.Username != c.want.Username || o.Password != c.want.Password || o.DB != c.want.DB ||
			o.DialTimeout != c.want.DialTimeout || (o.TLSConfig != nil) != c.tls || (o.Network == "unix") != (c.want.Network == "unix") ||
			got.shown != c.shown || got.source != c.source || got.ignored != c.ignored {
			t.Errorf("%q, REDIS_PASSWORD %q: Network %q, Addr %q, Username %q, Password %q, DB %d, DialTimeout %v, TLS %v; shown %q, source %q, ignored %v",
				c.addr, c.env, o.Network, o.Addr, o.Username, o.Password, o.DB, o.DialTimeout, o.TLSConfig != nil, got.shown, got.source, got.ignored)
		}
		if c.tls && (o.TLSConfig.ServerName != "cache.example" || o.TLSConfig.InsecureSkipVerify) {
			t.Errorf("%q: TLS ServerName %q, InsecureSkipVerify %v, want the host's and verified", c.addr, o.TLSConfig.ServerName, o.TLSConfig.InsecureSkipVerify)
		}
	}
}

// A -redis URL takes each of go-redis's connection options that the
// README lists, with every scheme; skip_verify is refused with each (see
// parseRedisURL).
func TestRedisURLOptions(t *testing.T) {
	options := []string{"db=1", "protocol=2", "client_name=gw", "max_retries=2", "min_retry_backoff=8ms",
		"max_retry_backoff=512ms", "dial_timeout=3s", "read_timeout=2s", "write_timeout=2s", "pool_fifo=true",
		"pool_size=20", "pool_timeout=4s", "min_idle_conns=1", "max_idle_conns=8", "max_active_conns=30",
		"max_concurrent_dials=4", "conn_max_idle_time=1m", "idle_timeout=1m", "conn_max_lifetime=1h",
		"max_conn_age=1h", "conn_max_lifetime_jitter=1m"}
	for _, base := range []string{"redis://cache.example", "rediss://cache.example", "unix:///run/redis.sock"} {
		for _, option := range options {
			if _, err := (clusterOptions{Addr: base + "?" + option}).target(); err != nil {
				t.Errorf("%s?%s: %v", base, option, err)
			}
		}
		if _, err := (clusterOptions{Addr: base + "?skip_verify=true"}).target(); err == nil || !strings.Contains(err.Error(), "skip_verify is refused") {
			t.Errorf("%s?skip_verify=true: %v, want it refused", base, err)
		}
	}
}

// rediss:// reaches Redis over TLS, verifying its certificate against the
// system's roots (SSL_CERT_FILE here): with the CA that signed it, the
// gateway serves; without, it does not start.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTestCerts(t, dir)
	tlsPort := freePort(t)
	_, admin := startAuthRedis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	skipWithoutTLS(t, tlsAddr)
	redisURL := "rediss://" + userinfo("alice", testAlicePassword) + tlsAddr + "/3"

	p := startProgramEnv(t, []string{"SSL_CERT_FILE=" + ca}, "-addr", "127.0.0.1:0",
		"-upstream-fail", "0", "-upstream-latency", "1ms", "-redis", redisURL)
	wantQuote(t, "rediss://", p.url)
	wantAliceOnDB3(t, "rediss://", admin)
	p.stop(t)
	logs := p.logs.String()
	if want := `msg="limits shared through Redis" redis=rediss://alice:***@` + tlsAddr + "/3 "; !strings.Contains(logs, want) {
		t.Errorf("the log does not say %q:\n%s", want, logs)
	}
	wantNoPassword(t, "rediss://", logs)

	out, status := runProgramEnv(t, []string{"SSL_CERT_FILE=" + filepath.Join(dir, "none.pem")}, "-addr", "127.0.0.1:0", "-redis", redisURL)
	want := `err="connecting to Redis at rediss://alice:***@` + tlsAddr + `/3: CommError: redis: TLS handshake failed"`
	if status != 1 || !strings.Contains(out, want) {
		t.Errorf("a certificate of an unknown CA: exit status %d, want 1 and %s; output:\n%s", status, want, out)
	}
	wantNoPassword(t, "an unknown CA", out)
}

// unix:// reaches a Redis on its unix socket, with the URL's user,
// password and database: the gateway serves, its connections are all on
// the socket, and its log names the Redis with the password as "***".
func TestRedisUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	_, admin := startAuthRedis(t, "--unixsocket", sock, "--unixsocketperm", "700")
	redisURL := "unix://" + userinfo("alice", testAlicePassword) + sock + "?db=3"

	p := startProgramEnv(t, nil, "-addr", "127.0.0.1:0", "-upstream-fail", "0", "-upstream-latency", "1ms", "-redis", redisURL)
	wantQuote(t, "unix://", p.url)
	wantAliceOnDB3(t, "unix://", admin)
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(list) {
		if strings.Contains(line, " user=alice ") && !strings.Contains(line, " addr="+sock+":0 ") {
			t.Errorf("alice's connection is not on the socket %s: %s", sock, line)
		}
	}
	p.stop(t)
	logs := p.logs.String()
	if want := `msg="limits shared through Redis" redis="unix://alice:***@` + sock + `?db=3" `; !strings.Contains(logs, want) {
		t.Errorf("the log does not say %q:\n%s", want, logs)
	}
	wantNoPassword(t, "unix://", logs)
}

// skipWithoutTLS skips t unless the redis-server at addr, started with
// --tls-port, completes a TLS handshake: one built without TLS cannot.
func skipWithoutTLS(t *testing.T, addr string) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Skipf("redis-server speaks no TLS on --tls-port (built without it?): %v", err)
	}
	conn.Close()
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// writeTestCerts writes to dir a CA's certificate and a certificate for
// 127.0.0.1 that it signed, with its key, and returns their files.
func writeTestCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey := newTestKey(t)
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "asyncsteps test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	serverKey := newTestKey(t)
	serverTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, serverTemplate, caCert, &serverKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	writePEM(t, ca, "CERTIFICATE", caDER)
	writePEM(t, cert, "CERTIFICATE", serverDER)
	writePEM(t, key, "PRIVATE KEY", keyDER)
	return ca, cert, key
}

func newTestKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
