package fleet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetRespelledAddress: a fleet resharding whose target writes
// one shard's address another way (127.0.0.1:P -> localhost:P, the same
// server; the single-process window keeps its keys, see
// reshard/reshard_respelled_test.go) must lose no key.
func TestAttackFleetRespelledAddress(t *testing.T) {
	const n = 200
	list, c, store := fixtures.AttackFleetJoined(t, 2, "rs:", n)
	target := append([]fleet.Shard(nil), list...)
	target[0].Addr = strings.Replace(target[0].Addr, "127.0.0.1", "localhost", 1)
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := fixtures.AttackLost(c, "rs:", n)
	if lost != 0 {
		t.Fatalf("%d of %d keys lost after a resharding that only respelled shard %q's address", lost, n, list[0].Name)
	}
}

type attackNoDrop struct{ fleet.Backend }

func (attackNoDrop) DropStale(context.Context, fleet.State) error { return nil }

// TestAttackFleetRespelledAddressNoDrop isolates the migration: the same
// change with the removal of stale copies skipped.
func TestAttackFleetRespelledAddressNoDrop(t *testing.T) {
	const n = 200
	list, c, store := fixtures.AttackFleetJoined(t, 2, "rs:", n)
	target := append([]fleet.Shard(nil), list...)
	target[0].Addr = strings.Replace(target[0].Addr, "127.0.0.1", "localhost", 1)
	if _, err := fleet.Reshard(ctx, store, attackNoDrop{c.FleetBackend(shardedredis.MigrateOptions{})}, target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := fixtures.AttackLost(c, "rs:", n)
	if lost != 0 {
		t.Fatalf("%d of %d keys lost (stale-copy removal skipped)", lost, n)
	}
}
