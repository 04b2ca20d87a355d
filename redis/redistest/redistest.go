// Package redistest runs a sharded client over in-process Redis servers
// (miniredis), for unit tests of code that takes a redis.UniversalClient,
// a redis.Cmdable or a *redis.ShardedClient: no redis-server, no network
// beyond 127.0.0.1, one server per shard, each stopped when the test ends.
//
//	func TestCart(t *testing.T) {
//		rdb, servers := redistest.NewClient(t, "a", "b", "c")
//		AddToCart(ctx, rdb, "user:1", "book") // your code
//		// rdb.GetShardInfo("cart:user:1").Index names the server that holds the key:
//		// servers[i].HGet(...), servers[i].FastForward(...), ...
//	}
//
// miniredis implements most commands of Redis 7 (not FUNCTION, not the
// modules); what it lacks fails as an unknown command. Keys are placed as
// in production, by the shard names.
package redistest

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// NewShards starts one miniredis server per name, each stopped when t
// ends, and returns the options of their shards (Name and Addr), in order,
// with the servers. With no name it starts three, named "shard-0" to
// "shard-2".
func NewShards(t testing.TB, names ...string) ([]shardedredis.ShardOptions, []*miniredis.Miniredis) {
	t.Helper()
	if len(names) == 0 {
		names = []string{"shard-0", "shard-1", "shard-2"}
	}
	opts := make([]shardedredis.ShardOptions, len(names))
	servers := make([]*miniredis.Miniredis, len(names))
	for i, name := range names {
		servers[i] = miniredis.RunT(t)
		opts[i] = shardedredis.ShardOptions{Name: name, Addr: servers[i].Addr()}
	}
	return opts, servers
}

// NewClient returns a ShardedClient over the servers of NewShards(t,
// names...), with the default placement (Jedis's), and the servers
// (servers[i] is shard i: rdb.GetShardInfo(key).Index names the one that
// holds key). The client is closed when t ends; a failure to build it
// fails t. For other placement or options, build the client from
// NewShards' options with redis.NewShardedClient.
func NewClient(t testing.TB, names ...string) (*shardedredis.ShardedClient, []*miniredis.Miniredis) {
	t.Helper()
	shards, servers := NewShards(t, names...)
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(fmt.Errorf("redistest: %w", err))
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, servers
}
