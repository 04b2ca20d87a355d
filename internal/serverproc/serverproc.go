// Package serverproc starts the server processes that tests and examples
// run (redis-server, redis-sentinel, memcached) so that they die with the
// process that started them, however it ends: a test binary killed by go
// test's -timeout, a SIGKILL, a panic or a Ctrl-C leaves no server behind
// holding its port.
//
// On Linux a server gets SIGKILL when its parent dies (prctl
// PR_SET_PDEATHSIG, as SysProcAttr.Pdeathsig) and runs in a process group
// of its own (Setpgid), so that a terminal's Ctrl-C reaches the test binary
// alone, which then stops its servers in order. On other Unix systems the
// server gets its process group only: there is no parent-death signal, and
// the servers rely on the tests' cleanups; elsewhere the command is
// returned unchanged.
//
// Linux delivers the parent-death signal when the thread that forked the
// server ends, not the whole process. The Go runtime ends a thread only
// when a goroutine locked to it (runtime.LockOSThread) returns without
// unlocking it, so Start must not be called from such a goroutine.
package serverproc

import "os/exec"

// Command is exec.Command(name, args...) with the process attributes that
// make the server die with its parent (see the package documentation).
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	dieWithParent(cmd)
	return cmd
}
