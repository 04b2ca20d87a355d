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
	shardedredis "github.com/shardedcache/shardedcache/redis"
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

// A process of a fleet joins it before its first command; one process
// (this one here, or the command-line tool) drives a change of the shard
// list that every member follows. (It needs etcd and the redis-servers, so
// it is compiled, not run.)
func Example_fleet() {
	etcdClient, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer etcdClient.Close()
	ctx := context.Background()
	opts := &shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "a", Addr: "10.0.0.1:6379"},
		{Name: "b", Addr: "10.0.0.2:6379"},
	}}
	newList := []fleet.Shard{
		{Name: "a", Addr: "10.0.0.1:6379"},
		{Name: "b", Addr: "10.0.0.2:6379"},
		{Name: "c", Addr: "10.0.0.3:6379"},
	}

	store, err := etcdstore.New(etcdClient, "/myservice/cache") // one key under the prefix, plus the driver's lock
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := shardedredis.NewShardedClient(opts) // the in-code list: the fleet's first state
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	member, err := rdb.JoinFleet(ctx, store, fleet.MemberOptions{}) // before the first command
	if err != nil {
		log.Fatal(err)
	}
	defer member.Close()

	// In one process (or the command-line tool): drive the change; every member follows it.
	final, err := fleet.Reshard(ctx, store, rdb.FleetBackend(shardedredis.MigrateOptions{KeysPerSecond: 50000}),
		newList, fleet.DriverOptions{Progress: func(p fleet.Progress) { fmt.Printf("\r%d keys scanned", p.Scanned) }})
	if err != nil {
		log.Fatal(err) // another process continues the change with fleet.Resume
	}
	fmt.Println("\nepoch", final.Epoch, final.Step)
}
