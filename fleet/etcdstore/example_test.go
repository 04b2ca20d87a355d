package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
)

// A fleet's processes share one prefix in etcd. This one stores the
// fleet's first state unless another process did, then follows the later
// ones. (It needs an etcd at 127.0.0.1:2379, so it is compiled, not run.)
func Example() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := etcdstore.New(client, "/shardedcache/sessions")
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := fleet.State{Epoch: 1, Step: fleet.Stable, Shards: []fleet.Shard{
		{Name: "a", Addr: "10.0.0.1:6379"},
		{Name: "b", Addr: "10.0.0.2:6379"},
	}}
	rev, err := store.Swap(ctx, 0, first)
	if errors.Is(err, fleet.ErrConflict) {
		_, rev, err = store.Load(ctx) // another process stored it first
	}
	if err != nil {
		log.Fatal(err)
	}
	for u := range store.Watch(ctx, rev) {
		if u.Err != nil {
			log.Fatal(u.Err) // compacted, deleted, etcd unreachable: Load and watch again
		}
		fmt.Println("epoch", u.State.Epoch, u.State.Step, "at revision", u.Revision)
	}
}
