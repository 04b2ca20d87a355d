package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// fleetDiesAfterFence is a driver that dies once its Fence has run, before
// it stores Moving.
type fleetDiesAfterFence struct{ fleet.Backend }

var errDiedAfterFence = errors.New("the driver died after its fence")

func (b fleetDiesAfterFence) Fence(ctx context.Context, st fleet.State) error {
	if err := b.Backend.Fence(ctx, st); err != nil {
		return err
	}
	return errDiedAfterFence
}

// A driver that dies between its fence and storing Moving leaves the
// fleet in Preparing with every server fenced and marked moved (a Redis
// Cluster target: each of its slots); Resume scans for stale copies again
// (the first driver removed them: none), fences again (idempotent) and
// finishes the change: into a new server, and into a Redis Cluster. Every
// key is then on its new owner with its value.
func TestFleetResumeAfterFence(t *testing.T) {
	for _, into := range []string{"server", "cluster"} {
		t.Run(into, func(t *testing.T) {
			shards, list := fixtures.FleetServers(t, 3)
			target := list
			if into == "cluster" {
				target = []fleet.Shard{{Name: "cluster", Addr: strings.Join(fixtures.SharedCluster(t).Addrs(), ","), Cluster: true}}
			}
			store := &fleet.MemStore{}
			cs, _ := fixtures.FleetMembers(t, shards[:2], list[:2], store, 1)
			c := cs[0]
			const n = 300
			for i := range n {
				if err := c.Set(ctx, fmt.Sprint("ra:", i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			backend := c.FleetBackend(shardedredis.MigrateOptions{})
			st, err := fleet.Reshard(ctx, store, fleetDiesAfterFence{backend}, target, fleet.DriverOptions{})
			if !errors.Is(err, errDiedAfterFence) || st.Step != fleet.Preparing || st.Epoch != 2 {
				t.Fatalf("the driver that dies after its fence: %+v, %v", st, err)
			}
			st, err = fleet.Resume(ctx, store, backend, fleet.DriverOptions{})
			if err != nil {
				t.Fatalf("Resume after the fence: %v", err)
			}
			if st.Step != fleet.Stable || st.Epoch != 4 || !slices.Equal(st.Shards, target) {
				t.Fatalf("after Resume: %+v", st)
			}
			for i := range n {
				if got, err := c.Get(ctx, fmt.Sprint("ra:", i)).Result(); got != fmt.Sprint(i) {
					t.Fatalf("ra:%d = %q (%v), want %d", i, got, err, i)
				}
			}
		})
	}
}

// A fleet's move into a Redis Cluster, driven in one process: every key
// ends on the cluster with its value and TTL, none on the old servers; the
// cluster holds the protocol's 16384 slot fences and no restored-move
// record; and a removal of stale copies for the move that lands late (a
// driver paused past its lease) is refused by the slots' fences and
// removes nothing.
func TestFleetIntoCluster(t *testing.T) {
	cluster := fixtures.SharedCluster(t)
	shards, list := fixtures.FleetServers(t, 3)
	store := &fleet.MemStore{}
	cs, _ := fixtures.FleetMembers(t, shards, list, store, 1)
	c := cs[0]
	const n = 1000
	fixtures.SeedTypes(t, c, n)
	target := []fleet.Shard{{Name: "cluster", Addr: strings.Join(cluster.Addrs(), ","), Cluster: true}}
	backend := c.FleetBackend(shardedredis.MigrateOptions{BatchSize: 50})
	var last fleet.Progress
	st, err := fleet.Reshard(ctx, store, backend, target, fleet.DriverOptions{Progress: func(p fleet.Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != 4 || st.Step != fleet.Stable || last.Moved != n || last.Sources != 3 || last.Done != 3 {
		t.Fatalf("after the move: %+v, progress %+v; want epoch 4, Stable, %d keys moved from 3 sources", st, last, n)
	}
	cm := &fixtures.ClusterMove{C: c, Cluster: cluster, N: n}
	cm.Check(t, nil)
	for _, sh := range list {
		raw := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
		keys, err := fixtures.UserKeys(raw).Result()
		raw.Close()
		if err != nil || len(keys) != 0 {
			t.Fatalf("server %s holds %d keys after the move (%v), e.g. %q", sh.Addr, len(keys), err, keys[:min(3, len(keys))])
		}
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
	defer cc.Close()
	var fences, restored atomic.Int64
	err = cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
		f, err := master.Keys(ctx, "__shardedcache:fence{*").Result()
		if err != nil {
			return err
		}
		r, err := master.Keys(ctx, "__shardedcache:restored*").Result()
		fences.Add(int64(len(f)))
		restored.Add(int64(len(r)))
		return err
	})
	if err != nil || fences.Load() != 16384 || restored.Load() != 0 {
		t.Fatalf("the cluster holds %d slot fences and %d restored-move records (%v); want 16384 and 0", fences.Load(), restored.Load(), err)
	}
	// The removal of stale copies of this move, landing now: refused.
	late := fleet.State{Epoch: 2, Step: fleet.Preparing, Change: "late", Shards: list, Target: target}
	if err := backend.DropStale(ctx, late); err == nil || !strings.Contains(err.Error(), "already marked moved for this resharding") {
		t.Fatalf("a late removal of stale copies: %v; want it refused, as the slots are marked moved", err)
	}
	cm.Check(t, nil)
}
