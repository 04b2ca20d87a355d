// Package etcdtest starts real etcd servers for tests: the etcd binary on
// PATH (Debian's package installs /usr/bin/etcd), one member, bound to
// 127.0.0.1 on free ports, with its data in a temporary directory.
//
// A test that needs etcd calls Start (a server of its own) or StartShared
// (one server for the whole test binary, stopped by StopShared from
// TestMain). Without the binary the test is skipped, unless CI=true: then
// it fails, so that CI never passes by skipping.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// Server is a running etcd process.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:<port>.
	Endpoint string

	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

// startTimeout bounds how long a server may take to report healthy.
const startTimeout = 20 * time.Second

// Start starts an etcd server that is killed when t's test ends, and
// returns its client URL. It skips t when the etcd binary is missing (fails
// under CI=true) and fails t when the server does not start.
func Start(t testing.TB) string {
	return StartServer(t).Endpoint
}

// StartServer is Start returning the Server, for tests that pause it.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	dir := t.TempDir()
	s, err := start(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

var shared struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error
}

// StartShared returns the client URL of the etcd server shared by the
// tests of this test binary, starting it at the first call (so a run of
// tests that need none starts none). It skips or fails t as Start does.
// Call StopShared from TestMain after m.Run.
func StartShared(t testing.TB) string {
	t.Helper()
	bin := binary(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "etcdtest-")
		if shared.err == nil {
			shared.srv, shared.err = start(bin, shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv.Endpoint
}

// StopShared kills the server StartShared started, if any, and removes its
// data.
func StopShared() {
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// binary returns the path of the etcd binary, or skips t (fails it under
// CI=true) when there is none.
func binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("etcd binary not found (%v); CI=true requires it (Debian: apt-get install etcd-server)", err)
		}
		t.Skipf("etcd binary not found (%v); skipping (CI=true makes this a failure)", err)
	}
	return bin
}

// start runs etcd with its data in dir, retrying on other ports when the
// two it picked were taken meanwhile, and waits until it reports healthy.
func start(bin, dir string) (*Server, error) {
	var err error
	for range 3 {
		var s *Server
		if s, err = startOnce(bin, dir); err == nil {
			return s, nil
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			return nil, rmErr
		}
	}
	return nil, err
}

func startOnce(bin, dir string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &Server{Endpoint: client, log: &syncBuffer{}, exited: make(chan struct{})}
	// A short heartbeat makes the server's smallest lease TTL 1 s
	// (1.5 election timeouts) instead of 2 s, for the lease-loss tests.
	// Its own process group (Stop kills the group), killed by the kernel
	// when the test binary dies (serverproc).
	s.cmd = serverproc.Command(bin,
		"--name", "etcdtest",
		"--data-dir", dir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcdtest="+peer,
		"--initial-cluster-state", "new",
		"--heartbeat-interval", "50",
		"--election-timeout", "500",
		"--logger", "zap",
		"--log-outputs", "stderr",
		"--log-level", "warn",
	)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdtest: start %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitHealthy(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("etcdtest: etcd on %s: %w; its log:\n%s", client, err, s.log)
	}
	return s, nil
}

// waitHealthy polls the server's /health until it answers healthy.
func (s *Server) waitHealthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body.Bytes(), []byte(`"health":"true"`)) {
				return nil
			}
		}
		select {
		case <-s.exited:
			return errors.New("exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy within %v", startTimeout)
		case <-tick.C:
		}
	}
}

// Stop kills the server (its whole process group) and waits for it to exit.
func (s *Server) Stop() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Pause freezes the server (SIGSTOP): it answers nothing, its leases do
// not expire while it is frozen but do at once when it resumes, if their
// TTL has passed.
func (s *Server) Pause(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Resume undoes Pause (SIGCONT).
func (s *Server) Resume(t testing.TB) { s.signal(t, syscall.SIGCONT) }

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("etcdtest: %v to etcd (pid %d): %v", sig, s.cmd.Process.Pid, err)
	}
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago (all listened on at once, then closed).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// syncBuffer is the server's log: written by the process's copier, read
// when a start fails.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
