//go:build race

package asyncsteps_test

// raceEnabled is whether the tests run under the race detector, which
// makes the scale cases run at a smaller size.
const raceEnabled = true
