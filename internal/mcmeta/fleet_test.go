package mcmeta

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/internal/memcachedtest"
)

// realMemcached starts a memcached (see memcachedtest.Start) and returns a
// meta connection to it, closed when t ends.
func realMemcached(t *testing.T) *Conn {
	t.Helper()
	c, err := DialTCP(context.Background(), memcachedtest.Start(t), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.Meta() {
		t.Skip("memcached without meta commands (before 1.6.10)")
	}
	return c
}

// Add stores only over nothing and returns the stored item's token;
// DeleteIf deletes only an item of the token given.
func TestAddAndDeleteIf(t *testing.T) {
	c := realMemcached(t)
	ctx := context.Background()
	stored, cas, err := c.Add(ctx, Item{Key: "k", Value: []byte("one"), Flags: 7, Expiration: 100})
	if err != nil || !stored || cas == 0 {
		t.Fatalf("Add over nothing = %v, %d, %v; want stored with a token", stored, cas, err)
	}
	if stored, cas2, err := c.Add(ctx, Item{Key: "k", Value: []byte("two")}); err != nil || stored || cas2 != 0 {
		t.Fatalf("Add over an item = %v, %d, %v; want not stored", stored, cas2, err)
	}
	items, err := c.Get(ctx, []string{"k"})
	if err != nil || len(items) != 1 || string(items[0].Value) != "one" || items[0].Flags != 7 || items[0].CAS != cas || items[0].TTL < 99 || items[0].TTL > 100 {
		t.Fatalf("Get after the adds = %+v, %v; want one, flags 7, token %d, TTL 100 s", items, err, cas)
	}
	for _, step := range []struct {
		cas  uint64
		want string
	}{{cas + 1, "changed"}, {cas, "deleted"}, {cas, "absent"}} {
		if got, err := c.DeleteIf(ctx, "k", step.cas); err != nil || got != step.want {
			t.Fatalf("DeleteIf(token %d) = %q, %v; want %q", step.cas, got, err, step.want)
		}
	}
	if _, _, err := c.Add(ctx, Item{Key: "bad key"}); err == nil {
		t.Error("Add of a malformed key: nil error")
	}
}

// Keys lists every key, in pages of at most MaxBatch.
func TestKeys(t *testing.T) {
	c := realMemcached(t)
	ctx := context.Background()
	var items []Item
	var want []string
	for i := range 300 {
		k := fmt.Sprintf("key:%03d", i)
		items = append(items, Item{Key: k, Value: []byte("v")})
		want = append(want, k)
	}
	if _, err := c.Set(ctx, items); err != nil {
		t.Fatal(err)
	}
	var got []string
	var pages []int
	if err := c.Keys(ctx, func(keys []string) error {
		got = append(got, keys...)
		pages = append(pages, len(keys))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || !slices.Equal(pages, []int{MaxBatch, 300 - MaxBatch}) {
		t.Fatalf("Keys: %d keys in pages %v; want the 300 set, in pages [%d %d]", len(got), pages, MaxBatch, 300-MaxBatch)
	}
	// The connection is usable after the dump.
	if items, err := c.Get(ctx, []string{"key:000"}); err != nil || len(items) != 1 {
		t.Fatalf("Get after Keys = %+v, %v", items, err)
	}
}
