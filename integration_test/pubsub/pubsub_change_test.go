package pubsub_test

// Pub/sub across changes of the shard list (SetShards, ejection and rejoin,
// resharding) and shard failures, on miniredis and on real redis-server
// processes: every subscription is where PUBLISH reaches it, PSConfirmations
// mean what they mean on one server, no goroutine panics.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Issue 17: subscribed on 3 shards, SetShards to 2. No goroutine panics
// (the relay of the removed shard once indexed the new list by its old
// position); the channel of the removed shard moves to its new owner; an
// Unsubscribe is confirmed only once the shards have unsubscribed: no
// publish reaches the receiver after it.
func TestPubSubShrinkShardList(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		chs := fixtures.OneChannelPerShard(t, c, servers)
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs...))
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: chs})

		if err := c.SetShards(fixtures.PSShards(servers[:2]...)); err != nil {
			t.Fatal(err)
		}
		r.SyncClean()
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: chs})
		r.Deliver(fixtures.PSPublisher(c), "after SetShards", fixtures.PSRoutes(chs...))

		if err := r.PS.Unsubscribe(ctx, chs...); err != nil {
			t.Fatal(err)
		}
		r.Expect(fixtures.PSConfirmations("unsubscribe", 2, -1, chs...)...)
		r.Deliver(fixtures.PSPublisher(c), "after Unsubscribe", map[string][]string{chs[0]: nil, chs[1]: nil, chs[2]: nil})
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{})
		r.SyncClean()
	})
}

// Issue 11, item 1: named shards [a, b], Subscribe(chA), SetShards(b, a),
// then Subscribe(chB) where chB belongs to b: chB is subscribed on b's
// server (not a's), and PUBLISH chB reaches it.
func TestPubSubReorderedNamedShards(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 2)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		chA, chB := fixtures.OwnedBy(t, c, "ch", "s0"), fixtures.OwnedBy(t, c, "ch", "s1")
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chA))
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chA)...)
		if err := c.SetShards(fixtures.PSShards(servers[1], servers[0])); err != nil {
			t.Fatal(err)
		}
		if got := c.GetShardInfo(chB).Name; got != "s1" {
			t.Fatalf("%s moved to %s when the named shards were reordered", chB, got)
		}
		if err := r.PS.Subscribe(ctx, chB); err != nil {
			t.Fatal(err)
		}
		r.Expect(fixtures.PSConfirmations("subscribe", 2, 1, chB)...)
		r.Deliver(fixtures.PSPublisher(c), "reordered", fixtures.PSRoutes(chA, chB))
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: []string{chA, chB}})
	})
}

// A channel that moves to a shard added by SetShards keeps receiving; it
// is unsubscribed on its old owner.
func TestPubSubChannelMovesToAddedShard(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers[:2]...)
		chs := fixtures.PSNames("ch", 30)
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs...))
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
		if err := c.SetShards(fixtures.PSShards(servers...)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(chs, func(ch string) bool { return c.GetShardInfo(ch).Name == "s2" }) {
			t.Fatal("no channel moved to the added shard")
		}
		r.SyncClean()
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: chs})
		r.Deliver(fixtures.PSPublisher(c), "after adding s2", fixtures.PSRoutes(chs...))
	})
}

// Issue 18, item 3: a pattern covers every shard, shards added later
// included: PSubscribe("__keyspace@0__:*"), SetShards adding c, then a
// write on c: its keyspace event arrives (redis-server). On miniredis,
// which has no keyspace events, a publish on a channel of c arrives.
func TestPubSubPatternCoversAddedShard(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers[:2]...)
		pattern := "news.*"
		if servers[0].Real {
			pattern = "__keyspace@0__:*"
			for _, s := range servers {
				if err := s.Direct.ConfigSet(ctx, "notify-keyspace-events", "KEA").Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := fixtures.NewPSReader(t, c.PSubscribe(ctx, pattern))
		r.Expect(fixtures.PSConfirmations("psubscribe", 1, 1, pattern)...)
		if err := c.SetShards(fixtures.PSShards(servers...)); err != nil {
			t.Fatal(err)
		}
		r.SyncClean()
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Patterns: []string{pattern}})
		if !servers[0].Real {
			ch := fixtures.OwnedBy(t, c, "news.", "s2")
			r.Deliver(fixtures.PSPublisher(c), "on the added shard", map[string][]string{ch: {pattern}})
			return
		}
		k := fixtures.OwnedBy(t, c, "key:", "s2")
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		want := goredis.Message{Channel: "__keyspace@0__:" + k, Pattern: pattern, Payload: "set"}
		if m, ok := r.Next().(*goredis.Message); !ok || m.Channel != want.Channel || m.Pattern != want.Pattern || m.Payload != want.Payload {
			t.Fatalf("after SET %s on the added shard: %v, want %v", k, m, want)
		}
	})
}

// Issue 11, item 2: the first confirmation of a Subscribe over several
// shards means every channel of the call is live (go-redis's documented
// way to wait is one Receive): PUBLISH sports right after it reaches 1
// receiver, in every one of 10 runs. The other PSConfirmations follow, in
// order, with one server's counts.
func TestPubSubSubscribeConfirmsEveryShard(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 4)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		chs := []string{"news", "sports", "weather", "c4"}
		shards := map[string]bool{}
		for _, ch := range chs {
			shards[c.GetShardInfo(ch).Name] = true
		}
		if len(shards) < 2 {
			t.Fatalf("the channels are all on %v", shards)
		}
		for run := range 10 {
			ps := c.Subscribe(ctx, chs...)
			m, err := ps.Receive(ctx)
			if sub, ok := m.(*goredis.Subscription); !ok || err != nil || *sub != fixtures.PSConfirmations("subscribe", 1, 1, chs...)[0] {
				t.Fatalf("run %d: first reply %v, %v", run, m, err)
			}
			if n, err := c.Publish(ctx, "sports", "goal").Result(); err != nil || n != 1 {
				t.Fatalf("run %d: PUBLISH sports right after the first confirmation = %d, %v; want 1", run, n, err)
			}
			r := &fixtures.PSReader{T: t, PS: ps}
			r.Expect(fixtures.PSConfirmations("subscribe", 2, 1, chs[1:]...)...)
			if m, ok := r.Next().(*goredis.Message); !ok || m.Channel != "sports" || m.Payload != "goal" {
				t.Fatalf("run %d: %v, want the message on sports", run, m)
			}
			if err := ps.Close(); err != nil {
				t.Fatal(err)
			}
			fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{}) // the next run's PUBLISH counts only its own
		}
	})
}

// Issue 11, item 2: the subscription of a dead shard fails with a
// *ShardError naming the shard (not reply text), before the PSConfirmations
// of that call; the other shards' channels work, and the dead shard's
// channel receives once it is back (go-redis resubscribes).
func TestPubSubDeadShardError(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		chs := fixtures.OneChannelPerShard(t, c, servers)
		dead := servers[1]
		dead.Down()
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs...))
		err, _ := r.Next().(error)
		fixtures.WantShardError(t, "Subscribe with a dead shard", err, 1, dead.Addr)
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
		live := fixtures.PSRoutes(chs[0], chs[2])
		r.Deliver(fixtures.PSPublisher(c), "with a dead shard", live)

		dead.Up()
		payload := ""
		fixtures.Poll(t, 10*time.Second, "the returned shard's channel", func() error {
			payload = fmt.Sprint("back ", time.Now().UnixNano())
			if n, err := c.Publish(ctx, chs[1], payload).Result(); err != nil || n != 1 {
				return fmt.Errorf("PUBLISH = %d, %v", n, err)
			}
			return nil
		})
		for {
			m := r.Next()
			if err, ok := m.(error); ok { // the failures of the relay meanwhile
				fixtures.WantShardErrors(t, "while the shard was down", []error{err}, dead)
				continue
			}
			if msg, ok := m.(*goredis.Message); !ok || msg.Channel != chs[1] || msg.Payload != payload {
				t.Fatalf("received %v, want %q on %s", m, payload, chs[1])
			}
			break
		}
		r.SyncClean()
		r.Deliver(fixtures.PSPublisher(c), "after the shard returned", fixtures.PSRoutes(chs...))
	})
}

// EjectMode: the channels of an ejected shard move to the shards that now
// own them, and back when it rejoins; patterns leave the ejected shard and
// return to it.
func TestPubSubFollowsEjectionAndRejoin(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{
			Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		}, servers...)
		r, want, all := subscribeChannelsAndPattern(t, c)

		dead := servers[1]
		fixtures.EjectServer(t, c, dead)
		fixtures.WantShardErrors(t, "ejection", r.Sync(), dead)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: want.Channels, Patterns: want.Patterns, Down: []*fixtures.PSServer{dead}})
		r.Deliver(fixtures.PSPublisher(c), "ejected", all)

		fixtures.RejoinServer(t, c, dead)
		r.SyncClean()
		fixtures.CheckPSPlacement(t, c, servers, want)
		r.Deliver(fixtures.PSPublisher(c), "rejoined", all)
	})
}

// Resharding: subscriptions move to the new owners at BeginResharding; a
// shard that the window removes keeps the patterns (it is still in the
// list) but no channel, and nothing once the window ends.
func TestPubSubFollowsResharding(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers[:2]...)
		r, want, all := subscribeChannelsAndPattern(t, c)
		for _, step := range []struct {
			name string
			run  func() error
		}{
			{"BeginResharding adding s2", func() error { return c.BeginResharding(fixtures.PSShards(servers...)) }},
			{"the migration ends the window", func() error { fixtures.RunMigration(t, c); return nil }},
			{"BeginResharding removing s1", func() error { return c.BeginResharding(fixtures.PSShards(servers[2], servers[0])) }},
			{"the migration ends the window", func() error { fixtures.RunMigration(t, c); return nil }},
		} {
			if err := step.run(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			r.SyncClean()
			fixtures.CheckPSPlacement(t, c, servers, want)
			r.Deliver(fixtures.PSPublisher(c), step.name, all)
		}
	})
}

// Shard channels (SSUBSCRIBE, redis-server only) follow SetShards as
// channels do, and SPUBLISH reaches them; smessages arrive as messages.
func TestPubSubShardChannelsFollowSetShards(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		if !servers[0].Real {
			t.Skip("miniredis has no SSUBSCRIBE")
		}
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers[:2]...)
		chs := fixtures.PSNames("sch", 20)
		r := fixtures.NewPSReader(t, c.SSubscribe(ctx, chs...))
		r.Expect(fixtures.PSConfirmations("ssubscribe", 1, 1, chs...)...)
		spublish := func(ch, payload string) (int64, error) { return c.SPublish(ctx, ch, payload).Result() }
		for _, list := range [][]*fixtures.PSServer{servers, {servers[2], servers[0]}} {
			if err := c.SetShards(fixtures.PSShards(list...)); err != nil {
				t.Fatal(err)
			}
			r.SyncClean()
			fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{ShardChannels: chs})
			r.Deliver(spublish, "shard channels on "+strings.Join(fixtures.PSServerNames(list), ","), fixtures.PSRoutes(chs...))
		}
		if err := r.PS.SUnsubscribe(ctx); err != nil {
			t.Fatal(err)
		}
		r.Expect(fixtures.PSConfirmations("sunsubscribe", 19, -1, fixtures.PSSorted(chs)...)...)
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{})
	})
}

// Subscribing and unsubscribing while another goroutine changes the shard
// list over and over: every confirmation carries one server's count, no
// goroutine panics or races, and once the changes stop (and a PING), the
// servers hold exactly the subscriptions and every publish arrives once.
func TestPubSubSubscribeDuringShardChanges(t *testing.T) {
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		servers := fixtures.StartPSServers(t, b, 3)
		c := fixtures.NewPSClient(t, shardedredis.Health{}, servers...)
		lists := [][]*fixtures.PSServer{servers[:2], {servers[2], servers[0]}, servers, {servers[1]}}
		changes := make(chan error, 1)
		go func() {
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				err = c.SetShards(fixtures.PSShards(lists[i%len(lists)]...))
			}
			changes <- err
		}()
		chs := fixtures.PSNames("ch", 12)
		r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs[0]))
		r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs[0])...)
		subscribed := map[string]bool{chs[0]: true}
		for i := range 40 {
			ch := chs[i*7%len(chs)]
			call, kind := r.PS.Subscribe, "subscribe"
			if subscribed[ch] {
				call, kind = r.PS.Unsubscribe, "unsubscribe"
			}
			if err := call(ctx, ch); err != nil {
				t.Fatal(err)
			}
			if kind == "subscribe" {
				subscribed[ch] = true
			} else {
				delete(subscribed, ch)
			}
			r.Expect(goredis.Subscription{Kind: kind, Channel: ch, Count: len(subscribed)})
		}
		if err := <-changes; err != nil {
			t.Fatal(err)
		}
		r.SyncClean()
		want := slices.Collect(maps.Keys(subscribed))
		rs := fixtures.PSRoutes(want...)
		for _, ch := range chs {
			if !subscribed[ch] {
				rs[ch] = nil
			}
		}
		fixtures.CheckPSPlacement(t, c, servers, fixtures.PSPlacement{Channels: want})
		r.Deliver(fixtures.PSPublisher(c), "after the changes", rs)
	})
}

// subscribeChannelsAndPattern subscribes c to 30 channels ("ch:...") and
// the pattern "p.*", checks the confirmations, and returns the reader, the
// placement the subscriptions want, and where a publication of each
// channel (and of "p.x") must arrive.
func subscribeChannelsAndPattern(t *testing.T, c *shardedredis.ShardedClient) (*fixtures.PSReader, fixtures.PSPlacement, map[string][]string) {
	t.Helper()
	chs := fixtures.PSNames("ch", 30)
	r := fixtures.NewPSReader(t, c.Subscribe(ctx, chs...))
	r.Expect(fixtures.PSConfirmations("subscribe", 1, 1, chs...)...)
	if err := r.PS.PSubscribe(ctx, "p.*"); err != nil {
		t.Fatal(err)
	}
	r.Expect(fixtures.PSConfirmations("psubscribe", 31, 1, "p.*")...)
	all := fixtures.PSRoutes(chs...)
	all["p.x"] = []string{"p.*"}
	return r, fixtures.PSPlacement{Channels: chs, Patterns: []string{"p.*"}}, all
}
