// Package memcachedtest starts real memcached servers for tests: the
// memcached binary on PATH (Debian's package installs /usr/bin/memcached),
// bound to 127.0.0.1 on a free port (or a Unix socket), killed when the
// test ends, and with it when the test process dies (internal/serverproc).
// Without the binary the test is skipped, unless CI=true: then it fails,
// so that CI never passes by skipping.
package memcachedtest

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

	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// Server is one memcached server started for a test.
type Server struct {
	Addr string      // "127.0.0.1:<port>", or the Unix socket's path
	Stop func()      // kills the server and waits for it; safe to call again (t.Cleanup does)
	Proc *os.Process // the memcached process; nil for a server of another kind
}

// Start starts a memcached (64 MB, no UDP) and returns its
// "127.0.0.1:port".
func Start(t testing.TB) string { return StartWith(t).Addr }

// StartWith starts `memcached -l 127.0.0.1 -p <free port> -U 0` with more
// arguments, and waits until it accepts connections.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	path := Binary(t)
	var lastErr error
	for range 3 { // the free port may be taken before memcached binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		s, err := Run(path, "tcp", addr, append([]string{"-l", "127.0.0.1", "-p", port, "-U", "0"}, args...)...)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

// StartUnix starts `memcached -s <socket>` (no TCP) and waits until it
// accepts connections. Its address is the socket's path.
func StartUnix(t testing.TB) *Server {
	t.Helper()
	path := Binary(t)
	sock := filepath.Join(t.TempDir(), "memcached.sock")
	s, err := Run(path, "unix", sock, "-s", sock, "-a", "0700")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Binary returns the memcached binary's path, or skips the test when it is
// missing (fails it under CI=true, where .ci/run installs it).
func Binary(t testing.TB) string {
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

// Run starts memcached at path with args and waits, at most 10 s, until
// addr accepts connections on network. The caller stops it (Server.Stop).
func Run(path, network, addr string, args ...string) (*Server, error) {
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
			return &Server{Addr: addr, Stop: stop, Proc: cmd.Process}, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("memcached " + strconv.Quote(addr) + " did not accept connections within 10s: " + out.String())
		}
		time.Sleep(10 * time.Millisecond) // readiness polling, not an assertion
	}
}
