package fleet_test

import (
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetLateDropStale: driver D1 of change X (2 -> 3 shards) sends
// its removal of stale copies to the new shard s2; the EVAL is delayed in
// the network (D1 paused, its lease lost). D2 resumes X to its end, a write
// is acknowledged on s2, and D2 runs a later change Y (3 -> 4), which marks
// s2 moved for Y. Then D1's EVAL lands: its guard checks "moved == X" only,
// so it unlinks the key that s2 owns and holds with an acknowledged write.
// Expected (package fleet: "every server-side operation it may still have
// in flight is ... safe whenever it lands"): the write survives.
func TestAttackFleetLateDropStale(t *testing.T) {
	shards, list := fixtures.FleetServers(t, 4)
	probe := func(n int) *shardedredis.ShardedClient {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:n]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	p3, p4 := probe(3), probe(4)
	// key: on s0/s1 under L, on s2 under T and under Y.
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("ld:", i); p3.GetShardInfo(k).Index == 2 && p4.GetShardInfo(k).Index == 2 {
			key = k
		}
	}
	// A stale copy on s2 (a leftover), so that D1 has something to unlink.
	raw2 := goredis.NewClient(&goredis.Options{Addr: list[2].Addr})
	defer raw2.Close()
	if err := raw2.Set(ctx, key, "leftover", 0).Err(); err != nil {
		t.Fatal(err)
	}

	store := &fleet.MemStore{}
	c := probe(2) // the member and driver D2
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	release, d1done := fixtures.AttackHeldDriver(t, shards, list, store, "UNLINK", "D1's removal of stale copies was not sent")
	backend := c.FleetBackend(shardedredis.MigrateOptions{})
	if _, err := fleet.Resume(ctx, store, backend, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Reshard(ctx, store, backend, list, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	close(release)
	t.Logf("D1 ended with: %v", <-d1done)
	got, err := c.Get(ctx, key).Result()
	if got != "v2" {
		t.Fatalf("Get(%q) = %q (%v) after D1's delayed removal landed; want the acknowledged v2", key, got, err)
	}
}
