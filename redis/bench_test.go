package redis

import (
	"context"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// BenchmarkGet compares one GET through a one-shard ShardedClient with the
// same GET through a plain *redis.Client, on the same miniredis server: the
// difference is what routing costs.
func BenchmarkGet(b *testing.B) {
	m := miniredis.RunT(b)
	ctx := context.Background()
	plain := goredis.NewClient(&goredis.Options{Addr: m.Addr()})
	defer plain.Close()
	sharded, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: m.Addr()}}})
	if err != nil {
		b.Fatal(err)
	}
	defer sharded.Close()
	if err := plain.Set(ctx, "key:1", "value", 0).Err(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		get  func() error
	}{
		{"plain", func() error { return plain.Get(ctx, "key:1").Err() }},
		{"sharded", func() error { return sharded.Get(ctx, "key:1").Err() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.get(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMGet100 is one MGET of 100 keys: over 4 shards (four parallel
// MGETs and a merge) against one MGET on one server.
func BenchmarkMGet100(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 100)
	var pairs []any
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
		pairs = append(pairs, keys[i], i)
	}
	var shards []ShardOptions
	for range 4 {
		shards = append(shards, ShardOptions{Addr: miniredis.RunT(b).Addr()})
	}
	sharded, err := NewShardedClient(&ShardedOptions{Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	defer sharded.Close()
	plain := goredis.NewClient(&goredis.Options{Addr: miniredis.RunT(b).Addr()})
	defer plain.Close()
	for name, c := range map[string]goredis.Cmdable{"plain-1-server": plain, "sharded-4-shards": sharded} {
		if err := c.MSet(ctx, pairs...).Err(); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				vals, err := c.MGet(ctx, keys...).Result()
				if err != nil || len(vals) != 100 {
					b.Fatal(vals, err)
				}
			}
		})
	}
}

// BenchmarkRoute is the dispatch path alone: classifying a GET and finding
// its shard, without any I/O.
func BenchmarkRoute(b *testing.B) {
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{
		{Addr: "127.0.0.1:1"}, {Addr: "127.0.0.1:2"}, {Addr: "127.0.0.1:3"}, {Addr: "127.0.0.1:4"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cmd := goredis.NewStringCmd(context.Background(), "get", "user:12345")
	b.ReportAllocs()
	for b.Loop() {
		v := c.shards.Acquire()
		var r keyShards
		err := route(v, cmd, &r)
		v.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
}
