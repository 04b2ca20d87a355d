//go:build attackfindings

// Failing attacks (findings), left out of the default build so that the
// tree stays green: go test -tags attackfindings -run "TestAttackFleetTombstone|TestAttackFleetBadTargetStuck" ./integration_test/memcache/

package memcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
)

// TestAttackFleetTombstoneAppend: in a memcache fleet's Moving step, a key
// is set, deleted (a tombstone on its new owner), then Appended and
// Prepended to, as a caller does who expects ErrNotStored for a key that
// holds nothing. Every later Get, in both processes, during and after the
// change, must be a miss: the key was deleted and nothing set it since.
func TestAttackFleetTombstoneAppend(t *testing.T) {
	a, b, moving, _, finish := mcFleetInMoving(t, "tomb-append", 40)
	for i, op := range []func(*gomemcache.Item) error{a.Append, a.Prepend} {
		k := moving[i]
		if err := a.Set(&gomemcache.Item{Key: k, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete(k); err != nil {
			t.Fatal(err)
		}
		err := op(&gomemcache.Item{Key: k, Value: []byte("x")})
		t.Logf("op %d on the deleted %s: %v", i, k, err)
		for _, c := range []*shardedmc.ShardedClient{a, b} {
			if it, err := c.Get(k); !errors.Is(err, gomemcache.ErrCacheMiss) {
				t.Errorf("Moving: Get(%s) after Delete and op %d = %q (flags %#x), %v; want ErrCacheMiss", k, i, it.Value, it.Flags, err)
			}
		}
	}
	finish()
	for i := range 2 {
		if it, err := b.Get(moving[i]); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("Stable: Get(%s) = %q, %v; want ErrCacheMiss", moving[i], it.Value, err)
		}
	}
}

// TestAttackFleetTombstoneTouch: in Moving, a key is set and deleted, then
// touched with expiration 0 (Touch, GetAndTouch: a caller keeping a key it
// believes may exist). The tombstone must still expire within TombstoneTTL
// seconds: its new owner reports its TTL, -1 would be a tombstone for ever
// (an Add of the key then fails with ErrNotStored for ever, a stray item).
func TestAttackFleetTombstoneTouch(t *testing.T) {
	a, _, moving, servers, finish := mcFleetInMoving(t, "tomb-touch", 40)
	touch := []func(string) error{
		func(k string) error { return a.Touch(k, 0) },
		func(k string) error { _, err := a.GetAndTouch(k, 0); return err },
	}
	for i, op := range touch {
		k := moving[i]
		if err := a.Set(&gomemcache.Item{Key: k, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete(k); err != nil {
			t.Fatal(err)
		}
		t.Logf("touch %d of the deleted %s: %v", i, k, op(k))
	}
	finish()
	conn, err := mcmeta.DialTCP(ctx, servers[3].Addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	items, err := conn.Get(ctx, moving[:2])
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.TTL < 0 || it.TTL > shardedmc.TombstoneTTL {
			t.Errorf("after the change, %s on its owner: flags %#x value %q TTL %d s; want a tombstone living at most %d s", it.Key, it.Flags, it.Value, it.TTL, shardedmc.TombstoneTTL)
		}
	}
	if err := a.Add(&gomemcache.Item{Key: moving[0], Value: []byte("new")}); err != nil {
		t.Logf("Add(%s) after the change: %v", moving[0], err)
	}
}

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

// TestAttackFleetJoinTwice: one client joined to a fleet twice is two
// members sharing one lease gate: closing one takes the gate's lease away,
// and the client then refuses nothing while the other member's lease may
// run out. The second JoinFleet must fail.
func TestAttackFleetJoinTwice(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t)}
	_, c := fixtures.NamedMemcache(t, servers, 1)
	store := &fleet.MemStore{}
	m1, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	m2, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err == nil {
		m2.Close()
		t.Error("JoinFleet of a client already in a fleet: nil error")
	}
}
