package pubsub_test

// Pub/sub through the sharded client, on miniredis and on real redis-server
// processes, and the helpers of every pub/sub test: servers that can go
// down and come back, a reader of the *redis.PubSub that checks what
// arrives, and a check of what each server holds.

import (
	"testing"
	"time"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Subscribe to one channel on each of three shards: each is held on its
// shard's server, PUBLISH reaches it there once; an Unsubscribe of one is
// confirmed with the count of the others, after which its shard holds it no
// more and PUBLISH reaches nobody; PING on the connection answers.
func TestRedisSubscribeAcrossShards(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		chs := fixtures.OneChannelPerShard(t, c, servers)
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs...))
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: chs})
		r.Deliver(fixtures.PSPublisher(c), "subscribed", fixtures.PSRoutes(chs...))

		if err := r.PS.Unsubscribe(ctx, chs[0]); err != nil {
			t.Fatal(err)
		}
		r.Expect(fixtures.PSConfirmations("unsubscribe", 2, 0, chs[0])...)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: chs[1:]})
		rs := fixtures.PSRoutes(chs[1:]...)
		rs[chs[0]] = nil
		r.Deliver(fixtures.PSPublisher(c), "after unsubscribing "+chs[0], rs)
		r.SyncClean()
	})
}

// PSubscribe holds the pattern on every shard and receives the messages of
// every shard, also through Channel().
func TestRedisPSubscribeEveryShard(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		r := fixtures.NewPSReader(t, c.PSubscribe(ctx, "ch*"))
		r.Expect(fixtures.PSConfirmations("psubscribe", 1, 1, "ch*")...)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Patterns: []string{"ch*"}})
		chs := fixtures.OneChannelPerShard(t, c, servers)
		rs := map[string][]string{}
		for _, ch := range chs {
			rs[ch] = []string{"ch*"}
		}
		r.Deliver(fixtures.PSPublisher(c), "pattern", rs)

		msgs := r.PS.Channel()
		if n, err := c.Publish(ctx, chs[0], "via channel").Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH = %d, %v", n, err)
		}
		select {
		case msg := <-msgs:
			if msg.Channel != chs[0] || msg.Pattern != "ch*" || msg.Payload != "via channel" {
				t.Fatalf("Channel() delivered %v", msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Channel() delivered nothing")
		}
	})
}
