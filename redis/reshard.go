package redis

import (
	"context"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/ring"
)

// movedKey is a key whose owner changes in the resharding in progress.
type movedKey struct {
	key      string
	from, to int
}

// PlanResharding returns the exact change of ownership that moving to shards
// would make (ring.Compare of the current and the target ring: per (from,
// to) pair of shards, the share of the hash space that changes owner). It
// creates no client.
func (c *ShardedClient) PlanResharding(shards []ShardOptions) (ring.Diff, error) {
	nodes := make([]ring.Node, len(shards))
	for i, so := range shards {
		addr := so.Addr
		switch {
		case so.Failover != nil:
			addr = "sentinel:" + so.Failover.MasterName
		case addr == "" && so.Options != nil:
			addr = so.Options.Addr
		}
		nodes[i] = ring.Node{Name: so.Name, Weight: so.Weight, Addr: addr}
	}
	return c.shards.Plan(nodes)
}

// BeginResharding switches the client to a new shard list without a cold
// cache. From now on keys are placed by the new ring, and the old ring is
// kept as the previous one: before any command touches a key whose owner
// changed, the client moves that key from its old owner to its new one
// (DUMP and PTTL there, RESTORE here, then DEL there), so reads see it and
// writes, deletes included, apply to the only copy. RESTORE never replaces
// a value already on the new owner (it is newer: written after the switch),
// in which case the old copy is just deleted. A Migration (NewMigration,
// then Run) moves the remaining keys in the background; EndResharding (or
// Migration.Run, when it finishes)
// ends the window. Shards with the same name and address keep their client.
//
// A key the switch moves waits, before its first command, until the
// commands begun before BeginResharding have ended (a write of theirs could
// otherwise land on its old owner after the move): give blocking commands
// a timeout. Every client of the same shards must switch at the same time:
// a client still on the old ring would write keys to their old owners.
func (c *ShardedClient) BeginResharding(shards []ShardOptions) error {
	return c.switchShards(shards, c.shards.BeginMove)
}

// EndResharding ends the window that BeginResharding opened: the old ring is
// dropped, and the clients of shards that left are closed once the
// commands using them have ended. Keys not yet moved stay where they are,
// unreachable through this client: run a Migration to the end first.
func (c *ShardedClient) EndResharding() error { return c.shards.EndMove() }

// settle prepares a command's keys during and after resharding: it waits
// until gate (see shardedclient.View.Gate) opens, then moves the keys that
// have not reached their new owner. The keys' stripes are locked only while
// they move: once a key has left its old owner, nothing puts it back there
// (commands begun on older views have ended; the Migration takes the same
// locks), so the command itself needs no lock.
func (c *ShardedClient) settle(ctx context.Context, v *view, moved []movedKey, gate <-chan struct{}) error {
	return c.settleWith(ctx, v, moved, gate, func() error {
		_, err := moveKeys(ctx, v, moved)
		return err
	})
}

// settleWith waits for gate, then runs move with the stripes of moved locked.
func (c *ShardedClient) settleWith(ctx context.Context, v *view, moved []movedKey, gate <-chan struct{}, move func() error) error {
	if gate != nil {
		if err := waitGates(ctx, []<-chan struct{}{gate}); err != nil {
			return err
		}
	}
	if len(moved) == 0 {
		return nil
	}
	unlock := c.lockStripes(moved)
	defer unlock()
	return move()
}

// lockStripes locks the keys' stripes (see shardedclient.KeyLocks).
func (c *ShardedClient) lockStripes(keys []movedKey) func() {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	return c.moveLocks.Lock(names...)
}

// moveCounts are the outcomes of moving keys.
type moveCounts struct {
	moved   int // restored on the new owner and deleted from the old
	skipped int // not on the old owner, or already on the new one (newer)
}

// moveKeys moves keys from their old owner to their new one, three round
// trips for any number of keys: DUMP and PTTL on the old owners, RESTORE
// (never REPLACE) on the new ones, DEL on the old ones of the keys that
// the new owner now holds. The caller holds the keys' stripes.
func moveKeys(ctx context.Context, v *view, keys []movedKey) (moveCounts, error) {
	var counts moveCounts
	dumps := make([]*goredis.StringCmd, len(keys))
	ttls := make([]*goredis.DurationCmd, len(keys))
	groups := make([][]goredis.Cmder, v.Len())
	for i, k := range keys {
		dumps[i] = goredis.NewStringCmd(ctx, "dump", k.key)
		ttls[i] = goredis.NewDurationCmd(ctx, time.Millisecond, "pttl", k.key)
		groups[k.from] = append(groups[k.from], dumps[i], ttls[i])
	}
	execGroups(ctx, v, groups)
	restores := make([]*goredis.StatusCmd, len(keys))
	groups = make([][]goredis.Cmder, v.Len())
	for i, k := range keys {
		switch err := dumps[i].Err(); {
		case err == goredis.Nil:
			counts.skipped++
			continue
		case err != nil:
			return counts, err
		case ttls[i].Err() != nil:
			return counts, ttls[i].Err()
		}
		ttl := ttls[i].Val()
		switch {
		case ttl == -2: // expired since the DUMP
			counts.skipped++
			continue
		case ttl < 0:
			ttl = 0
		case ttl < time.Millisecond:
			ttl = time.Millisecond // about to expire: keep it expiring
		}
		restores[i] = goredis.NewStatusCmd(ctx, "restore", k.key, ttl.Milliseconds(), dumps[i].Val())
		groups[k.to] = append(groups[k.to], restores[i])
	}
	execGroups(ctx, v, groups)
	dels := make([]goredis.Cmder, 0, len(keys))
	groups = make([][]goredis.Cmder, v.Len())
	for i, k := range keys {
		if restores[i] == nil {
			continue
		}
		switch err := restores[i].Err(); {
		case err == nil:
			counts.moved++
		case strings.HasPrefix(err.Error(), "BUSYKEY"):
			counts.skipped++ // the new owner has a newer value
		default:
			return counts, err
		}
		del := goredis.NewIntCmd(ctx, "del", k.key)
		dels = append(dels, del)
		groups[k.from] = append(groups[k.from], del)
	}
	execGroups(ctx, v, groups)
	return counts, firstErr(dels)
}
