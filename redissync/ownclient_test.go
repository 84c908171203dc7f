package redissync

import (
	"context"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The client New makes for its round trips has the settings of the user's
// client, whose options go-redis has normalized: "none" (-1) is stored as
// 0, which a second normalization turns into the default. The tests below
// compare, field by field, the options of the user's client and of the
// copy, which must differ in ContextTimeoutEnabled alone.

// uncompared names the fields of go-redis's options that the comparison
// leaves out, and why: a func compares only with nil.
var uncompared = map[string]string{
	"Dialer":                     "func",
	"OnConnect":                  "func",
	"CredentialsProvider":        "func",
	"CredentialsProviderContext": "func",
	"NewClient":                  "func",
	"ClusterSlots":               "func",
	"HeartbeatFn":                "func",
	"NewConsistentHash":          "func",
	// The processor NewClient made for the user's client, which the copy
	// must not share (TestOwnClientMakesItsOwnProcessor).
	"PushNotificationProcessor": "the copy's own",
}

// checkSameOptions fails t for each field of the options own (a pointer
// to a struct) that differs from that of user, but ContextTimeoutEnabled,
// which own must have set and user not, and the fields of uncompared.
// A pointer field compares by what it points to.
func checkSameOptions(t *testing.T, user, own any) {
	t.Helper()
	u, o := reflect.ValueOf(user).Elem(), reflect.ValueOf(own).Elem()
	for i := range u.NumField() {
		f := u.Type().Field(i)
		uf, of := u.Field(i), o.Field(i)
		switch {
		case f.Name == "ContextTimeoutEnabled":
			if uf.Bool() || !of.Bool() {
				t.Errorf("ContextTimeoutEnabled: user's %v, copy's %v; want false, true", uf, of)
			}
		case uncompared[f.Name] != "":
		case f.Type.Kind() == reflect.Func:
			t.Errorf("%s is a func that the comparison does not name", f.Name)
		case !f.IsExported():
			if !uf.Equal(of) {
				t.Errorf("%s: copy's %v, user's %v", f.Name, of, uf)
			}
		case !reflect.DeepEqual(uf.Interface(), of.Interface()):
			t.Errorf("%s: copy's %+v, user's %+v", f.Name, show(of), show(uf))
		}
	}
}

// show is a field's value for a message: what a pointer points to.
func show(v reflect.Value) any {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return v.Interface()
}

// TestOwnClientKeepsOptions: the copy of a *redis.Client has its settings,
// "none" and the defaults alike, also those of the maintenance
// notifications that go-redis derives from the pool's size.
func TestOwnClientKeepsOptions(t *testing.T) {
	addr := sharedRedis(t)
	for name, opts := range map[string]redis.Options{
		"defaults": {},
		"none": {
			MaxRetries: -1, MinRetryBackoff: -1, MaxRetryBackoff: -1,
			ReadTimeout: -1, WriteTimeout: -1, ConnMaxIdleTime: -1, ConnMaxLifetime: -1,
		},
		"no deadlines":           {ReadTimeout: -2, WriteTimeout: -2},
		"no read deadline":       {ReadTimeout: -2, WriteTimeout: -1},
		"no write timeout":       {ReadTimeout: time.Second, WriteTimeout: -1},
		"no write deadline":      {WriteTimeout: -2},
		"set":                    {MaxRetries: 1, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Second, ReadTimeout: time.Second, WriteTimeout: 2 * time.Second, Protocol: 2},
		"large pool":             {PoolSize: 100},
		"small pool, max active": {PoolSize: 4, MaxActiveConns: 100},
		"maintenance given":      {PoolSize: 4, MaxActiveConns: 100, MaintNotificationsConfig: &maintnotifications.Config{}},
		"maintenance set": {PoolSize: 20, MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled, MaxWorkers: 7, HandoffQueueSize: 300,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Addr = addr
			user := redis.NewClient(&opts)
			defer user.Close()
			own := timedClient(user).(*redis.Client)
			defer own.Close()
			checkSameOptions(t, user.Options(), own.Options())
		})
	}
}

// TestOwnClusterClientKeepsOptions: the copy of a *redis.ClusterClient has
// its settings. A cluster of one plain server would not work: the check
// is of the options alone, from which the clients of the nodes are made.
func TestOwnClusterClientKeepsOptions(t *testing.T) {
	for name, opts := range map[string]redis.ClusterOptions{
		"defaults": {},
		"none": {
			MaxRedirects: -1, MaxRetries: -1, MinRetryBackoff: -1, MaxRetryBackoff: -1,
			ReadTimeout: -1, WriteTimeout: -1, ConnMaxIdleTime: -1, ConnMaxLifetime: -1,
		},
		"no deadlines":     {ReadTimeout: -2, WriteTimeout: -2},
		"no write timeout": {ReadTimeout: time.Second, WriteTimeout: -1},
		"set":              {MaxRedirects: 1, MaxRetries: 2, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Second, ReadTimeout: time.Second},
		"route randomly":   {RouteRandomly: true},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Addrs = []string{"127.0.0.1:1"}
			user := redis.NewClusterClient(&opts)
			defer user.Close()
			own := timedClient(user).(*redis.ClusterClient)
			defer own.Close()
			checkSameOptions(t, user.Options(), own.Options())
		})
	}
}

// TestOwnRingKeepsOptions: the copy of a *redis.Ring has its settings, and
// so have the clients of its shards.
func TestOwnRingKeepsOptions(t *testing.T) {
	addr := sharedRedis(t)
	for name, opts := range map[string]redis.RingOptions{
		"defaults": {},
		"none": {
			MaxRetries: -1, MinRetryBackoff: -1, MaxRetryBackoff: -1,
			ReadTimeout: -1, WriteTimeout: -2, ConnMaxIdleTime: -1, ConnMaxLifetime: -1,
		},
		"set": {MaxRetries: 1, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Second, ReadTimeout: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Addrs = map[string]string{"one": addr}
			user := redis.NewRing(&opts)
			defer user.Close()
			own := timedClient(user).(*redis.Ring)
			defer own.Close()
			checkSameOptions(t, user.Options(), own.Options())
			userShard, ownShard := shardOf(t, user), shardOf(t, own)
			checkSameOptions(t, userShard.Options(), ownShard.Options())
		})
	}
}

// shardOf returns the client of the one shard of ring.
func shardOf(t *testing.T, ring *redis.Ring) *redis.Client {
	t.Helper()
	var shard atomic.Pointer[redis.Client]
	_ = ring.ForEachShard(context.Background(), func(_ context.Context, c *redis.Client) error {
		shard.Store(c)
		return nil
	})
	if shard.Load() == nil {
		t.Fatal("the ring has no shard up")
	}
	return shard.Load()
}

// TestOwnClientNoRetries: on a client with MaxRetries -1, a round trip is
// one attempt: New, where nothing listens, dials once. The copy retried
// three times, as go-redis does by default.
func TestOwnClientNoRetries(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // closed again: nothing listens
	var dials atomic.Int32
	var d net.Dialer
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond, PoolSize: 10,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	})
	defer rdb.Close()
	newRefused(t, rdb)
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1: MaxRetries -1 allows no retry", n)
	}
}
