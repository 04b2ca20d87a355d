package shardedclient_test

import (
	"context"
	"fmt"

	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// A ring of database tables, as Sharding-JDBC setups place rows: each key
// (a user ID) belongs to one table, placed as Jedis 3.x Sharded places it,
// and a table that keeps failing is ejected.
func ExampleSharded() {
	type table struct{ name string }
	list := []shardedclient.Shard[*table]{
		{Name: "users_0", Client: &table{"users_0"}},
		{Name: "users_1", Client: &table{"users_1"}},
		{Name: "users_2", Client: &table{"users_2"}, Weight: 2}, // twice the rows
	}
	tables, err := shardedclient.New(list, shardedclient.Health[*table]{Mode: shardedclient.EjectMode}, ring.Jedis{})
	if err != nil {
		panic(err)
	}
	defer tables.Close()
	for _, user := range []string{"user:1", "user:2", "user:3", "user:13"} {
		err := tables.Do(context.Background(), user, func(ctx context.Context, t *table) error {
			fmt.Println(user, "->", t.name) // SELECT ... FROM t.name WHERE id = user
			return nil
		})
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// user:1 -> users_0
	// user:2 -> users_2
	// user:3 -> users_0
	// user:13 -> users_1
}
