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

// TestAttackFleetDuplicateAddressTarget: a target list that names one
// server twice (a typo: s2 given s0's address). Expected: Reshard refuses
// it before storing anything. Observed: the check comes after the fence,
// and the fleet is left in Moving with its sources fenced.
func TestAttackFleetDuplicateAddressTarget(t *testing.T) {
	list, c, store := fixtures.AttackFleetJoined(t, 2, "du:", 100)
	bad := append(append([]fleet.Shard(nil), list...), fleet.Shard{Name: "s2", Addr: list[0].Addr})
	_, rerr := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), bad, fleet.DriverOptions{})
	st, _, _ := store.Load(ctx)
	failed := 0
	var first error
	for i := range 100 {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := c.Get(cctx, fmt.Sprint("du:", i)).Err()
		cancel()
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if st.Step != fleet.Stable || failed > 0 {
		t.Fatalf("Reshard(%v) = %v; the store is left at %s (epoch %d); %d of 100 GETs fail, first: %v", bad, rerr, st.Step, st.Epoch, failed, first)
	}
}
