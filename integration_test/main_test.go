package integration_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withSharedServers{m})
}

// withSharedServers runs the tests, then stops the redis-servers they
// shared (sharedRedis).
type withSharedServers struct{ m *testing.M }

func (w withSharedServers) Run() int {
	defer stopSharedRedis()
	defer stopSharedCluster()
	return w.m.Run()
}

// shared is the package's pool of real redis-servers, started once, on the
// first sharedRedis call, and reused by every test that asks for it.
var shared struct {
	mu    sync.Mutex
	procs []*redisProc
	dirs  []string
}

// sharedRedis returns n redis-servers of the package's pool (started once
// per package run, more when a test needs more), emptied (FLUSHALL) and
// with their configuration reset for the test. Tests that use it do not
// run in parallel with each other. It skips the test without redis-server
// (fails it under CI=true).
func sharedRedis(t testing.TB, n int) []*redisProc {
	t.Helper()
	bin := realRedisBin(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for len(shared.procs) < n {
		dir, err := os.MkdirTemp("", "shardedcache-redis-")
		if err != nil {
			t.Fatal(err)
		}
		p, err := launchRedisProc(bin, nil, "", []string{"--hz", "100"}, dir)
		if err != nil {
			t.Fatal(err)
		}
		shared.procs = append(shared.procs, p)
		shared.dirs = append(shared.dirs, dir)
	}
	for _, p := range shared.procs[:n] {
		c := goredis.NewClient(&goredis.Options{Addr: p.addr, MaxRetries: -1})
		err := c.FlushAll(context.Background()).Err()
		if err == nil {
			err = c.ConfigSet(context.Background(), "notify-keyspace-events", "").Err()
		}
		c.Close()
		if err != nil {
			t.Fatalf("resetting the shared redis-server %s: %v", p.addr, err)
		}
	}
	return shared.procs[:n]
}

func stopSharedRedis() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for i, p := range shared.procs {
		p.kill()
		_ = os.RemoveAll(shared.dirs[i])
	}
	shared.procs, shared.dirs = nil, nil
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
