//go:build attackfindings

// Failing attacks (findings), left out of the default build so that the
// tree stays green: go test -tags attackfindings -run "TestAttackFleetReservedPrefix|TestAttackFleetBadClusterTargetStuck" ./integration_test/fleet/

package fleet_test

import (
	"fmt"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestAttackFleetReservedPrefix: an application's keys that happen to
// start with the protocol's prefix ("__shardedcache:u0", ...) are
// accepted by SET; a fleet's resharding 3 -> 2 then must either keep
// them or have refused them: never lose an acknowledged write silently.
func TestAttackFleetReservedPrefix(t *testing.T) {
	list, c, store := fixtures.AttackFleetJoined(t, 3, "p:", 10)
	const n = 60
	key := func(i int) string { return fmt.Sprint("__shardedcache:u", i) }
	acked := map[int]bool{}
	for i := range n {
		acked[i] = c.Set(ctx, key(i), i, 0).Err() == nil
	}
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), list[:2], fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i := range n {
		if v, _ := c.Get(ctx, key(i)).Result(); acked[i] && v != fmt.Sprint(i) {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes of keys with the prefix __shardedcache: lost in the resharding", lost, n)
	}
}

// TestAttackFleetBadClusterTargetStuck: a Redis fleet "moved into a
// cluster" whose seed is a plain redis-server (a typo in the list). The
// move fails, as it must (DropStale: cluster support disabled); the fleet
// must then be able to call the change off (Reshard back to its list) or
// change to a corrected target, not stay in Preparing for ever.
func TestAttackFleetBadClusterTargetStuck(t *testing.T) {
	list, c, store := fixtures.AttackFleetJoined(t, 2, "bc:", 20)
	backend := c.FleetBackend(shardedredis.MigrateOptions{})
	st, err := fleet.Reshard(ctx, store, backend, []fleet.Shard{{Name: "cl", Addr: list[1].Addr, Cluster: true}}, fleet.DriverOptions{})
	t.Logf("into a plain server marked as a cluster: %v (%s, epoch %d)", err, st.Step, st.Epoch)
	if st, err := fleet.Reshard(ctx, store, backend, list, fleet.DriverOptions{}); err != nil || st.Step != fleet.Stable {
		t.Errorf("calling the change off: %+v, %v", st, err)
	}
}
