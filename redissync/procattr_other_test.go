//go:build !linux

package redissync

import "os/exec"

// dieWithTest does nothing where the OS cannot tie a child's life to its
// parent's: the tests' cleanups stop the server.
func dieWithTest(*exec.Cmd) {}
