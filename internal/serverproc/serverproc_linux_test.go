package serverproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentEnv makes the test binary a parent that starts a redis-server and
// waits to be killed: "guarded" starts it with Command, "plain" with
// exec.Command.
// dirEnv names the directory of its socket.
const (
	parentEnv = "SERVERPROC_TEST_PARENT"
	dirEnv    = "SERVERPROC_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(parentEnv); mode != "" {
		os.Exit(runParent(mode))
	}
	os.Exit(m.Run())
}

// runParent starts the server (listening on a Unix socket alone, so no
// port is taken), prints its PID and blocks until killed.
func runParent(mode string) int {
	dir := os.Getenv(dirEnv)
	args := []string{"--port", "0", "--unixsocket", dir + "/redis.sock", "--save", "", "--appendonly", "no", "--dir", dir}
	cmd := exec.Command("redis-server", args...)
	if mode == "guarded" {
		cmd = Command("redis-server", args...)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	time.Sleep(time.Hour)
	return 1
}

// A server started with Command dies when its parent is SIGKILLed; one
// started with exec.Command outlives it (the attribute is what matters).
func TestServerDiesWithParent(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required under CI=true: %v", err)
		}
		t.Skip("redis-server not in PATH")
	}
	for _, tc := range []struct {
		mode     string
		survives bool
	}{{"guarded", false}, {"plain", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			pid := startParentAndKill(t, tc.mode)
			if tc.survives {
				defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
				time.Sleep(300 * time.Millisecond)
				if !alive(pid) {
					t.Fatalf("the server (pid %d) started with exec.Command died with its parent: the test would prove nothing", pid)
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the server (pid %d) still runs 10 s after its parent was SIGKILLed", pid)
				}
			}
		})
	}
}

// startParentAndKill runs the test binary as a parent in mode, reads the
// PID of its server, checks the server runs, SIGKILLs the parent and
// returns the server's PID.
func startParentAndKill(t *testing.T, mode string) int {
	t.Helper()
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+mode, dirEnv+"="+t.TempDir())
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("reading the server's PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !alive(pid) {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("the parent printed %q, not the PID of a running server (%v)", line, err)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	return pid
}

// alive reports whether pid runs: it exists and is not a zombie (a
// container's PID 1 may never reap the orphan).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
