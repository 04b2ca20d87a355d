package memcache_test

import (
	"context"
	"fmt"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

// BenchmarkPickServer compares PickServer of our Selector (Jedis ring,
// ketama, and the gomemcache preset) with gomemcache's own ServerList
// (crc32 % N under a read lock), over 3 and 30 servers, 1,024 keys of 9-15
// bytes in turn.
func BenchmarkPickServer(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i*7919)
	}
	for _, n := range []int{3, 30} {
		srvs := servers(n, "")
		addrs := make([]string, n)
		for i, s := range srvs {
			addrs[i] = s.Addr
		}
		var list gomemcache.ServerList
		if err := list.SetServers(addrs...); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			sel  gomemcache.ServerSelector
		}{
			{"Selector-jedis", mustSelector(b, srvs, nil)},
			{"Selector-ketama", mustSelector(b, srvs, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted})},
			{"Selector-gomemcache", mustSelector(b, srvs, ring.Gomemcache{})},
			{"ServerList", &list},
		} {
			b.Run(fmt.Sprintf("servers=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := c.sel.PickServer(keys[i&1023]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkGet is one Get of a stored key on a minimemcached server: through
// a plain gomemcache client, through a one-shard ShardedClient (what routing
// costs), and through GetContext with a cancellable context (what running
// the call in its own goroutine costs).
func BenchmarkGet(b *testing.B) {
	addr := startMini(b, 1)[0]
	plain := gomemcache.New(addr)
	defer plain.Close()
	sharded, err := memcache.NewShardedClient(&memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: addr}}})
	if err != nil {
		b.Fatal(err)
	}
	defer sharded.Close()
	if err := plain.Set(&gomemcache.Item{Key: "key:1", Value: []byte("value")}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		get  func() (*gomemcache.Item, error)
	}{
		{"plain", func() (*gomemcache.Item, error) { return plain.Get("key:1") }},
		{"sharded", func() (*gomemcache.Item, error) { return sharded.Get("key:1") }},
		{"sharded-context", func() (*gomemcache.Item, error) { return sharded.GetContext(ctx, "key:1") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.get(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
