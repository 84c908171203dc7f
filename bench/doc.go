// Package bench holds the performance workloads of asyncsteps (see
// docs/PERFORMANCE.md) as Go benchmarks; bench/js runs the same workloads on
// the JavaScript reference implementation, and bench/compare runs both in
// turns and prints the table of docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench . -benchmem ./bench
//	go run ./bench/compare
package bench
