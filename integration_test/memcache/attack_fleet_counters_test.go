package memcache_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
)

// TestAttackFleetConcurrentIncrements: two members of a memcache fleet in
// Moving increment the same 30 moving keys (each 20 times per member)
// while the migration runs; no increment is lost: each key ends at 40,
// read by either member after the change. Before that, a CAS token got by
// one member is refused (ErrCASConflict) once the other member set the
// key, and nothing is written.
func TestAttackFleetConcurrentIncrements(t *testing.T) {
	a, b, moving, _, finish := mcFleetInMoving(t, "ctr", 200)
	if len(moving) < 31 {
		t.Fatalf("%d moving keys, want 31", len(moving))
	}
	keys, casKey := moving[:30], moving[30]
	for _, k := range append(keys, casKey) {
		if err := a.Set(&gomemcache.Item{Key: k, Value: []byte("0")}); err != nil {
			t.Fatal(err)
		}
	}
	it, err := a.Get(casKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set(&gomemcache.Item{Key: casKey, Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	it.Value = []byte("a")
	if err := a.CompareAndSwap(it); !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CAS with a token older than the other member's Set: %v, want ErrCASConflict", err)
	}
	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, c := range []*shardedmc.ShardedClient{a, b} {
		wg.Go(func() {
			for range rounds {
				for _, k := range keys {
					if _, err := c.Increment(k, 1); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	finish() // the migration runs with the increments
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Increment: %v", err)
	}
	for _, c := range []*shardedmc.ShardedClient{a, b} {
		for _, k := range keys {
			it, err := c.Get(k)
			if err != nil || string(it.Value) != strconv.Itoa(2*rounds) {
				t.Errorf("%s after the change = %v, %v; want %d", k, it, err, 2*rounds)
			}
		}
		if it, err := c.Get(casKey); err != nil || string(it.Value) != "b" {
			t.Errorf("%s = %v, %v; want b", casKey, it, err)
		}
	}
}
