package ring_test

import (
	"fmt"

	"github.com/shardedcache/shardedcache/ring"
)

// locateAll prints where key:0, key:1 and key:2 go.
func locateAll(r *ring.Ring, names ...string) {
	for _, k := range []string{"key:0", "key:1", "key:2"} {
		i := r.Locate(k)
		if names != nil {
			fmt.Printf("%s -> %s\n", k, names[i])
		} else {
			fmt.Printf("%s -> %d\n", k, i)
		}
	}
}

// Coming from twemproxy: a pool's servers in order ("host:port:weight" or
// "host:port:weight name"), its distribution and its hash. This is the pool
//
//	hash: fnv1a_64
//	distribution: ketama
//	servers: [127.0.0.1:7001:1, 127.0.0.1:7002:1, 127.0.0.1:7003:1, 127.0.0.1:7004:1]
func ExampleTwemproxy() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:7001"}, {Addr: "127.0.0.1:7002"}, {Addr: "127.0.0.1:7003"}, {Addr: "127.0.0.1:7004"},
	}, ring.Twemproxy{HashTag: "{}"})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 3
	// key:1 -> 3
	// key:2 -> 3
}

// Coming from libmemcached with MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, or PHP
// memcached with OPT_LIBKETAMA_COMPATIBLE: servers in the order they were
// added.
func ExampleLibmemcached() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 1
	// key:1 -> 0
	// key:2 -> 0
}

// Coming from spymemcached's KetamaConnectionFactory (2.5 or later).
func ExampleSpymemcached() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Spymemcached{Locator: ring.SpymemcachedKetama})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 1
	// key:1 -> 1
	// key:2 -> 3
}

// Coming from libmemcached's default (MODULA with one-at-a-time).
func ExampleLibmemcached_modula() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Libmemcached{Hash: ring.HashOneAtATime})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 1
	// key:1 -> 0
	// key:2 -> 1
}

// Coming from go-redis's Ring: the shard names of go-redis RingOptions.Addrs (the
// addresses play no part).
func ExampleGoRedisRing() {
	names := []string{"shard-a", "shard-b", "shard-c"}
	r, err := ring.New([]ring.Node{{Name: names[0]}, {Name: names[1]}, {Name: names[2]}}, ring.GoRedisRing{})
	if err != nil {
		panic(err)
	}
	locateAll(r, names...)
	// Output:
	// key:0 -> shard-c
	// key:1 -> shard-a
	// key:2 -> shard-a
}

// Coming from gomemcache's memcache.New(servers...): the same list. Plan the
// move to a consistent ring with Compare's exact figures.
func ExampleGomemcache() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Gomemcache{})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 2
	// key:1 -> 0
	// key:2 -> 2
}

// Coming from spymemcached's defaults: new MemcachedClient(addrs) places keys
// with DefaultConnectionFactory's array-mod over String.hashCode().
func ExampleSpymemcached_default() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Spymemcached{})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 1
	// key:1 -> 2
	// key:2 -> 3
}

// Coming from libmemcached with MEMCACHED_BEHAVIOR_KETAMA set to 1 and then
// MEMCACHED_BEHAVIOR_HASH to MEMCACHED_HASH_MD5: the points keep the
// one-at-a-time hash of the ring's build, keys are hashed with MD5.
func ExampleLibmemcached_hashAfter() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:11211"}, {Addr: "127.0.0.1:11212"}, {Addr: "127.0.0.1:11213"}, {Addr: "127.0.0.1:11214"},
	}, ring.Libmemcached{Distribution: ring.LibmemcachedKetama, HashAfter: ring.HashMD5})
	if err != nil {
		panic(err)
	}
	locateAll(r)
	// Output:
	// key:0 -> 1
	// key:1 -> 2
	// key:2 -> 0
}
