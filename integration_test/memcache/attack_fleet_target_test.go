// Found by a reviewer's attack: a change to a target that cannot be
// reached, or is no memcached, is refused before anything is stored.

package memcache_test

import (
	"context"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetBadTargetStuck: a memcache fleet resharded to a target
// with a typo (the new shard's address has no server). Reshard fails, as
// it must; but the fleet must not be left where its keys that would move
// cannot be used: either the keys are served, or the change can be called
// off by resharding back to the current list.
func TestAttackFleetBadTargetStuck(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	dead := fixtures.StartRealMemcached(t)
	deadAddr := dead.Addr
	dead.Stop()
	servers = append(servers, &fixtures.MCServer{Addr: deadAddr, Stop: func() {}})
	opts, a := fixtures.NamedMemcache(t, servers, 2)
	store := &fleet.MemStore{}
	m, err := a.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	keys := fixtures.MCKeys("typo", 200)
	fixtures.SetAll(t, a, keys)
	list := []fleet.Shard{{Name: opts[0].Name, Addr: opts[0].Addr}, {Name: opts[1].Name, Addr: opts[1].Addr}}
	target := append(list[:2:2], fleet.Shard{Name: opts[2].Name, Addr: deadAddr})
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := fleet.Reshard(rctx, store, a.FleetBackend(), target, fleet.DriverOptions{})
	t.Logf("Reshard to a target with a dead shard: %v at %s (epoch %d)", err, st.Step, st.Epoch)
	_, back := fleet.Reshard(ctx, store, a.FleetBackend(), list, fleet.DriverOptions{})
	t.Logf("Reshard back to the current list: %v", back)
	moving := 0
	for i, k := range keys {
		get := a.Get
		if i > 0 { // the first waits FleetWait; the others a bound of their own
			get = func(k string) (*gomemcache.Item, error) {
				gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				return a.GetContext(gctx, k)
			}
		}
		if _, err := get(k); err != nil {
			moving++
			if moving == 1 {
				t.Errorf("Get(%s) after the failed change: %v", k, err)
			}
		}
	}
	if moving > 0 {
		t.Errorf("%d of %d keys cannot be read after the failed change", moving, len(keys))
	}
}

// TestAttackFleetMemcacheIntoCluster: a memcache fleet "resharded" to one
// shard marked as a Redis Cluster (fleet.Shard.Cluster, a memcached's
// address: a wrong list) must be refused; the fleet must stay reshardable.
func TestAttackFleetMemcacheIntoCluster(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	opts, c := fixtures.NamedMemcache(t, servers, 1)
	store := &fleet.MemStore{}
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, err := fleet.Reshard(ctx, store, c.FleetBackend(), []fleet.Shard{{Name: opts[1].Name, Addr: opts[1].Addr, Cluster: true}}, fleet.DriverOptions{})
	if err == nil {
		t.Errorf("a memcache fleet into a Redis Cluster shard: %+v, nil error", st)
	}
	two := []fleet.Shard{{Name: opts[0].Name, Addr: opts[0].Addr}, {Name: opts[1].Name, Addr: opts[1].Addr}}
	if st, err := fleet.Reshard(ctx, store, c.FleetBackend(), two, fleet.DriverOptions{}); err != nil {
		t.Errorf("the fleet resharded to two servers after that: %+v, %v", st, err)
	}
}
