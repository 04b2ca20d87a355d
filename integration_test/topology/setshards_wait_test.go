package topology_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// refusedAddr returns an address of 127.0.0.1 where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// hangingShard is a shard at a server that accepts connections and never
// answers: a SetShards that brings it in step (FUNCTION, CONFIG) waits its
// ReadTimeout, 2 s.
func hangingShard(t *testing.T) shardedredis.ShardOptions {
	return shardedredis.ShardOptions{Name: "hang", Addr: fixtures.StartHangServer(t).Addr, Options: &goredis.Options{
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, PoolSize: 2}}
}

// In EjectMode with FailureLimit 1, a SetShards whose joining shard refuses
// the step that brings it in step (the libraries, once a FUNCTION command
// ran) fails naming that shard. Reporting the refusal ejected the joining
// shard, which waited for the lock SetShards held: SetShards, and every
// later list change and Close, never returned.
func TestSetShardsJoiningShardRefusesInEjectMode(t *testing.T) {
	procs := fixtures.SharedRedis(t, 1)
	fixtures.ResetServerState(t, procs)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0)},
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FunctionList(ctx, goredis.FunctionListQuery{}).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.SetShards([]shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("dead", refusedAddr(t), 0)})
	}()
	select {
	case err := <-done:
		var se *shardedclient.ShardError
		if !errors.As(err, &se) || se.Name != "dead" {
			t.Errorf("SetShards with a joining shard that refuses connections: %v, want a ShardError naming \"dead\"", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SetShards with a joining shard that refuses connections has not returned after 10 s")
	}
	if got := len(c.Shards()); got != 1 {
		t.Errorf("%d shards after the failed SetShards, want 1", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A list change holds its lock through its round trips to the shards: a
// command whose shard fails meanwhile, and whose failure ejects it, does
// not wait for the change (past its deadline), nor does a CONFIG command,
// which waits for the state the change copies no longer than its context.
func TestCommandsDoNotWaitForSetShards(t *testing.T) {
	procs := fixtures.SharedRedis(t, 1)
	fixtures.ResetServerState(t, procs)
	dead := refusedAddr(t)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", dead, 0)},
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.ConfigSet(ctx, "slowlog-max-len", "200").Err(); err == nil {
		t.Fatal("CONFIG SET with shard b down succeeded")
	}
	if err := c.FunctionList(ctx, goredis.FunctionListQuery{}).Err(); err != nil { // reads skip nothing: b is live
		t.Logf("FUNCTION LIST: %v", err)
	}
	var k string
	for i := 0; ; i++ {
		if k = fmt.Sprintf("k:%d", i); c.GetShardInfo(k).Name == "b" {
			break
		}
	}
	_ = c.Get(ctx, k).Err() // b's first failure
	done := make(chan error, 1)
	go func() {
		done <- c.SetShards([]shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", dead, 0), hangingShard(t)})
	}()
	time.Sleep(300 * time.Millisecond) // SetShards waits on the joining shard
	for _, call := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"GET on b (its second failure ejects it)", func(ctx context.Context) error { return c.Get(ctx, k).Err() }},
		{"CONFIG GET", func(ctx context.Context) error { return c.ConfigGet(ctx, "slowlog-max-len").Err() }},
	} {
		tight, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := call.run(tight)
		took := time.Since(start)
		cancel()
		if err == nil || took > time.Second {
			t.Errorf("%s with a 200 ms deadline during SetShards: %v after %v, want an error by its deadline", call.name, err, took)
		}
	}
	if err := <-done; err == nil {
		t.Error("SetShards with a joining shard that never answers succeeded")
	}
	if st := c.Stats()[1]; !st.Ejected {
		t.Errorf("shard b after its second failure: %+v, want ejected", st)
	}
}
