//go:build !unix

package serverproc

import "os/exec"

func dieWithParent(*exec.Cmd) {}
