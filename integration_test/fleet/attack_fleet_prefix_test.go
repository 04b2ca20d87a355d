package fleet_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestAttackFleetReservedPrefix (found by a reviewer's attack): keys that
// start with the resharding protocol's prefix ("__shardedcache:u0", ...)
// are refused, sent nowhere, since no migration moves them: a resharding
// 3 -> 2 used to lose 18 of 60 such acknowledged writes.
func TestAttackFleetReservedPrefix(t *testing.T) {
	list, c, store := fixtures.AttackFleetJoined(t, 3, "p:", 10)
	const n = 60
	key := func(i int) string { return fmt.Sprint("__shardedcache:u", i) }
	for i := range n {
		var ue *shardedredis.UnsupportedError
		if err := c.Set(ctx, key(i), i, 0).Err(); !errors.As(err, &ue) {
			t.Fatalf("SET %s: %v; want an *UnsupportedError (a reserved prefix)", key(i), err)
		}
	}
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), list[:2], fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	if lost := fixtures.AttackLost(c, "p:", 10); lost != 0 {
		t.Errorf("%d of the 10 other keys lost in the resharding", lost)
	}
}

// TestAttackFleetJoinTwice (found by a reviewer's attack): a client that
// is a fleet's member already cannot join again (its two members would
// share its connections and fences).
func TestAttackFleetJoinTwice(t *testing.T) {
	_, c, store := fixtures.AttackFleetJoined(t, 2, "j:", 10)
	if m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{}); !errors.Is(err, fleet.ErrJoined) {
		if m != nil {
			m.Close()
		}
		t.Errorf("JoinFleet of a client already in a fleet: %v; want fleet.ErrJoined", err)
	}
	if lost := fixtures.AttackLost(c, "j:", 10); lost != 0 {
		t.Errorf("%d of 10 keys lost", lost)
	}
}
