// Found by a reviewer's attack: calls that act on a value, on a key
// deleted during a memcache fleet's change (a tombstone on its new owner).

package memcache_test

import (
	"errors"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/internal/mcmeta"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
)

// TestAttackFleetTombstoneAppend: in a memcache fleet's Moving step, a key
// is set, deleted (a tombstone on its new owner), then Appended and
// Prepended to, as a caller does who expects ErrNotStored for a key that
// holds nothing. Every later Get, in both processes, during and after the
// change, must be a miss: the key was deleted and nothing set it since.
func TestAttackFleetTombstoneAppend(t *testing.T) {
	a, b, moving, _, finish := mcFleetInMoving(t, "tomb-append", 40)
	for i, op := range []func(*gomemcache.Item) error{a.Append, a.Prepend} {
		k := moving[i]
		if err := a.Set(&gomemcache.Item{Key: k, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete(k); err != nil {
			t.Fatal(err)
		}
		if err := op(&gomemcache.Item{Key: k, Value: []byte("x")}); !errors.Is(err, gomemcache.ErrNotStored) {
			t.Errorf("op %d on the deleted %s: %v; want ErrNotStored, as on a key that holds nothing", i, k, err)
		}
		for _, c := range []*shardedmc.ShardedClient{a, b} {
			if it, err := c.Get(k); !errors.Is(err, gomemcache.ErrCacheMiss) {
				t.Errorf("Moving: Get(%s) after Delete and op %d = %q (flags %#x), %v; want ErrCacheMiss", k, i, it.Value, it.Flags, err)
			}
		}
	}
	finish()
	for i := range 2 {
		if it, err := b.Get(moving[i]); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("Stable: Get(%s) = %q, %v; want ErrCacheMiss", moving[i], it.Value, err)
		}
	}
}

// TestAttackFleetTombstoneTouch: in Moving, a key is set and deleted, then
// touched with expiration 0 (Touch, GetAndTouch: a caller keeping a key it
// believes may exist). The tombstone must still expire within TombstoneTTL
// seconds: its new owner reports its TTL, -1 would be a tombstone for ever
// (an Add of the key then fails with ErrNotStored for ever, a stray item).
func TestAttackFleetTombstoneTouch(t *testing.T) {
	a, _, moving, servers, finish := mcFleetInMoving(t, "tomb-touch", 40)
	touch := []func(string) error{
		func(k string) error { return a.Touch(k, 0) },
		func(k string) error { _, err := a.GetAndTouch(k, 0); return err },
	}
	for i, op := range touch {
		k := moving[i]
		if err := a.Set(&gomemcache.Item{Key: k, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete(k); err != nil {
			t.Fatal(err)
		}
		if err := op(k); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("touch %d of the deleted %s: %v; want ErrCacheMiss, as on a key that holds nothing", i, k, err)
		}
	}
	finish()
	conn, err := mcmeta.DialTCP(ctx, servers[3].Addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	items, err := conn.Get(ctx, moving[:2])
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.TTL < 0 || it.TTL > shardedmc.TombstoneTTL {
			t.Errorf("after the change, %s on its owner: flags %#x value %q TTL %d s; want a tombstone living at most %d s", it.Key, it.Flags, it.Value, it.TTL, shardedmc.TombstoneTTL)
		}
	}
	if err := a.Add(&gomemcache.Item{Key: moving[0], Value: []byte("new")}); err != nil {
		t.Errorf("Add(%s) after the change, over its tombstone: %v; want it stored", moving[0], err)
	}
	if it, err := a.Get(moving[0]); err != nil || string(it.Value) != "new" {
		t.Errorf("Get(%s) after the Add: %v, %v; want new", moving[0], it, err)
	}
}
