package memcache

import (
	"context"
	"fmt"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// ReshardOptions configure BeginResharding.
type ReshardOptions struct {
	// CopyExpiration is the expiration (memcached's exptime: seconds, or a
	// Unix time) given to a value copied to its new owner; 0 means none.
	// memcached's text protocol does not tell an item's remaining time to
	// live, so a copy cannot keep it: choose the longest TTL the
	// application uses, or less.
	CopyExpiration int32
}

// PlanResharding returns the exact change of ownership that moving to shards
// would make (ring.Compare of the current and the target ring). It creates
// no client and resolves no address.
func (c *ShardedClient) PlanResharding(shards []ShardOptions) (ring.Diff, error) {
	nodes := make([]ring.Node, len(shards))
	for i, so := range shards {
		nodes[i] = ring.Node{Name: so.Name, Weight: so.Weight, Addr: so.Addr}
	}
	return c.shards.Plan(nodes)
}

// BeginResharding switches the client to a new shard list without a cold
// cache. memcached cannot list its keys, so the window is the migration:
// keys are placed by the new ring at once, and before any call uses a key
// whose owner changed, the client moves it, batched per old owner: a
// multi-get there, then for each hit a set on the new owner (with
// opt.CopyExpiration and the item's flags) and a delete on the old owner,
// and for each miss a delete on the new owner.
//
// The rule that keeps every write: while the old owner still holds a key,
// its value is the truth, unless this process already moved the key inside
// this window (then the value on the new owner is newer). A copy that the
// new owner holds before the key's first move in the window is stale by
// definition (a leftover of an earlier shard list or of an ejection) and
// never wins: the move overwrites it, or deletes it when the old owner has
// nothing. The window remembers each key it has moved, so that it moves
// once: one map entry per key used in the window, dropped by EndResharding.
//
// Keys nobody touches stay on their old owner, unreachable once
// EndResharding drops the old ring: keep the window open for as long as the
// cache's useful lifetime of a value. Shards with the same name, address
// and settings keep their client. Every client of the same servers must
// switch at the same time. It returns ErrMoveInProgress while a window is
// open, and the errors of SetShards.
func (c *ShardedClient) BeginResharding(shards []ShardOptions, opt ReshardOptions) error {
	c.reshardMu.Lock() // one BeginResharding at a time
	defer c.reshardMu.Unlock()
	return c.switchShards(shards, func(next []Shard) error {
		if c.shards.Window() != nil {
			return shardedclient.ErrMoveInProgress // the window keeps its expiration
		}
		old := c.copyExpiration.Swap(opt.CopyExpiration)
		err := c.shards.BeginMove(next, nil)
		if err != nil {
			c.copyExpiration.Store(old) // no window began: nothing copied meanwhile
		}
		return err
	})
}

// EndResharding ends the window: the old ring is dropped and the clients of
// the shards that left are closed once the calls using them have ended.
// Keys not used in the window stay on their old owner, unreachable.
func (c *ShardedClient) EndResharding() error { return c.shards.EndMove(true) }

// moveKeys is the client's shardedclient.Mover (see BeginResharding): per old
// owner, one multi-get, then a set on the new owner and a delete on the old
// one for each hit, a delete on the new owner for each miss. It stops at
// the first failure, or when ctx ends, with an error naming the key, the
// step and the shard; the keys done so far are remembered.
func (c *ShardedClient) moveKeys(ctx context.Context, v *view, keys []shardedclient.MovingKey) error {
	w := c.shards.Window()
	byFrom := map[int][]string{}
	for _, k := range keys {
		byFrom[k.From] = append(byFrom[k.From], k.Key)
	}
	for _, k := range keys {
		if _, ok := byFrom[k.From]; !ok {
			continue // its group is done
		}
		names := byFrom[k.From]
		delete(byFrom, k.From)
		if err := ctx.Err(); err != nil {
			return err
		}
		items, err := v.Client(k.From).GetMulti(names)
		if err != nil {
			return moveErr(v, "get", names[0], k.From, k.From, err)
		}
		for _, m := range keys {
			if m.From != k.From {
				continue
			}
			if err := c.moveOne(v, m, items[m.Key]); err != nil {
				return err
			}
			w.Remember(m.Key)
		}
	}
	return nil
}

// moveOne puts item, the value of key k on its old owner (nil: none), on
// k's new owner, and deletes the old copy.
func (c *ShardedClient) moveOne(v *view, k shardedclient.MovingKey, item *memcache.Item) error {
	if item == nil {
		if err := v.Client(k.To).Delete(k.Key); err != nil && err != memcache.ErrCacheMiss {
			return moveErr(v, "delete stale copy", k.Key, k.From, k.To, err)
		}
		return nil
	}
	item.Expiration = c.copyExpiration.Load()
	if err := v.Client(k.To).Set(item); err != nil {
		return moveErr(v, "set", k.Key, k.From, k.To, err)
	}
	if err := v.Client(k.From).Delete(k.Key); err != nil && err != memcache.ErrCacheMiss {
		return moveErr(v, "delete old copy", k.Key, k.From, k.From, err)
	}
	return nil
}

// moveErr names a failed step of moving key from shard from: the shard at
// fault (at) is reported to its health and named, with the key and the
// step in the cause.
func moveErr(v *view, step, key string, from, at int, err error) error {
	return finish(v, at, fmt.Errorf("moving key %q from %s during resharding: %s: %w", key, v.Label(from), step, err))
}
