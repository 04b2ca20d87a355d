package reshard_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// reshardFixture: three named miniredis shards holding n keys (every tenth
// with a TTL), and a fourth server to add.
func reshardFixture(t *testing.T, n int) ([]*miniredis.Miniredis, *shardedredis.ShardedClient, []shardedredis.ShardOptions) {
	t.Helper()
	var servers []*miniredis.Miniredis
	var opts []shardedredis.ShardOptions
	for i := range 4 {
		s := miniredis.RunT(t)
		servers = append(servers, s)
		opts = append(opts, shardedredis.ShardOptions{Name: fmt.Sprintf("redis-%c", 'a'+i), Addr: s.Addr()})
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts[:3]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			ttl := time.Duration(0)
			if i%10 == 0 {
				ttl = time.Hour
			}
			p.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("v%d", i), ttl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return servers, c, opts
}

// checkPlaced asserts that every key is on exactly its owner, with its value
// and TTL.
func checkPlaced(t *testing.T, servers []*miniredis.Miniredis, c *shardedredis.ShardedClient, n int, want func(i int) string) {
	t.Helper()
	total := 0
	for _, s := range servers {
		for _, k := range s.Keys() {
			if !strings.HasPrefix(k, "__shardedcache:") { // the resharding protocol's own (revoked moves)
				total++
			}
		}
	}
	if total != n {
		t.Fatalf("servers hold %d keys, want %d", total, n)
	}
	for i := range n {
		k := fmt.Sprintf("key:%d", i)
		owner := c.GetShardInfo(k).Index
		if !servers[owner].Exists(k) {
			t.Fatalf("%s is not on its owner %d (on %v)", k, owner, fixtures.Holders(servers, k))
		}
		if v, _ := servers[owner].Get(k); v != want(i) {
			t.Fatalf("%s = %q, want %q", k, v, want(i))
		}
		if ttl := servers[owner].TTL(k); (i%10 == 0) != (ttl > 0) {
			t.Fatalf("%s has TTL %v", k, ttl)
		}
	}
}

func TestRedisReshardMigrates(t *testing.T) {
	const n = 5000
	servers, c, opts := reshardFixture(t, n)
	plan, err := c.PlanResharding(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	// Reads in the window see every key, moved or not.
	for i := 0; i < n; i += 7 {
		k := fmt.Sprintf("key:%d", i)
		if v, err := c.Get(ctx, k).Result(); err != nil || v != fmt.Sprintf("v%d", i) {
			t.Fatalf("GET %s in the window = %q, %v", k, v, err)
		}
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var moved, scanned int64
	for _, p := range m.Progress() {
		moved += p.Moved
		scanned += p.Scanned
		if !p.Done || p.Failed != 0 {
			t.Fatalf("progress %+v", p)
		}
	}
	checkPlaced(t, servers, c, n, func(i int) string { return fmt.Sprintf("v%d", i) })
	onNew := int64(len(servers[3].Keys()))
	if frac := float64(onNew) / n; frac < plan.Moved-0.03 || frac > plan.Moved+0.03 {
		t.Fatalf("%d of %d keys moved, the plan says %.3f", onNew, n, plan.Moved)
	}
	t.Logf("plan %.4f, keys on the new shard %d, moved by the migration %d of %d scanned", plan.Moved, onNew, moved, scanned)

	// Idempotent: a second window and run move nothing.
	if err := c.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	m2, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range m2.Progress() {
		if p.Moved != 0 {
			t.Fatalf("second run moved %d keys from %s", p.Moved, p.Shard)
		}
	}
}

// A migration stopped halfway resumes from its cursors; writers during the
// migration never lose their last write.
func TestRedisReshardResumeAndConcurrentWriters(t *testing.T) {
	const n = 4000
	servers, c, opts := reshardFixture(t, n)
	if err := c.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	last := make([]atomic.Value, n) // the last value each key was given
	for i := range last {
		last[i].Store(fmt.Sprintf("v%d", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, misses atomic.Int64
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(n)
				k := fmt.Sprintf("key:%d", i)
				if rng.IntN(2) == 0 {
					v := fmt.Sprintf("w%d-%d", w, writes.Add(1))
					// Keep the key's TTL class (a TTL on every tenth key).
					ttl := time.Duration(0)
					if i%10 == 0 {
						ttl = time.Hour
					}
					// The writers own disjoint keys, so "last" is exact.
					if i%2 != w {
						continue
					}
					if err := c.Set(ctx, k, v, ttl).Err(); err != nil {
						t.Error(err)
						return
					}
					last[i].Store(v)
				} else if err := c.Get(ctx, k).Err(); err == goredis.Nil {
					misses.Add(1)
				}
			}
		})
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 20000})
	if err != nil {
		t.Fatal(err)
	}
	half, cancel := context.WithCancel(ctx)
	go func() {
		for {
			var scanned int64
			for _, p := range m.Progress() {
				scanned += p.Scanned
			}
			if scanned > n/2 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := m.Run(half); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	cp := m.Checkpoint()
	if notDone := slices.DeleteFunc(slices.Collect(maps.Values(cp.Shards)), func(s shardedredis.ShardCheckpoint) bool { return s.Done }); len(notDone) == 0 {
		t.Fatalf("checkpoint %+v: every shard done after a cancel", cp)
	}
	m2, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 20, Resume: cp})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if misses.Load() != 0 {
		t.Fatalf("readers missed %d existing keys", misses.Load())
	}
	checkPlaced(t, servers, c, n, func(i int) string { return last[i].Load().(string) })
	t.Logf("%d writes during the migration", writes.Load())
}
