package main

import (
	"context"
	"fmt"
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
	Addr   string        // Redis address; "": the instance runs alone
	Prefix string        // the key prefix: instances with the same one share their limits
	TTL    time.Duration // the lease of a concurrency slot: a killed instance's slots come back after it
}

// connectCluster connects to the Redis of o. It fails with redissync's
// CommError when Redis does not answer, prefixed with the address, which
// the error's info does not name: the operator who reads why the gateway
// did not start must learn which Redis it could not reach.
func connectCluster(ctx context.Context, o clusterOptions) (*redissync.Client, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.Addr})
	c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: o.Prefix})
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("connecting to Redis at %s: %w", o.Addr, err)
	}
	return c, func() { c.Close(); rdb.Close() }, nil
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
