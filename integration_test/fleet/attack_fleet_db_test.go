package fleet_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetMoveToOtherDB: a fleet resharding that moves shard s1 to
// DB 1 of its server (same name) must keep every key, and leave no copy on
// DB 0.
func TestAttackFleetMoveToOtherDB(t *testing.T) {
	const n = 200
	list, c, store := fixtures.AttackFleetJoined(t, 2, "db:", n)
	target := append([]fleet.Shard(nil), list...)
	target[1].DB = 1
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := fixtures.AttackLost(c, "db:", n)
	raw := func(db int) int64 {
		r := goredis.NewClient(&goredis.Options{Addr: list[1].Addr, DB: db})
		defer r.Close()
		keys, _ := r.Keys(ctx, "db:*").Result()
		return int64(len(keys))
	}
	if lost != 0 || raw(0) != 0 {
		t.Fatalf("%d of %d keys lost after moving s1 to DB 1; %d user keys left on s1's DB 0, %d on DB 1", lost, n, raw(0), raw(1))
	}
}
