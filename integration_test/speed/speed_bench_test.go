package integration_test

// The side-by-side speed benchmark: this SDK against the clients it is
// measured by, on real servers that the benchmark starts itself (four
// redis-servers, four memcached; skipped when a binary is missing, a
// failure under CI=true):
//
//	go test -run '^$' -bench Speed -count 6 ./integration_test | tee new.txt
//	benchstat new.txt
//
// Each workload is one sub-benchmark. Its contenders (a plain go-redis
// client, the sharded client over one shard and over four, go-redis Ring
// over the same four servers with its defaults; gomemcache against the
// memcache client; for the 100-key workloads, a fan-out written by hand on
// the sharded client's shard clients: see handSplit) run in rounds, a chunk
// of operations each, in an order that rotates from round to round, so
// that a load that comes and goes on the machine weighs on every contender
// alike. A round is one iteration of
// the benchmark loop: -benchtime sets how many rounds run. Per contender it
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
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/workers"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// speedKeys is the number of keys the single-key workloads rotate over;
// every server holds every key, so that every contender hits whatever its
// placement.
const speedKeys = 1024

// contender is one client's way of running one operation of a workload;
// i numbers the operation (it picks the key).
type contender struct {
	name string
	op   func(i int) error
}

// workload is what one sub-benchmark measures.
type workload struct {
	contenders []contender
	chunk      int  // operations per contender per round (per goroutine)
	goroutines int  // goroutines running the chunk at once; 0 means 1
	latency    bool // time every operation (percentiles)
	// ratios are the pairs {ours, theirs} reported as ratios; the first
	// pair's ours is the contender of the built-in ns/op, B/op, allocs/op.
	ratios [][2]string
	// ratioOf names the measures compared ("ns", "cpu", "allocs", "B",
	// "p50", "ops/s").
	ratioOf []string
}

// roundStats is one contender's chunk in one round.
type roundStats struct {
	wall, cpu     time.Duration
	ops           int
	allocs, bytes uint64
}

func (r roundStats) per(what string) float64 {
	n := float64(r.ops)
	switch what {
	case "ns":
		return float64(r.wall.Nanoseconds()) / n
	case "cpu":
		return float64(r.cpu.Nanoseconds()) / n
	case "allocs":
		return float64(r.allocs) / n
	case "B":
		return float64(r.bytes) / n
	case "ops/s":
		return n / r.wall.Seconds()
	}
	panic("unknown measure " + what)
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run runs w in rounds, one per benchmark iteration, and reports it.
func (w workload) run(b *testing.B) {
	n := len(w.contenders)
	rounds := make([][]roundStats, n) // [contender][round]
	lat := make([][]time.Duration, n)
	g := max(1, w.goroutines)
	var ms runtime.MemStats
	for _, c := range w.contenders { // warm up: connections open, pools full
		for i := range max(g, 8) {
			if err := c.op(i); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	round := 0
	for b.Loop() {
		for k := range n {
			ci := (round + k) % n
			c := w.contenders[ci]
			var mu sync.Mutex
			var errs []error
			var lats []time.Duration
			runtime.ReadMemStats(&ms)
			allocs0, bytes0 := ms.Mallocs, ms.TotalAlloc
			cpu0, t0 := cpuTime(b), time.Now()
			var wg sync.WaitGroup
			for gi := range g {
				wg.Go(func() {
					var mine []time.Duration
					if w.latency {
						mine = make([]time.Duration, 0, w.chunk)
					}
					for j := range w.chunk {
						i := (round*g+gi)*w.chunk + j
						var s time.Time
						if w.latency {
							s = time.Now()
						}
						err := c.op(i)
						if w.latency {
							mine = append(mine, time.Since(s))
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
					}
					mu.Lock()
					lats = append(lats, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			wall, cpu := time.Since(t0), cpuTime(b)-cpu0
			runtime.ReadMemStats(&ms)
			if len(errs) > 0 {
				b.Fatalf("%s: %v", c.name, errs[0])
			}
			rounds[ci] = append(rounds[ci], roundStats{wall: wall, cpu: cpu, ops: g * w.chunk,
				allocs: ms.Mallocs - allocs0, bytes: ms.TotalAlloc - bytes0})
			lat[ci] = append(lat[ci], lats...)
		}
		round++
	}
	index := func(name string) int {
		i := slices.IndexFunc(w.contenders, func(c contender) bool { return c.name == name })
		if i < 0 {
			b.Fatalf("no contender %q", name)
		}
		return i
	}
	measures := []string{"ns", "cpu", "allocs", "B"}
	if g > 1 {
		measures = append(measures, "ops/s")
	}
	for ci, c := range w.contenders {
		for _, m := range measures {
			b.ReportMetric(median(rounds[ci], func(r roundStats) float64 { return r.per(m) }), c.name+"-"+unit(m))
		}
		if w.latency {
			b.ReportMetric(float64(percentile(lat[ci], 50).Nanoseconds()), c.name+"-p50-ns")
			b.ReportMetric(float64(percentile(lat[ci], 99).Nanoseconds()), c.name+"-p99-ns")
		}
	}
	for _, pair := range w.ratios {
		a, t := index(pair[0]), index(pair[1])
		for _, m := range w.ratioOf {
			var r float64
			if p, ok := strings.CutPrefix(m, "p"); ok {
				n, _ := strconv.Atoi(p)
				r = float64(percentile(lat[a], n)) / float64(percentile(lat[t], n))
			} else {
				perRound := make([]float64, len(rounds[a]))
				for i := range perRound {
					perRound[i] = rounds[a][i].per(m) / rounds[t][i].per(m)
				}
				r = medianOf(perRound)
			}
			b.ReportMetric(r, "ratio-"+ratioName(m)+"-"+pair[0]+":"+pair[1])
		}
	}
	ours := index(w.ratios[0][0])
	b.ReportMetric(median(rounds[ours], func(r roundStats) float64 { return r.per("ns") }), "ns/op")
	b.ReportMetric(median(rounds[ours], func(r roundStats) float64 { return r.per("allocs") }), "allocs/op")
	b.ReportMetric(median(rounds[ours], func(r roundStats) float64 { return r.per("B") }), "B/op")
}

func unit(measure string) string {
	switch measure {
	case "ns":
		return "ns/op"
	case "cpu":
		return "cpu-ns/op"
	case "ops/s":
		return "ops/s"
	}
	return measure + "/op"
}

func median(rs []roundStats, f func(roundStats) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return medianOf(xs)
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// percentile returns the p-th percentile of ds (nearest rank); ds is sorted.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !sort.SliceIsSorted(ds, func(i, j int) bool { return ds[i] < ds[j] }) {
		slices.Sort(ds)
	}
	return ds[min(len(ds)-1, (len(ds)*p+99)/100-1)]
}

// speedRedis are the redis contenders over four servers that hold every
// key of keys.
type speedRedis struct {
	addrs    []string
	plain    *goredis.Client // on the first server
	sharded1 *shardedredis.ShardedClient
	sharded4 *shardedredis.ShardedClient
	// shardedAP is sharded4 with autopipelining: AutoPipelineOptions in
	// its shards' options.
	shardedAP *shardedredis.ShardedClient
	// routerAP is sharded4's own AutoPipeline().
	routerAP *goredis.AutoPipeliner
	ring     *goredis.Ring
	floor    *handSplit[*goredis.Client] // on sharded4's shard clients
	// apFloor is the floor of autopipelining over four servers: one
	// go-redis AutoPipeline() per server, a key's found by placement (the
	// ring of sharded4), nothing else.
	apFloor *apFloor
	speedKeyset
}

// apFloor runs a command on the autopipeliner of its key's server.
type apFloor struct {
	place   *ring.Ring
	clients []*goredis.Client
	aps     []*goredis.AutoPipeliner
}

func newAPFloor(b *testing.B, addrs []string, place *ring.Ring) *apFloor {
	f := &apFloor{place: place}
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		ap, err := c.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		f.clients, f.aps = append(f.clients, c), append(f.aps, ap)
	}
	b.Cleanup(func() {
		for _, c := range f.clients {
			c.Close()
		}
	})
	return f
}

// of returns the autopipeliner of key's server.
func (f *apFloor) of(key string) *goredis.AutoPipeliner { return f.aps[f.place.Locate(key)] }

func newSpeedRedis(b *testing.B) *speedRedis {
	procs := sharedRedis(b, 4)
	r := &speedRedis{speedKeyset: mcKeys("speed:key:", speedKeys)}
	var shards []shardedredis.ShardOptions
	ringAddrs := map[string]string{}
	for i, p := range procs {
		r.addrs = append(r.addrs, p.addr)
		shards = append(shards, shardedredis.ShardOptions{Addr: p.addr})
		ringAddrs["shard"+strconv.Itoa(i)] = p.addr
		d := goredis.NewClient(&goredis.Options{Addr: p.addr})
		if _, err := d.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range r.speedKeyset {
				p.Set(ctx, k, "value-of-"+k, 0)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	r.plain = goredis.NewClient(&goredis.Options{Addr: r.addrs[0]})
	var err error
	if r.sharded1, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:1]}); err != nil {
		b.Fatal(err)
	}
	if r.sharded4, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards}); err != nil {
		b.Fatal(err)
	}
	if r.shardedAP, err = shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards,
		Options: &goredis.Options{AutoPipelineOptions: goredis.DefaultBlockingAutoPipelineOptions()}}); err != nil {
		b.Fatal(err)
	}
	if r.routerAP, err = r.sharded4.AutoPipeline(); err != nil {
		b.Fatal(err)
	}
	r.ring = goredis.NewRing(&goredis.RingOptions{Addrs: ringAddrs})
	r.floor = newHandSplit(r.speedKeyset, r.sharded4.Shards(), func(k string) int { return r.sharded4.GetShardInfo(k).Index })
	r.apFloor = newAPFloor(b, r.addrs, r.sharded4.Ring())
	b.Cleanup(func() {
		r.plain.Close()
		r.sharded1.Close()
		r.sharded4.Close()
		r.shardedAP.Close()
		r.ring.Close()
	})
	return r
}

// speedKeyset are the keys of the single-key and 100-key workloads.
type speedKeyset []string

// key returns the key of operation i.
func (ks speedKeyset) key(i int) string { return ks[i%len(ks)] }

// keys100 returns the 100 keys of operation i.
func (ks speedKeyset) keys100(i int) []string {
	from := ks.from(i)
	return ks[from : from+100]
}

// keys10 returns the 10 keys of operation i.
func (ks speedKeyset) keys10(i int) []string {
	from := (i * 10) % (len(ks) - 10)
	return ks[from : from+10]
}

// from returns the index of the first of the 100 keys of operation i.
func (ks speedKeyset) from(i int) int { return (i * 100) % (len(ks) - 100) }

// handSplit is the floor of a sharded 100-key operation on the clients it
// is built on, a fan-out written by hand: each operation's keys split by
// shard beforehand (no hashing, no routing at run time), then one plain
// call per shard that holds some of them, on the sharded client's own
// shard clients, in parallel: each but the last on a kept worker (as the
// redis client runs its fan-outs), the last on the caller's goroutine.
// What the sharded client costs over it is locating, splitting and
// merging; what it gains over go-redis Ring or gomemcache is its
// transport's to gain.
type handSplit[C comparable] struct {
	clients []C
	ops     [][]shardKeys // by speedKeyset.from(i): the shards of operation i
	keyset  speedKeyset
}

// shardKeys are the keys of one operation that one shard holds.
type shardKeys struct {
	shard int
	keys  []string
}

// newHandSplit splits every 100-key operation of ks among shards by
// locate, which returns the index of a key's shard.
func newHandSplit[C comparable](ks speedKeyset, shards []shardedclient.Shard[C], locate func(string) int) *handSplit[C] {
	h := &handSplit[C]{ops: make([][]shardKeys, len(ks)-100), keyset: ks}
	for _, sh := range shards {
		h.clients = append(h.clients, sh.Client)
	}
	for from := range h.ops {
		byShard := make([][]string, len(shards))
		for _, k := range ks[from : from+100] {
			s := locate(k)
			byShard[s] = append(byShard[s], k)
		}
		for s, keys := range byShard {
			if len(keys) > 0 {
				h.ops[from] = append(h.ops[from], shardKeys{shard: s, keys: keys})
			}
		}
	}
	return h
}

// groupsOf returns the shards of operation i and their keys.
func (h *handSplit[C]) groupsOf(i int) []shardKeys { return h.ops[h.keyset.from(i)] }

// run runs call(j, client, keys) for the j-th shard of operation i, every
// j in parallel, and returns their errors joined.
func (h *handSplit[C]) run(i int, call func(j int, c C, keys []string) error) error {
	groups := h.groupsOf(i)
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	last := len(groups) - 1
	for j, g := range groups[:last] {
		wg.Add(1)
		workers.Go(func() {
			defer wg.Done()
			errs[j] = call(j, h.clients[g.shard], g.keys)
		})
	}
	g := groups[last]
	errs[last] = call(last, h.clients[g.shard], g.keys)
	wg.Wait()
	return errors.Join(errs...)
}

func getErr(c goredis.Cmdable, key string) error { return c.Get(ctx, key).Err() }

func setErr(c goredis.Cmdable, key string) error { return c.Set(ctx, key, "speed-value", 0).Err() }

// concurrent are the contenders of a single-key workload at many
// goroutines: op runs the command on a client.
func (r *speedRedis) concurrent(op func(c goredis.Cmdable, key string) error) []contender {
	return []contender{
		{"ring", func(i int) error { return op(r.ring, r.key(i)) }},
		{"sharded4", func(i int) error { return op(r.sharded4, r.key(i)) }},
		{"floorAP", func(i int) error { k := r.key(i); return op(r.apFloor.of(k), k) }},
		{"shardedAP", func(i int) error { return op(r.shardedAP, r.key(i)) }},
		{"routerAP", func(i int) error { return op(r.routerAP, r.key(i)) }},
	}
}

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

// BenchmarkSpeed runs the workloads of the README's speed table side by
// side (see the top of this file).
func BenchmarkSpeed(b *testing.B) {
	realRedisBin(b)
	r := newSpeedRedis(b)
	for _, w := range []struct {
		name string
		w    workload
	}{
		{"GET", workload{
			contenders: []contender{
				{"plain", func(i int) error { return getErr(r.plain, r.key(i)) }},
				{"sharded1", func(i int) error { return getErr(r.sharded1, r.key(i)) }},
				{"sharded4", func(i int) error { return getErr(r.sharded4, r.key(i)) }},
				{"ring", func(i int) error { return getErr(r.ring, r.key(i)) }},
				{"shardedAP", func(i int) error { return getErr(r.shardedAP, r.key(i)) }},
			},
			chunk:   200,
			latency: true,
			ratios:  [][2]string{{"sharded1", "plain"}, {"sharded4", "ring"}, {"shardedAP", "sharded4"}},
			ratioOf: []string{"ns", "cpu", "allocs", "p50"},
		}},
		{"GET-32-goroutines", workload{
			contenders: []contender{
				{"plain", func(i int) error { return getErr(r.plain, r.key(i)) }},
				{"sharded4", func(i int) error { return getErr(r.sharded4, r.key(i)) }},
				{"ring", func(i int) error { return getErr(r.ring, r.key(i)) }},
			},
			chunk:      20,
			goroutines: 32,
			ratios:     [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}},
			ratioOf:    []string{"ops/s", "cpu"},
		}},
		{"GET-64-goroutines", workload{
			contenders: r.concurrent(getErr),
			chunk:      20,
			goroutines: 64,
			latency:    true,
			ratios:     concurrentRatios,
			ratioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"GET-8-goroutines", workload{
			contenders: r.concurrent(getErr),
			chunk:      40,
			goroutines: 8,
			latency:    true,
			ratios:     concurrentRatios,
			ratioOf:    []string{"ops/s", "cpu", "p50"},
		}},
		{"SET-64-goroutines", workload{
			contenders: r.concurrent(setErr),
			chunk:      20,
			goroutines: 64,
			latency:    true,
			ratios:     concurrentRatios,
			ratioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"MGET-10-64-goroutines", workload{
			contenders: []contender{
				{"ring", func(i int) error { return pipelineGets(r.ring, r.keys10(i)) }}, // Ring has no cross-shard MGET
				{"sharded4", func(i int) error { return mgetErr(r.sharded4, r.keys10(i)) }},
				{"shardedAP", func(i int) error { return mgetErr(r.shardedAP, r.keys10(i)) }},
				{"routerAP", func(i int) error { return mgetErr(r.routerAP, r.keys10(i)) }},
			},
			chunk:      10,
			goroutines: 64,
			latency:    true,
			ratios:     [][2]string{{"shardedAP", "ring"}, {"sharded4", "ring"}, {"routerAP", "ring"}},
			ratioOf:    []string{"ops/s", "cpu", "p99"},
		}},
		{"MGET-100", workload{
			contenders: []contender{
				{"plain", func(i int) error { return mgetErr(r.plain, r.keys100(i)) }},
				{"sharded4", func(i int) error { return mgetErr(r.sharded4, r.keys100(i)) }},
				{"shardedAP", func(i int) error { return mgetErr(r.shardedAP, r.keys100(i)) }},
				{"ring", func(i int) error { return pipelineGets(r.ring, r.keys100(i)) }}, // Ring has no cross-shard MGET
				{"floor", func(i int) error {
					return r.floor.run(i, func(_ int, c *goredis.Client, keys []string) error { return mgetErr(c, keys) })
				}},
			},
			chunk:   40,
			latency: true,
			ratios:  [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}, {"sharded4", "floor"}, {"floor", "ring"}, {"shardedAP", "floor"}},
			ratioOf: []string{"p50", "cpu", "allocs"},
		}},
		{"Pipeline-100-GETs", workload{
			contenders: []contender{
				{"plain", func(i int) error { return pipelineGets(r.plain, r.keys100(i)) }},
				{"sharded4", func(i int) error { return pipelineGets(r.sharded4, r.keys100(i)) }},
				{"shardedAP", func(i int) error { return pipelineGets(r.shardedAP, r.keys100(i)) }},
				{"ring", func(i int) error { return pipelineGets(r.ring, r.keys100(i)) }},
				{"floor", func(i int) error {
					// The commands are queued first, on the caller, as one
					// pipeline's are; then each shard's pipeline runs.
					groups := r.floor.groupsOf(i)
					pipes := make([]goredis.Pipeliner, len(groups))
					for j, g := range groups {
						pipes[j] = r.floor.clients[g.shard].Pipeline()
						for _, k := range g.keys {
							pipes[j].Get(ctx, k)
						}
					}
					return r.floor.run(i, func(j int, _ *goredis.Client, keys []string) error {
						cmds, err := pipes[j].Exec(ctx)
						if err == nil && len(cmds) != len(keys) {
							err = fmt.Errorf("%d replies for %d GETs", len(cmds), len(keys))
						}
						return err
					})
				}},
			},
			chunk:   40,
			latency: true,
			ratios:  [][2]string{{"sharded4", "ring"}, {"sharded4", "plain"}, {"sharded4", "floor"}, {"floor", "ring"}, {"shardedAP", "floor"}},
			ratioOf: []string{"p50", "cpu", "allocs"},
		}},
	} {
		b.Run(w.name, w.w.run)
	}
	benchCache(b, r) // speed_cache_bench_test.go
	b.Run("NewClient-1000-shards", func(b *testing.B) { benchNewClient1000(b) })
	b.Run("Migration", func(b *testing.B) { benchMigration(b, r.addrs, shardedredis.MigrateOptions{}) })
	b.Run("Migration-server-side", func(b *testing.B) { benchMigration(b, r.addrs, shardedredis.MigrateOptions{ServerSide: true}) })
	for _, limit := range migrationLimits {
		b.Run(fmt.Sprintf("Migration-limited-%dk", limit/1000), func(b *testing.B) {
			benchMigration(b, r.addrs, shardedredis.MigrateOptions{KeysPerSecond: float64(limit)})
		})
	}

	memcachedPath(b)
	mc := newSpeedMemcache(b)
	for _, w := range []struct {
		name string
		w    workload
	}{
		{"memcache-Get", workload{
			contenders: []contender{
				{"gomemcache", func(i int) error { return itemErr(mc.plain.Get(mc.key(i))) }},
				{"sharded4", func(i int) error { return itemErr(mc.sharded.Get(mc.key(i))) }},
			},
			chunk:   200,
			ratios:  [][2]string{{"sharded4", "gomemcache"}},
			ratioOf: []string{"ns", "cpu", "allocs", "B"},
		}},
		{"memcache-GetMulti-100", workload{
			contenders: []contender{
				{"gomemcache", func(i int) error { return itemsErr(mc.plain.GetMulti(mc.keys100(i))) }},
				{"sharded4", func(i int) error { return itemsErr(mc.sharded.GetMulti(mc.keys100(i))) }},
				{"floor", func(i int) error { return itemsErr(mc.floorGetMulti(i)) }},
			},
			chunk:   40,
			latency: true,
			ratios:  [][2]string{{"sharded4", "gomemcache"}, {"sharded4", "floor"}, {"floor", "gomemcache"}},
			ratioOf: []string{"p50", "cpu", "allocs", "B"},
		}},
	} {
		b.Run(w.name, w.w.run)
	}
}

// speedMemcache are gomemcache and the memcache client over four memcached
// servers that hold every key.
type speedMemcache struct {
	plain   *gomemcache.Client
	sharded *shardedmc.ShardedClient
	floor   *handSplit[*gomemcache.Client] // on sharded's shard clients
	speedKeyset
}

// floorGetMulti is the hand-split GetMulti of operation i: one gomemcache
// GetMulti per shard, their maps copied into one made at its final size.
func (m *speedMemcache) floorGetMulti(i int) (map[string]*gomemcache.Item, error) {
	parts := make([]map[string]*gomemcache.Item, len(m.floor.groupsOf(i)))
	err := m.floor.run(i, func(j int, c *gomemcache.Client, keys []string) error {
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
	m := &speedMemcache{speedKeyset: mcKeys("speed:key:", speedKeys)}
	var addrs []string
	var shards []shardedmc.ShardOptions
	for range 4 {
		s := startRealMemcached(b)
		addrs = append(addrs, s.addr)
		shards = append(shards, shardedmc.ShardOptions{Addr: s.addr, MaxIdleConns: 8})
		d := gomemcache.New(s.addr)
		for _, k := range m.speedKeyset {
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
	m.floor = newHandSplit(m.speedKeyset, m.sharded.Shards(), func(k string) int { return m.sharded.GetShardInfo(k).Index })
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
		b.ReportMetric(medianOf(times[bi]), bu.name+"-ns/build")
		b.ReportMetric(medianOf(heaps[bi])/(1<<20), bu.name+"-MiB")
		b.ReportMetric(medianOf(gors[bi]), bu.name+"-goroutines")
	}
	for _, m := range []struct {
		name string
		xs   [2][]float64
	}{{"wall", times}, {"MiB", heaps}, {"goroutines", gors}} {
		r := make([]float64, len(m.xs[0]))
		for i := range r {
			r[i] = m.xs[0][i] / max(m.xs[1][i], 1)
		}
		b.ReportMetric(medianOf(r), "ratio-"+m.name+"-sharded:ring")
	}
	b.ReportMetric(medianOf(times[0]), "ns/op")
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
	keys := mcKeys("mig:", migrationKeys)
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
		i, p := percentile(idle, 99), percentile(busy, 99)
		idleP99 = append(idleP99, float64(i.Nanoseconds()))
		busyP99 = append(busyP99, float64(p.Nanoseconds()))
		ratios = append(ratios, float64(p)/float64(i))
	}
	b.ReportMetric(medianOf(rates), "keys/s")
	b.ReportMetric(medianOf(idleP99), "idle-GET-p99-ns")
	b.ReportMetric(medianOf(busyP99), "migrating-GET-p99-ns")
	b.ReportMetric(medianOf(ratios), "ratio-GET-p99-migrating:idle")
	if len(machines) > 0 {
		b.ReportMetric(medianOf(machines), "machine-busy")
		b.ReportMetric(medianOf(clients), "client-busy")
		b.ReportMetric(medianOf(idles), "idle-machine-busy")
	}
	b.ReportMetric(1e9/medianOf(rates), "ns/op") // per key moved
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

// ratioName names a measure in a ratio's unit so that benchstat does not
// take the ratio for a time ("ns" would be).
func ratioName(measure string) string {
	if measure == "ns" {
		return "wall"
	}
	return measure
}
