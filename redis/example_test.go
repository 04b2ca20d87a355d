package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// startServers starts n in-process Redis servers and returns their
// addresses and a function that stops them all.
func startServers(n int) ([]string, func()) {
	var servers []*miniredis.Miniredis
	stop := func() {
		for _, s := range servers {
			s.Close()
		}
	}
	addrs := make([]string, n)
	for i := range addrs {
		s, err := miniredis.Run()
		if err != nil {
			stop()
			log.Fatal(err)
		}
		servers = append(servers, s)
		addrs[i] = s.Addr()
	}
	return addrs, stop
}

// startShards starts one in-process Redis server per name and returns the
// shard options for them and a function that stops them all.
func startShards(names ...string) ([]shardedredis.ShardOptions, func()) {
	addrs, stop := startServers(len(names))
	opts := make([]shardedredis.ShardOptions, len(names))
	for i, name := range names {
		opts[i] = shardedredis.ShardOptions{Name: name, Addr: addrs[i]}
	}
	return opts, stop
}

func ExampleNewShardedClient() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()

	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	for _, key := range []string{"user:1", "user:3", "user:9"} {
		// Set and Get are go-redis's own methods; each runs on the shard
		// that owns its key. Placement depends only on the shard names,
		// so it is the same on every run.
		if err := client.Set(ctx, key, "hello "+key, 0).Err(); err != nil {
			log.Fatal(err)
		}
		val, err := client.Get(ctx, key).Result()
		if err != nil {
			log.Fatal(err)
		}
		info := client.GetShardInfo(key)
		fmt.Printf("%s -> shard %d (%s): %q\n", key, info.Index, info.Name, val)
	}
	// Output:
	// user:1 -> shard 1 (redis-b): "hello user:1"
	// user:3 -> shard 2 (redis-c): "hello user:3"
	// user:9 -> shard 0 (redis-a): "hello user:9"
}

// The README's first snippet: three named shards, one with twice the keys
// of the others, one with its own pool size; the calls are go-redis's own.
func ExampleNewShardedClient_options() {
	addr, stop := startServers(3) // in-process servers; in production, host:port of each
	defer stop()
	ctx := context.Background()

	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{
			{Name: "redis-a", Addr: addr[0]},
			{Name: "redis-b", Addr: addr[1], Weight: 2},
			{Name: "redis-c", Addr: addr[2], Options: &goredis.Options{PoolSize: 50}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	err = rdb.Set(ctx, "user:42", "ada", time.Hour).Err() // on the shard that owns user:42
	if err != nil {
		log.Fatal(err)
	}
	vals, err := rdb.MGet(ctx, "user:1", "user:42").Result() // split by shard, values in argument order
	if err != nil {
		log.Fatal(err)
	}
	n, err := rdb.DBSize(ctx).Result() // summed over every shard
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vals, n, rdb.GetShardInfo("user:42").Name)
	// Output:
	// [<nil> ada] 1 redis-b
}

func ExampleShardedClient_mget() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()

	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// A pipeline is split by shard: one pipeline per server, run in
	// parallel, each command keeping its own reply.
	ctx := context.Background()
	_, err = client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i := range 10 {
			pipe.Set(ctx, fmt.Sprintf("user:%d", i), fmt.Sprintf("v%d", i), 0)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// MGET is split by shard too; the values come back in argument order,
	// nil for a missing key.
	keys := []string{"user:9", "user:3", "user:1", "missing", "user:8", "user:0"}
	vals, err := client.MGet(ctx, keys...).Result()
	if err != nil {
		log.Fatal(err)
	}
	for i, key := range keys {
		fmt.Printf("%-7s shard %d: %v\n", key, client.GetShardInfo(key).Index, vals[i])
	}
	// Output:
	// user:9  shard 0: v9
	// user:3  shard 2: v3
	// user:1  shard 1: v1
	// missing shard 2: <nil>
	// user:8  shard 1: v8
	// user:0  shard 2: v0
}

func ExampleCrossShardError() {
	ctx := context.Background()
	src, dst := "{user:1}:a", "{user:1}:b"

	// Without key tags every key is hashed whole, so src and dst land on
	// different shards, and RENAME fails before anything is sent.
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	plain, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Set(ctx, src, "ada", 0).Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("without key tags: shards", plain.GetShardInfo(src).Index, plain.GetShardInfo(dst).Index)
	err = plain.Rename(ctx, src, dst).Err()
	fmt.Println("cross-shard:", errors.Is(err, shardedredis.ErrCrossShard))
	var cse *shardedredis.CrossShardError
	if errors.As(err, &cse) {
		fmt.Println("command:", cse.Command)
	}
	n, err := plain.Exists(ctx, src).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("source still there:", n == 1)

	// With key tags both keys are placed by their tag "user:1", so they
	// share a shard and RENAME runs there.
	shards, stop = startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	tagged, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards:    shards,
		Placement: ring.Jedis{KeyTags: true},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tagged.Close()
	if err := tagged.Set(ctx, src, "ada", 0).Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("with key tags: shards", tagged.GetShardInfo(src).Index, tagged.GetShardInfo(dst).Index)
	if err := tagged.Rename(ctx, src, dst).Err(); err != nil {
		log.Fatal(err)
	}
	val, err := tagged.Get(ctx, dst).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("renamed:", val)
	// Output:
	// without key tags: shards 1 2
	// cross-shard: true
	// command: rename
	// source still there: true
	// with key tags: shards 1 1
	// renamed: ada
}

// Adding a shard without a cold cache: the plan, then the window in which
// every key moves to its new owner before any command uses it, then the
// migration that moves the rest. (miniredis's DUMP serves strings only, so
// on these in-process servers every key is a string.)
func ExampleShardedClient_BeginResharding() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c", "redis-d")
	defer stop()
	ctx := context.Background()
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3]})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	for i := range 1000 {
		if err := rdb.Set(ctx, fmt.Sprintf("user:%d", i), i, 0).Err(); err != nil {
			log.Fatal(err)
		}
	}
	newShards := shards // redis-d joins

	plan, err := rdb.PlanResharding(newShards) // exact share moving, per (from, to) pair of shards
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(plan)
	// Stale copies removed, then keys placed by the new ring; a key moves to its new owner
	// (marked, DUMP/RESTORE with its absolute expiry, deleted) before any command uses it.
	// On error nothing has changed.
	if err := rdb.BeginResharding(newShards); err != nil {
		log.Fatal(err)
	}
	m, err := rdb.NewMigration(shardedredis.MigrateOptions{KeysPerSecond: 50000})
	if err != nil {
		log.Fatal(err)
	}
	// SCAN every old shard, move what changed owner, then end the window. On error, run a new
	// Migration with MigrateOptions{Resume: m.Checkpoint()}.
	if err := m.Run(ctx); err != nil {
		log.Fatal(err)
	}

	for _, p := range m.Progress() {
		fmt.Printf("%s: %d kept, %d moved\n", p.Name, p.Owned, p.Moved)
	}
	wrong := 0
	for i := range 1000 {
		if v, err := rdb.Get(ctx, fmt.Sprintf("user:%d", i)).Int(); err != nil || v != i {
			wrong++
		}
	}
	fmt.Println("wrong values:", wrong)
	// Output:
	// moved 28.3135% of the hash space
	//   redis-a              -> redis-d                9.3659%
	//   redis-b              -> redis-d               10.9125%
	//   redis-c              -> redis-d                8.0351%
	// redis-a: 248 kept, 87 moved
	// redis-b: 210 kept, 111 moved
	// redis-c: 266 kept, 78 moved
	// wrong values: 0
}

// Moving every key of three shards into a Redis Cluster, live, from the
// running client. It needs real redis-servers and a cluster, so it is
// compiled, not run.
func ExampleShardedClient_BeginClusterMove() {
	ctx := context.Background()
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{
			{Name: "redis-a", Addr: "10.0.0.1:6379"},
			{Name: "redis-b", Addr: "10.0.0.2:6379"},
			{Name: "redis-c", Addr: "10.0.0.3:6379"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	opt := &goredis.ClusterOptions{Addrs: []string{"10.0.1.1:6379", "10.0.1.2:6379", "10.0.1.3:6379"}}
	// Slots and keys per master, the keys each master holds now (deleted by the move), and the
	// key groups that would be split.
	plan, err := rdb.PlanClusterMove(ctx, opt, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan)
	// WaitReplicas: 1 needs a replica behind every master; leave it 0 on a cluster without replicas.
	if err := rdb.BeginClusterMove(shardedredis.ClusterShard{Options: opt, WaitReplicas: 1}); err != nil {
		log.Fatal(err)
	}
	m, err := rdb.NewMigration(shardedredis.MigrateOptions{KeysPerSecond: 20000})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		log.Fatal(err) // a *MigrationError names keys and nodes; resume with MigrateOptions{Resume: m.Checkpoint()}
	}
	// Every command now goes to the cluster, through a go-redis ClusterClient.
	fmt.Println(rdb.ClusterClient().Options().Addrs)
}

// Eject mode: after FailureLimit consecutive failures a shard is ejected
// and its keys go to the shard that stands in for it (on the Jedis ring, the
// next node clockwise), until a probe after RetryTimeout finds it back.
// Keys written on the stand-in meanwhile are not copied back.
func ExampleShardedOptions_ejectMode() {
	a, b := miniredis.NewMiniRedis(), miniredis.NewMiniRedis()
	for _, s := range []*miniredis.Miniredis{a, b} {
		if err := s.Start(); err != nil {
			log.Fatal(err)
		}
		defer s.Close()
	}
	ctx := context.Background()

	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{{Name: "redis-a", Addr: a.Addr()}, {Name: "redis-b", Addr: b.Addr()}},
		Health: shardedredis.Health{
			Mode:         shardedclient.EjectMode,
			FailureLimit: 1,                // ejected at the first failure (default 2)
			RetryTimeout: 30 * time.Second, // then probed (PING), and it rejoins
			OnEvent:      func(e shardedclient.Event) { fmt.Println("event:", e.Kind, e.Name) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	fmt.Println("user:1 is on", rdb.GetShardInfo("user:1").Name)
	b.Close() // redis-b dies
	err = rdb.Get(ctx, "user:1").Err()
	var se *shardedclient.ShardError
	if errors.As(err, &se) {
		fmt.Println("failed on", se.Name)
	}
	// Ejected: its keys are served by the stand-in.
	if err := rdb.Set(ctx, "user:1", "ada", 0).Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("user:1 is on", rdb.GetShardInfo("user:1").Name)
	// Output:
	// user:1 is on redis-b
	// event: failure redis-b
	// event: ejected redis-b
	// failed on redis-b
	// user:1 is on redis-a
}

// Subscribe holds each channel on the shard that owns it, where Publish
// sends it, and delivers every message on one go-redis *redis.PubSub.
func ExampleShardedClient_Subscribe() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()

	ps := rdb.Subscribe(ctx, "news", "sports", "weather")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // every channel of the call is live now
		log.Fatal(err)
	}
	for _, ch := range []string{"news", "sports", "weather"} {
		if err := rdb.Publish(ctx, ch, "hello "+ch).Err(); err != nil { // on the channel's shard
			log.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			log.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s on %s: %s", msg.Channel, rdb.GetShardInfo(msg.Channel).Name, msg.Payload))
	}
	slices.Sort(got) // the shards' messages interleave in any order
	fmt.Println(strings.Join(got, "\n"))
	// Output:
	// news on redis-a: hello news
	// sports on redis-c: hello sports
	// weather on redis-c: hello weather
}

// Adding a shard to three real redis-servers and moving the keys it takes
// over with MIGRATE, server to server (MigrateOptions.ServerSide). The
// servers must reach each other at these addresses; miniredis has no
// MIGRATE, so this example is compiled, not run.
func ExampleMigrateOptions_serverSide() {
	ctx := context.Background()
	shards := []shardedredis.ShardOptions{
		{Name: "redis-a", Addr: "10.0.0.1:6379"},
		{Name: "redis-b", Addr: "10.0.0.2:6379"},
		{Name: "redis-c", Addr: "10.0.0.3:6379"},
	}
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.BeginResharding(append(shards, shardedredis.ShardOptions{Name: "redis-d", Addr: "10.0.0.4:6379"})); err != nil {
		log.Fatal(err)
	}
	m, err := rdb.NewMigration(shardedredis.MigrateOptions{ServerSide: true})
	if errors.Is(err, shardedredis.ErrServerSide) {
		// A shard MIGRATE cannot reach (TLS, ...): the default path moves
		// the keys through this client.
		m, err = rdb.NewMigration(shardedredis.MigrateOptions{})
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		log.Fatal(err) // a *MigrationError names the keys left; run again to retry them
	}
	for _, p := range m.Progress() {
		fmt.Printf("%s: %d moved, %d kept\n", p.Shard, p.Moved, p.Owned)
	}
}

// Autopipelining: AutoPipelineOptions in the shards' options make the
// commands of many goroutines for one shard share round trips, through
// go-redis's engine (once AutoPipelineFrom commands are on a shard at once;
// from one goroutine they take the plain path). The calls do not change.
func ExampleShardedOptions_autoPipeline() {
	shards, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()

	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards:  shards,
		Options: &goredis.Options{AutoPipelineOptions: goredis.DefaultBlockingAutoPipelineOptions()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := fmt.Sprintf("user:%d", i)
			if err := client.Set(ctx, key, i, 0).Err(); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	n, err := client.Exists(ctx, "user:0", "user:31", "user:63").Result()
	fmt.Println(n, err)
	// Output:
	// 3 <nil>
}
