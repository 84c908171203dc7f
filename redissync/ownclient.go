package redissync

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// timedClient returns a client that bounds each call by the deadline of
// its context: rdb, or a client made with rdb's settings and
// ContextTimeoutEnabled when rdb would ignore the deadline.
func timedClient(rdb redis.UniversalClient) redis.UniversalClient {
	switch r := rdb.(type) {
	case *redis.Client:
		if !r.Options().ContextTimeoutEnabled {
			return redis.NewClient(clientOptions(r.Options()))
		}
	case *redis.ClusterClient:
		if !r.Options().ContextTimeoutEnabled {
			return redis.NewClusterClient(clusterOptions(r.Options()))
		}
	case *redis.Ring:
		if !r.Options().ContextTimeoutEnabled {
			return redis.NewRing(ringOptions(r.Options()))
		}
	}
	return rdb
}

// The options a go-redis client returns are normalized: NewClient,
// NewClusterClient and NewRing store a "none" in an internal form
// (MaxRetries -1 as 0) and put the default in place of a zero (MaxRetries
// 0 becomes 3). Given to them again, the internal form of none would be
// taken for "use the default": a user who turned retries off would get 3
// of them. The functions below make the options of a copy that normalize
// to those of the user's client: each internal form of none goes back to
// the value that asks for it. Every other field normalizes to itself
// in go-redis v9.18, but the derived parts of a Client's maintenance
// notifications config (see maintAgain); the tests of ownclient_test.go
// compare the copy's options with the user's, field by field.

// clientOptions returns the options of the copy of a *redis.Client whose
// options are o.
func clientOptions(o *redis.Options) *redis.Options {
	c := *o
	c.ContextTimeoutEnabled = true
	c.MaxRetries = noneAgain(o.MaxRetries)
	c.MinRetryBackoff = noneAgain(o.MinRetryBackoff)
	c.MaxRetryBackoff = noneAgain(o.MaxRetryBackoff)
	c.ReadTimeout = timeoutAgain(o.ReadTimeout)
	c.WriteTimeout = timeoutAgain(o.WriteTimeout)
	// NewClient stored the user's client's processor in its options: the
	// copy must make its own, or registering its handlers fails.
	c.PushNotificationProcessor = nil
	c.MaintNotificationsConfig = maintAgain(o)
	return &c
}

// clusterOptions returns the options of the copy of a *redis.ClusterClient
// whose options are o. Its MaxRetries needs nothing: the cluster stores
// its default, 0, as -1, which it keeps.
func clusterOptions(o *redis.ClusterOptions) *redis.ClusterOptions {
	c := *o
	c.ContextTimeoutEnabled = true
	c.MaxRedirects = noneAgain(o.MaxRedirects)
	c.MinRetryBackoff = noneAgain(o.MinRetryBackoff)
	c.MaxRetryBackoff = noneAgain(o.MaxRetryBackoff)
	// A cluster stores a timeout of -1 as 0, and keeps -2 (which its
	// nodes' clients take as "no deadline").
	c.ReadTimeout = noneAgain(o.ReadTimeout)
	c.WriteTimeout = noneAgain(o.WriteTimeout)
	return &c
}

// ringOptions returns the options of the copy of a *redis.Ring whose
// options are o. A Ring keeps its timeouts as given; its shards' clients
// normalize them.
func ringOptions(o *redis.RingOptions) *redis.RingOptions {
	c := *o
	c.ContextTimeoutEnabled = true
	c.MaxRetries = noneAgain(o.MaxRetries)
	c.MinRetryBackoff = noneAgain(o.MinRetryBackoff)
	c.MaxRetryBackoff = noneAgain(o.MaxRetryBackoff)
	return &c
}

// noneAgain maps a setting whose none (-1) is stored as 0 back to -1.
// A setting that go-redis normalized is 0 only as none: it replaced a
// zero, its default, with a positive value.
func noneAgain[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// timeoutAgain maps a ReadTimeout or WriteTimeout of a *redis.Client back
// to the value it was given as: NewClient stores -2 (no deadline set on
// the connection) as -1 and -1 (no timeout) as 0.
func timeoutAgain(d time.Duration) time.Duration {
	switch d {
	case -1:
		return -2
	case 0:
		return -1
	}
	return d
}

// maintAgain returns a MaintNotificationsConfig for the copy of a
// *redis.Client with options o that NewClient normalizes to
// o.MaintNotificationsConfig. A MaxWorkers or HandoffQueueSize that
// go-redis derived from the pool's size must go back to 0, or it would be
// taken for set by the user (and raised: MaxWorkers to PoolSize/2 at
// least, HandoffQueueSize to 200), while one that was set must stay; and
// a config derived from none (nil) must be none again, as NewClient
// derives it otherwise (without MaxActiveConns). Rather than copy
// go-redis's formulae, maintAgain tries each choice with go-redis's own
// normalization and takes the first that gives the user's config back.
func maintAgain(o *redis.Options) *maintnotifications.Config {
	m := o.MaintNotificationsConfig
	if m == nil || normalizeMaint(nil, o) == *m {
		return nil
	}
	for _, workers := range []int{0, m.MaxWorkers} {
		for _, queue := range []int{0, m.HandoffQueueSize} {
			c := *m
			c.MaxWorkers, c.HandoffQueueSize = workers, queue
			if normalizeMaint(&c, o) == *m {
				return &c
			}
		}
	}
	c := *m // met by none with go-redis v9.18: as near as the copy gets
	return &c
}

// normalizeMaint returns the MaintNotificationsConfig that NewClient makes
// of c with options o, as go-redis v9.18's Options.init does.
func normalizeMaint(c *maintnotifications.Config, o *redis.Options) maintnotifications.Config {
	n := *c.ApplyDefaultsWithPoolConfig(o.PoolSize, o.MaxActiveConns)
	if n.EndpointType == "" || n.EndpointType == maintnotifications.EndpointTypeAuto {
		n.EndpointType = maintnotifications.DetectEndpointType(o.Addr, o.TLSConfig != nil)
	}
	return n
}
