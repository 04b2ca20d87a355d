package pubsub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// A shard's failure reaches Receive exactly once, as an error where
// errors.As finds the *ShardError, whether go-redis asked for RESP3 (and
// then peeks before each reply) or RESP2; the connection stays: the
// confirmations and a PING's pong follow.
func TestPubSubShardFailureIsReadOnce(t *testing.T) {
	ctx := context.Background()
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", protocol), func(t *testing.T) {
			live, dead := miniredis.RunT(t), miniredis.RunT(t)
			deadAddr := dead.Addr()
			dead.Close()
			var list []shardcore.Shard[*goredis.Client]
			for _, addr := range []string{live.Addr(), deadAddr} {
				c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
				list = append(list, shardcore.Shard[*goredis.Client]{Addr: addr, Client: c})
			}
			shards, err := shardcore.New(list, shardcore.Backend[*goredis.Client]{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = shards.Close() })
			router := goredis.NewClient(&goredis.Options{
				Addr: "fan-in:0", Protocol: protocol, DisableIdentity: true,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
				Dialer:                   func(context.Context, string, string) (net.Conn, error) { return Dial(shards, Clusters{}), nil },
			})
			t.Cleanup(func() { _ = router.Close() })
			chs := make([]string, 2) // one channel on each shard
			for i := 0; chs[0] == "" || chs[1] == ""; i++ {
				ch := fmt.Sprint("ch", i)
				chs[shards.Locate(ch)] = ch
			}

			ps := router.Subscribe(ctx, chs...)
			defer ps.Close()
			_, err = ps.Receive(ctx)
			var se *shardedclient.ShardError
			if !errors.As(err, &se) || se.Index != 1 || se.Addr != deadAddr {
				t.Fatalf("first Receive: %v (%T), want the ShardError of shard 1", err, err)
			}
			for i, ch := range chs {
				m, err := ps.Receive(ctx)
				if sub, ok := m.(*goredis.Subscription); !ok || err != nil || *sub != (goredis.Subscription{Kind: "subscribe", Channel: ch, Count: i + 1}) {
					t.Fatalf("confirmation %d: %v, %v", i, m, err)
				}
			}
			if err := ps.Ping(ctx, "p"); err != nil {
				t.Fatal(err)
			}
			if m, err := ps.Receive(ctx); err != nil || *m.(*goredis.Pong) != (goredis.Pong{Payload: "p"}) {
				t.Fatalf("after the failure: %v, %v; want the pong", m, err)
			}
		})
	}
}
