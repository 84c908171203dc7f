package redissync

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes cmd killed when the test process dies, also when a
// test times out and the process ends without its cleanups.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
