package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// attackExpiredLockStore gives its driver a lease that it does not hold in
// the store: a driver whose lease expired while it was paused.
type attackExpiredLockStore struct{ *fleet.MemStore }

type attackNoLease struct{}

func (attackNoLease) Lost() <-chan struct{}        { return nil }
func (attackNoLease) Unlock(context.Context) error { return nil }

func (attackExpiredLockStore) Lock(context.Context, time.Duration) (fleet.Lease, error) {
	return attackNoLease{}, nil
}

// attackHoldConn holds a write that contains marker until release is
// closed (a packet delayed in the network, a paused process), then sends it.
type attackHoldConn struct {
	net.Conn
	marker  []byte
	held    chan struct{}
	release chan struct{}
	once    *sync.Once
}

func (c attackHoldConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.marker) {
		c.once.Do(func() { close(c.held) })
		<-c.release
	}
	return c.Conn.Write(p)
}

// attackHeldDriver starts driver D1 of the change from list[:2] to
// list[:3] (shards are list's options), whose lock is taken as lost at
// once, with the first write to list[2] that holds marker held back in the
// network; it returns once that write is held, with the channel that
// releases it and the one D1's end is sent on.
func attackHeldDriver(t *testing.T, shards []shardedredis.ShardOptions, list []fleet.Shard, store *fleet.MemStore, marker, what string) (release chan struct{}, d1done chan error) {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d1, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2], Options: &goredis.Options{
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil || addr != list[2].Addr {
				return cn, err
			}
			return attackHoldConn{Conn: cn, marker: []byte(marker), held: held, release: release, once: &once}, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d1.Close() })
	d1done = make(chan error, 1)
	go func() {
		_, err := fleet.Reshard(ctx, attackExpiredLockStore{store}, d1.FleetBackend(shardedredis.MigrateOptions{}), list[:3], fleet.DriverOptions{})
		d1done <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
	return release, d1done
}

// TestAttackFleetLateDropStale: driver D1 of change X (2 -> 3 shards) sends
// its removal of stale copies to the new shard s2; the EVAL is delayed in
// the network (D1 paused, its lease lost). D2 resumes X to its end, a write
// is acknowledged on s2, and D2 runs a later change Y (3 -> 4), which marks
// s2 moved for Y. Then D1's EVAL lands: its guard checks "moved == X" only,
// so it unlinks the key that s2 owns and holds with an acknowledged write.
// Expected (package fleet: "every server-side operation it may still have
// in flight is ... safe whenever it lands"): the write survives.
func TestAttackFleetLateDropStale(t *testing.T) {
	shards, list := fleetServers(t, 4)
	probe := func(n int) *shardedredis.ShardedClient {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:n]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	p3, p4 := probe(3), probe(4)
	// key: on s0/s1 under L, on s2 under T and under Y.
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("ld:", i); p3.GetShardInfo(k).Index == 2 && p4.GetShardInfo(k).Index == 2 {
			key = k
		}
	}
	// A stale copy on s2 (a leftover), so that D1 has something to unlink.
	raw2 := goredis.NewClient(&goredis.Options{Addr: list[2].Addr})
	defer raw2.Close()
	if err := raw2.Set(ctx, key, "leftover", 0).Err(); err != nil {
		t.Fatal(err)
	}

	store := &fleet.MemStore{}
	c := probe(2) // the member and driver D2
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	release, d1done := attackHeldDriver(t, shards, list, store, "UNLINK", "D1's removal of stale copies was not sent")
	backend := c.FleetBackend(shardedredis.MigrateOptions{})
	if _, err := fleet.Resume(ctx, store, backend, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Reshard(ctx, store, backend, list, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	close(release)
	t.Logf("D1 ended with: %v", <-d1done)
	got, err := c.Get(ctx, key).Result()
	if got != "v2" {
		t.Fatalf("Get(%q) = %q (%v) after D1's delayed removal landed; want the acknowledged v2", key, got, err)
	}
}
