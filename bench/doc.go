// Package bench holds the performance workloads of asyncsteps (a to i of the
// performance plan) as Go benchmarks, and the harness that runs the same
// workloads with the JavaScript reference implementation.
//
//	go test -run '^$' -bench . -benchmem ./bench
package bench
