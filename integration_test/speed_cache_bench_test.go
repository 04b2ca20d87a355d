package integration_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// The client-side caching workloads of the Speed benchmark (see the top of
// speed_bench_test.go), over the same four redis-servers:
//
//   - cache-GET: one goroutine GETs keys that the cache holds: the sharded
//     client with caching against itself without, go-redis's own client
//     with the same cache (one server) and go-redis's Ring whose shard
//     clients have it. "<contender>-trips/op" is the round trips per GET
//     (the cache misses; 0 when every GET is served from memory).
//   - cache-Zipf-64-goroutines: 64 goroutines, 95% GET and 5% SET of keys
//     drawn by a Zipf law (s = 1.1) over 100,000 keys, the sharded client
//     with caching against itself without and against Ring with the cache.
//     Ring's shard clients serve their own writes' replaced values until
//     the invalidation arrives; the sharded client drops them at once, so a
//     SET of a hot key costs it a miss more (and one more when the
//     server's invalidation of its own SET then drops the value fetched
//     again).
//   - cache-staleness: how long another client's acknowledged write of a
//     cached key stays unseen: a plain client SETs a new value, then a
//     reader GETs the key until it sees it, through the sharded client
//     with caching and through go-redis's own client with the same cache.
//     Reports "<contender>-p50-ns", "-p99-ns" and "-max-ns" over the rounds.

// zipfKeys is the key space of cache-Zipf-64-goroutines.
const zipfKeys = 100_000

// speedCache are the caching contenders of the cache workloads.
type speedCache struct {
	sharded *shardedredis.ShardedClient // over the four servers, caching
	plain   *goredis.Client             // on the first server, caching
	ring    *goredis.Ring               // over the four servers, each shard caching
	zipf    []string                    // the key of operation i: zipf[i%len(zipf)]
}

func newSpeedCache(b *testing.B, r *speedRedis) *speedCache {
	sc := &speedCache{sharded: newCachedClient(b, r.addrs...)}
	o := cachedOptions()
	o.Addr = r.addrs[0]
	sc.plain = goredis.NewClient(o)
	ringAddrs := map[string]string{}
	for i, a := range r.addrs {
		ringAddrs["shard"+strconv.Itoa(i)] = a
	}
	sc.ring = goredis.NewRing(&goredis.RingOptions{Addrs: ringAddrs, NewClient: func(opt *goredis.Options) *goredis.Client {
		opt.Protocol, opt.ClientSideCacheConfig = 3, cachedOptions().ClientSideCacheConfig
		return goredis.NewClient(opt)
	}})
	b.Cleanup(func() {
		sc.plain.Close()
		sc.ring.Close()
	})
	keys := mcKeys("zipf:", zipfKeys)
	for from := 0; from < len(keys); from += 1000 {
		var kv []any
		for _, k := range keys[from : from+1000] {
			kv = append(kv, k, "value-of-"+k)
		}
		// Through the uncached client: placement is the same, and Ring
		// (which places keys otherwise) reads missing keys as nil alike.
		if err := r.sharded4.MSet(ctx, kv...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(11, 29))
	z := rand.NewZipf(rng, 1.1, 1, zipfKeys-1)
	sc.zipf = make([]string, 1<<20)
	for i := range sc.zipf {
		sc.zipf[i] = keys[z.Uint64()]
	}
	return sc
}

// zipfOp is operation i of cache-Zipf-64-goroutines on c: a SET one time
// in 20, else a GET.
func (sc *speedCache) zipfOp(c goredis.Cmdable, i int) error {
	k := sc.zipf[i%len(sc.zipf)]
	if i%20 == 0 {
		return c.Set(ctx, k, "value-of-"+k, 0).Err()
	}
	return ignoreNil(c.Get(ctx, k).Err())
}

// benchCache runs the cache workloads of the Speed benchmark.
func benchCache(b *testing.B, r *speedRedis) {
	sc := newSpeedCache(b, r)
	hot := r.speedKeyset[:64] // a working set the caches hold
	hotKey := func(i int) string { return hot[i%len(hot)] }
	b.Run("cache-GET", func(b *testing.B) {
		for _, k := range hot { // cached before the rounds: every GET of them then hits
			for hit := cacheHits(sc.sharded); cacheHits(sc.sharded) == hit; {
				if err := getErr(sc.sharded, k); err != nil {
					b.Fatal(err)
				}
			}
		}
		misses0 := cacheMisses(sc.sharded)
		workload{
			contenders: []contender{
				{"sharded4-cached", func(i int) error { return getErr(sc.sharded, hotKey(i)) }},
				{"sharded4", func(i int) error { return getErr(r.sharded4, hotKey(i)) }},
				{"plain-cached", func(i int) error { return getErr(sc.plain, hotKey(i)) }},
				{"ring-cached", func(i int) error { return getErr(sc.ring, hotKey(i)) }},
			},
			chunk:   2000,
			ratios:  [][2]string{{"sharded4-cached", "sharded4"}, {"sharded4-cached", "plain-cached"}, {"sharded4-cached", "ring-cached"}},
			ratioOf: []string{"ns", "cpu", "allocs"},
		}.run(b)
		gets := float64(b.N*2000 + 8) // the rounds and run's warm-up
		b.ReportMetric(float64(cacheMisses(sc.sharded)-misses0)/gets, "sharded4-cached-trips/op")
	})
	b.Run("cache-Zipf-64-goroutines", workload{
		contenders: []contender{
			{"sharded4-cached", func(i int) error { return sc.zipfOp(sc.sharded, i) }},
			{"sharded4", func(i int) error { return sc.zipfOp(r.sharded4, i) }},
			{"ring-cached", func(i int) error { return sc.zipfOp(sc.ring, i) }},
		},
		chunk:      400,
		goroutines: 64,
		ratios:     [][2]string{{"sharded4-cached", "sharded4"}, {"sharded4-cached", "ring-cached"}},
		ratioOf:    []string{"ops/s", "cpu"},
	}.run)
	b.Run("cache-staleness", func(b *testing.B) { benchStaleness(b, r, sc) })
}

func cacheMisses(c *shardedredis.ShardedClient) uint64 {
	var n uint64
	for _, st := range c.CacheStats() {
		n += st.Misses
	}
	return n
}

// benchStaleness measures, each round and for each reader, how long after
// a plain client's acknowledged SET of a cached key the reader still
// returns the value it replaced.
func benchStaleness(b *testing.B, r *speedRedis, sc *speedCache) {
	const key = "staleness"
	writer := goredis.NewClient(&goredis.Options{Addr: r.addrs[sc.sharded.GetShardInfo(key).Index]})
	defer writer.Close()
	readers := []struct {
		name string
		c    goredis.Cmdable
		w    *goredis.Client
		hits func() uint64
	}{
		{"sharded4-cached", sc.sharded, writer, func() uint64 { return cacheHits(sc.sharded) }},
		{"plain-cached", sc.plain, r.plain, func() uint64 { return sc.plain.CSCStats().Hits }},
	}
	lat := make([][]time.Duration, len(readers))
	round := 0
	for b.Loop() {
		for j, rd := range readers {
			lat[j] = append(lat[j], seenAfter(b, rd.w, rd.c, rd.hits, key, round))
		}
		round++
	}
	for j, rd := range readers {
		for _, p := range []int{50, 99, 100} {
			name := "p" + strconv.Itoa(p)
			if p == 100 {
				name = "max"
			}
			b.ReportMetric(float64(percentile(lat[j], p).Nanoseconds()), rd.name+"-"+name+"-ns")
		}
	}
}

// seenAfter SETs key to an old value through w, reads it through c until
// the read is a cache hit (hits counts them), SETs a new value through w,
// and returns how long c went on returning the old value after w's SET was
// acknowledged. It fails tb if that exceeds 5 s.
func seenAfter(tb testing.TB, w *goredis.Client, c goredis.Cmdable, hits func() uint64, key string, round int) time.Duration {
	old, val := "old-"+strconv.Itoa(round), "new-"+strconv.Itoa(round)
	if err := w.Set(ctx, key, old, 0).Err(); err != nil {
		tb.Fatal(err)
	}
	for got, n := "", hits(); got != old || hits() == n; {
		n = hits()
		got, _ = c.Get(ctx, key).Result()
	}
	if err := w.Set(ctx, key, val, 0).Err(); err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	for got := old; got != val; {
		got, _ = c.Get(ctx, key).Result()
		if time.Since(t0) > 5*time.Second {
			tb.Fatalf("a write of another client was not seen in 5 s")
		}
	}
	return time.Since(t0)
}
