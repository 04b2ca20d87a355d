package etcdstore_test

// The backends of the fleet's reference-model test (fleet_process_test.go):
// one harness, two kinds of servers and clients.

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/serverproc"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// server is a server process of a run.
type server struct {
	addr string
	cmd  *exec.Cmd
}

// fleetBackend is what a run needs of a backend.
type fleetBackend interface {
	name() string
	// start starts one server, killed when t ends.
	start(t *testing.T) *server
	// client returns a worker's client over list.
	client(t *testing.T, list []fleet.Shard) fleetClient
	// driver returns the backend a driver process runs the change with,
	// and its clean-up.
	driver(t *testing.T, target []fleet.Shard) (fleet.Backend, func())
	// content reads every key of the server at addr, read without the
	// sharded client: its value, or nil for a key that holds none (a
	// memcache tombstone). The backend's own keys are left out; left-over
	// protocol state fails t.
	content(t *testing.T, addr string) map[string]*string
	// hangs reports whether a run hangs the new shard's server during the
	// resumed migration.
	hangs() bool
}

// fleetClient is a worker's client.
type fleetClient interface {
	join(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error)
	set(ctx context.Context, key, value string) error
	del(ctx context.Context, key string) error // a delete of nothing is not an error
	get(ctx context.Context, key string) (*string, error)
	close()
}

var backends = map[string]fleetBackend{"redis": redisBackend{}, "memcache": memcacheBackend{}}

// backendOf is the backend of a re-executed test binary (envBackend).
func backendOf() fleetBackend {
	if b, ok := backends[os.Getenv(envBackend)]; ok {
		return b
	}
	return backends["redis"]
}

// unprotected reports whether this process runs the negative control
// (envBare): a memcache fleet without member leases.
func unprotected() bool { return os.Getenv(envBare) == "1" }

// startServer starts bin with the arguments args gives for a free port,
// killed when t ends, and waits until ready accepts its address. It skips
// t when bin is missing (fails under CI=true).
func startServer(t *testing.T, bin string, args func(port string) []string, ready func(addr string) error) *server {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (%v); CI=true requires it", bin, err)
		}
		t.Skipf("%s not found (%v)", bin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := serverproc.Command(path, args(port)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &server{addr: "127.0.0.1:" + port, cmd: cmd}
	for i := 0; ready(s.addr) != nil; i++ {
		if i > 100 {
			t.Fatalf("%s on %s did not start", bin, s.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// redisBackend: redis-servers, fenced.
type redisBackend struct{}

func (redisBackend) name() string { return "redis" }

func (redisBackend) hangs() bool { return true }

func (redisBackend) start(t *testing.T) *server {
	return startServer(t, "redis-server", func(port string) []string {
		return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	}, func(addr string) error {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		defer c.Close()
		return c.Ping(context.Background()).Err()
	})
}

// newRedisClient returns a sharded client over list with the test's
// timeouts (short, so that a hung server is noticed).
func newRedisClient(t *testing.T, list []fleet.Shard) *shardedredis.ShardedClient {
	opts := make([]shardedredis.ShardOptions, len(list))
	for i, sh := range list {
		opts[i] = shardedredis.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts, Options: &goredis.Options{
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, PoolSize: 8,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (redisBackend) client(t *testing.T, list []fleet.Shard) fleetClient {
	return redisClient{newRedisClient(t, list)}
}

func (redisBackend) driver(t *testing.T, target []fleet.Shard) (fleet.Backend, func()) {
	c := newRedisClient(t, target)
	return c.FleetBackend(shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 300}), func() { c.Close() }
}

func (redisBackend) content(t *testing.T, addr string) map[string]*string {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*string{}
	for _, k := range keys {
		if strings.HasPrefix(k, "__shardedcache:") {
			continue
		}
		v, err := c.Get(ctx, k).Result()
		if err != nil {
			t.Fatalf("GET %s on %s: %v", k, addr, err)
		}
		out[k] = &v
	}
	if n, _ := c.HLen(ctx, "__shardedcache:moving").Result(); n != 0 {
		t.Errorf("%d move marks left on %s", n, addr)
	}
	return out
}

type redisClient struct{ c *shardedredis.ShardedClient }

func (r redisClient) join(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error) {
	return r.c.JoinFleet(ctx, store, opt)
}
func (r redisClient) set(ctx context.Context, key, value string) error {
	return r.c.Set(ctx, key, value, 0).Err()
}
func (r redisClient) del(ctx context.Context, key string) error { return r.c.Del(ctx, key).Err() }
func (r redisClient) get(ctx context.Context, key string) (*string, error) {
	v, err := r.c.Get(ctx, key).Result()
	switch {
	case err == nil:
		return &v, nil
	case errors.Is(err, goredis.Nil):
		return nil, nil
	}
	return nil, err
}
func (r redisClient) close() { r.c.Close() }

// memcacheBackend: memcached servers, protected by member leases and
// compare-and-set moves (fleet.Unfenced).
type memcacheBackend struct{}

// memberLease and applyLag are a memcache worker's: a short lease, so
// that the paused worker's runs out, and every state applied late (a slow
// watch, a rolling deploy), so that the driver's wait for the members
// matters.
const (
	memberLease = 2 * time.Second
	applyLag    = 400 * time.Millisecond
)

func (memcacheBackend) name() string { return "memcache" }

// hangs is false for memcached: a write that a worker stopped waiting for
// on a hung server (its timeout) runs when the server wakes up, possibly
// after the worker's next write of the same key, sent on a new connection
// (memcached orders nothing across connections): a stale value with or
// without a resharding, which no client of memcached can prevent (seen:
// one stale read in six seeds, from exactly that). The Redis run keeps
// this chaos.
func (memcacheBackend) hangs() bool { return false }

func (memcacheBackend) start(t *testing.T) *server {
	return startServer(t, "memcached", func(port string) []string {
		args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root") // memcached refuses to run as root without it
		}
		return args
	}, func(addr string) error { return gomemcache.New(addr).Ping() })
}

func newMemcacheClient(t *testing.T, list []fleet.Shard) *shardedmc.ShardedClient {
	opts := make([]shardedmc.ShardOptions, len(list))
	for i, sh := range list {
		opts[i] = shardedmc.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: opts, Timeout: 300 * time.Millisecond, MaxIdleConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (memcacheBackend) client(t *testing.T, list []fleet.Shard) fleetClient {
	return memcacheClient{newMemcacheClient(t, list), list}
}

func (memcacheBackend) driver(t *testing.T, target []fleet.Shard) (fleet.Backend, func()) {
	c := newMemcacheClient(t, target)
	b := c.FleetBackend()
	if unprotected() {
		b = &lagged{Backend: b} // not Unfenced: the driver waits for no member
	}
	return b, func() { c.Close() }
}

func (memcacheBackend) content(t *testing.T, addr string) map[string]*string {
	ctx := context.Background()
	dump, err := mcmeta.DialTCP(ctx, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer dump.Close()
	get, err := mcmeta.DialTCP(ctx, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Close()
	out := map[string]*string{}
	err = dump.Keys(ctx, func(keys []string) error {
		items, err := get.Get(ctx, keys)
		for _, it := range items {
			v := string(it.Value)
			out[it.Key] = &v
			if it.Flags == shardedmc.TombstoneFlags && v == shardedmc.TombstoneValue {
				out[it.Key] = nil
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("listing %s: %v", addr, err)
	}
	return out
}

type memcacheClient struct {
	c    *shardedmc.ShardedClient
	list []fleet.Shard
}

func (m memcacheClient) join(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error) {
	opt.Initial, opt.LeaseTTL, opt.RetryInterval = m.list, memberLease, 100*time.Millisecond
	var b fleet.Backend = &lagged{Backend: m.c.FleetBackend(), lag: applyLag}
	if !unprotected() {
		b = laggedUnfenced{b.(*lagged)}
	}
	return fleet.Join(ctx, store, b, opt)
}
func (m memcacheClient) set(ctx context.Context, key, value string) error {
	return m.c.SetContext(ctx, &gomemcache.Item{Key: key, Value: []byte(value)})
}
func (m memcacheClient) del(ctx context.Context, key string) error {
	if err := m.c.DeleteContext(ctx, key); !errors.Is(err, gomemcache.ErrCacheMiss) {
		return err
	}
	return nil
}
func (m memcacheClient) get(ctx context.Context, key string) (*string, error) {
	it, err := m.c.GetContext(ctx, key)
	switch {
	case err == nil:
		v := string(it.Value)
		return &v, nil
	case errors.Is(err, gomemcache.ErrCacheMiss):
		return nil, nil
	}
	return nil, err
}
func (m memcacheClient) close() { m.c.Close() }

// lagged applies every state but the first lag late. It is not
// fleet.Unfenced: wrapped in it alone, a backend has no member lease.
type lagged struct {
	fleet.Backend
	lag     time.Duration
	applied atomic.Bool
}

func (l *lagged) Apply(ctx context.Context, st fleet.State) error {
	if l.applied.Swap(true) {
		select {
		case <-time.After(l.lag):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Backend.Apply(ctx, st)
}

// laggedUnfenced is lagged keeping the backend's member lease.
type laggedUnfenced struct{ *lagged }

func (l laggedUnfenced) UseLease(member string, lease fleet.MemberLease) {
	l.Backend.(fleet.Unfenced).UseLease(member, lease)
}
