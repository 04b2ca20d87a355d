// Found by a reviewer's attack: a change to a target that cannot be
// reached is refused before anything is stored (fleet.TargetChecker).

package fleet_test

import (
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

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
