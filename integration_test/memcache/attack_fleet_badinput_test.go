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
