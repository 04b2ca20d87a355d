package redistest_test

import (
	"context"
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/redistest"
)

// addToCart is code under test: it takes any go-redis client.
func addToCart(ctx context.Context, rdb goredis.UniversalClient, user, item string) error {
	return rdb.HIncrBy(ctx, "cart:"+user, item, 1).Err()
}

// Each key is on the one server that GetShardInfo names, and nowhere else;
// the client over three shards serves it as one server would.
func TestNewClient(t *testing.T) {
	rdb, servers := redistest.NewClient(t, "a", "b", "c")
	ctx := context.Background()
	for i := range 20 {
		if err := addToCart(ctx, rdb, fmt.Sprint(i), "book"); err != nil {
			t.Fatal(err)
		}
	}
	held := make([]int, len(servers))
	for i := range 20 {
		key := fmt.Sprintf("cart:%d", i)
		owner := rdb.GetShardInfo(key).Index
		for j, s := range servers {
			if got := s.HGet(key, "book"); (j == owner) != (got == "1") {
				t.Errorf("%s on server %d: %q; owner %d", key, j, got, owner)
			}
		}
		held[owner]++
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 20 || held[0] == 0 || held[1] == 0 || held[2] == 0 {
		t.Errorf("DBSIZE = %d, %v; keys per shard %v", n, err, held)
	}
	if names := []string{rdb.Shards()[0].Name, rdb.Shards()[1].Name, rdb.Shards()[2].Name}; fmt.Sprint(names) != "[a b c]" {
		t.Errorf("shard names %v", names)
	}
}

// With no name, three shards named shard-0 to shard-2.
func TestNewShardsDefault(t *testing.T) {
	opts, servers := redistest.NewShards(t)
	if len(opts) != 3 || len(servers) != 3 || opts[2].Name != "shard-2" || opts[2].Addr != servers[2].Addr() {
		t.Errorf("NewShards() = %+v", opts)
	}
}
