package integration_test

// SCAN returns a key more than once (Redis allows it, e.g.
// while a table shrinks). Here every SCAN reply of the migration on a
// source also repeats the keys of the source's previous reply, so that
// every key comes back twice, deterministically. Each stale copy must be
// counted once, each move once, and each run's counts must add up.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

func TestReshardScanDuplicates(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		for _, inflight := range []int{1, 3} {
			t.Run(fmt.Sprintf("seed%d/inflight%d", seed, inflight), func(t *testing.T) {
				w := cutFixture(t, seed, int(seed), 300)
				var mu sync.Mutex
				prev := map[string][]string{} // addr -> keys of the previous SCAN reply
				addrs := map[string]bool{}
				onScanReplies(w.c, func(addr string, sc *goredis.ScanCmd) {
					keys, cursor := sc.Val()
					mu.Lock()
					addrs[addr] = true
					dup := slices.Concat(keys, prev[addr])
					prev[addr] = slices.Clone(keys)
					if cursor == 0 {
						delete(prev, addr)
					}
					mu.Unlock()
					sc.SetVal(dup, cursor)
				})
				m, err := w.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 2, InFlight: inflight})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx); err != nil {
					t.Fatal(err)
				}
				c := checkRunCounts(t, "run", m.Progress())
				var scanned int64
				for _, p := range m.Progress() {
					scanned += p.Scanned
					t.Logf("%s: %+v", p.Shard, p)
				}
				distinct := len(w.keys)
				if c.moved != int64(w.moving) {
					t.Errorf("the run moved %d keys, want the %d that change owner", c.moved, w.moving)
				}
				if c.stale != int64(w.stale) {
					t.Errorf("the run counts %d stale copies, want the %d there were (each returned twice by SCAN)", c.stale, w.stale)
				}
				t.Logf("scanned %d (SCAN returned every key twice); %d keys + %d stale copies on the sources", scanned, distinct, w.stale)
				w.checkFinal(t)
			})
		}
	}
}

// onScanReplies calls f with each SCAN reply that did not fail on c's shard
// clients, and the address of the server that sent it; f may change it.
func onScanReplies(c *shardedredis.ShardedClient, f func(addr string, sc *goredis.ScanCmd)) {
	c.OnNewNode(func(node *goredis.Client) {
		addr := node.Options().Addr
		node.AddHook(sendHook{after: func(_ context.Context, cmds []goredis.Cmder) {
			for _, cmd := range cmds {
				if sc, ok := cmd.(*goredis.ScanCmd); ok && sc.Err() == nil {
					f(addr, sc)
				}
			}
		}})
	})
}
