package redis_test

import (
	"context"
	"fmt"
	"log"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// Client-side caching on every shard: each shard gets a go-redis cache of
// its own, invalidated by its server (RESP3, CLIENT TRACKING); a write
// through the client is read back at once, never the value it replaced.
// (It needs redis-server 6 or later: miniredis has no CLIENT TRACKING, so
// this example is not run.)
func ExampleShardedClient_CacheStats() {
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{{Addr: "10.0.0.1:6379"}, {Addr: "10.0.0.2:6379"}},
		Options: &goredis.Options{
			Protocol:              3,
			ClientSideCacheConfig: &goredis.ClientSideCacheConfig{MaxEntries: 100_000},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, "user:42", "ada", 0)
	rdb.Get(ctx, "user:42")                    // a round trip; the reply is cached
	rdb.Get(ctx, "user:42")                    // from memory
	rdb.Set(ctx, "user:42", "grace", 0)        // drops the cached value before returning
	fmt.Println(rdb.Get(ctx, "user:42").Val()) // grace
	for _, st := range rdb.CacheStats() {
		fmt.Printf("%s: %d hits, %d misses, %d entries\n", st.Addr, st.Hits, st.Misses, st.Entries)
	}
}
