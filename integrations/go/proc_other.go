//go:build !linux

package mockdcp

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; elsewhere a test process that
// dies without running its cleanups leaves the server running.
func dieWithParent(*exec.Cmd) {}
