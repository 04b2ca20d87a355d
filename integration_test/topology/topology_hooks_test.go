package topology_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Issue 11.3 and 19 (OnNewNode): AddHook and OnNewNode reach every shard
// client the sharded client ever uses: the shards at construction, a shard
// SetShards adds, a shard moved to a new address under its name, a shard
// whose options change, the shards of a resharding window (in it and after
// it) and a Sentinel shard. After each step a SET on every shard's keys is
// seen exactly once, and every client in use was handed to OnNewNode
// exactly once.
func TestTopologyHooksSeeEveryShardClient(t *testing.T) {
	procs := fixtures.SharedRedis(t, 4)
	bin := fixtures.RealRedisBin(t)
	master := fixtures.StartRedisProc(t, bin, "")
	sentinel := fixtures.StartRedisProc(t, bin, "port {port}\nsentinel monitor topo 127.0.0.1 "+
		strings.TrimPrefix(master.Addr, "127.0.0.1:")+" 1\n", "--sentinel")

	a, b, cc := fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0), fixtures.TopoShard("c", procs[2].Addr, 0)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	h := &fixtures.SetCounter{Sets: map[string]int{}}
	c.AddHook(h)
	var (
		mu    sync.Mutex
		given = map[*goredis.Client]int{}
	)
	c.OnNewNode(func(rdb *goredis.Client) {
		mu.Lock()
		given[rdb]++
		mu.Unlock()
	})

	check := func(step string, shards int) {
		t.Helper()
		if n := len(c.Shards()); n != shards {
			t.Fatalf("%s: %d shards, want %d", step, n, shards)
		}
		ks := make([]string, 300)
		for i := range ks {
			ks[i] = fmt.Sprintf("%s:%d", step, i)
		}
		if owners := fixtures.ByOwner(c, ks); len(owners) != shards {
			t.Fatalf("%s: the keys are on %d shards of %d", step, len(owners), shards)
		}
		for _, k := range ks {
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatalf("%s: SET %s: %v", step, k, err)
			}
		}
		seen := h.Take()
		for _, k := range ks {
			if seen[k] != 1 {
				t.Fatalf("%s: the hook saw SET %s %d times, want 1 (shard %d)", step, k, seen[k], c.GetShardInfo(k).Index)
			}
		}
		if len(seen) != len(ks) {
			t.Fatalf("%s: the hook saw %d SETs, want %d", step, len(seen), len(ks))
		}
		mu.Lock()
		defer mu.Unlock()
		for i, sh := range c.Shards() {
			if given[sh.Client] != 1 {
				t.Fatalf("%s: shard %d (%s)'s client was handed to OnNewNode %d times, want 1", step, i, sh.Name, given[sh.Client])
			}
		}
		for rdb, n := range given {
			if n != 1 {
				t.Fatalf("%s: client %s handed to OnNewNode %d times", step, rdb.Options().Addr, n)
			}
		}
	}
	check("start", 2)

	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc}); err != nil {
		t.Fatal(err)
	}
	check("added", 3)

	b = fixtures.TopoShard("b", procs[3].Addr, 0)
	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc}); err != nil {
		t.Fatal(err)
	}
	check("moved", 3)

	b.Options.PoolSize = 5
	old := c.Shards()[1].Client
	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc}); err != nil {
		t.Fatal(err)
	}
	if c.Shards()[1].Client == old || c.ShardOptions()[1].PoolSize != 5 {
		t.Fatalf("b's PoolSize change kept its client (PoolSize %d)", c.ShardOptions()[1].PoolSize)
	}
	check("new options", 3)

	d := fixtures.TopoShard("d", procs[2].Addr, 1) // c's server, another DB
	if err := c.BeginResharding([]shardedredis.ShardOptions{a, b, cc, d}); err != nil {
		t.Fatal(err)
	}
	check("window", 4)
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h.Take() // the migration's moves are not SETs; drop nothing else
	check("resharded", 4)

	fo := shardedredis.ShardOptions{Name: "fo", Failover: &goredis.FailoverOptions{
		MasterName: "topo", SentinelAddrs: []string{sentinel.Addr},
		DialTimeout: fixtures.RealTimeout, ReadTimeout: fixtures.RealTimeout, WriteTimeout: fixtures.RealTimeout, MaxRetries: -1, PoolSize: 4,
	}}
	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc, d, fo}); err != nil {
		t.Fatal(err)
	}
	if addr := c.Shards()[4].Addr; addr != "sentinel:topo" {
		t.Fatalf("the Sentinel shard's address is %q", addr)
	}
	check("sentinel", 5)
}
