package memcache_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// During a memcache resharding window every key stays readable (it moves to
// its new owner when first used), writes and deletes reach the only copy,
// and keys nobody touched stay on their old owner.
func TestMemcacheReshardWindow(t *testing.T) {
	fixtures.ForEachMemcached(t, 4, func(t *testing.T, servers []*fixtures.MCServer) {
		opts, c := fixtures.NamedMemcache(t, servers, 3)
		keys := fixtures.MCKeys("win:", 1000)
		fixtures.SetAll(t, c, keys)
		plan, err := c.PlanResharding(opts)
		if err != nil || plan.Moved < 0.15 || plan.Moved > 0.35 {
			t.Fatalf("plan %v, %v", plan.Moved, err)
		}
		if err := c.BeginResharding(opts, shardedmc.ReshardOptions{CopyExpiration: 3600}); err != nil {
			t.Fatal(err)
		}
		var moved []string
		for _, k := range keys {
			if c.GetShardInfo(k).Name == "mc-3" {
				moved = append(moved, k)
			}
		}
		if len(moved) == 0 {
			t.Fatal("no key moves to the new shard")
		}
		// Read half of the moved keys one by one and a quarter with GetMulti.
		half, quarter := moved[:len(moved)/2], moved[len(moved)/2:3*len(moved)/4]
		for _, k := range half {
			it, err := c.Get(k)
			if err != nil || string(it.Value) != "v-"+k {
				t.Fatalf("Get(%q) in the window: %v, %v", k, it, err)
			}
		}
		items, err := c.GetMulti(quarter)
		if err != nil || len(items) != len(quarter) {
			t.Fatalf("GetMulti in the window: %d of %d, %v", len(items), len(quarter), err)
		}
		// A write and a delete on keys still on their old owner.
		rest := moved[3*len(moved)/4:]
		if err := c.Set(&gomemcache.Item{Key: rest[0], Value: []byte("new")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(rest[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(rest[1]); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Fatalf("Get after Delete in the window: %v", err)
		}
		on := fixtures.OnServers(t, servers, keys)
		for _, k := range append(slices.Clone(half), quarter...) {
			if on[3][k] != "v-"+k || fixtures.Holds(on[:3], k) {
				t.Fatalf("%s not moved to the new owner alone: %v", k, on[3][k])
			}
		}
		if on[3][rest[0]] != "new" || fixtures.Holds(on[:3], rest[0]) {
			t.Fatal("the write in the window did not replace the old copy")
		}
		if on[3][rest[1]] != "" || fixtures.Holds(on[:3], rest[1]) {
			t.Fatal("the delete in the window left a copy")
		}
		for _, k := range rest[2:] { // untouched: still on the old owner
			if on[3][k] != "" || !fixtures.Holds(on[:3], k) {
				t.Fatalf("untouched %s moved", k)
			}
		}
		if err := c.EndResharding(); err != nil {
			t.Fatal(err)
		}
	})
}

// A leftover on a key's new owner, from an earlier cold SetShards, never wins
// in a memcache window: the old owner's value replaces it, and when the old
// owner has none (the key was deleted since) the leftover is deleted, not
// resurrected. The window moves a key once: a write after the move stays.
func TestMemcacheReshardLeftoverNeverWins(t *testing.T) {
	fixtures.ForEachMemcached(t, 4, func(t *testing.T, servers []*fixtures.MCServer) {
		opts, c := fixtures.NamedMemcache(t, servers, 3)
		keys := fixtures.MCKeys("left:", 400)
		fixtures.SetAll(t, c, keys)               // "v-<key>" on the first three servers
		if err := c.SetShards(opts); err != nil { // cold: leftovers stay behind
			t.Fatal(err)
		}
		var onD []string
		for _, k := range keys {
			if c.GetShardInfo(k).Name == "mc-3" {
				onD = append(onD, k)
			}
		}
		if len(onD) < 3 {
			t.Fatalf("%d keys on the fourth shard", len(onD))
		}
		written, deleted := onD[0], onD[1]
		if err := c.Set(&gomemcache.Item{Key: written, Value: []byte("v2")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(deleted); !errors.Is(err, gomemcache.ErrCacheMiss) { // its value is a leftover elsewhere
			t.Fatalf("Delete of a key with no value on its owner: %v", err)
		}
		if err := c.BeginResharding(opts[:3], shardedmc.ReshardOptions{}); err != nil {
			t.Fatal(err)
		}
		if it, err := c.Get(written); err != nil || string(it.Value) != "v2" {
			t.Fatalf("Get(%q) = %v, %v; want v2, the last write", written, it, err)
		}
		if it, err := c.Get(deleted); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Fatalf("Get(%q) = %v, %v; want a miss: its leftover is stale", deleted, it, err)
		}
		if err := c.Set(&gomemcache.Item{Key: written, Value: []byte("v3")}); err != nil {
			t.Fatal(err)
		}
		if it, err := c.Get(written); err != nil || string(it.Value) != "v3" {
			t.Fatalf("Get(%q) after a write in the window = %v, %v; want v3", written, it, err)
		}
		on := fixtures.OnServers(t, servers, keys)
		if on[3][written] != "" || on[3][deleted] != "" || fixtures.Holds([]map[string]string{on[0], on[1], on[2]}, deleted) {
			t.Fatalf("copies left: %q on d, deleted key held: %v", on[3][written], fixtures.Holds(on[:3], deleted))
		}
		if err := c.EndResharding(); err != nil {
			t.Fatal(err)
		}
	})
}

// A memcache key whose old owner is ejected in the window moves as if that
// owner held nothing (it is flushed when it rejoins): its new owner's
// leftover from an earlier shard list is deleted, never served. Keys are
// written v1 on mc-0..2, a cold SetShards to mc-0, mc-1 leaves the v1
// copies on mc-2, the keys are rewritten v2, and the window back to all
// three begins; then mc-1 is ejected. Skipping the move of such keys served
// v1 for every key moving from mc-1 to mc-2 (45 of 300 on the Jedis ring).
func TestMemcacheLeftoverWithOldOwnerEjected(t *testing.T) {
	for _, pr := range []struct {
		name string
		p    ring.Preset
	}{{"jedis", nil}, {"ketama", ring.Twemproxy{}}, {"modula", ring.Twemproxy{Distribution: ring.TwemproxyModula}}} {
		t.Run(pr.name, func(t *testing.T) {
			servers := []*fixtures.MCServer{fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t)}
			var down atomic.Bool
			var d net.Dialer
			shards := make([]shardedmc.ShardOptions, len(servers))
			for i, s := range servers {
				shards[i] = shardedmc.ShardOptions{Name: "mc-" + strconv.Itoa(i), Addr: s.Addr, Timeout: time.Second}
			}
			shards[1].DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
				}
				return d.DialContext(ctx, network, addr)
			}
			c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards, Placement: pr.p,
				Health: shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			keys := fixtures.MCKeys("lo:", 300)
			setAll := func(v string) {
				for _, k := range keys {
					if err := c.Set(&gomemcache.Item{Key: k, Value: []byte(v)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			setAll("v1")
			if err := c.SetShards(shards[:2]); err != nil {
				t.Fatal(err)
			}
			setAll("v2")
			fromB := 0
			for _, k := range keys {
				fromB += fixtures.B2I(c.GetShardInfo(k).Name == "mc-1")
			}
			if err := c.BeginResharding(shards, shardedmc.ReshardOptions{}); err != nil {
				t.Fatal(err)
			}
			fixtures.DropIdle(t, c)
			down.Store(true)
			for n := 0; !c.Stats()[1].Ejected; n++ {
				_, _ = c.Get(keys[n%len(keys)])
				if n > 10000 {
					t.Fatal("mc-1 not ejected")
				}
			}
			var got [3]int // miss, v1, v2
			for _, k := range keys {
				it, err := c.Get(k)
				switch {
				case errors.Is(err, gomemcache.ErrCacheMiss):
					got[0]++
				case err != nil:
					t.Fatalf("Get(%s): %v", k, err)
				case string(it.Value) == "v1":
					got[1]++
				default:
					got[2]++
				}
			}
			// mc-1's keys miss (it is out); every other key reads v2.
			if want := [3]int{fromB, 0, len(keys) - fromB}; got != want {
				t.Errorf("Get with mc-1 ejected: %v (miss, stale v1, v2); want %v", got, want)
			}
			items, err := c.GetMulti(keys)
			if err != nil || len(items) != len(keys)-fromB {
				t.Errorf("GetMulti: %d items, %v; want %d", len(items), err, len(keys)-fromB)
			}
			for k, it := range items {
				if string(it.Value) != "v2" {
					t.Errorf("GetMulti %s = %q, want v2", k, it.Value)
				}
			}
		})
	}
}
