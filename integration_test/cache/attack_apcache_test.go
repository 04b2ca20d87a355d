package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Attacks on autopipelining and client-side caching on the same shards
// (redis/autopipeline.go cachedRead, redis/cache.go writeHook), on real
// redis-servers: read-your-writes under concurrency, other clients'
// writes, which reads the servers still run, Close and a shard that dies
// while cached reads and batched writes are in flight.

// apCacheVariant is one way of combining autopipelining and caching.
type apCacheVariant struct {
	name string
	tune func(o *goredis.Options) // on the shared options after WithAP
}

var apCacheVariants = []apCacheVariant{
	{name: "blocking", tune: func(*goredis.Options) {}},
	{name: "fullduplex", tune: func(o *goredis.Options) { o.AutoPipelineOptions.FullDuplex = true }},
	{name: "coalesce-misses", tune: func(o *goredis.Options) { o.ClientSideCacheCoalesceMisses = true }},
	{name: "refresh-on-invalidate", tune: func(o *goredis.Options) { o.ClientSideCacheRefreshOnInvalidate = true }},
	{name: "invalidation-window", tune: func(o *goredis.Options) { o.ClientSideCacheInvalidationBatchWindow = 2 * time.Millisecond }},
}

// newAPCacheClient is a client over addrs whose shards cache and send every
// command through go-redis's engine (WithAP), tuned by v, with base's
// timeouts and pools when base is set.
func newAPCacheClient(t *testing.T, v apCacheVariant, base *goredis.Options, addrs ...string) *shardedredis.ShardedClient {
	t.Helper()
	o := fixtures.CachedOptions()
	if base != nil {
		b := *base
		b.Protocol, b.ClientSideCacheConfig = o.Protocol, o.ClientSideCacheConfig
		o = &b
	}
	opt := fixtures.WithAP(&shardedredis.ShardedOptions{Shards: fixtures.ShardsAt(addrs...), Options: o})
	v.tune(opt.Options)
	c, err := shardedredis.NewShardedClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rywKeys are one writer's keys: x and z on shard 0, y on shard 1.
type rywKeys struct{ x, y, z string }

// writerKeys returns n writers' keys of c, named after prefix.
func writerKeys(c *shardedredis.ShardedClient, prefix string, n int) []rywKeys {
	out := make([]rywKeys, n)
	for w := range out {
		var on [2][]string
		for i := 0; len(on[0]) < 2 || len(on[1]) < 1; i++ {
			k := fmt.Sprintf("%s%d:%d", prefix, w, i)
			s := c.GetShardInfo(k).Index
			on[s] = append(on[s], k)
		}
		out[w] = rywKeys{x: on[0][0], y: on[1][0], z: on[0][1]}
	}
	return out
}

// rywWrite is one shape of write of a writer's keys: it writes through c
// and updates model (a missing key is absent from it), from next, a value
// no earlier write of the writer used. It returns what it checked of the
// write's own replies (GETDEL, SET ... GET: the value they replaced) as an
// error.
type rywWrite struct {
	name  string
	write func(c *shardedredis.ShardedClient, k rywKeys, model map[string]int, next int) error
}

// replaced checks the value a GETDEL or SET ... GET returned for k.
func replaced(model map[string]int, k, got string, err error) error {
	want, ok := model[k]
	switch {
	case !ok && err == goredis.Nil, ok && err == nil && got == strconv.Itoa(want):
		return nil
	case err != nil && err != goredis.Nil:
		return err
	}
	return fmt.Errorf("replied old value %q (%v) for %s, want %d (present: %v)", got, err, k, want, ok)
}

var rywWrites = []rywWrite{
	{"SET", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		m[k.x] = n
		return c.Set(ctx, k.x, n, 0).Err()
	}},
	{"MSET-split", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		m[k.x], m[k.y], m[k.z] = n, n+1, n+2
		return c.MSet(ctx, k.x, n, k.y, n+1, k.z, n+2).Err()
	}},
	{"DEL-split", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, _ int) error {
		delete(m, k.x)
		delete(m, k.y)
		return c.Del(ctx, k.x, k.y).Err()
	}},
	{"INCR", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, _ int) error {
		m[k.y]++
		return c.Incr(ctx, k.y).Err()
	}},
	{"pipeline", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		// Two commands per shard: each shard's group rides the deferred engine.
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, key := range []string{k.x, k.y} {
				p.Set(ctx, key, n, 0)
				p.Incr(ctx, key)
				m[key] = n + 1
			}
			return nil
		})
		return err
	}},
	{"TxPipelined", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		m[k.x], m[k.z] = n, n
		_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, k.x, n, 0)
			p.Set(ctx, k.z, n, 0)
			return nil
		})
		return err
	}},
	{"EVAL", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		const script = "redis.call('SET', KEYS[1], ARGV[1]) redis.call('INCR', KEYS[2])"
		m[k.x] = n
		m[k.z]++
		return fixtures.IgnoreNil(c.Eval(ctx, script, []string{k.x, k.z}, n).Err())
	}},
	{"GETDEL", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, _ int) error {
		got, err := c.GetDel(ctx, k.y).Result()
		err = replaced(m, k.y, got, err)
		delete(m, k.y)
		return err
	}},
	{"router-AutoPipeline", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		ap, err := c.AutoPipelineWithOptions(goredis.DefaultBlockingAutoPipelineOptions()) // not FullDuplex
		if err != nil {
			return err
		}
		m[k.x], m[k.y] = n, n
		if err := ap.Set(ctx, k.x, n, 0).Err(); err != nil {
			return err
		}
		return ap.Set(ctx, k.y, n, 0).Err()
	}},
	{"GETEX", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, _ int) error {
		got, err := c.GetEx(ctx, k.x, time.Hour).Result()
		return replaced(m, k.x, got, err)
	}},
	{"SET-GET", func(c *shardedredis.ShardedClient, k rywKeys, m map[string]int, n int) error {
		got, err := c.SetArgs(ctx, k.z, n, goredis.SetArgs{Get: true}).Result()
		err = replaced(m, k.z, got, err)
		m[k.z] = n
		return err
	}},
}

// TestAttackAPCacheConcurrentRYW: with autopipelining (every command in a
// batch) and caching on both shards, 8 writers each write keys of their
// own through every shape of write (rywWrites: 200 writes each) and read
// them back at once, with GET and MGET, while 4 readers keep reading every
// writer's keys (so the cache holds them and fetches race the writes). No
// read may return anything but the writer's own last write.
func TestAttackAPCacheConcurrentRYW(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	for _, v := range apCacheVariants {
		t.Run(v.name, func(t *testing.T) {
			fixtures.SharedRedis(t, 2) // emptied
			c := newAPCacheClient(t, v, nil, addrsOf(procs)...)
			const writers, readers, rounds = 8, 4, 200
			keys := writerKeys(c, "ryw-ap:", writers)
			hits0 := fixtures.CacheHits(c)
			var wrong atomic.Int64
			var firstWrong sync.Once
			var stop atomic.Bool
			var rg sync.WaitGroup
			for r := range readers {
				rg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(r), 1))
					for !stop.Load() {
						k := keys[(r+rng.IntN(2)*readers)%writers]
						c.Get(ctx, k.x)
						c.MGet(ctx, k.x, k.y, k.z)
						c.Get(ctx, k.y)
					}
				})
			}
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					k, model := keys[w], map[string]int{}
					report := func(format string, args ...any) {
						wrong.Add(1)
						firstWrong.Do(func() { t.Errorf("writer %d: "+format, append([]any{w}, args...)...) })
					}
					for r := range rounds {
						shape := rywWrites[r%len(rywWrites)]
						if err := shape.write(c, k, model, 1000*(r+1)); err != nil {
							report("round %d %s: %v", r, shape.name, err)
							return
						}
						for _, key := range []string{k.x, k.y, k.z, k.x, k.y, k.z} {
							got, err := c.Get(ctx, key).Result()
							if err := replaced(model, key, got, err); err != nil {
								report("round %d after %s: GET: %v", r, shape.name, err)
							}
						}
						vals, err := c.MGet(ctx, k.x, k.y, k.z).Result()
						if want := modelVals(model, k.x, k.y, k.z); err != nil || fmt.Sprint(vals) != fmt.Sprint(want) {
							report("round %d after %s: MGET = %v, %v; want %v", r, shape.name, vals, err, want)
						}
					}
				})
			}
			wg.Wait()
			stop.Store(true)
			rg.Wait()
			if n := wrong.Load(); n != 0 {
				t.Errorf("%d reads of %d after a writer's own acknowledged write returned another value", n, writers*rounds*7)
			}
			if hits := fixtures.CacheHits(c) - hits0; hits == 0 {
				t.Errorf("no cache hit: the keys were never cached, the test measured nothing")
			}
		})
	}
}

// modelVals is what MGET of keys returns under model.
func modelVals(model map[string]int, keys ...string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		if v, ok := model[k]; ok {
			out[i] = strconv.Itoa(v)
		}
	}
	return out
}

// TestAttackAPCacheOtherClientsWrite: with autopipelining and caching, and
// 8 goroutines keeping the shards' engines busy (batched writes of other
// keys, cached reads), a write of another client to a cached key is seen
// within go-redis's invalidation delay every time (SeenAfter fails past
// 5 s); the delays are logged next to go-redis's own client with the same
// cache, idle.
func TestAttackAPCacheOtherClientsWrite(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	const key, rounds = "ap-other-client", 30
	plainOpt := fixtures.CachedOptions()
	plainOpt.Addr = procs[0].Addr
	plain := goredis.NewClient(plainOpt)
	defer plain.Close()
	w := goredis.NewClient(&goredis.Options{Addr: procs[0].Addr})
	defer w.Close()
	var lat []time.Duration
	for r := range rounds {
		lat = append(lat, fixtures.SeenAfter(t, w, plain, func() uint64 { return plain.CSCStats().Hits }, key, r))
	}
	t.Logf("go-redis alone: seen after p50 %v, max %v", fixtures.Percentile(lat, 50), fixtures.Percentile(lat, 100))
	for _, v := range apCacheVariants {
		t.Run(v.name, func(t *testing.T) {
			c := newAPCacheClient(t, v, nil, addrsOf(procs)...)
			w := goredis.NewClient(&goredis.Options{Addr: procs[c.GetShardInfo(key).Index].Addr})
			defer w.Close()
			stop := busy(t, c, 8)
			var lat []time.Duration
			for r := range rounds {
				lat = append(lat, fixtures.SeenAfter(t, w, c, func() uint64 { return fixtures.CacheHits(c) }, key, r))
			}
			stop()
			t.Logf("seen after p50 %v, max %v", fixtures.Percentile(lat, 50), fixtures.Percentile(lat, 100))
		})
	}
}

// busy keeps n goroutines writing and reading keys of their own through c
// (SET then GET), so that the shards' engines batch; stop ends them and
// fails t if one of their reads did not return its write.
func busy(t *testing.T, c *shardedredis.ShardedClient, n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range n {
		wg.Go(func() {
			k := "busy:" + strconv.Itoa(g)
			for i := 0; !done.Load(); i++ {
				c.Set(ctx, k, i, 0)
				if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
					wrong.Add(1)
				}
			}
		})
	}
	return func() {
		done.Store(true)
		wg.Wait()
		if n := wrong.Load(); n != 0 {
			t.Errorf("%d background reads did not return their own write", n)
		}
	}
}

// TestAttackAPCacheServerReads counts the reads that the servers run
// (INFO commandstats) when every key read is cached, one goroutine, every
// command in a batch (AutoPipelineFrom 1): each read path is warmed twice,
// then run 50 times. The plain go-redis client's numbers for the same
// calls are the reference (its pipelines never consult the cache; its
// AutoPipeline does for a batch of one).
func TestAttackAPCacheServerReads(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	c := newAPCacheClient(t, apCacheVariants[0], nil, addrsOf(procs)...)
	keys := twoShardKeys(t, c, "ap-reads:")
	same := oneShardKeys(c, "ap-reads-same:", 2)
	all := append(keys[:], same...)
	for _, k := range all {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, "h"+k, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	hkeys := []string{"h" + keys[0], "h" + keys[1]}
	router, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	pipeGets := func(ks ...string) func() error {
		return func() error {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range ks {
					p.Get(ctx, k)
				}
				return nil
			})
			return err
		}
	}
	direct := make([]*goredis.Client, len(procs))
	for i, p := range procs {
		direct[i] = goredis.NewClient(&goredis.Options{Addr: p.Addr})
		defer direct[i].Close()
	}
	count := func(cmd string) (n int64) {
		for _, d := range direct {
			n += fixtures.ReadCounts(t, d).Calls[cmd]
		}
		return n
	}
	const runs = 50
	for _, tc := range []struct {
		name, cmd string
		read      func() error
		want      int64 // server calls of cmd in runs reads
	}{
		{"GET", "get", func() error { return c.Get(ctx, keys[0]).Err() }, 0},
		{"MGET-split", "mget", func() error { return c.MGet(ctx, all...).Err() }, 0},
		{"HGET", "hget", func() error { return c.HGet(ctx, hkeys[1], "f").Err() }, 0},
		{"HMGET", "hmget", func() error { return c.HMGet(ctx, hkeys[0], "f").Err() }, 0},
		// One command per shard: each group is one command, which runs as a
		// plain command and is answered by the cache (go-redis's pipeline
		// would send it).
		{"pipeline-one-per-shard", "get", pipeGets(keys[0], keys[1]), 0},
		// (Two commands on one shard ride the deferred engine, which may
		// flush them as one batch, to the server, or as two batches of one,
		// each answered by the cache: no exact count.)
		// The router's engine, one goroutine: each batch is one GET, one
		// command of its shard: answered by the cache, as go-redis's
		// AutoPipeline answers a batch of one.
		{"router-AutoPipeline", "get", func() error { return router.Get(ctx, keys[1]).Err() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 {
				if err := tc.read(); err != nil {
					t.Fatal(err)
				}
			}
			before := count(tc.cmd)
			for range runs {
				if err := tc.read(); err != nil {
					t.Fatal(err)
				}
			}
			if got := count(tc.cmd) - before; got != tc.want {
				t.Errorf("%d reads of cached keys: the servers ran %s %d times, want %d", runs, tc.cmd, got, tc.want)
			}
		})
	}
}

// TestAttackAPCacheCloseUnderLoad: Close while 16 goroutines write and read
// back keys of their own through batches (SET, pipelines, MSET split, GET,
// MGET): every command before Close returns its own write, every one
// after returns an error, every goroutine returns, and no goroutine of
// the engines or caches outlives the test (goleak in TestMain).
func TestAttackAPCacheCloseUnderLoad(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	for _, v := range apCacheVariants {
		t.Run(v.name, func(t *testing.T) {
			c := newAPCacheClient(t, v, nil, addrsOf(procs)...)
			keys := writerKeys(c, "ap-close:", 16)
			var closed atomic.Bool
			var ops, wrong atomic.Int64
			var wg sync.WaitGroup
			for g := range keys {
				wg.Go(func() {
					k := keys[g]
					for i := 0; ; i++ {
						err := c.MSet(ctx, k.x, i, k.y, i).Err()
						if err == nil {
							_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
								p.Incr(ctx, k.x)
								p.Incr(ctx, k.z)
								return nil
							})
						}
						var got []any
						if err == nil {
							got, err = c.MGet(ctx, k.x, k.y).Result()
						}
						switch {
						case err != nil && closed.Load():
							return
						case err != nil:
							wrong.Add(1)
							t.Errorf("goroutine %d before Close: %v", g, err)
							return
						case fmt.Sprint(got) != fmt.Sprint([]any{strconv.Itoa(i + 1), strconv.Itoa(i)}):
							wrong.Add(1)
						}
						ops.Add(1)
					}
				})
			}
			for ops.Load() < 400 {
				time.Sleep(time.Millisecond)
			}
			closed.Store(true)
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			wg.Wait()
			if n := wrong.Load(); n != 0 {
				t.Errorf("%d rounds read another value than their own writes", n)
			}
			if err := c.Get(ctx, keys[0].x).Err(); err == nil {
				t.Errorf("GET after Close: no error")
			}
		})
	}
}

// TestAttackAPCacheShardDies: a shard is killed, or hung (SIGSTOP, then
// SIGCONT), while 8 goroutines write keys of their own on both shards
// through batches and read them back (cached reads and batched writes in
// flight). Every read returns an error or a value that a write of its key
// may have left: the last acknowledged one, or one whose write failed
// since (it may have run); every goroutine returns.
func TestAttackAPCacheShardDies(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	for _, how := range []string{"kill", "hang"} {
		for _, v := range apCacheVariants[:2] {
			t.Run(how+"/"+v.name, func(t *testing.T) {
				procs := []*fixtures.RedisProc{fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")}
				c := newAPCacheClient(t, v, fixtures.FailShard("").Options, addrsOf(procs)...)
				fixtures.CloseAndSettle(t, c)
				keys := writerKeys(c, "ap-dies:", 8)
				var phase atomic.Int32 // 0 before the failure, 1 during, 2 after (hang: continued)
				var rounds [3]atomic.Int64
				var wrong atomic.Int64
				var wg sync.WaitGroup
				for g := range keys {
					wg.Go(func() {
						wrong.Add(int64(dyingWriter(t, c, keys[g], &phase, &rounds)))
					})
				}
				waitRounds := func(p int, n int64) {
					for rounds[p].Load() < n {
						time.Sleep(time.Millisecond)
					}
				}
				waitRounds(0, 200)
				switch how {
				case "kill":
					procs[1].Kill()
				case "hang":
					procs[1].Signal(t, syscall.SIGSTOP)
				}
				phase.Store(1)
				waitRounds(1, 16)
				if how == "hang" {
					procs[1].Signal(t, syscall.SIGCONT)
				}
				phase.Store(2)
				waitRounds(2, 200)
				phase.Store(3)
				wg.Wait()
				if n := wrong.Load(); n != 0 {
					t.Errorf("%d reads returned a value no write of their key could have left", n)
				}
				t.Logf("rounds before/during/after: %d/%d/%d", rounds[0].Load(), rounds[1].Load(), rounds[2].Load())
			})
		}
	}
}

// dyingWriter is one goroutine of TestAttackAPCacheShardDies: until phase
// is 3, it writes i to its keys (SET x, MSET split x y, a pipeline SET y
// and INCR y... in turns), reads each key back (GET, and MGET split), and
// counts the rounds of each phase. It returns the reads that returned a
// value outside their key's allowed set, and fails t with the first.
func dyingWriter(t *testing.T, c *shardedredis.ShardedClient, k rywKeys, phase *atomic.Int32, rounds *[3]atomic.Int64) (wrong int) {
	// allowed[key] holds the values a read of key may return: the last
	// acknowledged write's, and every failed write's since the first failure.
	allowed := map[string]map[string]bool{}
	failed := map[string]bool{}
	wrote := func(err error, kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			key, val := kv[i], kv[i+1]
			if allowed[key] == nil || err == nil && !failed[key] {
				allowed[key] = map[string]bool{}
			}
			if err != nil {
				failed[key] = true
			}
			allowed[key][val] = true
		}
	}
	check := func(key string, got any, err error) {
		if err != nil {
			return
		}
		if s, ok := got.(string); !ok || !allowed[key][s] {
			wrong++
			if wrong == 1 {
				t.Errorf("read of %s = %v; allowed %v (a write failed: %v)", key, got, allowed[key], failed[key])
			}
		}
	}
	for i := 0; ; i++ {
		p := phase.Load()
		if p == 3 {
			return wrong
		}
		v := strconv.Itoa(i)
		switch i % 3 {
		case 0:
			err := c.Set(ctx, k.x, v, 0).Err()
			wrote(err, k.x, v)
		case 1:
			err := c.MSet(ctx, k.x, v, k.y, v).Err()
			wrote(err, k.x, v, k.y, v)
		default:
			_, err := c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
				pl.Set(ctx, k.y, v, 0)
				pl.Set(ctx, k.z, v, 0)
				return nil
			})
			wrote(err, k.y, v, k.z, v)
		}
		for _, key := range []string{k.x, k.y, k.z} {
			if allowed[key] == nil {
				continue
			}
			got, err := c.Get(ctx, key).Result()
			check(key, got, err)
		}
		if allowed[k.x] != nil && allowed[k.y] != nil {
			vals, err := c.MGet(ctx, k.x, k.y).Result()
			if err == nil {
				check(k.x, vals[0], nil)
				check(k.y, vals[1], nil)
			}
		}
		rounds[min(p, 2)].Add(1)
	}
}

// batchCounter counts the commands named name of a shard client that ran
// alone and those that ran in a pipeline of two or more (an engine's batch).
type batchCounter struct {
	name           string
	alone, batched atomic.Int64
}

func (h *batchCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *batchCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == h.name {
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *batchCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			switch {
			case cmd.Name() != h.name:
			case len(cmds) > 1:
				h.batched.Add(1)
			default:
				h.alone.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestAttackAPCacheUncachedReadsBatch: on a shard that caches and
// autopipelines, a read that go-redis's cache never answers (TTL: not on
// go-redis's list of cacheable commands) gains nothing from the plain path
// and should batch as on a shard that does not cache: 64 goroutines' 3,200
// TTLs on one shard, AutoPipelineFrom 1, ride the engine's batches (some
// batch of two or more) on both shards. Found in review, fixed since: on the caching shard all
// 3,200 run alone (cachedRead diverts every command that reads keys and
// writes none, commands.Info.ReadsOnly, not only those go-redis caches).
func TestAttackAPCacheUncachedReadsBatch(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			o := fixtures.CachedOptions()
			if !cached {
				o.ClientSideCacheConfig = nil
			}
			opt := fixtures.WithAP(&shardedredis.ShardedOptions{Shards: fixtures.ShardsAt(addrsOf(procs)...), Options: o})
			c, err := shardedredis.NewShardedClient(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			alone, batched := readsOnOneShard(t, c, "ttl-batch:", "ttl", func(k string) error {
				if got, err := c.TTL(ctx, k).Result(); err != nil || got != -2*time.Nanosecond {
					return fmt.Errorf("TTL %s = %v, %v; want -2ns (no key)", k, got, err)
				}
				return nil
			})
			t.Logf("3,200 TTLs: %d alone, %d in batches", alone, batched)
			if alone+batched != 3200 || batched == 0 {
				t.Errorf("3,200 TTLs from 64 goroutines: %d ran alone, %d in batches; want 3,200 in all, some in batches", alone, batched)
			}
		})
	}
}

// TestAttackAPCacheCloseWithHungShard: Close while one shard is hung
// (SIGSTOP) and 16 goroutines write and read back cached keys through
// batches: Close returns no error, every goroutine returns (each GET
// returning an error or its goroutine's last acknowledged write), every
// command after Close fails, and no goroutine outlives the test (goleak
// in TestMain; the server continues before the cleanup kills it).
func TestAttackAPCacheCloseWithHungShard(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	for _, v := range apCacheVariants[:3] {
		t.Run(v.name, func(t *testing.T) {
			procs := []*fixtures.RedisProc{fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")}
			c := newAPCacheClient(t, v, fixtures.FailShard("").Options, addrsOf(procs)...)
			keys := writerKeys(c, "ap-close-hung:", 16)
			for _, k := range keys {
				for _, key := range []string{k.x, k.y} {
					if err := c.Set(ctx, key, -1, 0).Err(); err != nil {
						t.Fatal(err)
					}
					if err := c.Get(ctx, key).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			procs[1].Signal(t, syscall.SIGSTOP)
			var started, wrong atomic.Int64
			var wg sync.WaitGroup
			for g := range keys {
				wg.Go(func() {
					started.Add(1)
					for i := 0; ; i++ {
						key := []string{keys[g].x, keys[g].y}[i%2]
						if c.Set(ctx, key, i, 0).Err() != nil {
							return
						}
						if got, err := c.Get(ctx, key).Int(); err == nil && got != i {
							wrong.Add(1)
						}
					}
				})
			}
			for started.Load() < int64(len(keys)) {
				time.Sleep(time.Millisecond)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			wg.Wait()
			procs[1].Signal(t, syscall.SIGCONT)
			if n := wrong.Load(); n != 0 {
				t.Errorf("%d GETs returned another value than their goroutine's write", n)
			}
			if err := c.Get(ctx, keys[0].x).Err(); err == nil {
				t.Errorf("GET after Close: no error")
			}
		})
	}
}

// TestAttackAPCacheFlushDBRYW: with autopipelining and caching, one writer
// sets 16 keys on both shards (MSET split), reads them back, empties the
// shards (FLUSHDB) and reads them back as missing, 100 rounds, while 6
// readers keep reading the keys (their fetches race the flush). Every read
// of the writer returns its round's value, then redis.Nil.
func TestAttackAPCacheFlushDBRYW(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	for _, v := range apCacheVariants[:3] {
		t.Run(v.name, func(t *testing.T) {
			c := newAPCacheClient(t, v, nil, addrsOf(procs)...)
			keys := make([]string, 16)
			for i := range keys {
				keys[i] = "ap-flush:" + strconv.Itoa(i)
			}
			var stop atomic.Bool
			var rg sync.WaitGroup
			for r := range 6 {
				rg.Go(func() {
					for i := r; !stop.Load(); i++ {
						c.Get(ctx, keys[i%len(keys)])
						c.MGet(ctx, keys[i%len(keys)], keys[(i+1)%len(keys)])
					}
				})
			}
			wrong := 0
			check := func(round int, want string, got any, err error, what string) {
				if s, _ := got.(string); err != nil && err != goredis.Nil || want == "" && got != nil || want != "" && s != want {
					wrong++
					if wrong == 1 {
						t.Errorf("round %d: %s = %v, %v; want %q (empty: missing)", round, what, got, err, want)
					}
				}
			}
			for r := range 100 {
				val := strconv.Itoa(r)
				var kv []any
				for _, k := range keys {
					kv = append(kv, k, val)
				}
				if err := c.MSet(ctx, kv...).Err(); err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{val, ""} {
					for _, k := range keys {
						got, err := c.Get(ctx, k).Result()
						if err == goredis.Nil {
							check(r, want, nil, nil, "GET "+k)
						} else {
							check(r, want, got, err, "GET "+k)
						}
					}
					vals, err := c.MGet(ctx, keys...).Result()
					for i := range vals {
						check(r, want, vals[i], err, "MGET[..."+keys[i]+"...]")
					}
					if want != "" {
						if err := c.FlushDB(ctx).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			stop.Store(true)
			rg.Wait()
			if wrong != 0 {
				t.Errorf("%d of %d reads after the writer's MSET or FLUSHDB returned another value", wrong, 100*2*2*len(keys))
			}
		})
	}
}

// TestAttackAPCacheSetShardsNewClients: SetShards that changes the shards'
// options (ReadTimeout 1 s, then 2 s, 100 times) gives them new clients,
// each with a new cache, while 4 writers set keys of their own and read
// them back at once, and 4 readers keep reading those keys. A write
// acknowledged by the old client, read back through the new one, must not
// return the value it replaced (the old client's hook dropped it from the
// old cache only). Plain and autopipelined. Found in review, fixed since: fails in both (a few
// reads in several hundred, most runs): the read through the new client is
// a hit on a value that a reader fetched through the new client before the
// write ran on the server; writeHook dropped the key from the old client's
// cache only, and the server's invalidation for the new client's
// connection had not been applied yet.
func TestAttackAPCacheSetShardsNewClients(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	for _, ap := range []bool{false, true} {
		t.Run(fmt.Sprintf("ap=%v", ap), func(t *testing.T) {
			var c *shardedredis.ShardedClient
			if ap {
				c = newAPCacheClient(t, apCacheVariants[0], nil, addrsOf(procs)...)
			} else {
				c = fixtures.NewCachedClient(t, addrsOf(procs)...)
			}
			keys := writerKeys(c, "ap-setshards:", 4)
			var stop atomic.Bool
			var stale, reads atomic.Int64
			var first sync.Once
			var wg sync.WaitGroup
			for r := range 4 {
				wg.Go(func() {
					for i := r; !stop.Load(); i++ {
						k := keys[i%len(keys)]
						c.Get(ctx, k.x)
						c.Get(ctx, k.y)
					}
				})
			}
			for w := range keys {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						for _, key := range []string{keys[w].x, keys[w].y} {
							if err := c.Set(ctx, key, i, 0).Err(); err != nil {
								t.Error(err)
								return
							}
							for range 2 {
								got, err := c.Get(ctx, key).Int()
								reads.Add(1)
								if err != nil || got != i {
									stale.Add(1)
									first.Do(func() { t.Errorf("writer %d: GET %s after SET %d = %d, %v", w, key, i, got, err) })
								}
							}
						}
					}
				})
			}
			for i := range 100 {
				shards := fixtures.ShardsAt(addrsOf(procs)...)
				for j := range shards {
					shards[j].Options = &goredis.Options{ReadTimeout: time.Duration(1+i%2) * time.Second}
				}
				if err := c.SetShards(shards); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			if n := stale.Load(); n != 0 {
				t.Errorf("%d of %d reads after the writer's own acknowledged SET returned another value", n, reads.Load())
			}
		})
	}
}
