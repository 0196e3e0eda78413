package mockdcp

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send the server SIGTERM when the test process dies
// without running its cleanups (a panic, go test's -timeout, a kill).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
