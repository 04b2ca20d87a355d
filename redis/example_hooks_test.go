package redis_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// commandLog is a go-redis hook that reports each command run alone (not
// pipelines), leaving out go-redis's own connection setup (HELLO, CLIENT).
type commandLog struct{ seen func(cmd goredis.Cmder) }

func (h commandLog) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h commandLog) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			h.seen(cmd)
		}
		return next(ctx, cmd)
	}
}

func (h commandLog) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// OnNewNode hands every shard's client to per-node instrumentation, the
// clients of shards added later included, as go-redis's Ring.OnNewNode
// does. With redisotel, the function is
//
//	func(c *redis.Client) { _ = redisotel.InstrumentTracing(c) }
//
// (redisotel.InstrumentTracing(client) itself refuses a *ShardedClient).
// Here each shard's client logs the commands it runs.
func ExampleShardedClient_OnNewNode() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	var mu sync.Mutex
	seen := map[string][]string{} // shard address -> commands
	client.OnNewNode(func(c *goredis.Client) {
		addr := c.Options().Addr
		c.AddHook(commandLog{func(cmd goredis.Cmder) {
			mu.Lock()
			defer mu.Unlock()
			seen[addr] = append(seen[addr], strings.TrimSpace(fmt.Sprintln(cmd.Args()...)))
		}})
	})
	// redis-c joins: its new client is instrumented before it serves.
	if err := client.SetShards(shards); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"user:1", "user:3", "user:9"} {
		if err := client.Set(ctx, key, "x", 0).Err(); err != nil {
			log.Fatal(err)
		}
	}
	if err := client.MGet(ctx, "user:1", "user:3", "user:9").Err(); err != nil {
		log.Fatal(err)
	}
	for _, sh := range client.Shards() {
		fmt.Printf("%s: %s\n", sh.Name, strings.Join(seen[sh.Addr], "; "))
	}
	// Output:
	// redis-a: set user:9 x; mget user:9
	// redis-b: set user:1 x; mget user:1
	// redis-c: set user:3 x; mget user:3
}
