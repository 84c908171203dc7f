package redissync

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestStallLongerThanTTLLeavesNoLease: Redis stalls (SIGSTOP) for longer
// than the Mutex's TTL while two flows ask. Their round trip times out
// and they fail, but the call stays in its connection, and Redis runs it
// when it resumes. Once Redis has run every call sent during the stall,
// no lease is held: the give-back of the failed round trip's leases, sent
// again during the stall, either ran after the late call and freed them,
// or ran before and made Redis refuse them. Two new flows then enter at
// once. The Client gave such leases back only while the TTL had not passed
// on its own clock, which it had: both slots stayed taken, with no flow
// inside, for a TTL after Redis resumed, and new flows were refused.
func TestStallLongerThanTTLLeavesNoLease(t *testing.T) {
	srv := startRedis(t)
	const ttl = 3 * time.Second
	written := new(evalWrites)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, Dialer: written.dial})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, Options{Prefix: "stall", OpTimeout: 200 * time.Millisecond, Recheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	loadScripts(t, rdb)
	m := c.NewMutex("m", MutexOptions{Max: 2, TTL: ttl})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	run := scriptCalls(t, rdb)

	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	var tr, failed tracer // A and B fail together, in either order
	a, b := enter(l, m, &failed, "A"), enter(l, m, &failed, "B")
	wantError(t, (<-a).Err, asyncsteps.CommError, "redis: timed out")
	wantError(t, (<-b).Err, asyncsteps.CommError, "redis: timed out")
	time.Sleep(ttl + 500*time.Millisecond) // the stall outlasts the TTL on the Client's clock
	stalled := written.calls.Load()        // calls that wait in Redis's connections, at least
	if err := srv.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitFor(t, "Redis to run the calls of the stall", func() bool { return scriptCalls(t, rdb) >= run+int(stalled) })
	for rdb.ZCard(ctx, m.keys[0]).Val() != 0 {
		if time.Since(resumed) > ttl/3 {
			t.Fatalf("%v after Redis resumed, %d leases are held with no flow inside, want 0 (the TTL is %v)",
				time.Since(resumed), rdb.ZCard(ctx, m.keys[0]).Val(), ttl)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the slots were free %v after Redis resumed", time.Since(resumed))
	release := make(chan struct{})
	defer close(release)
	holdOpen(t, l, m, &tr, "C", release)
	<-enter(l, m, &tr, "D")
	tr.check(t, "C in", "D in")
}

// evalWrites counts the script calls written to the connections of a
// go-redis client made with its dial: a call written waits in Redis's
// connection while Redis stalls, and runs when it resumes, also when the
// client has given up on it.
type evalWrites struct {
	calls atomic.Int64
}

func (w *evalWrites) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &evalConn{Conn: conn, w: w}, nil
}

// evalConn is a connection whose script calls an evalWrites counts.
type evalConn struct {
	net.Conn
	w *evalWrites
}

func (c *evalConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n == len(b) {
		c.w.calls.Add(int64(bytes.Count(b, []byte("evalsha"))))
	}
	return n, err
}

// TestCloseReportsLeasesNotGivenBack: a Close whose last round trip
// cannot give back the leases it holds (Redis stalled) says so: how many,
// and that they run out within a TTL. It returned nil.
func TestCloseReportsLeasesNotGivenBack(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv.addr, Options{OpTimeout: 200 * time.Millisecond, Recheck: time.Hour})
	m := c.NewMutex("m", MutexOptions{Max: 2, TTL: 3 * time.Second})
	l := newLoops(t, 1)[0]
	var tr tracer
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", releaseA)
	b := holdOpen(t, l, m, &tr, "B", releaseB)
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	err := c.Close()
	const want = `redissync: Close: Mutex "m": 2 leases not given back (CommError: redis: timed out); ` +
		`they run out within one TTL, 3s, of Redis's last call for them`
	if err == nil || err.Error() != want {
		t.Fatalf("Close: %v, want %s", err, want)
	}
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: timed out" {
		t.Errorf("Close: %v does not unwrap to the CommError", err)
	}
	if again := c.Close(); again == nil || again.Error() != want {
		t.Errorf("Close again: %v, want the same error", again)
	}
	for _, held := range []struct {
		release chan struct{}
		done    <-chan asyncsteps.Result
	}{{releaseA, a}, {releaseB, b}} {
		close(held.release)
		if res := <-held.done; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	tr.check(t, "A in", "B in", "A out", "B out")
}

// TestKeyedMutexCloseReportsLeasesNotGivenBack: a KeyedMutex's Close that
// cannot give back the lease of its one key held says so, in the singular:
// it said "1 lease of 1 keys".
func TestKeyedMutexCloseReportsLeasesNotGivenBack(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv.addr, Options{OpTimeout: 200 * time.Millisecond, Recheck: time.Hour})
	km := c.NewKeyedMutex("acct", MutexOptions{TTL: 3 * time.Second})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, km.Key("a"), &tr, "A", release)
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	err := c.Close()
	const want = `redissync: Close: KeyedMutex "acct": 1 lease of 1 key not given back (CommError: redis: timed out); ` +
		`it runs out within one TTL, 3s, of Redis's last call for it`
	if err == nil || err.Error() != want {
		t.Fatalf("Close: %v, want %s", err, want)
	}
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "A out")
}
