package memcache_test

import (
	"cmp"
	"errors"
	"slices"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// A CAS token is its server's: each server numbers items with a counter of
// its own. Here the new owner's counter is driven so that, once key k has
// moved and been written anew in the window, k's token there equals the
// token k had on its old owner: a CompareAndSwap with the item read before
// the window would succeed and overwrite that write if the token were sent
// as it is. It fails with ErrCASConflict; an item read in the window swaps;
// so does one read in the window and swapped after it ended.
func TestMemcacheWindowCASTokenOfTheOldOwner(t *testing.T) {
	fixtures.ForEachMemcached(t, 4, func(t *testing.T, servers []*fixtures.MCServer) {
		c, opts := fixtures.MCWindowClient(t, servers)
		keys := fixtures.MCKeys("cas:", 300)
		fixtures.SetAll(t, c, keys)
		moving := fixtures.ToNewShard(t, opts, keys)
		before, err := c.GetMulti(moving)
		if err != nil {
			t.Fatal(err)
		}
		k := slices.MaxFunc(moving, func(a, b string) int { return cmp.Compare(before[a].CasID, before[b].CasID) })
		old := before[k]
		if old.CasID < 3 {
			t.Fatalf("token %d of %s: too small to drive the new owner's counter to", old.CasID, k)
		}
		// The new owner's next tokens: old.CasID-1 for the move's set,
		// old.CasID for the write in the window.
		direct := gomemcache.New(servers[3].Addr)
		defer direct.Close()
		for {
			if err := direct.Set(&gomemcache.Item{Key: "filler", Value: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			it, err := direct.Get("filler")
			if err != nil || it.CasID > old.CasID-2 {
				t.Fatalf("filler: %v, %v; want token %d", it, err, old.CasID-2)
			}
			if it.CasID == old.CasID-2 {
				break
			}
		}
		if err := c.BeginResharding(opts, shardedmc.ReshardOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("written in the window")}); err != nil {
			t.Fatal(err)
		}
		if it, err := direct.Get(k); err != nil || it.CasID != old.CasID {
			t.Fatalf("%s on its new owner: %v, %v; want token %d, as on its old owner", k, it, err, old.CasID)
		}
		old.Value = []byte("stale swap")
		if err := c.CompareAndSwap(old); !errors.Is(err, gomemcache.ErrCASConflict) {
			t.Fatalf("CompareAndSwap with the old owner's token after the move: %v, want ErrCASConflict", err)
		}
		it, err := c.Get(k)
		if err != nil || string(it.Value) != "written in the window" {
			t.Fatalf("Get(%q) = %v, %v", k, it, err)
		}
		it.Value = []byte("swapped in the window")
		if err := c.CompareAndSwap(it); err != nil {
			t.Fatalf("CompareAndSwap of an item read in the window: %v", err)
		}
		items, err := c.GetMulti([]string{k})
		if err != nil || string(items[k].Value) != "swapped in the window" {
			t.Fatalf("GetMulti(%q) = %v, %v", k, items, err)
		}
		if err := c.EndResharding(); err != nil {
			t.Fatal(err)
		}
		items[k].Value = []byte("swapped after the window")
		if err := c.CompareAndSwap(items[k]); err != nil {
			t.Fatalf("CompareAndSwap after the window of an item read in it: %v", err)
		}
		if it, err := direct.Get(k); err != nil || string(it.Value) != "swapped after the window" {
			t.Fatalf("%s on its owner: %v, %v", k, it, err)
		}
	})
}
