//go:build unix && !linux

package serverproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent has no parent-death signal to set outside Linux: the
// process group alone, so that a caller may kill the server's group.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
