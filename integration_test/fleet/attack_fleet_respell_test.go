package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// fleetServers starts n real redis-servers and returns them as the shards
// s0, s1, ... of a client's options and of a fleet's list.
func fleetServers(t testing.TB, n int) ([]shardedredis.ShardOptions, []fleet.Shard) {
	t.Helper()
	bin := realRedisBin(t)
	shards := make([]shardedredis.ShardOptions, n)
	list := make([]fleet.Shard, n)
	for i := range shards {
		p := startRedisProc(t, bin, "")
		shards[i] = shardedredis.ShardOptions{Name: fmt.Sprintf("s%d", i), Addr: p.addr}
		list[i] = fleet.Shard{Name: shards[i].Name, Addr: p.addr}
	}
	return shards, list
}

// attackFleetSetup starts n real redis-servers and a client of them with
// every one in the fleet list.
func attackFleetSetup(t *testing.T, n int) ([]fleet.Shard, *shardedredis.ShardedClient) {
	t.Helper()
	shards, list := fleetServers(t, n)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return list, c
}

// attackFleetJoined is attackFleetSetup with the client joined to a new
// fleet (a MemStore) and n keys prefix<i> = i written through it.
func attackFleetJoined(t *testing.T, servers int, prefix string, n int) ([]fleet.Shard, *shardedredis.ShardedClient, *fleet.MemStore) {
	t.Helper()
	list, c := attackFleetSetup(t, servers)
	store := &fleet.MemStore{}
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for i := range n {
		if err := c.Set(ctx, fmt.Sprint(prefix, i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return list, c, store
}

// attackLost counts the keys prefix<i> (i < n) that no longer read i.
func attackLost(c *shardedredis.ShardedClient, prefix string, n int) int {
	lost := 0
	for i := range n {
		if v, err := c.Get(ctx, fmt.Sprint(prefix, i)).Result(); err != nil || v != fmt.Sprint(i) {
			lost++
		}
	}
	return lost
}

// TestAttackFleetRespelledAddress: a fleet resharding whose target writes
// one shard's address another way (127.0.0.1:P -> localhost:P, the same
// server; the single-process window keeps its keys, see
// reshard_respelled_test.go) must lose no key.
func TestAttackFleetRespelledAddress(t *testing.T) {
	const n = 200
	list, c, store := attackFleetJoined(t, 2, "rs:", n)
	target := append([]fleet.Shard(nil), list...)
	target[0].Addr = strings.Replace(target[0].Addr, "127.0.0.1", "localhost", 1)
	if _, err := fleet.Reshard(ctx, store, c.FleetBackend(shardedredis.MigrateOptions{}), target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := attackLost(c, "rs:", n)
	if lost != 0 {
		t.Fatalf("%d of %d keys lost after a resharding that only respelled shard %q's address", lost, n, list[0].Name)
	}
}

type attackNoDrop struct{ fleet.Backend }

func (attackNoDrop) DropStale(context.Context, fleet.State) error { return nil }

// TestAttackFleetRespelledAddressNoDrop isolates the migration: the same
// change with the removal of stale copies skipped.
func TestAttackFleetRespelledAddressNoDrop(t *testing.T) {
	const n = 200
	list, c, store := attackFleetJoined(t, 2, "rs:", n)
	target := append([]fleet.Shard(nil), list...)
	target[0].Addr = strings.Replace(target[0].Addr, "127.0.0.1", "localhost", 1)
	if _, err := fleet.Reshard(ctx, store, attackNoDrop{c.FleetBackend(shardedredis.MigrateOptions{})}, target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := attackLost(c, "rs:", n)
	if lost != 0 {
		t.Fatalf("%d of %d keys lost (stale-copy removal skipped)", lost, n)
	}
}
