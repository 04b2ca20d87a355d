package integration_test

import (
	"context"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// twoDBsOfOneServer starts one redis-server and a client whose two shards
// are its DB 0 and DB 1.
func twoDBsOfOneServer(t *testing.T) (*redisProc, *shardedredis.ShardedClient) {
	t.Helper()
	p := startRedisProc(t, realRedisBin(t), "")
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "a", Addr: p.addr, Options: &goredis.Options{DB: 0}},
		{Name: "b", Addr: p.addr, Options: &goredis.Options{DB: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	closeAndSettle(t, c)
	return p, c
}

// Pub/sub ignores the DB, so PUBSUB runs once per server, like FLUSHALL:
// over two DBs of one server, CHANNELS lists each channel once and NUMPAT
// counts each pattern once, as the server itself does.
func TestPubSubIntrospectionOncePerServer(t *testing.T) {
	p, c := twoDBsOfOneServer(t)
	ps := c.Subscribe(ctx, "shared:ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	pps := c.PSubscribe(ctx, "shared:*")
	defer pps.Close()
	if _, err := pps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	direct := goredis.NewClient(&goredis.Options{Addr: p.addr})
	defer direct.Close()
	if got, err := c.PubSubChannels(ctx, "shared:*").Result(); err != nil || !slices.Equal(got, []string{"shared:ch"}) {
		t.Errorf("PUBSUB CHANNELS = %q, %v; want [shared:ch]", got, err)
	}
	if got, err := c.PubSubNumPat(ctx).Result(); err != nil || got != 1 {
		t.Errorf("PUBSUB NUMPAT = %d, %v; want 1", got, err)
	}
}

// A pattern is subscribed once per server, not once per shard: one PUBLISH
// over two DBs of one server is delivered once and counts one receiver.
func TestPatternOncePerServer(t *testing.T) {
	_, c := twoDBsOfOneServer(t)
	ps := c.PSubscribe(ctx, "shared:*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Publish(ctx, "shared:x", "m1").Result(); err != nil || n != 1 {
		t.Errorf("PUBLISH = %d, %v; want 1 receiver", n, err)
	}
	got := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		msg, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			break
		}
		if msg.Payload == "m1" {
			got++
		}
	}
	if got != 1 {
		t.Errorf("one PUBLISH received %d times, want 1", got)
	}
}
