package memcache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
)

// keyHistory is the values a key was given, in order ("" a delete), and
// how many of them were acknowledged.
type keyHistory struct {
	values []string
	acked  int
}

// TestAttackFleetTwoMembersModel: two members of a memcache fleet in
// Moving, each the only writer of half of the moving keys, run random
// seeded Set, Delete, Append (on a key holding a value) and Get on their
// keys, and Get on the other's, while the migration runs. Every read
// returns the last value acknowledged before it started or a later one
// (a miss for a delete); afterwards both members read every key's last
// value, and no old owner holds a moving key.
func TestAttackFleetTwoMembersModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { twoMembersModel(t, seed) })
	}
}

func twoMembersModel(t *testing.T, seed uint64) {
	a, b, moving, servers, finish := mcFleetInMoving(t, "model", 300)
	_, old := fixtures.NamedMemcache(t, servers, 3)
	var mu sync.Mutex
	hist := map[string]*keyHistory{}
	for _, k := range moving {
		if err := old.Set(&gomemcache.Item{Key: k, Value: []byte("v0")}); err != nil {
			t.Fatal(err)
		}
		hist[k] = &keyHistory{values: []string{"v0"}, acked: 1}
	}
	members := []*shardedmc.ShardedClient{a, b}
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for m, c := range members {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(m)))
			read := func(k string) error {
				mu.Lock()
				h := hist[k]
				from := h.acked - 1
				mu.Unlock()
				it, err := c.Get(k)
				got := ""
				switch {
				case err == nil:
					got = string(it.Value)
				case !errors.Is(err, gomemcache.ErrCacheMiss):
					return fmt.Errorf("member %d: Get(%s): %w", m, k, err)
				}
				mu.Lock()
				defer mu.Unlock()
				if !slices.Contains(h.values[from:], got) {
					return fmt.Errorf("member %d: Get(%s) = %q; want one of %q (acknowledged first)", m, k, got, h.values[from:])
				}
				return nil
			}
			for op := range 300 {
				k := moving[2*rng.IntN(len(moving)/2)+m] // one of this member's keys
				mu.Lock()
				h := hist[k]
				last := h.values[len(h.values)-1]
				var next string
				var do func() error
				switch r := rng.IntN(4); {
				case r == 0:
					do = func() error { return c.Delete(k) }
				case r == 1 && last != "":
					next = last + "+"
					do = func() error { return c.Append(&gomemcache.Item{Key: k, Value: []byte("+")}) }
				case r <= 2:
					next = fmt.Sprintf("m%d-%d", m, op)
					do = func() error { return c.Set(&gomemcache.Item{Key: k, Value: []byte(next)}) }
				}
				if do != nil {
					h.values = append(h.values, next)
				}
				mu.Unlock()
				if do != nil {
					if err := do(); err != nil && !(next == "" && errors.Is(err, gomemcache.ErrCacheMiss)) {
						errs <- fmt.Errorf("member %d: op on %s: %w", m, k, err)
						return
					}
					mu.Lock()
					h.acked = len(h.values)
					mu.Unlock()
				}
				if err := read(k); err != nil {
					errs <- err
					return
				}
				if err := read(moving[2*rng.IntN(len(moving)/2)+1-m]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	finish() // the migration runs with the members' operations
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, k := range moving {
		want := hist[k].values[len(hist[k].values)-1]
		for m, c := range members {
			it, err := c.Get(k)
			if want == "" && !errors.Is(err, gomemcache.ErrCacheMiss) || want != "" && (err != nil || string(it.Value) != want) {
				t.Errorf("after: member %d Get(%s) = %v, %v; want %q", m, k, it, err, want)
			}
		}
		if _, err := old.Get(k); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("after: %s on its old owner (%v)", k, err)
		}
	}
}
