package integration_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestReshardCancelInLastBatch cancels a migration's context as the
// RESTOREs (or DUMPs, or DELs) of the last batch of its only source are
// about to be sent: one page, one batch. Run must return context.Canceled
// and leave the window open (it once returned nil and ended the window with
// every moving key still on its old owner, unreachable); resumed, the
// migration moves each key once.
func TestReshardCancelInLastBatch(t *testing.T) {
	for _, name := range []string{"dump", "restore", "del"} {
		t.Run(name, func(t *testing.T) {
			shards, direct, c := safetyFixture(t, 2, 1, shardedredis.Health{})
			next := placementOf(t, shards)
			const n = 40
			moving := 0
			for i := range n {
				k := "lb:" + strconv.Itoa(i)
				if err := c.Set(ctx, k, i, 0).Err(); err != nil {
					t.Fatal(err)
				}
				moving += b2i(next.GetShardInfo(k).Index == 1)
			}
			if err := c.BeginResharding(shards); err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			h := &cancelOn{name: name, cancel: cancel}
			c.AddHook(beforeSend(h.before))
			m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 200, Parallelism: 1, InFlight: 1})
			if err != nil {
				t.Fatal(err)
			}
			err = m.Run(runCtx)
			p := m.Progress()[0]
			t.Logf("Run: %v; progress %+v; checkpoint %+v; window open: %v", err, p, m.Checkpoint(), c.Window() != nil)
			if h.hits.Load() != 1 {
				t.Fatalf("%d %s sent", h.hits.Load(), name)
			}
			if err != context.Canceled {
				t.Errorf("Run cut at the last batch's %s: %v, want context.Canceled", name, err)
			}
			if c.Window() == nil {
				t.Errorf("the window ended, though the cut left keys unmoved")
			}
			// Resumed, the migration moves each key that changes owner once,
			// and every key reads as it was.
			m2, err := c.NewMigration(shardedredis.MigrateOptions{Resume: m.Checkpoint()})
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Run(ctx); err != nil {
				t.Fatalf("resumed: %v", err)
			}
			moved := int64(0)
			for _, run := range [][]shardedredis.ShardProgress{m.Progress(), m2.Progress()} {
				moved += run[0].Moved + run[0].OnNewOwner
			}
			if moved != int64(moving) || c.Window() != nil {
				t.Fatalf("the runs moved %d keys, want %d; window ended: %v", moved, moving, c.Window() == nil)
			}
			for i := range n {
				k := "lb:" + strconv.Itoa(i)
				if holders := holdersOf(t, direct, k); !slices.Equal(holders, []int{next.GetShardInfo(k).Index}) {
					t.Fatalf("%s on servers %v, want only %d", k, holders, next.GetShardInfo(k).Index)
				}
				if v, err := c.Get(ctx, k).Int(); err != nil || v != i {
					t.Fatalf("%s: %d, %v; want %d", k, v, err, i)
				}
			}
		})
	}
}
