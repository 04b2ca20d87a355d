package etcdtest

import "syscall"

// procAttr puts etcd in a process group of its own (Stop kills the group)
// and has the kernel kill it when the test binary dies, so that an aborted
// test run leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
