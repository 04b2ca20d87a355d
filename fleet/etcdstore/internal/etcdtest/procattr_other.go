//go:build unix && !linux

package etcdtest

import "syscall"

// procAttr puts etcd in a process group of its own (Stop kills the group).
// Outside Linux there is no parent-death signal: a killed test binary may
// leave its server running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
