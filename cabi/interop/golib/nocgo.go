//go:build !cgo

package main

func main() {}
