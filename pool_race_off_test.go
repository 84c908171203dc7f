//go:build !race

package asyncsteps

// racing is whether the tests run under the race detector, whose
// sync.Pool drops some of what it is given at random: a count of
// allocations that relies on a pool is not exact then.
const racing = false
