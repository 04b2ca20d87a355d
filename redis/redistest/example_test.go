package redistest_test

import (
	"context"
	"testing"

	"github.com/shardedcache/shardedcache/redis/redistest"
)

// A unit test of your own code (addToCart, in redistest_test.go, takes any
// go-redis client) against the real routing over three in-process servers,
// each of which can be inspected.
func TestAddToCart(t *testing.T) {
	ctx := context.Background()
	rdb, servers := redistest.NewClient(t, "a", "b", "c")         // closed when t ends
	if err := addToCart(ctx, rdb, "user:1", "book"); err != nil { // your code
		t.Fatal(err)
	}
	owner := rdb.GetShardInfo("cart:user:1").Index // the shard that holds the key
	if got := servers[owner].HGet("cart:user:1", "book"); got != "1" {
		t.Errorf("book count %q", got)
	}
}
