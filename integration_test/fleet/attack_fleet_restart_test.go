package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetRestartWithNewStore: a process reshards 2 -> 3 through a
// MemStore ("for one process"), then restarts (a new MemStore, its list
// now the 3 shards). Its epoch starts at 1 again, but the old sources keep
// the fence (epoch 3) forever: every command to them is refused.
// Expected: a restarted process (or a fleet with a fresh etcd prefix)
// can use the servers.
func TestAttackFleetRestartWithNewStore(t *testing.T) {
	shards, list := fixtures.FleetServers(t, 3)
	run := func(n int) *shardedredis.ShardedClient {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:n]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := run(2)
	store := &fleet.MemStore{}
	m, err := first.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := first.Set(ctx, fmt.Sprint("rn:", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fleet.Reshard(ctx, store, first.FleetBackend(shardedredis.MigrateOptions{}), list, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	first.Close()

	// The restart: same servers, the final list in code, a fresh store.
	second := run(3)
	m2, err := second.JoinFleet(ctx, &fleet.MemStore{}, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	failed, firstErr := 0, error(nil)
	for i := range 100 {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		v, err := second.Get(cctx, fmt.Sprint("rn:", i)).Result()
		cancel()
		if err != nil || v != fmt.Sprint(i) {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if failed > 0 {
		t.Fatalf("after a restart with a fresh store, %d of 100 reads fail; first: %v", failed, firstErr)
	}
}
