package etcdstore_test

// The backends of the fleet's reference-model test (fleet_process_test.go):
// one harness, two kinds of servers and clients. A backend starts its
// servers, gives a worker its client and a driver its fleet.Backend, and
// reads a server's content for the check.

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/memcachedtest"
	"github.com/shardedcache/shardedcache/internal/rediscluster"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// server is a server a run starts.
type server struct {
	addr string
	// node is the redis-server's process, which a run may hang; nil for a
	// server a run never hangs (memcached: see memcacheBackend.start).
	node *rediscluster.Node
}

// fleetBackend is what a run needs of a backend.
type fleetBackend interface {
	name() string
	// start starts n servers, stopped when t ends; without the server's
	// binary t is skipped, unless CI=true (then it fails).
	start(t *testing.T, n int) []server
	// client returns a worker's client over list.
	client(t *testing.T, list []fleet.Shard) fleetClient
	// driver returns the backend a driver process runs the change with,
	// and its clean-up.
	driver(t *testing.T, target []fleet.Shard) (fleet.Backend, func())
	// content reads every key of the server at addr without the sharded
	// client: its value, or nil for a key that holds none (a memcache
	// tombstone), and the number of move marks left there. The backend's
	// own keys are left out.
	content(t *testing.T, addr string) (keys map[string]*string, marks int)
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
func backendOf(t *testing.T) fleetBackend {
	b, ok := backends[os.Getenv(envBackend)]
	if !ok {
		t.Fatalf("%s=%q: no such backend", envBackend, os.Getenv(envBackend))
	}
	return b
}

// leaseless reports whether this process runs the memcache negative
// control (envLeaseless): a fleet without member leases.
func leaseless() bool { return os.Getenv(envLeaseless) == "1" }

// cached reports whether this process's redis clients cache (envCached).
func cached() bool { return os.Getenv(envCached) == "1" }

// redisBackend: redis-servers (internal/rediscluster, as the cluster's
// nodes are started), fenced; a shard of the list may be a Redis Cluster.
type redisBackend struct{}

func (redisBackend) name() string { return "redis" }

func (redisBackend) start(t *testing.T, n int) []server {
	t.Helper()
	nodes := redisNodes(t, func(ctx context.Context) (*rediscluster.Cluster, error) { return rediscluster.StartServers(ctx, n) })
	out := make([]server, n)
	for i, node := range nodes {
		out[i] = server{node.Addr, node}
	}
	return out
}

// startCluster starts a Redis Cluster of 3 masters without replicas (a
// node timeout of 5 s, longer than a hang of the chaos), stopped when t
// ends, as redisBackend.start starts servers.
func startCluster(t *testing.T) []*rediscluster.Node {
	t.Helper()
	return redisNodes(t, func(ctx context.Context) (*rediscluster.Cluster, error) {
		return rediscluster.Start(ctx, 3, 0, 5*time.Second)
	})
}

func redisNodes(t *testing.T, start func(context.Context) (*rediscluster.Cluster, error)) []*rediscluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := start(ctx)
	switch {
	case errors.Is(err, rediscluster.ErrNoBinaries) && os.Getenv("CI") != "true":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c.Nodes
}

// redisShard returns the sharded client's options of sh: a server, or a
// Redis Cluster by its seeds.
func redisShard(sh fleet.Shard) shardedredis.ShardOptions {
	if sh.Cluster {
		return shardedredis.ShardOptions{Name: sh.Name, Weight: sh.Weight,
			Cluster: &shardedredis.ClusterShard{Options: &goredis.ClusterOptions{Addrs: sh.Seeds()}}}
	}
	return shardedredis.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
}

// newRedisClient returns a sharded client over list with the test's
// timeouts (short, so that a hung server is noticed); with cached(), every
// shard caches as the single-process cache tests do (RESP3, go-redis's
// ClientSideCacheConfig with 200,000 entries: the settings of
// integration_test/internal/fixtures.CachedOptions).
func newRedisClient(t *testing.T, list []fleet.Shard) *shardedredis.ShardedClient {
	opts := make([]shardedredis.ShardOptions, len(list))
	for i, sh := range list {
		opts[i] = redisShard(sh)
	}
	shared := &goredis.Options{
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, PoolSize: 8,
	}
	if cached() {
		shared.Protocol, shared.ClientSideCacheConfig = 3, &goredis.ClientSideCacheConfig{MaxEntries: 200_000}
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts, Options: shared})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// redisMigrate is the migration's pace, of the fleet's driver and of the
// negative control's worker alike.
var redisMigrate = shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 300}

func (redisBackend) client(t *testing.T, list []fleet.Shard) fleetClient {
	return redisClient{newRedisClient(t, list)}
}

func (redisBackend) driver(t *testing.T, target []fleet.Shard) (fleet.Backend, func()) {
	c := newRedisClient(t, target)
	return c.FleetBackend(redisMigrate), func() { c.Close() }
}

// content reads a redis-server, or a node of a Redis Cluster: KEYS lists
// the keys of the node's slots. (A node that does not serve the marks'
// slot answers MOVED: no marks there.)
func (redisBackend) content(t *testing.T, addr string) (map[string]*string, int) {
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
	marks, _ := c.HLen(ctx, "__shardedcache:moving").Result()
	return out, int(marks)
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

// start starts memcached servers (internal/memcachedtest). A run hangs
// none of them: a write that a worker stopped waiting for on a hung server
// (its timeout) runs when the server wakes up, possibly after the worker's
// next write of the same key, sent on a new connection (memcached orders
// nothing across connections): a stale value with or without a
// resharding, which no client of memcached can prevent (seen: one stale
// read in six seeds, from exactly that). The Redis runs keep this chaos.
func (memcacheBackend) start(t *testing.T, n int) []server {
	t.Helper()
	out := make([]server, n)
	for i := range out {
		out[i] = server{addr: memcachedtest.Start(t)}
	}
	return out
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
	if leaseless() {
		b = &lagged{Backend: b} // not Unfenced: the driver waits for no member
	}
	return b, func() { c.Close() }
}

// content reads a memcached server (lru_crawler metadump, then gets);
// memcached has no move marks.
func (memcacheBackend) content(t *testing.T, addr string) (map[string]*string, int) {
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
	return out, 0
}

type memcacheClient struct {
	c    *shardedmc.ShardedClient
	list []fleet.Shard
}

func (m memcacheClient) join(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error) {
	opt.Initial, opt.LeaseTTL, opt.RetryInterval = m.list, memberLease, 100*time.Millisecond
	var b fleet.Backend = &lagged{Backend: m.c.FleetBackend(), lag: applyLag}
	if !leaseless() {
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
