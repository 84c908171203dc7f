package redissync

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// redisServer is a real redis-server on a loopback port, without
// persistence, owned by a test.
type redisServer struct {
	port int
	addr string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server on a free loopback port; the test
// stops it at its end.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	s, err := launchRedis(freePort(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// launchRedis starts a redis-server on port and waits until it answers.
func launchRedis(port int, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (the Debian package redis-server; scripts/test.sh installs it): %v", err)
	}
	s := &redisServer{port: port, addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("redis-server on %s does not answer: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill stops the server at once, as a crash would.
func (s *redisServer) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// restart starts a new, empty server on the same port.
func (s *redisServer) restart(t testing.TB) {
	t.Helper()
	s.kill()
	n, err := launchRedis(s.port, s.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = n.cmd
}

// shared is the server of the tests that do not stop theirs.
var shared struct {
	once sync.Once
	srv  *redisServer
	err  error
}

// sharedRedis returns the address of a server shared by the package's
// tests; each test uses a Prefix of its own.
func sharedRedis(t testing.TB) string {
	t.Helper()
	addr, err := startSharedRedis()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startSharedRedis starts the shared server on first use.
func startSharedRedis() (string, error) {
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "redissync")
		if err != nil {
			shared.err = err
			return
		}
		port, err := pickPort()
		if err != nil {
			shared.err = err
			return
		}
		shared.srv, shared.err = launchRedis(port, dir)
	})
	if shared.err != nil {
		return "", shared.err
	}
	return shared.srv.addr, nil
}

func pickPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func TestMain(m *testing.M) {
	if kind := os.Getenv(workerEnv); kind != "" {
		os.Exit(runWorker(kind))
	}
	code := m.Run()
	if shared.srv != nil {
		shared.srv.kill()
		_ = os.RemoveAll(shared.srv.dir)
	}
	if benchServer.srv != nil {
		benchServer.srv.kill()
	}
	os.Exit(code)
}

var prefixSeq atomic.Int64

// newClient returns a Client on addr with a prefix of its own, closed at
// the end of the test, and a plain go-redis client for checks.
func newClient(t testing.TB, addr string, opts Options) (*Client, *redis.Client) {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("t%d-%d", os.Getpid(), prefixSeq.Add(1))
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := New(context.Background(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c, rdb
}

// newLoops returns n loops closed at the end of the test.
func newLoops(t testing.TB, n int) []*asyncsteps.Loop {
	loops := make([]*asyncsteps.Loop, n)
	for i := range loops {
		loops[i] = asyncsteps.NewLoop()
		l := loops[i]
		t.Cleanup(func() { l.Close() })
	}
	return loops
}

// waitFor polls cond until it holds, for synchronisation with the
// Syncers' goroutines (not for timing assertions).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued returns the number of this process's flows waiting in q's queue.
func queued(q *gateQueue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queue.live
}
