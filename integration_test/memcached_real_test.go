package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/daangn/minimemcached"

	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// mcServer is one memcached server started for a test.
type mcServer struct {
	addr string      // "127.0.0.1:<port>"
	stop func()      // stops the server; safe to call again (t.Cleanup does)
	proc *os.Process // a real memcached's process; nil for minimemcached
}

// memcacheBackends are the servers the memcache tests run against: the
// in-process minimemcached, and real memcached processes when the binary is
// in PATH (skipped otherwise, but a failure under CI=true).
var memcacheBackends = []struct {
	name  string
	start func(t testing.TB) *mcServer
}{
	{"minimemcached", startMiniMemcached},
	{"memcached", startRealMemcached},
}

// forEachMemcached runs f once per backend, as a subtest, with n fresh
// servers of that backend.
func forEachMemcached(t *testing.T, n int, f func(t *testing.T, servers []*mcServer)) {
	for _, b := range memcacheBackends {
		t.Run(b.name, func(t *testing.T) {
			servers := make([]*mcServer, n)
			for i := range servers {
				servers[i] = b.start(t)
			}
			f(t, servers)
		})
	}
}

func startMiniMemcached(t testing.TB) *mcServer {
	t.Helper()
	m, err := minimemcached.Run(&minimemcached.Config{Port: 0}) // 0: a free port
	if err != nil {
		t.Fatal(err)
	}
	s := &mcServer{addr: fmt.Sprintf("127.0.0.1:%d", m.Port()), stop: sync.OnceFunc(m.Close)}
	t.Cleanup(s.stop)
	return s
}

// startRealMemcached starts `memcached -l 127.0.0.1 -p <free port> -U 0`
// and waits until it accepts connections; the process is killed at cleanup.
func startRealMemcached(t testing.TB) *mcServer { return startRealMemcachedWith(t) }

// startRealMemcachedWith is startRealMemcached with more arguments for
// memcached.
func startRealMemcachedWith(t testing.TB, args ...string) *mcServer {
	t.Helper()
	path := memcachedPath(t)
	var lastErr error
	for range 3 { // the free port may be taken before memcached binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		s, err := runMemcached(path, "tcp", addr, append([]string{"-l", "127.0.0.1", "-p", port, "-U", "0"}, args...)...)
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

// startRealMemcachedUnix starts `memcached -s <socket>` (no TCP) and
// waits until it accepts connections; the process is killed at cleanup.
// Its address is the socket path.
func startRealMemcachedUnix(t *testing.T) *mcServer {
	t.Helper()
	path := memcachedPath(t)
	sock := filepath.Join(t.TempDir(), "memcached.sock")
	s, err := runMemcached(path, "unix", sock, "-s", sock, "-a", "0700")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// memcachedPath returns the memcached binary, or skips the test when it is
// missing (fails it under CI=true, where .ci/run installs it).
func memcachedPath(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("memcached is not in PATH (CI=true; .ci/run installs the Debian package): %v", err)
		}
		t.Skipf("memcached is not in PATH (apt-get install memcached to run these): %v", err)
	}
	return path
}

// runMemcached starts memcached with args and waits until addr accepts
// connections on network.
func runMemcached(path, network, addr string, args ...string) (*mcServer, error) {
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses to run as root without -u
	}
	cmd := serverproc.Command(path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := sync.OnceFunc(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // for stop
			return nil, fmt.Errorf("memcached %v exited: %v: %s", args, err, out.String())
		default:
		}
		if c, err := net.DialTimeout(network, addr, 100*time.Millisecond); err == nil {
			c.Close()
			return &mcServer{addr: addr, stop: stop, proc: cmd.Process}, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("memcached " + strconv.Quote(addr) + " did not accept connections within 10s: " + out.String())
		}
		time.Sleep(10 * time.Millisecond) // readiness polling, not an assertion
	}
}
