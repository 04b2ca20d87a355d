package reshard_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// realReshard starts four real redis-servers and a client over the first
// three, holding n keys of several types (strings with and without TTL,
// hashes, lists).
func realReshard(tb testing.TB, n int) (*shardedredis.ShardedClient, []shardedredis.ShardOptions, []*goredis.Client) {
	tb.Helper()
	bin := fixtures.RealRedisBin(tb)
	var shards []shardedredis.ShardOptions
	var direct []*goredis.Client
	for i := range 4 {
		p := fixtures.StartRedisProc(tb, bin, "")
		shards = append(shards, shardedredis.ShardOptions{Name: fmt.Sprintf("redis-%c", 'a'+i), Addr: p.Addr})
		d := goredis.NewClient(&goredis.Options{Addr: p.Addr})
		tb.Cleanup(func() { d.Close() })
		direct = append(direct, d)
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3]})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	fixtures.SeedTypes(tb, c, n)
	return c, shards, direct
}

// Migration on real redis-servers: every key of every type lands on its new
// owner with its value and TTL, under concurrent writers; a second run moves
// nothing.
func TestRealRedisReshardMigration(t *testing.T) {
	const n = 10000
	c, shards, direct := realReshard(t, n)
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	last := make([]atomic.Int64, n) // the last INCRBY total written to the string keys
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Go(func() {
		for i := 1; ; i += 4 { // the keys without TTL: k:1, k:5, ...
			select {
			case <-stop:
				return
			default:
			}
			i %= n
			v, err := c.IncrBy(ctx, "k:"+strconv.Itoa(i), 1000000).Result()
			if err != nil {
				t.Error(err)
				return
			}
			last[i].Store(v)
			writes.Add(1)
		}
	})
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	var moved int64
	for _, p := range m.Progress() {
		moved += p.Moved
	}
	t.Logf("moved %d keys in %v (%.0f keys/s) with %d concurrent writes", moved, elapsed, float64(moved)/elapsed.Seconds(), writes.Load())
	for i := range n {
		k := "k:" + strconv.Itoa(i)
		owner := c.GetShardInfo(k).Index
		for j, d := range direct {
			if got := d.Exists(ctx, k).Val(); got != 0 != (j == owner) {
				t.Fatalf("%s: on shard %d = %d, owner %d", k, j, got, owner)
			}
		}
		d := direct[owner]
		switch i % 4 {
		case 0:
			if v, _ := d.Get(ctx, k).Int(); v != i || d.TTL(ctx, k).Val() <= 0 {
				t.Fatalf("%s = %d, TTL %v", k, v, d.TTL(ctx, k).Val())
			}
		case 1:
			want := int64(i)
			if w := last[i].Load(); w != 0 {
				want = w
			}
			if v, _ := d.Get(ctx, k).Int64(); v != want || d.TTL(ctx, k).Val() != -1 {
				t.Fatalf("%s = %d, want its last write %d", k, v, want)
			}
		case 2:
			if h := d.HGetAll(ctx, k).Val(); h["f"] != strconv.Itoa(i) || h["g"] != strconv.Itoa(i+1) {
				t.Fatalf("%s = %v", k, h)
			}
		default:
			if l := d.LRange(ctx, k, 0, -1).Val(); len(l) != 3 || l[2] != strconv.Itoa(i+2) {
				t.Fatalf("%s = %v", k, l)
			}
		}
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	m2, _ := c.NewMigration(shardedredis.MigrateOptions{})
	if err := m2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range m2.Progress() {
		if p.Moved != 0 {
			t.Fatalf("second run moved %d keys of %s", p.Moved, p.Shard)
		}
	}
}

// BenchmarkMigrateRealRedis moves what a fourth real redis-server takes
// over of 20,000 keys (strings, hashes, lists); keys/s is the rate.
func BenchmarkMigrateRealRedis(b *testing.B) {
	var moved int64
	for b.Loop() {
		b.StopTimer()
		c, shards, _ := realReshard(b, 20000)
		if err := c.BeginResharding(shards); err != nil {
			b.Fatal(err)
		}
		m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 500})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := m.Run(ctx); err != nil {
			b.Fatal(err)
		}
		for _, p := range m.Progress() {
			moved += p.Moved
		}
	}
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "keys/s")
}
