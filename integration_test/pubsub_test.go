package integration_test

import (
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// channelsOnShards returns channel names "ch<i>" that cover at least two
// shards: three channels, not all on one shard.
func channelsOnShards(t *testing.T, owner func(string) int) []string {
	t.Helper()
	for i := 0; i < 100; i++ {
		chs := []string{"ch" + string(rune('a'+i%26)), "ch1", "ch2"}
		if owner(chs[0]) != owner(chs[1]) || owner(chs[1]) != owner(chs[2]) {
			return chs
		}
	}
	t.Fatal("no channels on two shards")
	return nil
}

func receiveN(t *testing.T, ps *goredis.PubSub, n int) []string {
	t.Helper()
	var got []string
	for range n {
		ctx2, cancel := contextWithTimeout(5 * time.Second)
		msg, err := ps.ReceiveMessage(ctx2)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, msg.Channel+"="+msg.Payload+"/"+msg.Pattern)
	}
	slices.Sort(got)
	return got
}

// Subscribe to three channels on two shards receives all three messages,
// each published on its channel's shard.
func TestRedisSubscribeAcrossShards(t *testing.T) {
	servers, c := startShards(t, 3)
	owner := func(ch string) int { return c.GetShardInfo(ch).Index }
	chs := channelsOnShards(t, owner)
	ps := c.Subscribe(ctx, chs...)
	defer ps.Close()
	for range chs { // wait for every confirmation
		m, err := ps.Receive(ctx)
		if _, ok := m.(*goredis.Subscription); !ok || err != nil {
			t.Fatalf("confirmation: %v, %v", m, err)
		}
	}
	var want []string
	for _, ch := range chs {
		if n, err := c.Publish(ctx, ch, "hi "+ch).Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH %s = %d, %v; want 1 receiver on its shard", ch, n, err)
		}
		if got := servers[owner(ch)].PubSubNumSub(ch)[ch]; got != 1 {
			t.Fatalf("shard %d has %d subscribers of %s", owner(ch), got, ch)
		}
		want = append(want, ch+"=hi "+ch+"/")
	}
	slices.Sort(want)
	if got := receiveN(t, ps, 3); !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	// Unsubscribe one channel: its shard drops the subscriber.
	if err := ps.Unsubscribe(ctx, chs[0]); err != nil {
		t.Fatal(err)
	}
	m, err := ps.Receive(ctx)
	if sub, ok := m.(*goredis.Subscription); !ok || err != nil || sub.Kind != "unsubscribe" || sub.Channel != chs[0] || sub.Count != 2 {
		t.Fatalf("unsubscribe confirmation: %#v, %v", m, err)
	}
	if n, _ := c.Publish(ctx, chs[0], "gone").Result(); n != 0 {
		t.Fatalf("PUBLISH to an unsubscribed channel reached %d receivers", n)
	}
	if err := ps.Ping(ctx, "still there"); err != nil {
		t.Fatalf("PING on the pub/sub connection: %v", err)
	}
	m, err = ps.Receive(ctx)
	if pong, ok := m.(*goredis.Pong); !ok || err != nil || pong.Payload != "still there" {
		t.Fatalf("PING reply: %#v, %v", m, err)
	}
}

// PSubscribe receives messages from every shard.
func TestRedisPSubscribeEveryShard(t *testing.T) {
	_, c := startShards(t, 3)
	owner := func(ch string) int { return c.GetShardInfo(ch).Index }
	chs := channelsOnShards(t, owner)
	ps := c.PSubscribe(ctx, "ch*")
	defer ps.Close()
	m, err := ps.Receive(ctx)
	if sub, ok := m.(*goredis.Subscription); !ok || err != nil || sub.Kind != "psubscribe" || sub.Count != 1 {
		t.Fatalf("psubscribe confirmation: %#v, %v", m, err)
	}
	var want []string
	for _, ch := range chs {
		if n, err := c.Publish(ctx, ch, "p").Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH %s = %d, %v", ch, n, err)
		}
		want = append(want, ch+"=p/ch*")
	}
	slices.Sort(want)
	if got := receiveN(t, ps, 3); !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	// The Channel() form delivers too.
	msgs := ps.Channel()
	c.Publish(ctx, chs[0], "via channel")
	select {
	case msg := <-msgs:
		if msg.Payload != "via channel" {
			t.Fatalf("Channel() delivered %v", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Channel() delivered nothing")
	}
}
