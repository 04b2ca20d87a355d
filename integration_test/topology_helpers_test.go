package integration_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// topoShard is a named shard on a real redis-server's DB db, with the
// package's short timeouts.
func topoShard(name, addr string, db int) shardedredis.ShardOptions {
	so := realShard(addr)
	so.Name = name
	so.Options.DB = db
	return so
}

// directClient is a plain client of DB db of the server at addr, closed at
// the end of the test.
func directClient(t testing.TB, addr string, db int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, DB: db, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// resetServerState removes, at the end of the test, the function libraries
// of the shared servers and resets the parameters that the topology tests
// set (sharedRedis resets the rest).
func resetServerState(t testing.TB, procs []*redisProc) {
	t.Cleanup(func() {
		for _, p := range procs {
			c := goredis.NewClient(&goredis.Options{Addr: p.addr, MaxRetries: -1})
			err := c.FunctionFlush(ctx).Err()
			for param, def := range configDefaults {
				if err == nil {
					err = c.ConfigSet(ctx, param, def).Err()
				}
			}
			_ = c.Close()
			if err != nil {
				t.Errorf("resetting %s: %v", p.addr, err)
			}
		}
	})
}

// configDefaults are the parameters the topology tests set through the
// sharded client, with Redis 7.0's defaults.
var configDefaults = map[string]string{"slowlog-max-len": "128", "hash-max-listpack-entries": "128"}
