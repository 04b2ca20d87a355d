package speed_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// BenchmarkFleetCommand measures what a fleet costs a GET, on real
// redis-servers, one goroutine: a client outside any fleet; a member of a
// fleet outside a change (the same path: no round trip or store call is
// added); and a member in the Moving step, on a key that does not move and
// on a key that has moved (known gone from its old owner: no round trip to
// it).
func BenchmarkFleetCommand(b *testing.B) {
	shards, list := fixtures.FleetServers(b, 4)
	newClient := func() *shardedredis.ShardedClient {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3]})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	plain := newClient()
	// 2,000 keys, and one that stays and one that moves in the 3 -> 4 change.
	var stays, moves string
	next, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	defer next.Close()
	for i := range 2000 {
		k := fmt.Sprint("fb:", i)
		if err := plain.Set(ctx, k, "v", 0).Err(); err != nil {
			b.Fatal(err)
		}
		if moved := next.GetShardInfo(k).Index == 3; moved && moves == "" {
			moves = k
		} else if !moved && stays == "" {
			stays = k
		}
	}
	get := func(b *testing.B, c *shardedredis.ShardedClient, k string) {
		for b.Loop() {
			if err := c.Get(ctx, k).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("outside-fleet", func(b *testing.B) { get(b, plain, stays) })

	store := &fleet.MemStore{}
	member := newClient()
	m, err := member.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:3]})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.Run("member-stable", func(b *testing.B) { get(b, member, stays) })

	// Drive the change to Moving only: a backend that stops before the
	// migration.
	driver := newClient()
	backend := stopAtMigrate{driver.FleetBackend(shardedredis.MigrateOptions{})}
	if _, err := fleet.Reshard(ctx, store, backend, list, fleet.DriverOptions{}); err == nil {
		b.Fatal("the change ended; want it held in Moving")
	}
	st, _, _ := store.Load(ctx)
	if err := m.WaitEpoch(ctx, st.Epoch); err != nil {
		b.Fatal(err)
	}
	b.Run("member-moving-key-stays", func(b *testing.B) { get(b, member, stays) })
	b.Run("member-moving-key-moved", func(b *testing.B) { get(b, member, moves) })
}

// stopAtMigrate is a fleet backend that fails Migrate, holding the change
// in its Moving step.
type stopAtMigrate struct{ fleet.Backend }

func (stopAtMigrate) Migrate(context.Context, fleet.State, func(fleet.Progress)) error {
	return fmt.Errorf("held in Moving by the benchmark")
}
