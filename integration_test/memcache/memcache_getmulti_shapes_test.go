package memcache_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestGetMultiShapes runs GetMulti on four real memcacheds with keys
// on one, two and four shards, duplicates, misses and no key at all: the
// map holds exactly the hits, each with its value, and every call's map is
// its own (writing into one changes no other call's).
func TestGetMultiShapes(t *testing.T) {
	var opts []shardedmc.ShardOptions
	for i := range 4 {
		opts = append(opts, shardedmc.ShardOptions{Name: "mc-" + strconv.Itoa(i), Addr: fixtures.StartRealMemcached(t).Addr})
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	byShard := map[int][]string{}
	for i := 0; len(byShard) < 4 || slices.ContainsFunc(slices.Collect(maps.Values(byShard)), func(k []string) bool { return len(k) < 4 }); i++ {
		k := "gm:" + strconv.Itoa(i)
		s := c.GetShardInfo(k).Index
		if len(byShard[s]) < 4 {
			byShard[s] = append(byShard[s], k)
			if err := c.Set(&memcache.Item{Key: k, Value: []byte("v" + k)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := map[string][]string{
		"none":        {},
		"nil":         nil,
		"one shard":   byShard[0][:3],
		"one key":     byShard[2][:1],
		"two shards":  append(slices.Clone(byShard[1][:2]), byShard[3][:3]...),
		"four shards": slices.Concat(byShard[0], byShard[1], byShard[2], byShard[3]),
		"duplicates":  {byShard[0][0], byShard[0][0], byShard[1][0], byShard[1][0], byShard[0][1]},
		"misses":      {"gm:miss:1", byShard[2][0], "gm:miss:2", "gm:miss:3"},
		"only misses": {"gm:miss:1", "gm:miss:2"},
		"one hit, misses elsewhere": func() []string {
			out := []string{byShard[3][0]}
			for i := range 40 {
				out = append(out, "gm:miss:"+strconv.Itoa(i))
			}
			return out
		}(),
	}
	for name, keys := range cases {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{}
			for _, k := range keys {
				if !strings.HasPrefix(k, "gm:miss:") {
					want[k] = "v" + k
				}
			}
			a, err := c.GetMulti(keys)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.GetMulti(keys)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []map[string]*memcache.Item{a, b} {
				if m == nil {
					t.Fatal("nil map")
				}
				got := map[string]string{}
				for k, it := range m {
					if it.Key != k {
						t.Errorf("item of %q has key %q", k, it.Key)
					}
					got[k] = string(it.Value)
				}
				if !maps.Equal(got, want) {
					t.Errorf("GetMulti(%q) = %v, want %v", keys, got, want)
				}
			}
			// Each call's map and items are its own.
			a["gm:extra"] = &memcache.Item{Key: "gm:extra"}
			for k, it := range a {
				if k != "gm:extra" {
					it.Value = []byte("changed")
				}
			}
			if _, ok := b["gm:extra"]; ok || len(b) != len(want) {
				t.Errorf("a key added to one call's map is in the other's: %d keys", len(b))
			}
			for k, it := range b {
				if string(it.Value) != want[k] {
					t.Errorf("%s changed in the other call's map: %q", k, it.Value)
				}
			}
		})
	}
}
