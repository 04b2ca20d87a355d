package redis_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shardedcache/shardedcache/otelmetrics"
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
// (redisotel.InstrumentTracing(client) itself refuses a *ShardedClient);
// OnNewShardNode adds the shard's name. Here each shard's client logs the
// commands it runs.
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

// OnNewShardNode instruments every shard's client with redisotel (traces and
// go-redis's own metrics), each span and metric carrying the shard's name. One MGET over three shards is three "mget"
// spans, one per shard, each with that shard's keys (db.statement), its
// server.address and server.port, and shardedcache.shard.name.
func ExampleShardedClient_OnNewShardNode() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)) // in a program: otel's global providers
	mp := sdkmetric.NewMeterProvider()
	client.OnNewShardNode(func(sh shardedredis.Shard, node *goredis.Client) {
		name := redisotel.WithAttributes(otelmetrics.ShardNameKey.String(sh.Name))
		_ = redisotel.InstrumentTracing(node, name, redisotel.WithTracerProvider(tp))
		_ = redisotel.InstrumentMetrics(node, name, redisotel.WithMeterProvider(mp))
	})
	if err := client.MGet(context.Background(), "user:1", "user:3", "user:9").Err(); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, s := range spans.GetSpans() {
		if s.Name != "mget" {
			continue // the connection setup (redis.dial, hello, client)
		}
		var shard, stmt string
		for _, kv := range s.Attributes {
			switch kv.Key {
			case otelmetrics.ShardNameKey:
				shard = kv.Value.AsString()
			case "db.statement":
				stmt = kv.Value.AsString()
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s: %s", s.Name, shard, stmt))
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// mget redis-a: mget user:9
	// mget redis-b: mget user:1
	// mget redis-c: mget user:3
}
