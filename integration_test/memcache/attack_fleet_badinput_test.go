package memcache_test

import (
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetTinyLeaseTTL: a memcache client joins a fleet (MemStore)
// with a member lease too short to renew (1 ns, 2 ns): JoinFleet returns
// an error naming the TTL, and the process does not crash (the renewal
// ticker of ttl/3 = 0 panicked in a goroutine of its own). The client
// then serves as before.
func TestAttackFleetTinyLeaseTTL(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t)}
	_, c := fixtures.NamedMemcache(t, servers, 1)
	for _, ttl := range []time.Duration{time.Nanosecond, 2 * time.Nanosecond} {
		m, err := c.JoinFleet(ctx, &fleet.MemStore{}, fleet.MemberOptions{LeaseTTL: ttl})
		if err == nil {
			m.Close()
			t.Fatalf("JoinFleet with LeaseTTL %v: nil error", ttl)
		}
		if !strings.Contains(err.Error(), ttl.String()) {
			t.Errorf("JoinFleet with LeaseTTL %v: %v; want an error naming %v", ttl, err, ttl)
		}
	}
	if err := c.Set(&gomemcache.Item{Key: "after", Value: []byte("v")}); err != nil {
		t.Errorf("Set after the refused joins: %v", err)
	}
}

// TestAttackFleetNegativeDurations: a negative member lease, retry
// interval or driver lock TTL was taken silently as the default; each is
// now an error naming the option and its value, and nothing is joined or
// stored.
func TestAttackFleetNegativeDurations(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t)}
	_, c := fixtures.NamedMemcache(t, servers, 1)
	store := &fleet.MemStore{}
	for name, opt := range map[string]fleet.MemberOptions{
		"MemberOptions.LeaseTTL -1s":       {LeaseTTL: -time.Second},
		"MemberOptions.RetryInterval -1ms": {RetryInterval: -time.Millisecond},
	} {
		if m, err := c.JoinFleet(ctx, store, opt); err == nil || !strings.Contains(err.Error(), name) {
			if m != nil {
				m.Close()
			}
			t.Errorf("JoinFleet with %s: %v; want an error naming it", name, err)
		}
	}
	if _, rev, err := store.Load(ctx); err != nil || rev != 0 {
		t.Errorf("the store after the refused joins: revision %d, %v; want empty", rev, err)
	}
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, _, _ := store.Load(ctx)
	_, err = fleet.Reshard(ctx, store, c.FleetBackend(), st.Shards, fleet.DriverOptions{LockTTL: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "DriverOptions.LockTTL -1s") {
		t.Errorf("Reshard with LockTTL -1s: %v; want an error naming it", err)
	}
}
