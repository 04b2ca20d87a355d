package speed_test

import (
	"strconv"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// BenchmarkMemcacheWindowGetMulti is GetMulti of 4,000 keys on four real
// memcached servers, the client going from three shards to four (about a
// quarter of the keys change owner):
//
//   - before: three shards, no window;
//   - first: the first call inside the window, which moves the keys that
//     changed owner (each iteration starts a fresh window);
//   - moved: inside the window once every key has moved;
//   - after: four shards once the window has ended.
func BenchmarkMemcacheWindowGetMulti(b *testing.B) {
	servers := make([]*fixtures.MCServer, 4)
	opts := make([]shardedmc.ShardOptions, len(servers))
	for i := range servers {
		servers[i] = fixtures.StartRealMemcached(b)
		opts[i] = shardedmc.ShardOptions{Name: "mc-" + strconv.Itoa(i), Addr: servers[i].Addr, MaxIdleConns: 8}
	}
	keys := fixtures.MCKeys("bench:", 4000)
	// fresh returns a three-shard client over servers holding only keys.
	fresh := func(b *testing.B) *shardedmc.ShardedClient {
		b.Helper()
		c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: opts})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.FlushAll(); err != nil {
			b.Fatal(err)
		}
		if err := c.SetShards(opts[:3]); err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
				b.Fatal(err)
			}
		}
		return c
	}
	getAll := func(b *testing.B, c *shardedmc.ShardedClient) {
		items, err := c.GetMulti(keys)
		if err != nil || len(items) != len(keys) {
			b.Fatalf("GetMulti: %d of %d hits, %v", len(items), len(keys), err)
		}
	}
	begin := func(b *testing.B, c *shardedmc.ShardedClient) {
		if err := c.BeginResharding(opts, shardedmc.ReshardOptions{CopyExpiration: 3600}); err != nil {
			b.Fatal(err)
		}
	}
	loop := func(b *testing.B, c *shardedmc.ShardedClient) {
		getAll(b, c) // connections open
		b.ResetTimer()
		for b.Loop() {
			getAll(b, c)
		}
		b.StopTimer()
		_ = c.Close()
	}

	b.Run("before", func(b *testing.B) { loop(b, fresh(b)) })
	b.Run("first", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			c := fresh(b)
			getAll(b, c) // connections open, as in the others
			begin(b, c)
			b.StartTimer()
			getAll(b, c)
			b.StopTimer()
			_ = c.Close()
		}
	})
	b.Run("moved", func(b *testing.B) {
		c := fresh(b)
		begin(b, c)
		loop(b, c)
	})
	b.Run("after", func(b *testing.B) {
		c := fresh(b)
		begin(b, c)
		getAll(b, c)
		if err := c.EndResharding(); err != nil {
			b.Fatal(err)
		}
		loop(b, c)
	})
}
