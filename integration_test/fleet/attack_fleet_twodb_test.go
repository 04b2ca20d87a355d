package fleet_test

import (
	"fmt"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetTwoDBsOneServer: shards on DB 0 and DB 1 of one server,
// 2 -> 3 (a third on DB 2 of the same server). Every key must survive,
// with no copy left on a DB that does not own it.
func TestAttackFleetTwoDBsOneServer(t *testing.T) {
	p := fixtures.StartRedisProc(t, fixtures.RealRedisBin(t), "")
	list := []fleet.Shard{{Name: "a", Addr: p.Addr}, {Name: "b", Addr: p.Addr, DB: 1}, {Name: "c", Addr: p.Addr, DB: 2}}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{{Name: "a", Addr: p.Addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := &fleet.MemStore{}
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:2]})
	if err != nil {
		t.Fatalf("JoinFleet with two DBs of one server: %v", err)
	}
	defer m.Close()
	for i := range 200 {
		if err := c.Set(ctx, fmt.Sprint("td:", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), list, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i := range 200 {
		if v, err := c.Get(ctx, fmt.Sprint("td:", i)).Result(); err != nil || v != fmt.Sprint(i) {
			lost++
		}
	}
	n, _ := c.DBSize(ctx).Result()
	if lost != 0 {
		t.Fatalf("%d of 200 keys lost; DBSIZE %d", lost, n)
	}
}
