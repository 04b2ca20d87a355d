package redis_test

// This file is added by shardedcache's TestGoRedisSuite to a copy of the
// go-redis module (package redis_test of github.com/redis/go-redis/v9):
// the subject that the patched main_test.go, pipeline_test.go and
// tx_test.go build is a shardedcache ShardedClient over the redis-servers
// listed in SHARDEDCACHE_SUITE_ADDRS, whose first shard's client is the
// specs' own rawClient.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/internal/pool"

	sharded "github.com/shardedcache/shardedcache/redis"
)

// ctx is the specs' context (example_test.go, which declares it in
// go-redis, is not copied).
var ctx = context.Background()

// shardedSuite turns off the BeforeSuite and AfterSuite work for the
// ring, Sentinel and cluster servers of go-redis's docker fleet.
const shardedSuite = true

// shardedAddrs returns the "127.0.0.1:port" addresses of the shards.
func shardedAddrs() []string {
	v := os.Getenv("SHARDEDCACHE_SUITE_ADDRS")
	if v == "" {
		panic("SHARDEDCACHE_SUITE_ADDRS is not set")
	}
	return strings.Split(v, ",")
}

// shardedRedisPort is the port of the first shard, where rawClient goes.
func shardedRedisPort() string {
	addr := shardedAddrs()[0]
	return addr[strings.LastIndexByte(addr, ':')+1:]
}

// newShardedClient builds the ShardedClient over every shard: first,
// which becomes the client of the first shard (so that the specs that
// count rawClient's pool count the subject's), and clients with the specs'
// own options for the others, which it empties (the specs flush only
// rawClient's server). The shards are named, so that every key has the same
// shard at every run, whatever the servers' ports.
//
// With SHARDEDCACHE_SUITE_AUTOPIPELINE=1 every shard autopipelines and
// every command goes through go-redis's engine (AutoPipelineFrom 1).
func newShardedClient(first *redis.Client) *sharded.ShardedClient {
	addrs := shardedAddrs()
	ap := os.Getenv("SHARDEDCACHE_SUITE_AUTOPIPELINE") == "1"
	if ap {
		first.Options().AutoPipelineOptions = redis.DefaultBlockingAutoPipelineOptions() // read at first use
	}
	shards := []sharded.Shard{{Name: "shard0", Addr: addrs[0], Client: first}}
	for i, addr := range addrs[1:] {
		o := redisOptions()
		o.Addr = addr
		if ap {
			o.AutoPipelineOptions = redis.DefaultBlockingAutoPipelineOptions()
		}
		shards = append(shards, sharded.Shard{Name: fmt.Sprintf("shard%d", i+1), Addr: addr, Client: redis.NewClient(o)})
	}
	c, err := sharded.NewShardedClientFromClients(shards, nil)
	if err == nil && ap {
		err = c.SetAutoPipelineFrom(1)
	}
	if err != nil {
		panic(err)
	}
	flushOthers(c)
	return c
}

// flushOthers empties every shard but the first.
func flushOthers(c *sharded.ShardedClient) {
	for _, sh := range c.Shards()[1:] {
		if err := sh.Client.FlushAll(ctx).Err(); err != nil {
			panic(fmt.Sprintf("flushing shard %s: %v", sh.Addr, err))
		}
	}
}

// newShardedSubject is newUniversalSubject's case "sharded": the
// ShardedClient over c and the other shards, and a closer that empties the
// other shards and closes it (c with it).
func newShardedSubject(c *redis.Client) (redis.UniversalClient, func() error) {
	s := newShardedClient(c)
	return s, func() error {
		flushOthers(s)
		return s.Close()
	}
}

// shardedTestClient stands for the *redis.Client of the pipelining and Tx
// specs.
type shardedTestClient struct{ *sharded.ShardedClient }

func newShardedTestClient() shardedTestClient {
	return shardedTestClient{newShardedClient(redis.NewClient(redisOptions()))}
}

// Pool is the connection pool of the first shard (the Tx spec puts a bad
// connection in it).
func (c shardedTestClient) Pool() pool.Pooler {
	return c.Shards()[0].Client.Pool()
}
