package reshard_test

import (
	"net"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// A shard whose address is written another way ("127.0.0.1:P" becomes
// "localhost:P") is the same server and DB, so the same shard: a window to
// the respelled list moves none of its keys (it took them for keys leaving
// one shard for another, and BeginResharding's sweep deleted them as stale
// copies on their own server), and the migration after it neither.
func TestReshardRespelledAddressIsTheSameShard(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	_, port, _ := net.SplitHostPort(procs[0].Addr)
	list := []shardedredis.ShardOptions{fixtures.TopoShard("a", "127.0.0.1:"+port, 0), fixtures.TopoShard("b", procs[1].Addr, 0)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: list})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := fixtures.Keys(200)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	direct := goredis.NewClient(&goredis.Options{Addr: procs[0].Addr})
	defer direct.Close()
	onA := fixtures.UserDBSize(direct).Val()
	respelled := []shardedredis.ShardOptions{fixtures.TopoShard("a", "localhost:"+port, 0), fixtures.TopoShard("b", procs[1].Addr, 0)}
	if plan, err := c.PlanResharding(respelled); err != nil || plan.Moved != 0 || len(plan.Moves) != 0 {
		t.Errorf("PlanResharding to the respelled list = %+v, %v; want nothing to move", plan, err)
	}
	if err := c.BeginResharding(respelled); err != nil {
		t.Fatal(err)
	}
	wantAll := func(when string) {
		t.Helper()
		for _, k := range ks {
			if got, err := c.Get(ctx, k).Result(); got != "v-"+k {
				t.Fatalf("%s: Get(%q) = %q, %v; want %q", when, k, got, err, "v-"+k)
			}
		}
		if n := fixtures.UserDBSize(direct).Val(); n != onA {
			t.Fatalf("%s: a's server holds %d keys, want %d", when, n, onA)
		}
	}
	wantAll("in the window")
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var moved int64
	for _, p := range m.Progress() {
		moved += p.Moved
	}
	if moved != 0 {
		t.Errorf("the migration moved %d keys, want 0", moved)
	}
	if err := c.EndResharding(); err != nil {
		t.Fatal(err)
	}
	wantAll("after the window")
	if got := c.Shards()[0].Addr; got != "localhost:"+port {
		t.Errorf("shard a's address = %q, want the new spelling", got)
	}
}

// The same for memcache: a key of the respelled shard, used in the window,
// is not "moved" onto its own server (set there, then deleted as the old
// copy).
func TestMemcacheReshardRespelledAddressIsTheSameShard(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	_, port, _ := net.SplitHostPort(servers[0].Addr)
	list := []shardedmc.ShardOptions{{Name: "a", Addr: "127.0.0.1:" + port}, {Name: "b", Addr: servers[1].Addr}}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: list})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := fixtures.MCKeys("respell:", 200)
	for _, k := range ks {
		if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
			t.Fatal(err)
		}
	}
	respelled := []shardedmc.ShardOptions{{Name: "a", Addr: "localhost:" + port}, {Name: "b", Addr: servers[1].Addr}}
	if plan, err := c.PlanResharding(respelled); err != nil || plan.Moved != 0 || len(plan.Moves) != 0 {
		t.Errorf("PlanResharding to the respelled list = %+v, %v; want nothing to move", plan, err)
	}
	if err := c.BeginResharding(respelled, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if it, err := c.Get(k); err != nil || string(it.Value) != "v-"+k {
			t.Fatalf("Get(%q) in the window = %v, %v; want %q", k, it, err, "v-"+k)
		}
	}
	if st := c.ReshardStats(); st != (shardedmc.ReshardStats{}) {
		t.Errorf("ReshardStats = %+v, want nothing moved or deleted", st)
	}
}
