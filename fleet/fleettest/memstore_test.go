package fleettest_test

import (
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/fleettest"
)

func TestMemStore(t *testing.T) {
	fleettest.TestStore(t, func(*testing.T) fleet.Store { return &fleet.MemStore{} })
}
