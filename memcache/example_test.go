package memcache_test

import (
	"fmt"
	"log"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/daangn/minimemcached"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

// A Selector makes a plain gomemcache client place keys as libmemcached's
// ketama does (PHP memcached, twemproxy ketama/md5): the same servers in the
// same order give the same server for every key.
func ExampleNewSelector_gomemcache() {
	sel, err := memcache.NewSelector([]memcache.Server{
		{Addr: "10.0.0.1:11211"},
		{Addr: "10.0.0.2:11211"},
		{Addr: "10.0.0.3:11211"},
	}, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted})
	if err != nil {
		log.Fatal(err)
	}
	client := gomemcache.NewFromSelector(sel) // a plain *memcache.Client; connects on first use
	_ = client

	keys := []string{"user:1", "user:2", "user:3", "user:11"}
	before := make([]string, len(keys))
	for i, key := range keys {
		addr, err := sel.PickServer(key)
		if err != nil {
			log.Fatal(err)
		}
		before[i] = addr.String()
	}

	// Adding a fourth server moves only the keys it takes over.
	if err := sel.SetServers(append(sel.Servers(), memcache.Server{Addr: "10.0.0.4:11211"})); err != nil {
		log.Fatal(err)
	}
	for i, key := range keys {
		after, err := sel.PickServer(key)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(key, before[i], "->", after)
	}
	// Output:
	// user:1 10.0.0.2:11211 -> 10.0.0.2:11211
	// user:2 10.0.0.3:11211 -> 10.0.0.4:11211
	// user:3 10.0.0.3:11211 -> 10.0.0.3:11211
	// user:11 10.0.0.1:11211 -> 10.0.0.1:11211
}

func ExampleNewShardedClient_minimemcached() {
	// Three in-process memcached servers for the example.
	var shards []memcache.ShardOptions
	for _, name := range []string{"cache-a", "cache-b", "cache-c"} {
		srv, err := minimemcached.Run(&minimemcached.Config{Port: 0})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		shards = append(shards, memcache.ShardOptions{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port())})
	}

	client, err := memcache.NewShardedClient(&memcache.ShardedOptions{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	keys := []string{"user:1", "user:3", "user:8"}
	for _, key := range keys {
		// gomemcache's own method and item type; the key's shard stores it.
		// Placement depends only on the shard names, so it is the same on
		// every run.
		if err := client.Set(&gomemcache.Item{Key: key, Value: []byte("hello " + key)}); err != nil {
			log.Fatal(err)
		}
		fmt.Println(key, "is on", client.GetShardInfo(key).Name)
	}
	items, err := client.GetMulti(append(keys, "user:5")) // one multi-get per shard, in parallel
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(items), "hits;", string(items["user:3"].Value))
	if _, err := client.Get("user:5"); err == gomemcache.ErrCacheMiss {
		fmt.Println("user:5: cache miss")
	}
	// Output:
	// user:1 is on cache-c
	// user:3 is on cache-a
	// user:8 is on cache-b
	// 3 hits; hello user:3
	// user:5: cache miss
}

// The README's snippet: gomemcache's own client over a Selector, and the
// sharded client, with one placement, so both find every key on the same
// server.
func ExampleNewShardedClient_placement() {
	var addr []string // two in-process memcached servers; in production, host:port of each
	for range 2 {
		srv, err := minimemcached.Run(&minimemcached.Config{Port: 0})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		addr = append(addr, fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	}

	// The lightest drop-in: gomemcache's own client with consistent placement.
	sel, err := memcache.NewSelector([]memcache.Server{{Addr: addr[0]}, {Addr: addr[1]}},
		ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}) // libketama; nil: the Jedis ring
	if err != nil {
		log.Fatal(err)
	}
	mc := gomemcache.NewFromSelector(sel)
	defer mc.Close()

	// Or a sharded client: one gomemcache client per shard, fan-out with per-shard errors. Give
	// it the same Placement as every other client of these servers (here the Selector's), or
	// they look for a key on different servers.
	smc, err := memcache.NewShardedClient(&memcache.ShardedOptions{
		Shards:    []memcache.ShardOptions{{Addr: addr[0], Timeout: 200 * time.Millisecond}, {Addr: addr[1]}},
		Placement: ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer smc.Close()

	keys := []string{"user:1", "user:2", "user:3", "user:4"}
	for _, key := range keys[:3] {
		if err := mc.Set(&gomemcache.Item{Key: key, Value: []byte("v")}); err != nil {
			log.Fatal(err)
		}
	}
	items, err := smc.GetMulti(keys) // every hit, plus a *memcache.MultiShardError naming failed shards
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(items), "hits")
	// Output:
	// 3 hits
}
