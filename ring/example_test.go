package ring_test

import (
	"fmt"
	"log"

	"github.com/shardedcache/shardedcache/ring"
)

func ExampleNew() {
	r, err := ring.New([]ring.Node{{Name: "redis-a"}, {Name: "redis-b"}, {Name: "redis-c"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	nodes := r.Nodes()
	for _, key := range []string{"user:1", "user:2", "user:3", "cart:42", "session:abc"} {
		i := r.Locate(key)
		fmt.Printf("%-11s -> %d %s\n", key, i, nodes[i].Name)
	}
	fmt.Println(r.Len(), "nodes,", r.VirtualNodes(), "virtual nodes")
	// Output:
	// user:1      -> 1 redis-b
	// user:2      -> 1 redis-b
	// user:3      -> 2 redis-c
	// cart:42     -> 1 redis-b
	// session:abc -> 1 redis-b
	// 3 nodes, 480 virtual nodes
}

func ExampleRing_Shares() {
	r, err := ring.New([]ring.Node{{Name: "redis-a"}, {Name: "redis-b"}, {Name: "redis-c"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	shares, err := r.Shares()
	if err != nil {
		log.Fatal(err)
	}
	for i, s := range shares {
		fmt.Printf("%s %.4f\n", r.Nodes()[i].Name, s)
	}
	// Output:
	// redis-a 0.3448
	// redis-b 0.3380
	// redis-c 0.3171
}

// With twemproxy's "crc32" hash, keys hash below 2^15 while ketama's points
// spread over 32 bits: one node owns every key, and Shares says so.
func ExampleRing_Shares_crc32() {
	r, err := ring.New([]ring.Node{
		{Addr: "127.0.0.1:7001"}, {Addr: "127.0.0.1:7002"}, {Addr: "127.0.0.1:7003"}, {Addr: "127.0.0.1:7004"},
	}, ring.Twemproxy{Hash: ring.HashCRC32Bits16to30})
	if err != nil {
		log.Fatal(err)
	}
	shares, err := r.Shares()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(shares)
	// Output:
	// [0 0 1 0]
}

func ExampleCompare() {
	old, err := ring.New([]ring.Node{{Name: "redis-a"}, {Name: "redis-b"}, {Name: "redis-c"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	grown, err := old.Add(ring.Node{Name: "redis-d"})
	if err != nil {
		log.Fatal(err)
	}
	d, err := ring.Compare(old, grown)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("moved %.4f\n", d.Moved)
	for _, m := range d.Moves {
		fmt.Printf("%d -> %d %.4f\n", m.From, m.To, m.Share)
	}
	// Output:
	// moved 0.2831
	// 0 -> 3 0.0937
	// 1 -> 3 0.1091
	// 2 -> 3 0.0804
}

func ExampleKeyTag() {
	for _, key := range []string{"user:{42}:name", "user:{42}:email", "plain", "{}", "foo{}{bar}"} {
		tag, ok := ring.KeyTag(key)
		fmt.Printf("%-16q %q %v\n", key, tag, ok)
	}
	// Output:
	// "user:{42}:name" "42" true
	// "user:{42}:email" "42" true
	// "plain"          "plain" false
	// "{}"             "{}" false
	// "foo{}{bar}"     "}{bar" true
}

// The ring works on any key-to-target mapping, not only caches: here, which
// of three database tables holds a customer's orders.
func ExampleRing_Locate() {
	r, err := ring.New([]ring.Node{{Name: "orders_0"}, {Name: "orders_1"}, {Name: "orders_2"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	table := r.Locate("customer:1234") // 0, 1 or 2; no allocation, no lock
	shares, err := r.Shares()          // exact share of the hash's range per node
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s; shares %.4f\n", r.Nodes()[table].Name, shares)
	// Output:
	// orders_0; shares [0.3479 0.3638 0.2883]
}
