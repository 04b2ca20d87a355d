// Package memcachedtest starts real memcached servers for tests: the
// memcached binary on PATH (Debian's package installs /usr/bin/memcached),
// bound to 127.0.0.1 on a free port. Without the binary the test is
// skipped, unless CI=true: then it fails, so that CI never passes by
// skipping.
package memcachedtest

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// Start starts a memcached (64 MB, no UDP), killed when t ends, waits until
// it accepts connections, and returns its "127.0.0.1:port".
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("memcached not found (%v); CI=true requires it", err)
		}
		t.Skipf("memcached not found (%v)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses to run as root without it
	}
	cmd := serverproc.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if i == 100 {
			t.Fatalf("memcached on %s did not start: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
