package redis_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// onTwoDBsOfOneServer runs f, once per spelling, on a client whose two
// shards are DB 0 and DB 1 of one redis-server, the second's address
// written as the first's, or as "localhost:<port>" for "127.0.0.1:<port>".
func onTwoDBsOfOneServer(t *testing.T, f func(t *testing.T, p *fixtures.RedisProc, c *shardedredis.ShardedClient)) {
	for _, spelling := range []string{"same", "respelled"} {
		t.Run(spelling, func(t *testing.T) {
			p := fixtures.StartRedisProc(t, fixtures.RealRedisBin(t), "")
			second := p.Addr
			if spelling == "respelled" {
				_, port, _ := net.SplitHostPort(p.Addr)
				second = "localhost:" + port
			}
			c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
				{Name: "a", Addr: p.Addr, Options: &goredis.Options{DB: 0}},
				{Name: "b", Addr: second, Options: &goredis.Options{DB: 1}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			fixtures.CloseAndSettle(t, c)
			f(t, p, c)
		})
	}
}

// Pub/sub ignores the DB, so PUBSUB runs once per server, like FLUSHALL:
// over two DBs of one server, CHANNELS lists each channel once and NUMPAT
// counts each pattern once, as the server itself does.
func TestPubSubIntrospectionOncePerServer(t *testing.T) {
	onTwoDBsOfOneServer(t, testPubSubIntrospectionOncePerServer)
}

func testPubSubIntrospectionOncePerServer(t *testing.T, p *fixtures.RedisProc, c *shardedredis.ShardedClient) {
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
	direct := goredis.NewClient(&goredis.Options{Addr: p.Addr})
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
	onTwoDBsOfOneServer(t, testPatternOncePerServer)
}

func testPatternOncePerServer(t *testing.T, _ *fixtures.RedisProc, c *shardedredis.ShardedClient) {
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

// A command on the whole server (FUNCTION, SCRIPT, CONFIG, FLUSHALL) runs
// once per server: FUNCTION LOAD of one library over two DBs of one server
// loads it once and succeeds (twice, the second would fail "already
// exists").
func TestServerWideOncePerServer(t *testing.T) {
	onTwoDBsOfOneServer(t, func(t *testing.T, _ *fixtures.RedisProc, c *shardedredis.ShardedClient) {
		lib := "#!lua name=sharedlib\nredis.register_function('sharedf', function(keys, args) return 1 end)"
		if got, err := c.FunctionLoad(ctx, lib).Result(); err != nil || got != "sharedlib" {
			t.Errorf("FUNCTION LOAD = %q, %v; want sharedlib", got, err)
		}
	})
}
