package topology_test

// Issue 11's property for hooks and health: random shard-list changes (cold
// SetShards that add, remove or re-address a shard or change its options,
// resharding windows run to the end) while commands run, some of them with
// a context the caller already cancelled. After every step, a hook added
// once at the start has seen each SET that ran exactly once, and no shard's
// health has counted a failure: none of the servers failed.

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

func TestTopologyPropertyHooksAndHealth(t *testing.T) {
	seed := fixtures.DiffSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	servers := make([]*miniredis.Miniredis, 5)
	for i := range servers {
		servers[i] = miniredis.RunT(t)
	}
	// list draws a random shard list: 2 to 5 of the servers, each under its
	// own name, some with a PoolSize option that changes from list to list.
	list := func() []shardedredis.ShardOptions {
		var out []shardedredis.ShardOptions
		for _, i := range rng.Perm(len(servers))[:2+rng.IntN(len(servers)-1)] {
			so := shardedredis.ShardOptions{Name: "s" + strconv.Itoa(i), Addr: servers[i].Addr()}
			if rng.IntN(3) == 0 {
				so.Options = &goredis.Options{PoolSize: 2 + rng.IntN(3)}
			}
			out = append(out, so)
		}
		return out
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: list(),
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hook := &fixtures.SetCounter{Sets: map[string]int{}}
	c.AddHook(hook)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for step := range 60 {
		var what string
		switch rng.IntN(3) {
		case 0, 1:
			what = "SetShards"
			if err := c.SetShards(list()); err != nil && !errors.Is(err, shardedclient.ErrPlacementShift) {
				t.Fatalf("seed=%d step %d: SetShards: %v", seed, step, err)
			}
		default:
			what = "resharding"
			if err := c.BeginResharding(list()); err != nil {
				t.Fatalf("seed=%d step %d: BeginResharding: %v", seed, step, err)
			}
			m, err := c.NewMigration(shardedredis.MigrateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx); err != nil {
				t.Fatalf("seed=%d step %d: migration: %v", seed, step, err)
			}
		}
		hook.Take()
		want := map[string]int{}
		for i := range 40 {
			k := "p" + strconv.Itoa(rng.IntN(200))
			if i%4 == 0 { // the caller's cancel: not the shard's failure
				// (A hook sees it when it reaches a shard client, not when
				// it ends before: waiting for a key's barrier, say.)
				if err := c.Set(cancelled, "cancelled:"+k, i, 0).Err(); !errors.Is(err, context.Canceled) {
					t.Fatalf("seed=%d step %d: SET with a cancelled context: %v", seed, step, err)
				}
				continue
			}
			want[k]++
			if err := c.Set(ctx, k, i, 0).Err(); err != nil {
				t.Fatalf("seed=%d step %d (%s): SET: %v", seed, step, what, err)
			}
		}
		got := hook.Take()
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("seed=%d step %d (%s): the hook saw %d SETs of %s, want %d", seed, step, what, got[k], k, n)
			}
		}
		for _, st := range c.Stats() {
			if st.Errors != 0 || st.Ejected || st.Ejections != 0 {
				t.Fatalf("seed=%d step %d (%s): shard %s counted a failure: %+v", seed, step, what, st.Name, st)
			}
		}
	}
}
