package fleet_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestAttackFleetClusterBadLists: fleet.Reshard of a Redis fleet to lists
// with a cluster shard that no move can reach: a cluster beside a server,
// two clusters, a cluster with DB 1, an empty seed. Each is refused with
// fleet.ErrInvalidState naming the shard, before any step is stored, and
// the fleet keeps serving.
func TestAttackFleetClusterBadLists(t *testing.T) {
	list, c, store := fixtures.AttackFleetJoined(t, 2, "bl:", 20)
	seeds := strings.Join(fixtures.SharedCluster(t).Addrs(), ",")
	bad := map[string][]fleet.Shard{
		"beside a server": {list[0], {Name: "cl", Addr: seeds, Cluster: true}},
		"two clusters":    {{Name: "cl", Addr: seeds, Cluster: true}, {Name: "cl2", Addr: seeds, Cluster: true}},
		"DB 1":            {{Name: "cl", Addr: seeds, DB: 1, Cluster: true}},
		"an empty seed":   {{Name: "cl", Addr: seeds + ",", Cluster: true}},
	}
	backend := c.FleetBackend(shardedredis.MigrateOptions{})
	for what, target := range bad {
		_, err := fleet.Reshard(ctx, store, backend, target, fleet.DriverOptions{})
		if !errors.Is(err, fleet.ErrInvalidState) || !strings.Contains(err.Error(), `"cl`) {
			t.Errorf("%s: %v; want ErrInvalidState naming the shard", what, err)
		}
	}
	st, _, err := store.Load(ctx)
	if err != nil || st.Epoch != 1 || st.Step != fleet.Stable || !slices.Equal(st.Shards, list) {
		t.Errorf("the fleet after the refused lists: %+v, %v; want epoch 1, Stable, the first list", st, err)
	}
	if lost := fixtures.AttackLost(c, "bl:", 20); lost != 0 {
		t.Errorf("%d keys lost", lost)
	}
}
