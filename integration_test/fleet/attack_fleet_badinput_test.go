package fleet_test

import (
	"testing"

	"github.com/shardedcache/shardedcache/fleet"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetBadInput: JoinFleet with a nil store, and with an invalid
// initial list, returns an error (no panic).
func TestAttackFleetBadInput(t *testing.T) {
	list, c := fixtures.AttackFleetSetup(t, 1)
	if _, err := c.JoinFleet(ctx, nil, fleet.MemberOptions{}); err == nil {
		t.Error("JoinFleet(nil store) = nil error")
	} else {
		t.Log(err)
	}
	bad := []fleet.Shard{{Name: "", Addr: list[0].Addr}}
	if _, err := c.JoinFleet(ctx, &fleet.MemStore{}, fleet.MemberOptions{Initial: bad}); err == nil {
		t.Error("JoinFleet(unnamed shard) = nil error")
	} else {
		t.Log(err)
	}
	neg := []fleet.Shard{{Name: "a", Addr: list[0].Addr, Weight: -1}}
	if _, err := c.JoinFleet(ctx, &fleet.MemStore{}, fleet.MemberOptions{Initial: neg}); err == nil {
		t.Error("JoinFleet(weight -1) = nil error")
	} else {
		t.Log(err)
	}
	if err := c.Set(ctx, "after", "v", 0).Err(); err != nil {
		t.Errorf("the client after failed joins: %v", err)
	}
}
