//go:build !cgo

// Command lib is the C shared library of asyncsteps; it needs cgo.
package main

func main() {}
