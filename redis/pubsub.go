package redis

import (
	"context"
	"net"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/pubsub"
)

// Subscribe subscribes to channels, each on the live shard that owns it
// (the shard PUBLISH sends it to; a channel is placed like a key, key tags
// apply), and returns one *redis.PubSub that delivers the messages of every
// shard.
//
// The *redis.PubSub is go-redis's own: Receive, ReceiveMessage, Channel,
// Subscribe, Unsubscribe, Ping and Close work as on one server, over an
// in-memory connection to a fan-in that holds one subscription connection
// per shard. What it guarantees:
//
//   - Subscriptions follow their channels: after SetShards, an ejection or
//     a rejoin, BeginResharding or EndResharding, BeginClusterMove or the
//     end of its migration, each channel is subscribed on its new owner and
//     unsubscribed from its old one; a pattern is on every live shard,
//     shards added later included. Messages published while a channel
//     moves may be lost, as pub/sub is at most once; none is delivered
//     twice.
//   - On a shard that is a Redis Cluster, subscriptions are held through
//     its *redis.ClusterClient: channels and patterns on one connection to
//     a node (the cluster broadcasts every PUBLISH to every node), each
//     shard channel on a connection to the master of its hash slot, one
//     per slot in use.
//   - The first confirmation of a Subscribe (or Unsubscribe) call means
//     every channel of the call is subscribed (unsubscribed) on its shard:
//     the confirmations of a call are held until every shard of the call
//     has confirmed, and carry the counts one server would give. No
//     message of a channel arrives after its unsubscribe confirmation.
//   - The reply to Ping (a *redis.Pong) means every subscription is in
//     place on the shards of the shard list current when Ping was called:
//     after a change, Ping and wait for the Pong before relying on it.
//   - A shard's failure arrives as the error of Receive, a
//     *shardedclient.ShardError naming the shard (errors.As); go-redis
//     resubscribes on that shard when it returns.
//   - A receiver that falls 32 MiB of messages behind is disconnected, as
//     Redis disconnects a slow subscriber; go-redis reconnects and
//     resubscribes.
func (c *ShardedClient) Subscribe(ctx context.Context, channels ...string) *goredis.PubSub {
	return c.pubsub.Subscribe(ctx, channels...)
}

// PSubscribe subscribes to patterns on every live shard (a matching channel
// may be on any of them), shards added later included, and returns one
// *redis.PubSub, as Subscribe.
func (c *ShardedClient) PSubscribe(ctx context.Context, patterns ...string) *goredis.PubSub {
	return c.pubsub.PSubscribe(ctx, patterns...)
}

// SSubscribe subscribes to shard channels (SSUBSCRIBE, Redis 7), each on the
// live shard that owns it, and returns one *redis.PubSub, as Subscribe.
func (c *ShardedClient) SSubscribe(ctx context.Context, channels ...string) *goredis.PubSub {
	return c.pubsub.SSubscribe(ctx, channels...)
}

// dialFanIn is the dialer of the pub/sub client: each go-redis pub/sub
// connection is a fan-in over the shards.
func (c *ShardedClient) dialFanIn(context.Context, string, string) (net.Conn, error) {
	return pubsub.Dial(c.shards, pubsub.Clusters{Of: clusterClient, Slot: Slot, Server: server}), nil
}
