package cache_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardedcache/shardedcache/otelmetrics"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Client-side caching through the shards, on real redis-servers (go-redis's
// cache needs RESP3 and CLIENT TRACKING, which miniredis lacks).

func addrsOf(procs []*fixtures.RedisProc) []string {
	addrs := make([]string, len(procs))
	for i, p := range procs {
		addrs[i] = p.Addr
	}
	return addrs
}

// twoShardKeys returns a key on shard 0 and a key on shard 1 of c.
func twoShardKeys(t testing.TB, c *shardedredis.ShardedClient, prefix string) [2]string {
	var keys [2]string
	found := 0
	for i := 0; found < 3; i++ {
		k := prefix + strconv.Itoa(i)
		if s := c.GetShardInfo(k).Index; s < 2 && keys[s] == "" {
			keys[s] = k
			found |= 1 << s
		}
	}
	return keys
}

// oneShardKeys returns n keys of shard 0 of c.
func oneShardKeys(c *shardedredis.ShardedClient, prefix string, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := prefix + strconv.Itoa(i); c.GetShardInfo(k).Index == 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// writeShape writes val to keys (all on one shard when oneShard), or
// deletes them (wantNil), through one way of writing.
type writeShape struct {
	name     string
	oneShard bool // the keys must share a shard (a transaction, a script)
	wantNil  bool
	write    func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error
}

var writeShapes = []writeShape{
	{name: "SET", write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		for _, k := range keys {
			if err := c.Set(ctx, k, val, 0).Err(); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "MSET-split", write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		var kv []any
		for _, k := range keys {
			kv = append(kv, k, val)
		}
		return c.MSet(ctx, kv...).Err()
	}},
	{name: "DEL-split", wantNil: true, write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, _ string) error {
		return c.Del(ctx, keys...).Err()
	}},
	{name: "pipeline", write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range keys {
				p.Set(ctx, k, val, 0)
			}
			return nil
		})
		return err
	}},
	{name: "transaction", oneShard: true, write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range keys {
				p.Set(ctx, k, val, 0)
			}
			return nil
		})
		return err
	}},
	{name: "Watch", oneShard: true, write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		return c.Watch(ctx, func(tx *goredis.Tx) error {
			_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range keys {
					p.Set(ctx, k, val, 0)
				}
				return nil
			})
			return err
		}, keys...)
	}},
	{name: "EVAL", oneShard: true, write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		const script = "for _, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1]) end"
		return fixtures.IgnoreNil(c.Eval(ctx, script, keys, val).Err())
	}},
	{name: "GETSET-family", write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		for _, k := range keys {
			if err := fixtures.IgnoreNil(c.SetArgs(ctx, k, val, goredis.SetArgs{Get: true}).Err()); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "GetShard", write: func(ctx context.Context, c *shardedredis.ShardedClient, keys []string, val string) error {
		for _, k := range keys {
			if err := c.GetShard(k).Set(ctx, k, val, 0).Err(); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "FLUSHDB", wantNil: true, write: func(ctx context.Context, c *shardedredis.ShardedClient, _ []string, _ string) error {
		return c.FlushDB(ctx).Err()
	}},
}

// cacheRounds is the rounds of each read-your-writes case: the issue
// behind the feature saw every one of 2,000 reads after SET stale.
const cacheRounds = 200

// TestCacheReadYourWrites writes keys that the cache holds, through every
// shape of write, and reads them back at once: no read returns the value
// the write replaced. Each round first reads the keys twice, so that the
// second read is a hit (counted), which proves they were cached.
func TestCacheReadYourWrites(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	t.Run("plain", func(t *testing.T) { cacheReadYourWrites(t, fixtures.NewCachedClient(t, addrsOf(procs)...)) })
	t.Run("autopipelined", func(t *testing.T) { cacheReadYourWrites(t, newCachedAPClient(t, procs)) })
	t.Run("coalesced-misses", func(t *testing.T) {
		o := fixtures.CachedOptions()
		o.ClientSideCacheCoalesceMisses = true
		cacheReadYourWrites(t, newCachedClientWith(t, procs, &shardedredis.ShardedOptions{Options: o}))
	})
}

// newCachedAPClient is NewCachedClient with autopipelining (WithAP: every
// command joins a batch of go-redis's engine).
func newCachedAPClient(t *testing.T, procs []*fixtures.RedisProc) *shardedredis.ShardedClient {
	t.Helper()
	return newCachedClientWith(t, procs, fixtures.WithAP(&shardedredis.ShardedOptions{Options: fixtures.CachedOptions()}))
}

// newCachedClientWith returns a client built from opt over procs, closed
// at the end of the test.
func newCachedClientWith(t *testing.T, procs []*fixtures.RedisProc, opt *shardedredis.ShardedOptions) *shardedredis.ShardedClient {
	t.Helper()
	opt.Shards = fixtures.ShardsAt(addrsOf(procs)...)
	c, err := shardedredis.NewShardedClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func cacheReadYourWrites(t *testing.T, c *shardedredis.ShardedClient) {
	split := twoShardKeys(t, c, "ryw:")
	for _, shape := range writeShapes {
		t.Run(shape.name, func(t *testing.T) {
			keys := split[:]
			if shape.oneShard {
				keys = oneShardKeys(c, "ryw:"+shape.name+":", 2)
			}
			stale, hits := readYourWrites(t, c, shape, keys)
			if stale != 0 {
				t.Errorf("%d of %d reads after an acknowledged write returned the replaced value", stale, cacheRounds*len(keys))
			}
			if want := uint64(cacheRounds * len(keys)); hits < want {
				t.Errorf("%d cache hits, want at least %d: the keys were not cached", hits, want)
			}
		})
	}
}

// readYourWrites runs the rounds of shape on keys through c, and returns
// the reads that returned a replaced value and the cache hits counted.
// Before each write, each key is read until the read is a hit: the first
// read after a SET may miss twice, since the server's invalidation of the
// SET drops the fetch that races it.
func readYourWrites(t *testing.T, c *shardedredis.ShardedClient, shape writeShape, keys []string) (stale int, hits uint64) {
	t.Helper()
	hits0 := fixtures.CacheHits(c)
	for r := range cacheRounds {
		old, val := "old-"+strconv.Itoa(r), "new-"+strconv.Itoa(r)
		for _, k := range keys {
			if err := c.Set(ctx, k, old, 0).Err(); err != nil {
				t.Fatal(err)
			}
			fixtures.CacheKey(t, c, k, old)
		}
		if err := shape.write(ctx, c, keys, val); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		for _, k := range keys {
			got, err := c.Get(ctx, k).Result()
			switch {
			case shape.wantNil && err == goredis.Nil, !shape.wantNil && err == nil && got == val:
			case err == nil && got == old:
				stale++
			default:
				t.Fatalf("round %d: GET %s = %q, %v; want %q (nil: %v)", r, k, got, err, val, shape.wantNil)
			}
		}
	}
	return stale, fixtures.CacheHits(c) - hits0
}

// TestCacheAutoPipelinedHits: with autopipelining, reads of keys that the
// cache holds are served from memory however many callers are on the shard
// at once (go-redis's engine would send a batch of several GETs to the
// server, its replies uncached): 64 goroutines' GETs of cached keys are all
// hits, and the servers run none of them.
func TestCacheAutoPipelinedHits(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	c := newCachedAPClient(t, procs)
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = "ap-hot:" + strconv.Itoa(i)
		if err := c.Set(ctx, keys[i], "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatal(err)
		}
		fixtures.CacheKey(t, c, keys[i], "v"+strconv.Itoa(i))
	}
	direct := make([]*goredis.Client, len(procs))
	for i, p := range procs {
		direct[i] = goredis.NewClient(&goredis.Options{Addr: p.Addr})
		defer direct[i].Close()
	}
	gets := func() (n int64) {
		for _, d := range direct {
			n += fixtures.ReadCounts(t, d).Calls["get"]
		}
		return n
	}
	gets0, hits0, misses0 := gets(), fixtures.CacheHits(c), fixtures.CacheMisses(c)
	const goroutines, each = 64, 200
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			for j := range each {
				i := (g + j) % len(keys)
				if got, err := c.Get(ctx, keys[i]).Result(); err != nil || got != "v"+strconv.Itoa(i) {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d GETs failed or returned another value", n)
	}
	if hits, misses, sent := fixtures.CacheHits(c)-hits0, fixtures.CacheMisses(c)-misses0, gets()-gets0; hits != goroutines*each || misses != 0 || sent != 0 {
		t.Errorf("%d GETs of cached keys: %d hits, %d misses, %d GETs run by the servers; want %d, 0, 0",
			goroutines*each, hits, misses, sent, goroutines*each)
	}
}

// TestCacheReadYourWritesAcrossClients: two sharded clients of one process
// over the same servers each cache; once one has acknowledged a write, the
// other no longer returns the value it replaced (a write drops its keys
// from every cache the process holds for the server).
func TestCacheReadYourWritesAcrossClients(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	a, b := fixtures.NewCachedClient(t, addrsOf(procs)...), fixtures.NewCachedClient(t, addrsOf(procs)...)
	keys := twoShardKeys(t, a, "across:")
	stale := 0
	for r := range cacheRounds {
		old, val := "old-"+strconv.Itoa(r), "new-"+strconv.Itoa(r)
		for _, k := range keys {
			if err := a.Set(ctx, k, old, 0).Err(); err != nil {
				t.Fatal(err)
			}
			fixtures.CacheKey(t, b, k, old)
			if err := a.Set(ctx, k, val, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Get(ctx, k).Result(); err != nil || got != val {
				stale++
			}
		}
	}
	if stale != 0 {
		t.Errorf("%d of %d reads through the other client after an acknowledged write returned the replaced value", stale, cacheRounds*len(keys))
	}
}

// TestCacheStaleWithoutTheHook is the control of TestCacheReadYourWrites:
// go-redis's own client, with the same cache, returns replaced values after
// its own writes (its invalidations come asynchronously), so the test above
// measures something that fails without the sharded client's drop.
func TestCacheStaleWithoutTheHook(t *testing.T) {
	procs := fixtures.SharedRedis(t, 1)
	o := fixtures.CachedOptions()
	o.Addr = procs[0].Addr
	plain := goredis.NewClient(o)
	defer plain.Close()
	stale := 0
	for r := range cacheRounds {
		old, val := "old-"+strconv.Itoa(r), "new-"+strconv.Itoa(r)
		plain.Set(ctx, "control", old, 0)
		plain.Get(ctx, "control")
		plain.Get(ctx, "control")
		if err := plain.Set(ctx, "control", val, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, _ := plain.Get(ctx, "control").Result(); got == old {
			stale++
		}
	}
	t.Logf("go-redis alone: %d of %d reads after its own SET stale", stale, cacheRounds)
	if stale == 0 {
		t.Errorf("go-redis alone served no stale read in %d rounds: the read-your-writes test cannot tell the hook's work", cacheRounds)
	}
}

// TestCacheStats: CacheStats counts each shard's hits and misses, and its
// entries; a shard without caching reports zeros.
func TestCacheStats(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "s0", Addr: procs[0].Addr, Options: fixtures.CachedOptions()},
		{Name: "s1", Addr: procs[1].Addr, Options: &goredis.Options{Protocol: 3}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := twoShardKeys(t, c, "stats:")
	for _, k := range keys {
		c.Set(ctx, k, "v", 0)
		for range 3 {
			if err := c.Get(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := c.CacheStats()
	var got []string
	for _, s := range st {
		got = append(got, fmt.Sprintf("%s %d %d %d", s.Name, s.Hits, s.Misses, s.Entries))
	}
	if want := []string{"s0 2 1 1", "s1 0 0 0"}; !slices.Equal(got, want) {
		t.Errorf("CacheStats (name hits misses entries) = %q, want %q", got, want)
	}
}

// TestCacheMovedKeys: a key that the resharding window moves to a shard
// whose cache holds the key's earlier absence is read at its moved value,
// whether a command moves it (through the shard clients), the migration
// does, or the servers do (MIGRATE). Each key is cached as missing on its
// shard s1, then placed on s0 by a re-weighting (SetShards, which keeps
// both clients and caches) and written there, then moved back to s1. With
// two sharded clients of the process over the same servers, both in the
// window, one writes and moves the keys and the other reads them (its
// cache held their absence on s1).
func TestCacheMovedKeys(t *testing.T) {
	for _, clients := range []int{1, 2} {
		for _, how := range []string{"command", "migration", "migration-server-side"} {
			t.Run(how+"/clients="+strconv.Itoa(clients), func(t *testing.T) {
				addrs := addrsOf(fixtures.SharedRedis(t, 2))
				even, heavy := fixtures.ShardsAt(addrs...), fixtures.ShardsAt(addrs...)
				heavy[0].Weight = 5
				cs := make([]*shardedredis.ShardedClient, clients)
				for i := range cs {
					cs[i] = fixtures.NewCachedClient(t, addrs...)
				}
				a, b := cs[0], cs[clients-1] // a writes and moves, b reads
				keys := movingKeys(t, even, heavy, 50)
				for _, c := range cs {
					for _, k := range keys {
						fixtures.CacheKey(t, c, k, fixtures.NoValue)
					}
					if err := c.SetShards(heavy); err != nil {
						t.Fatal(err)
					}
				}
				for _, k := range keys {
					if err := a.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range cs {
					if err := c.BeginResharding(even); err != nil {
						t.Fatal(err)
					}
				}
				if how == "command" {
					for _, k := range keys {
						if got, err := a.Get(ctx, k).Result(); err != nil || got != "v-"+k {
							t.Fatalf("GET %s through the writer = %q, %v; want %q", k, got, err, "v-"+k)
						}
					}
				} else {
					m, err := a.NewMigration(shardedredis.MigrateOptions{ServerSide: how == "migration-server-side", KeepWindow: true})
					if err != nil {
						t.Fatal(err)
					}
					if err := m.Run(ctx); err != nil {
						t.Fatal(err)
					}
				}
				wrong := 0
				for _, k := range keys {
					if got, err := b.Get(ctx, k).Result(); err != nil || got != "v-"+k {
						if wrong++; wrong == 1 {
							t.Errorf("GET %s = %q, %v; want %q", k, got, err, "v-"+k)
						}
					}
				}
				if wrong != 0 {
					t.Errorf("%d of %d moved keys read otherwise (a cached absence)", wrong, len(keys))
				}
			})
		}
	}
}

// movingKeys returns n keys of shard 1 under the shards from that are
// on shard 0 under the shards to.
func movingKeys(t *testing.T, from, to []shardedredis.ShardOptions, n int) []string {
	t.Helper()
	place := func(shards []shardedredis.ShardOptions) *shardedredis.ShardedClient {
		p, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b := place(from), place(to)
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := "moving:" + strconv.Itoa(i); a.GetShardInfo(k).Index == 1 && b.GetShardInfo(k).Index == 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestCacheModelRedis runs the resharding reference model (see
// reshard/reshard_model_test.go: writes, deletes and reads against a per-server
// model, cold SetShards, ejections and rejoins, resharding windows with
// commands, raw GetShard clients, migrations and abandons) with every shard
// caching: every read through the client must equal the model, so no read
// returns a value older than the servers' truth after any of those steps.
// Seeds as the model's; a third of its operations per seed.
func TestCacheModelRedis(t *testing.T) {
	for _, seed := range fixtures.ModelSeeds(t) {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			fixtures.RunRedisModel(t, seed, *fixtures.ModelOps/3, fixtures.CachedOptions().ClientSideCacheConfig, false)
		})
	}
	t.Run("autopipelined", func(t *testing.T) {
		fixtures.RunRedisModel(t, fixtures.ModelSeeds(t)[0], *fixtures.ModelOps/3, fixtures.CachedOptions().ClientSideCacheConfig, true)
	})
}

// TestCacheOtherClientsWrite: a write of another client to a key that the
// cache holds is seen, every time, within go-redis's invalidation delay
// (SeenAfter fails past 5 s); the delays are logged (the Speed benchmark's
// cache-staleness measures them).
func TestCacheOtherClientsWrite(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	c := fixtures.NewCachedClient(t, addrsOf(procs)...)
	const key = "other-client"
	w := goredis.NewClient(&goredis.Options{Addr: procs[c.GetShardInfo(key).Index].Addr})
	defer w.Close()
	var lat []time.Duration
	for r := range 50 {
		lat = append(lat, fixtures.SeenAfter(t, w, c, func() uint64 { return fixtures.CacheHits(c) }, key, r))
	}
	t.Logf("another client's write seen after p50 %v, p99 %v, max %v", fixtures.Percentile(lat, 50), fixtures.Percentile(lat, 99), fixtures.Percentile(lat, 100))
}

// TestCacheOtelMetrics: otelmetrics exports each shard's CacheStats: the
// hits, misses, entries and size of the caching shard, zeros for the other.
func TestCacheOtelMetrics(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.NewRedis(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "s0", Addr: procs[0].Addr, Options: fixtures.CachedOptions()},
		{Name: "s1", Addr: procs[1].Addr},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m.Observe(c)
	for _, k := range twoShardKeys(t, c, "otel:") {
		c.Set(ctx, k, "v", 0)
		for range 3 {
			if err := c.Get(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			sum, ok := metric.Data.(metricdata.Sum[int64])
			if !ok || !strings.HasPrefix(metric.Name, "shardedcache.cache.") {
				continue
			}
			for _, dp := range sum.DataPoints {
				name, _ := dp.Attributes.Value(otelmetrics.ShardNameKey)
				got[metric.Name+" "+name.AsString()] = dp.Value
			}
		}
	}
	size := c.CacheStats()[0].MemoryUsageBytes
	want := map[string]int64{
		"shardedcache.cache.hits s0": 2, "shardedcache.cache.misses s0": 1, "shardedcache.cache.entries s0": 1, "shardedcache.cache.size s0": size,
		"shardedcache.cache.hits s1": 0, "shardedcache.cache.misses s1": 0, "shardedcache.cache.entries s1": 0, "shardedcache.cache.size s1": 0,
	}
	if size <= 0 || !maps.Equal(got, want) {
		t.Errorf("cache metrics = %v, want %v (size > 0)", got, want)
	}
}

// TestCacheEjectRejoin: a shard ejected and rejoined, its server emptied
// by OnRejoin, serves no value its cache held before: a key cached on it
// reads as missing once it has rejoined; the other shard's cache stays.
func TestCacheEjectRejoin(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond,
		OnRejoin:     func(ctx context.Context, c *goredis.Client) error { return c.FlushDB(ctx).Err() }}
	servers, direct, _ := fixtures.SafetyFixture(t, 2, 2, h)
	c := fixtures.CachingClient(t, servers, 2, h, fixtures.CachedOptions().ClientSideCacheConfig, false)
	keys := twoShardKeys(t, c, "eject:")
	for _, k := range keys {
		c.Set(ctx, k, "before", 0)
		fixtures.CacheKey(t, c, k, "before")
	}
	fixtures.EjectFor(t, c, direct[1], 1, 300*time.Millisecond, func() {})
	if got, err := c.Get(ctx, keys[1]).Result(); err != goredis.Nil {
		t.Errorf("GET %s after its shard rejoined, flushed = %q, %v; want redis.Nil", keys[1], got, err)
	}
	if got, err := c.Get(ctx, keys[0]).Result(); err != nil || got != "before" {
		t.Errorf("GET %s on the shard that stayed = %q, %v; want %q", keys[0], got, err, "before")
	}
}
