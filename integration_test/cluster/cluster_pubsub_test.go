package cluster_test

// Pub/sub across a move into the shared Redis Cluster: subscriptions follow
// their channels to the cluster shard, where the fan-in holds them through
// the cluster client (channels and patterns on one node, each shard channel
// on its slot's master), and leave the old shards.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Channels, a pattern and shard channels subscribed on a sharded client of
// three redis-servers follow BeginClusterMove to the cluster: PUBLISH and
// SPUBLISH through a plain ClusterClient (and through the sharded client,
// which now sends them to the cluster) reach the receiver exactly once, in
// the window and after the migration, and the old shards hold nothing but
// the pattern (which stays on every shard of the window, where their other
// clients may still publish) and, once the window ends, not that either. A
// Subscribe, PSubscribe and SSubscribe after the move are held on the
// cluster; an SUnsubscribe takes its shard channel off its master. Each
// receiver holds one connection to the cluster for channels and patterns
// and one per hash slot of its shard channels, closed once it holds none.
func TestClusterMovePubSub(t *testing.T) {
	m := fixtures.NewClusterMove(t, 0, nil, nil)
	var old []*fixtures.PSServer
	for _, sh := range m.C.Shards() {
		old = append(old, fixtures.NewPSServer(t, sh.Name, sh.Addr, true, nil, nil))
	}
	const pattern = "pat.*"
	chs, schs, patterned := fixtures.PSNames("ch", 6), fixtures.PSNames("sch", 6), fixtures.PSNames("pat.", 3)
	routes := fixtures.PSRoutes(chs...)
	for _, ch := range patterned {
		routes[ch] = []string{pattern}
	}

	r := fixtures.NewPSReader(t, m.C.Subscribe(ctx, chs...))
	r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
	if err := r.PS.PSubscribe(ctx, pattern); err != nil {
		t.Fatal(err)
	}
	r.Expect(fixtures.PSConfirmations("psubscribe", len(chs)+1, 1, pattern)...)
	if err := r.PS.SSubscribe(ctx, schs...); err != nil {
		t.Fatal(err)
	}
	r.Expect(fixtures.PSConfirmations("ssubscribe", 1, 1, schs...)...)
	r.Deliver(fixtures.PSPublisher(m.C), "before the move", routes)
	r.Deliver(sPublisher(m.C), "before the move", fixtures.PSRoutes(schs...))

	if err := m.C.BeginClusterMove(m.ClusterShard(false)); err != nil {
		t.Fatal(err)
	}
	r.SyncClean()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: m.Cluster.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	checkClusterPlacement(t, cc, old, fixtures.PSPlacement{Channels: chs, ShardChannels: schs, Patterns: []string{pattern}}, 1)
	clusterDeliver(r, cc, "in the window", routes, schs)
	clusterDeliver(r, m.C, "in the window, through the sharded client", routes, schs)

	mig, err := m.C.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if m.C.Window() != nil {
		t.Fatal("the window is still open after the migration")
	}
	r.SyncClean()
	checkClusterPlacement(t, cc, old, fixtures.PSPlacement{Channels: chs, ShardChannels: schs, Patterns: []string{pattern}}, 0)
	clusterDeliver(r, cc, "after the move", routes, schs)
	slots := map[int]bool{}
	for _, ch := range schs {
		slots[shardedredis.Slot(ch)] = true
	}
	checkClusterPubSubConns(t, m.C.ClusterClient(), 1+len(slots))

	late := fixtures.NewPSReader(t, m.C.Subscribe(ctx, "late"))
	late.Expect(fixtures.PSConfirmations("subscribe", 1, 1, "late")...)
	if err := late.PS.PSubscribe(ctx, "later.*"); err != nil {
		t.Fatal(err)
	}
	late.Expect(fixtures.PSConfirmations("psubscribe", 2, 1, "later.*")...)
	if err := late.PS.SSubscribe(ctx, "slate0", "slate1"); err != nil {
		t.Fatal(err)
	}
	late.Expect(fixtures.PSConfirmations("ssubscribe", 1, 1, "slate0", "slate1")...)
	lateRoutes := map[string][]string{"late": {""}, "later.x": {"later.*"}}
	clusterDeliver(late, cc, "subscribed after the move", lateRoutes, []string{"slate0", "slate1"})
	if shardedredis.Slot("slate0") == shardedredis.Slot("slate1") {
		t.Fatal("slate0 and slate1 share a slot")
	}
	checkClusterPubSubConns(t, m.C.ClusterClient(), 1+len(slots)+3)

	if err := late.PS.SUnsubscribe(ctx, "slate0"); err != nil {
		t.Fatal(err)
	}
	late.Expect(fixtures.PSConfirmations("sunsubscribe", 1, 0, "slate0")...)
	if n, err := cc.SPublish(ctx, "slate0", "gone").Result(); err != nil || n != 0 {
		t.Fatalf("SPUBLISH slate0 after SUNSUBSCRIBE = %d, %v; want 0 receivers", n, err)
	}
	clusterDeliver(late, cc, "after SUNSUBSCRIBE", lateRoutes, []string{"slate1"})
	checkClusterPubSubConns(t, m.C.ClusterClient(), 1+len(slots)+2)
}

// checkClusterPubSubConns polls until cc, summed over its nodes, has want
// subscription connections open.
func checkClusterPubSubConns(t *testing.T, cc *goredis.ClusterClient, want int) {
	t.Helper()
	fixtures.Poll(t, 5*time.Second, "subscription connections to the cluster", func() error {
		var open atomic.Int64
		err := cc.ForEachShard(ctx, func(_ context.Context, node *goredis.Client) error {
			open.Add(int64(node.PoolStats().PubSubStats.Active))
			return nil
		})
		if err == nil && open.Load() != int64(want) {
			err = fmt.Errorf("%d open, want %d", open.Load(), want)
		}
		return err
	})
}

// sPublisher shard-publishes through c.
func sPublisher(c goredis.Cmdable) func(ch, payload string) (int64, error) {
	return func(ch, payload string) (int64, error) { return c.SPublish(ctx, ch, payload).Result() }
}

// clusterDeliver publishes through c, which sends to the cluster, on each
// channel of routes and shard channel of ShardChannels, and checks that
// exactly one message per route arrives, and nothing else before the next
// pong. SPUBLISH must count exactly one receiver (its slot's master counts
// those of the slot); PUBLISH counts only the receivers on the node it was
// sent to, so its count is not checked.
func clusterDeliver(r *fixtures.PSReader, c goredis.Cmdable, tag string, routes map[string][]string, shardChannels []string) {
	r.T.Helper()
	for ch := range routes {
		if err := c.Publish(ctx, ch, fixtures.PSPayload(tag, ch)).Err(); err != nil {
			r.T.Fatalf("%s: publish %s: %v", tag, ch, err)
		}
	}
	r.Received(tag, routes)
	r.Deliver(sPublisher(c), tag, fixtures.PSRoutes(shardChannels...))
	r.SyncClean()
}

// checkClusterPlacement polls until the cluster holds want once: each
// channel and shard channel on one connection of one node (summed over
// every node: a shard channel's SPUBLISH shows on which), and every
// pattern once; and until each old server holds no channel and oldPatterns
// of want's patterns.
func checkClusterPlacement(t *testing.T, cc *goredis.ClusterClient, old []*fixtures.PSServer, want fixtures.PSPlacement, oldPatterns int) {
	t.Helper()
	fixtures.Poll(t, 5*time.Second, "subscriptions on the cluster", func() error {
		var mu sync.Mutex
		subs, ssubs := map[string]int64{}, map[string]int64{}
		var numpat int64
		err := cc.ForEachShard(ctx, func(ctx context.Context, node *goredis.Client) error {
			ns, err := node.PubSubNumSub(ctx, want.Channels...).Result()
			if err != nil {
				return err
			}
			ss, err := node.PubSubShardNumSub(ctx, want.ShardChannels...).Result()
			if err != nil {
				return err
			}
			np, err := node.PubSubNumPat(ctx).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for ch, n := range ns {
				subs[ch] += n
			}
			for ch, n := range ss {
				ssubs[ch] += n
			}
			numpat += np
			return nil
		})
		if err != nil {
			return err
		}
		for _, ch := range want.Channels {
			if subs[ch] != 1 {
				return fmt.Errorf("channel %s has %d subscribers on the cluster, want 1", ch, subs[ch])
			}
		}
		for _, ch := range want.ShardChannels {
			if ssubs[ch] != 1 {
				return fmt.Errorf("shard channel %s has %d subscribers on the cluster, want 1", ch, ssubs[ch])
			}
		}
		if numpat != int64(len(want.Patterns)) {
			return fmt.Errorf("the cluster holds %d patterns, want %d", numpat, len(want.Patterns))
		}
		for _, s := range old {
			if err := fixtures.PSServerHolds(s, nil, nil, oldPatterns); err != nil {
				return fmt.Errorf("old shard %s (%s): %w", s.Name, s.Addr, err)
			}
		}
		return nil
	})
}
