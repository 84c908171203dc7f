package redissync

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestNewRefusesAnEmptyHashTagPrefix: given a *redis.ClusterClient, a
// Prefix whose first "{" is followed at once by "}" is refused. Redis
// Cluster hashes the whole key when its first tag is empty, so the tag of
// the Syncer's name after such a prefix counted for nothing, and one
// Syncer's keys, which its scripts take together, went to different
// nodes. Other braces keep a Syncer's keys in one slot, and are taken.
func TestNewRefusesAnEmptyHashTagPrefix(t *testing.T) {
	addr := sharedRedis(t)
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer cluster.Close()
	for _, prefix := range []string{"{}", "app{}", "a}{}{b}"} {
		want := fmt.Sprintf(`redissync: New: Prefix %q has an empty hash tag "{}", which would spread a Syncer's keys over the nodes of a Redis Cluster`, prefix)
		c, err := New(context.Background(), cluster, Options{Prefix: prefix})
		if err == nil || err.Error() != want {
			if c != nil {
				c.Close()
			}
			t.Errorf("Prefix %q on a ClusterClient: error %v, want %q", prefix, err, want)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, prefix := range []string{"{app}", "{app}{}", "app{", "app}", "{"} {
		c, err := New(context.Background(), rdb, Options{Prefix: prefix})
		if err != nil {
			t.Errorf("Prefix %q: error %v, want none", prefix, err)
			continue
		}
		c.Close()
	}
}

// TestEmptyHashTagPrefixOnASingleRedis: on a single Redis, which runs a
// Syncer's scripts whatever slots its keys hash to, New takes a Prefix
// with an empty hash tag, and its Syncers work. New refused it there
// too, so that processes sharing limits under such a Prefix, which
// worked, failed to start once upgraded.
func TestEmptyHashTagPrefixOnASingleRedis(t *testing.T) {
	loops := newLoops(t, 1)
	for _, prefix := range []string{"{}", "app{}"} {
		prefix = fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), prefixSeq.Add(1))
		c, _ := newClient(t, sharedRedis(t), Options{Prefix: prefix})
		var tr tracer
		for _, s := range []asyncsteps.Syncer{
			c.NewMutex("m", MutexOptions{Max: 1}),
			c.NewThrottle("t", ThrottleOptions{Rate: 1, Period: time.Hour}),
		} {
			if res := <-enter(loops[0], s, &tr, prefix); res.Err != nil {
				t.Errorf("Prefix %q: %v", prefix, res.Err)
			}
		}
		tr.check(t, prefix+" in", prefix+" in")
	}
}

// TestSyncerKeysShareASlot: every key of one Syncer is in one Redis
// Cluster slot, whatever braces the Prefix New takes has: they have one
// hash tag, as Redis Cluster reads one.
func TestSyncerKeysShareASlot(t *testing.T) {
	for _, prefix := range []string{"app", "{app}", "{app}{}", "app{", "{", "app}", "a{b}c"} {
		c := &Client{opts: Options{Prefix: prefix}}
		tags := map[string]bool{}
		for _, key := range c.mutexKeys("db", "x:1") {
			tags[hashTag(key)] = true
		}
		for _, part := range []string{"tat", "hold"} {
			tags[hashTag(c.key("db", part))] = true
		}
		if len(tags) != 1 {
			t.Errorf("Prefix %q: the keys of Syncer \"db\" have the hash tags %v, want one", prefix, tags)
		}
	}
}

// hashTag returns what Redis Cluster hashes of key: the text between its
// first "{" and the next "}" if that is not empty, else the whole key.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// TestFailOpenThrottleOfNamesAClusterRefuses: on a Redis Cluster, a
// FailOpen Throttle named so that its keys have an empty hash tag ("", or
// a name that starts with "}") fails its flows with the CommError Redis
// answers, CROSSSLOT, as a fail-closed one does: Redis refuses every call
// of it until the name is changed, which is no outage. It let every flow
// in without a limit, as if Redis were lost, for good.
func TestFailOpenThrottleOfNamesAClusterRefuses(t *testing.T) {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{startOneNodeCluster(t)}})
	defer cluster.Close()
	c, err := New(context.Background(), cluster, Options{Prefix: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, name := range []string{"", "}x"} {
		th := c.NewThrottle(name, ThrottleOptions{Rate: 1, Period: time.Hour, FailOpen: true})
		<-enter(l, th, &tr, "named "+name)
	}
	tr.check(t, "named  onerror CommError: redis: error reply CROSSSLOT",
		"named }x onerror CommError: redis: error reply CROSSSLOT")
}

// startOneNodeCluster starts a redis-server in cluster mode that serves
// every slot, for the test's length, and returns its address.
func startOneNodeCluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--loglevel", "warning")
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + port
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	waitFor(t, "the cluster node to answer", func() bool { return rdb.Ping(ctx).Err() == nil })
	if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster to serve", func() bool {
		info, _ := rdb.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok")
	})
	return addr
}
