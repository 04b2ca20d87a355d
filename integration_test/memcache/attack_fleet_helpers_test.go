package memcache_test

import (
	"context"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
)

// heldMigration is a fleet backend whose Migrate waits for release: the
// fleet stays in its Moving step while a test works on moving keys.
type heldMigration struct {
	fleet.Unfenced
	release chan struct{}
}

func (h heldMigration) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	<-h.release
	return h.Unfenced.Migrate(ctx, st, progress)
}

// mcFleetInMoving starts four real memcached servers, joins two clients
// over the first three ("mc-0".."mc-2") to a fleet, and drives a resharding
// that adds "mc-3" until both members applied Moving. It returns the two
// clients, the keys of prefix (n of them) that move to mc-3, the servers,
// and finish, which lets the migration run and waits for Stable.
func mcFleetInMoving(t *testing.T, prefix string, n int) (a, b *shardedmc.ShardedClient, moving []string, servers []*fixtures.MCServer, finish func()) {
	t.Helper()
	servers = make([]*fixtures.MCServer, 4)
	for i := range servers {
		servers[i] = fixtures.StartRealMemcached(t)
	}
	opts, a := fixtures.NamedMemcache(t, servers, 3)
	_, b = fixtures.NamedMemcache(t, servers, 3)
	_, driver := fixtures.NamedMemcache(t, servers, 4)
	moving = fixtures.ToNewShard(t, opts, fixtures.MCKeys(prefix, n))
	store := &fleet.MemStore{}
	var members []*fleet.Member
	for _, c := range []*shardedmc.ShardedClient{a, b} {
		m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		members = append(members, m)
	}
	target := make([]fleet.Shard, 4)
	for i, o := range opts {
		target[i] = fleet.Shard{Name: o.Name, Addr: o.Addr}
	}
	held := heldMigration{driver.FleetBackend().(fleet.Unfenced), make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := fleet.Reshard(ctx, store, held, target, fleet.DriverOptions{})
		done <- err
	}()
	for _, m := range members {
		if err := m.WaitEpoch(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	finish = func() {
		close(held.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			if err := m.WaitEpoch(ctx, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	return a, b, moving, servers, finish
}
