package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// heldMigration is a driver's backend whose Migrate waits for release:
// the fleet stays in Moving, no key moved yet but by the members' commands.
type heldMigration struct {
	fleet.Backend
	release chan struct{}
}

func (h heldMigration) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	<-h.release
	return h.Backend.Migrate(ctx, st, progress)
}

// clusterKey is what a key of TestAttackFleetClusterMoving must hold.
type clusterKey struct {
	value  string // "" deleted
	expiry int64  // PEXPIRETIME; -1 none
}

// TestAttackFleetClusterMoving: two members (A, B) and a driver of one
// fleet, three real redis-servers moving into the shared Redis Cluster.
// While the fleet is in Moving and before the migration runs, A rewrites
// (SET: no TTL since), deletes, re-expires (PEXPIREAT) keys that have not
// moved yet, and writes hash-tagged pairs with MSET; B reads each at once.
// Every read of B returns A's write; after the change, every key on the
// cluster has its last value and exactly its absolute expiry, deleted
// keys are gone, and the old servers hold no key. An MSET of keys in
// several hash slots, in Moving, writes all of them or none.
func TestAttackFleetClusterMoving(t *testing.T) {
	cluster := fixtures.SharedCluster(t)
	shards, list := fixtures.FleetServers(t, 3)
	store := &fleet.MemStore{}
	clients, members := fixtures.FleetMembers(t, shards, list, store, 3) // A, B, the driver
	a, b := clients[0], clients[1]
	const n = 400
	base := time.Now().Add(time.Hour).UnixMilli()
	want := map[string]clusterKey{}
	for i := range n {
		k := fmt.Sprint("ck:", i)
		want[k] = clusterKey{fmt.Sprint("v0-", i), -1}
		if err := a.Set(ctx, k, want[k].value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			want[k] = clusterKey{want[k].value, base + int64(i)}
			if err := a.PExpireAt(ctx, k, time.UnixMilli(want[k].expiry)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for j := range 40 {
		for _, s := range []string{"a", "b"} {
			k := fmt.Sprintf("{tag:%d}:%s", j, s)
			want[k] = clusterKey{"t0", -1}
			if err := a.Set(ctx, k, "t0", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range []string{"x:1", "x:2", "x:3"} {
		want[k] = clusterKey{"x0", -1}
		if err := a.Set(ctx, k, "x0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	target := []fleet.Shard{{Name: "cluster", Addr: strings.Join(cluster.Addrs(), ","), Cluster: true}}
	held := heldMigration{clients[2].FleetBackend(shardedredis.MigrateOptions{BatchSize: 50}), make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := fleet.Reshard(ctx, store, held, target, fleet.DriverOptions{})
		done <- err
	}()
	for _, m := range members[:2] {
		if err := m.WaitEpoch(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	read := func(who string, c *shardedredis.ShardedClient, k string) {
		t.Helper()
		got, err := c.Get(ctx, k).Result()
		if err == goredis.Nil {
			got, err = "", nil
		}
		if err != nil || got != want[k].value {
			t.Errorf("%s: GET %s = %q, %v; want %q", who, k, got, err, want[k].value)
		}
	}
	for i := range n {
		k := fmt.Sprint("ck:", i)
		var err error
		switch i % 4 {
		case 0:
			want[k] = clusterKey{fmt.Sprint("v1-", i), -1}
			err = a.Set(ctx, k, want[k].value, 0).Err()
		case 1:
			want[k] = clusterKey{}
			err = a.Del(ctx, k).Err()
		case 2:
			want[k] = clusterKey{want[k].value, base + 100000 + int64(i)}
			err = a.PExpireAt(ctx, k, time.UnixMilli(want[k].expiry)).Err()
		}
		if err != nil {
			t.Fatalf("Moving: op %d on %s: %v", i%4, k, err)
		}
		read("B in Moving", b, k)
	}
	for j := range 40 {
		ka, kb := fmt.Sprintf("{tag:%d}:a", j), fmt.Sprintf("{tag:%d}:b", j)
		want[ka], want[kb] = clusterKey{"t1", -1}, clusterKey{"t1", -1}
		if err := a.MSet(ctx, ka, "t1", kb, "t1").Err(); err != nil {
			t.Fatalf("Moving: MSET %s %s: %v", ka, kb, err)
		}
		read("B in Moving", b, ka)
		read("B in Moving", b, kb)
	}
	// Keys in several hash slots: all written, or none (an error).
	err := a.MSet(ctx, "x:1", "x1", "x:2", "x1", "x:3", "x1").Err()
	t.Logf("Moving: MSET of keys in three slots: %v", err)
	if err == nil {
		for _, k := range []string{"x:1", "x:2", "x:3"} {
			want[k] = clusterKey{"x1", -1}
		}
	}
	for _, k := range []string{"x:1", "x:2", "x:3"} {
		read("B in Moving, after a cross-slot MSET", b, k)
	}
	close(held.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if err := m.WaitEpoch(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
	defer cc.Close()
	wrong := 0
	for k, w := range want {
		read("B after", b, k)
		read("A after", a, k)
		at, err := cc.Do(ctx, "pexpiretime", k).Int64()
		if w.value != "" && (err != nil || at != w.expiry) {
			wrong++
			if wrong < 10 {
				t.Errorf("after: %s PEXPIRETIME %d (%v); want %d", k, at, err, w.expiry)
			}
		}
	}
	for _, sh := range list {
		raw := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
		keys, err := fixtures.UserKeys(raw).Result()
		raw.Close()
		if err != nil || len(keys) != 0 {
			t.Errorf("server %s holds %d keys after the move (%v)", sh.Addr, len(keys), err)
		}
	}
}
