// Found by a reviewer's attack: a client joined to a fleet twice.

package memcache_test

import (
	"errors"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

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
	if m2, err := c.JoinFleet(ctx, store, fleet.MemberOptions{}); !errors.Is(err, fleet.ErrJoined) {
		if m2 != nil {
			m2.Close()
		}
		t.Errorf("JoinFleet of a client already in a fleet: %v; want fleet.ErrJoined", err)
	}
}
