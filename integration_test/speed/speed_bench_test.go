package speed_test

// The side-by-side speed benchmark: this SDK against the clients it is
// measured by, on real servers that the benchmark starts itself (four
// redis-servers, four memcached; skipped when a binary is missing, a
// failure under CI=true):
//
//	go test -run '^$' -bench Speed -count 6 ./integration_test/speed | tee new.txt
//	benchstat new.txt
//
// Each workload is one sub-benchmark. Its contenders (a plain go-redis
// client, the sharded client over one shard and over four, go-redis Ring
// over the same four servers with its defaults; gomemcache against the
// memcache client; for the 100-key workloads, a fan-out written by hand on
// the sharded client's shard clients: see HandSplit) run in rounds, a chunk
// of operations each, in an order that rotates from round to round, so
// that a load that comes and goes on the machine weighs on every contender
// alike. A round is one iteration of
// the benchmark loop: -benchtime sets how many rounds run. The workloads of
// many goroutines run chunks of 100 to 250 operations per goroutine: an
// autopipelining engine fills its batches only while every goroutine is in
// its loop, and with chunks of 20 each round's start and end weighed
// heavily (in one run, the autopipelined floor 2.0-2.1 times Ring at 64
// goroutines, against 2.6-2.8 in chunks of 250). Per contender it
// reports the median over rounds of wall time, CPU time of this process
// (user and system, the client's cost: the servers are other processes),
// allocations and bytes per operation, as "<contender>-ns/op",
// "<contender>-cpu-ns/op", "<contender>-allocs/op" and "<contender>-B/op";
// latency percentiles over every operation of every round ("-p50-ns"); and
// ratios of one contender to another (this SDK to the others, and the
// hand-written fan-out to Ring and gomemcache), each the median over rounds
// of the ratio within a round, as "ratio-<what>-<a>:<b>". The built-in
// ns/op, B/op and allocs/op are those of the SDK's contender (the first
// that the ratios name), for benchstat comparisons of one version with
// another.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// speedKeys is the number of keys the single-key workloads rotate over;
// every server holds every key, so that every contender hits whatever its
// placement.
const speedKeys = 1024

func newAPFloor(b *testing.B, addrs []string, place *ring.Ring) *fixtures.APFloor {
	f := &fixtures.APFloor{Place: place}
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		ap, err := c.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		f.Clients, f.APs = append(f.Clients, c), append(f.APs, ap)
	}
	b.Cleanup(func() {
		for _, c := range f.Clients {
			c.Close()
		}
	})
	return f
}

func newSpeedRedis(b *testing.B) *fixtures.SpeedRedis {
	procs := fixtures.SharedRedis(b, 4)
	r := &fixtures.SpeedRedis{SpeedKeyset: fixtures.MCKeys("speed:key:", speedKeys)}
	var shards []shardedredis.ShardOptions
	ringAddrs := map[string]string{}
	for i, p := range procs {
		r.Addrs = append(r.Addrs, p.Addr)
		shards = append(shards, shardedredis.ShardOptions{Addr: p.Addr})
		ringAddrs["shard"+strconv.Itoa(i)] = p.Addr
		d := goredis.NewClient(&goredis.Options{Addr: p.Addr})
		if _, err := d.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range r.SpeedKeyset {
				p.Set(ctx, k, "value-of-"+k, 0)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	r.Plain = goredis.NewClient(&goredis.Options{Addr: r.Addrs[0]})
	var err error
	if r.Sharded1, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:1]}); err != nil {
		b.Fatal(err)
	}
	if r.Sharded4, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards}); err != nil {
		b.Fatal(err)
	}
	if r.ShardedAP, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards,
		Options: &goredis.Options{AutoPipelineOptions: goredis.DefaultBlockingAutoPipelineOptions()}}); err != nil {
		b.Fatal(err)
	}
	if r.RouterAP, err = r.Sharded4.AutoPipeline(); err != nil {
		b.Fatal(err)
	}
	r.Ring = goredis.NewRing(&goredis.RingOptions{Addrs: ringAddrs})
	r.Floor = newHandSplit(r.SpeedKeyset, r.Sharded4.Shards(), func(k string) int { return r.Sharded4.GetShardInfo(k).Index })
	r.APFloor = newAPFloor(b, r.Addrs, r.Sharded4.Ring())
	b.Cleanup(func() {
		r.Plain.Close()
		r.Sharded1.Close()
		r.Sharded4.Close()
		r.ShardedAP.Close()
		r.Ring.Close()
	})
	return r
}

// newHandSplit splits every 100-key operation of ks among shards by
// locate, which returns the index of a key's shard.
func newHandSplit[C comparable](ks fixtures.SpeedKeyset, shards []shardedclient.Shard[C], locate func(string) int) *fixtures.HandSplit[C] {
	h := &fixtures.HandSplit[C]{Ops: make([][]fixtures.ShardKeys, len(ks)-100), Keyset: ks}
	for _, sh := range shards {
		h.Clients = append(h.Clients, sh.Client)
	}
	for from := range h.Ops {
		byShard := make([][]string, len(shards))
		for _, k := range ks[from : from+100] {
			s := locate(k)
			byShard[s] = append(byShard[s], k)
		}
		for s, keys := range byShard {
			if len(keys) > 0 {
				h.Ops[from] = append(h.Ops[from], fixtures.ShardKeys{Shard: s, Keys: keys})
			}
		}
	}
	return h
}

func setErr(c goredis.Cmdable, key string) error { return c.Set(ctx, key, "speed-value", 0).Err() }

// concurrentRatios are the ratios of the many-goroutine workloads.
var concurrentRatios = [][2]string{{"shardedAP", "ring"}, {"shardedAP", "floorAP"}, {"floorAP", "ring"},
	{"sharded4", "ring"}, {"routerAP", "ring"}}

func pipelineGets(c goredis.Cmdable, keys []string) error {
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if err == nil && len(cmds) != len(keys) {
		err = fmt.Errorf("%d replies for %d GETs", len(cmds), len(keys))
	}
	return err
}

func mgetErr(c goredis.Cmdable, keys []string) error {
	vals, err := c.MGet(ctx, keys...).Result()
	if err == nil && (len(vals) != len(keys) || vals[0] == nil) {
		err = fmt.Errorf("MGET: %d values for %d keys, first %v", len(vals), len(keys), vals[0])
	}
	return err
}

// BenchmarkSpeed runs the workloads of docs/speed.md's tables side by
// side (see the top of this file).
func BenchmarkSpeed(b *testing.B) {
	fixtures.RealRedisBin(b)
	r := newSpeedRedis(b)
	for _, w := range []struct {
		name string
		w    fixtures.Workload
	}{
		{"GET", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "plain", Op: func(i int) error { return fixtures.GetErr(r.Plain, r.Key(i)) }},
				{Name: "sharded1", Op: func(i int) error { return fixtures.GetErr(r.Sharded1, r.Key(i)) }},
				{Name: "sharded4", Op: func(i int) error { return fixtures.GetErr(r.Sharded4, r.Key(i)) }},
				{Name: "ring", Op: func(i int) error { return fixtures.GetErr(r.Ring, r.Key(i)) }},
				{Name: "shardedAP", Op: func(i int) error { return fixtures.GetErr(r.ShardedAP, r.Key(i)) }},
			},
			Chunk:   200,
			Latency: true,
			Ratios:  [][2]string{{"sharded1", "plain"}, {"sharded4", "ring"}, {"shardedAP", "sharded4"}},
			RatioOf: []string{"ns", "cpu", "allocs", "p50"},
		}},
		{"GET-32-goroutines", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "plain", Op: func(i int) error { return fixtures.GetErr(r.Plain, r.Key(i)) }},
				{Name: "sharded4", Op: func(i int) error { return fixtures.GetErr(r.Sharded4, r.Key(i)) }},
				{Name: "ring", Op: func(i int) error { return fixtures.GetErr(r.Ring, r.Key(i)) }},
			},
			Chunk:      100,
			Goroutines: 32,
			Ratios:     [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}},
			RatioOf:    []string{"ops/s", "cpu"},
		}},
		{"GET-64-goroutines", fixtures.Workload{
			Contenders: r.Concurrent(fixtures.GetErr),
			Chunk:      250,
			Goroutines: 64,
			Latency:    true,
			Ratios:     concurrentRatios,
			RatioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"GET-8-goroutines", fixtures.Workload{
			Contenders: r.Concurrent(fixtures.GetErr),
			Chunk:      200,
			Goroutines: 8,
			Latency:    true,
			Ratios:     concurrentRatios,
			RatioOf:    []string{"ops/s", "cpu", "p50"},
		}},
		{"SET-64-goroutines", fixtures.Workload{
			Contenders: r.Concurrent(setErr),
			Chunk:      250,
			Goroutines: 64,
			Latency:    true,
			Ratios:     concurrentRatios,
			RatioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"MGET-10-64-goroutines", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "ring", Op: func(i int) error { return pipelineGets(r.Ring, r.Keys10(i)) }}, // Ring has no cross-shard MGET
				{Name: "sharded4", Op: func(i int) error { return mgetErr(r.Sharded4, r.Keys10(i)) }},
				{Name: "shardedAP", Op: func(i int) error { return mgetErr(r.ShardedAP, r.Keys10(i)) }},
				{Name: "routerAP", Op: func(i int) error { return mgetErr(r.RouterAP, r.Keys10(i)) }},
			},
			Chunk:      100,
			Goroutines: 64,
			Latency:    true,
			Ratios:     [][2]string{{"shardedAP", "ring"}, {"sharded4", "ring"}, {"routerAP", "ring"}},
			RatioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"MGET-100", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "plain", Op: func(i int) error { return mgetErr(r.Plain, r.Keys100(i)) }},
				{Name: "sharded4", Op: func(i int) error { return mgetErr(r.Sharded4, r.Keys100(i)) }},
				{Name: "shardedAP", Op: func(i int) error { return mgetErr(r.ShardedAP, r.Keys100(i)) }},
				{Name: "ring", Op: func(i int) error { return pipelineGets(r.Ring, r.Keys100(i)) }}, // Ring has no cross-shard MGET
				{Name: "floor", Op: func(i int) error {
					return r.Floor.Run(i, func(_ int, c *goredis.Client, keys []string) error { return mgetErr(c, keys) })
				}},
			},
			Chunk:   40,
			Latency: true,
			Ratios:  [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}, {"sharded4", "floor"}, {"floor", "ring"}, {"shardedAP", "floor"}},
			RatioOf: []string{"p50", "cpu", "allocs"},
		}},
		{"Pipeline-100-GETs", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "plain", Op: func(i int) error { return pipelineGets(r.Plain, r.Keys100(i)) }},
				{Name: "sharded4", Op: func(i int) error { return pipelineGets(r.Sharded4, r.Keys100(i)) }},
				{Name: "shardedAP", Op: func(i int) error { return pipelineGets(r.ShardedAP, r.Keys100(i)) }},
				{Name: "ring", Op: func(i int) error { return pipelineGets(r.Ring, r.Keys100(i)) }},
				{Name: "floor", Op: func(i int) error {
					// The commands are queued first, on the caller, as one
					// pipeline's are; then each shard's pipeline runs.
					groups := r.Floor.GroupsOf(i)
					pipes := make([]goredis.Pipeliner, len(groups))
					for j, g := range groups {
						pipes[j] = r.Floor.Clients[g.Shard].Pipeline()
						for _, k := range g.Keys {
							pipes[j].Get(ctx, k)
						}
					}
					return r.Floor.Run(i, func(j int, _ *goredis.Client, keys []string) error {
						cmds, err := pipes[j].Exec(ctx)
						if err == nil && len(cmds) != len(keys) {
							err = fmt.Errorf("%d replies for %d GETs", len(cmds), len(keys))
						}
						return err
					})
				}},
			},
			Chunk:   40,
			Latency: true,
			Ratios:  [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}, {"sharded4", "floor"}, {"floor", "ring"}, {"shardedAP", "floor"}},
			RatioOf: []string{"p50", "cpu", "allocs"},
		}},
	} {
		b.Run(w.name, w.w.Run)
	}
	fixtures.BenchCache(b, r) // fixtures/speed_cache_bench.go
	b.Run("NewClient-1000-shards", func(b *testing.B) { benchNewClient1000(b) })
	b.Run("Migration", func(b *testing.B) { benchMigration(b, r.Addrs, shardedredis.MigrateOptions{}) })
	b.Run("Migration-server-side", func(b *testing.B) { benchMigration(b, r.Addrs, shardedredis.MigrateOptions{ServerSide: true}) })
	for _, limit := range migrationLimits {
		b.Run(fmt.Sprintf("Migration-limited-%dk", limit/1000), func(b *testing.B) {
			benchMigration(b, r.Addrs, shardedredis.MigrateOptions{KeysPerSecond: float64(limit)})
		})
	}

	fixtures.MemcachedPath(b)
	mc := newSpeedMemcache(b)
	for _, w := range []struct {
		name string
		w    fixtures.Workload
	}{
		{"memcache-Get", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "gomemcache", Op: func(i int) error { return itemErr(mc.plain.Get(mc.Key(i))) }},
				{Name: "sharded4", Op: func(i int) error { return itemErr(mc.sharded.Get(mc.Key(i))) }},
			},
			Chunk:   200,
			Ratios:  [][2]string{{"sharded4", "gomemcache"}},
			RatioOf: []string{"ns", "cpu", "allocs", "B"},
		}},
		{"memcache-GetMulti-100", fixtures.Workload{
			Contenders: []fixtures.Contender{
				{Name: "gomemcache", Op: func(i int) error { return itemsErr(mc.plain.GetMulti(mc.Keys100(i))) }},
				{Name: "sharded4", Op: func(i int) error { return itemsErr(mc.sharded.GetMulti(mc.Keys100(i))) }},
				{Name: "floor", Op: func(i int) error { return itemsErr(mc.floorGetMulti(i)) }},
			},
			Chunk:   40,
			Latency: true,
			Ratios:  [][2]string{{"sharded4", "gomemcache"}, {"sharded4", "floor"}, {"floor", "gomemcache"}},
			RatioOf: []string{"p50", "cpu", "allocs", "B"},
		}},
	} {
		b.Run(w.name, w.w.Run)
	}
}

// speedMemcache are gomemcache and the memcache client over four memcached
// servers that hold every key.
type speedMemcache struct {
	plain   *gomemcache.Client
	sharded *shardedmc.ShardedClient
	floor   *fixtures.HandSplit[*gomemcache.Client] // on sharded's shard clients
	fixtures.SpeedKeyset
}

// floorGetMulti is the hand-split GetMulti of operation i: one gomemcache
// GetMulti per shard, their maps copied into one made at its final size.
func (m *speedMemcache) floorGetMulti(i int) (map[string]*gomemcache.Item, error) {
	parts := make([]map[string]*gomemcache.Item, len(m.floor.GroupsOf(i)))
	err := m.floor.Run(i, func(j int, c *gomemcache.Client, keys []string) error {
		var err error
		parts[j], err = c.GetMulti(keys)
		return err
	})
	items := make(map[string]*gomemcache.Item, 100)
	for _, p := range parts {
		maps.Copy(items, p)
	}
	return items, err
}

func newSpeedMemcache(b *testing.B) *speedMemcache {
	m := &speedMemcache{SpeedKeyset: fixtures.MCKeys("speed:key:", speedKeys)}
	var addrs []string
	var shards []shardedmc.ShardOptions
	for range 4 {
		s := fixtures.StartRealMemcached(b)
		addrs = append(addrs, s.Addr)
		shards = append(shards, shardedmc.ShardOptions{Addr: s.Addr, MaxIdleConns: 8})
		d := gomemcache.New(s.Addr)
		for _, k := range m.SpeedKeyset {
			if err := d.Set(&gomemcache.Item{Key: k, Value: []byte("value-of-" + k)}); err != nil {
				b.Fatal(err)
			}
		}
		d.Close()
	}
	m.plain = gomemcache.New(addrs...)
	m.plain.MaxIdleConns = 8
	var err error
	if m.sharded, err = shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards}); err != nil {
		b.Fatal(err)
	}
	m.floor = newHandSplit(m.SpeedKeyset, m.sharded.Shards(), func(k string) int { return m.sharded.GetShardInfo(k).Index })
	b.Cleanup(func() {
		m.plain.Close()
		m.sharded.Close()
	})
	return m
}

func itemErr(it *gomemcache.Item, err error) error {
	if err == nil && len(it.Value) == 0 {
		err = fmt.Errorf("%s: empty value", it.Key)
	}
	return err
}

func itemsErr(items map[string]*gomemcache.Item, err error) error {
	if err == nil && len(items) != 100 {
		err = fmt.Errorf("GetMulti: %d hits of 100", len(items))
	}
	return err
}

// benchNewClient1000 builds a client of 1,000 shards (addresses where no
// server listens: nothing connects before the first command) against
// go-redis's NewRing with the same 1,000 addresses, and reports for each
// the time to build, the heap it keeps (after a GC), and the goroutines it
// starts, as medians over rounds.
func benchNewClient1000(b *testing.B) {
	const n = 1000
	shards := make([]shardedredis.ShardOptions, n)
	addrs := make(map[string]string, n)
	for i := range n {
		a := "127.0.0.1:" + strconv.Itoa(20000+i)
		shards[i] = shardedredis.ShardOptions{Addr: a}
		addrs["shard"+strconv.Itoa(i)] = a
	}
	type build struct {
		name string
		make func() (close func() error)
	}
	builds := []build{
		{"sharded", func() func() error {
			c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
			if err != nil {
				b.Fatal(err)
			}
			return c.Close
		}},
		{"ring", func() func() error { return goredis.NewRing(&goredis.RingOptions{Addrs: addrs}).Close }},
	}
	var times, heaps, gors [2][]float64
	var ms runtime.MemStats
	round := 0
	for b.Loop() {
		for k := range builds {
			bi := (round + k) % len(builds)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			heap0, g0 := ms.HeapAlloc, runtime.NumGoroutine()
			t0 := time.Now()
			closer := builds[bi].make()
			elapsed := time.Since(t0)
			g1 := runtime.NumGoroutine()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			times[bi] = append(times[bi], float64(elapsed.Nanoseconds()))
			heaps[bi] = append(heaps[bi], float64(int64(ms.HeapAlloc)-int64(heap0)))
			gors[bi] = append(gors[bi], float64(g1-g0))
			if err := closer(); err != nil {
				b.Fatal(err)
			}
			waitGoroutines(b, g0)
		}
		round++
	}
	for bi, bu := range builds {
		b.ReportMetric(fixtures.MedianOf(times[bi]), bu.name+"-ns/build")
		b.ReportMetric(fixtures.MedianOf(heaps[bi])/(1<<20), bu.name+"-MiB")
		b.ReportMetric(fixtures.MedianOf(gors[bi]), bu.name+"-goroutines")
	}
	for _, m := range []struct {
		name string
		xs   [2][]float64
	}{{"wall", times}, {"MiB", heaps}, {"goroutines", gors}} {
		r := make([]float64, len(m.xs[0]))
		for i := range r {
			r[i] = m.xs[0][i] / max(m.xs[1][i], 1)
		}
		b.ReportMetric(fixtures.MedianOf(r), "ratio-"+m.name+"-sharded:ring")
	}
	b.ReportMetric(fixtures.MedianOf(times[0]), "ns/op")
	b.ReportMetric(0, "allocs/op")
	b.ReportMetric(0, "B/op")
}

// waitGoroutines waits (up to 5 s) until no more than n goroutines run:
// those a closed client started end asynchronously.
func waitGoroutines(tb testing.TB, n int) {
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("%d goroutines still run, %d before", runtime.NumGoroutine(), n)
		}
	}
}

// migrationKeys is the number of keys of the migration workload: three
// shards hold them, a fourth joins and takes about a quarter.
const migrationKeys = 200000

// migrationLimits are the KeysPerSecond of the rate-limited migrations:
// keys scanned, of which about a quarter move. They trace how the live
// GETs' p99 grows with the migration's rate.
var migrationLimits = []int{25000, 100000, 200000}

// benchMigration moves what a fourth redis-server takes over of
// migrationKeys string keys on three (one round per iteration), with opt,
// while one goroutine GETs random keys through the same client; before
// that, the same GET loop runs for a while with no migration. It reports
// keys/s, the GET p99 during the migration against the idle one, and, where
// /proc tells it, how busy the machine's cores were, as fractions of all
// their time: all processes during the migration ("machine-busy") and
// during the idle GET loop ("idle-machine-busy"), this one (the client's
// migration and GET loop) during the migration ("client-busy").
func benchMigration(b *testing.B, addrs []string, opt shardedredis.MigrateOptions) {
	shards := make([]shardedredis.ShardOptions, len(addrs))
	for i, a := range addrs {
		shards[i] = shardedredis.ShardOptions{Name: "redis-" + strconv.Itoa(i), Addr: a}
	}
	keys := fixtures.MCKeys("mig:", migrationKeys)
	var rates, idleP99, busyP99, ratios, machines, clients, idles []float64
	for b.Loop() {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3]})
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range addrs {
			d := goredis.NewClient(&goredis.Options{Addr: a})
			err := d.FlushAll(ctx).Err()
			d.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		for from := 0; from < len(keys); from += 1000 {
			if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range keys[from:min(len(keys), from+1000)] {
					p.Set(ctx, k, "value-of-"+k, 0)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		var idleBusy busyTime
		idle := liveGets(b, c, keys, func(stop <-chan struct{}) {
			t0 := readBusyTime()
			time.Sleep(300 * time.Millisecond)
			idleBusy = readBusyTime().since(t0)
		})
		if err := c.BeginResharding(shards); err != nil {
			b.Fatal(err)
		}
		m, err := c.NewMigration(opt)
		if err != nil {
			b.Fatal(err)
		}
		var elapsed time.Duration
		var migBusy busyTime
		busy := liveGets(b, c, keys, func(<-chan struct{}) {
			b0, t0 := readBusyTime(), time.Now()
			if err := m.Run(ctx); err != nil {
				b.Error(err)
			}
			elapsed, migBusy = time.Since(t0), readBusyTime().since(b0)
		})
		var moved int64
		for _, p := range m.Progress() {
			moved += p.Moved
		}
		if moved < migrationKeys/8 {
			b.Fatalf("moved %d keys of %d", moved, migrationKeys)
		}
		c.Close()
		rates = append(rates, float64(moved)/elapsed.Seconds())
		if idleBusy.total > 0 && migBusy.total > 0 {
			machines = append(machines, migBusy.machine())
			clients = append(clients, migBusy.client())
			idles = append(idles, idleBusy.machine())
		}
		i, p := fixtures.Percentile(idle, 99), fixtures.Percentile(busy, 99)
		idleP99 = append(idleP99, float64(i.Nanoseconds()))
		busyP99 = append(busyP99, float64(p.Nanoseconds()))
		ratios = append(ratios, float64(p)/float64(i))
	}
	b.ReportMetric(fixtures.MedianOf(rates), "keys/s")
	b.ReportMetric(fixtures.MedianOf(idleP99), "idle-GET-p99-ns")
	b.ReportMetric(fixtures.MedianOf(busyP99), "migrating-GET-p99-ns")
	b.ReportMetric(fixtures.MedianOf(ratios), "ratio-GET-p99-migrating:idle")
	if len(machines) > 0 {
		b.ReportMetric(fixtures.MedianOf(machines), "machine-busy")
		b.ReportMetric(fixtures.MedianOf(clients), "client-busy")
		b.ReportMetric(fixtures.MedianOf(idles), "idle-machine-busy")
	}
	b.ReportMetric(1e9/fixtures.MedianOf(rates), "ns/op") // per key moved
	b.ReportMetric(0, "allocs/op")
	b.ReportMetric(0, "B/op")
}

// busyTime is CPU time in clock ticks, from /proc: every core's time
// (total), its busy part (user, nice, system, irq, softirq: not idle,
// iowait, or steal, the hypervisor's), and this process's (self, user and
// system); zero where /proc does not tell it.
type busyTime struct{ busy, total, self uint64 }

// readBusyTime reads the CPU time since boot.
func readBusyTime() busyTime {
	stat, err1 := os.ReadFile("/proc/stat")
	self, err2 := os.ReadFile("/proc/self/stat")
	line, _, _ := strings.Cut(string(stat), "\n")
	cores := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	_, after, _ := strings.Cut(string(self), ") ")
	proc := strings.Fields(after) // state ppid ... (field 3 on), utime and stime fields 14 and 15
	if err1 != nil || err2 != nil || len(cores) < 9 || cores[0] != "cpu" || len(proc) < 13 {
		return busyTime{}
	}
	var t busyTime
	for i, f := range cores[1:9] {
		n, _ := strconv.ParseUint(f, 10, 64)
		t.total += n
		if i != 3 && i != 4 && i != 7 {
			t.busy += n
		}
	}
	for _, f := range proc[11:13] {
		n, _ := strconv.ParseUint(f, 10, 64)
		t.self += n
	}
	return t
}

// since returns the CPU time from t0 to t; zero when either is unknown.
func (t busyTime) since(t0 busyTime) busyTime {
	if t0.total == 0 || t.total <= t0.total {
		return busyTime{}
	}
	return busyTime{busy: t.busy - t0.busy, total: t.total - t0.total, self: t.self - t0.self}
}

// machine and client are the busy fractions of the cores' time over an
// interval (from since): every process's, and this one's.
func (t busyTime) machine() float64 { return float64(t.busy) / float64(t.total) }
func (t busyTime) client() float64  { return float64(t.self) / float64(t.total) }

// liveGets GETs random keys through c, one at a time, while during runs,
// and returns the latencies.
func liveGets(b *testing.B, c *shardedredis.ShardedClient, keys []string, during func(stop <-chan struct{})) []time.Duration {
	stop := make(chan struct{})
	var lat []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			err := c.Get(context.Background(), keys[rng.IntN(len(keys))]).Err()
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	during(stop)
	close(stop)
	wg.Wait()
	return lat
}
