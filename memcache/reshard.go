package memcache

import (
	"context"
	"errors"

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
// whose owner changed, the client moves it (get on the old owner, add on
// the new one with opt.CopyExpiration, delete on the old one). add never
// overwrites a value the new owner already has (it was written after the
// switch and is newer); a delete reaches the only copy. Keys nobody touches
// stay on their old owner, unreachable once EndResharding drops the old
// ring: keep the window open for as long as the cache's useful lifetime of
// a value. Shards with the same name, address and settings keep their
// client. Every client of the same servers must switch at the same time.
func (c *ShardedClient) BeginResharding(shards []ShardOptions, opt ReshardOptions) error {
	c.reshardMu.Lock() // one BeginResharding at a time
	defer c.reshardMu.Unlock()
	return c.switchShards(shards, func(next []Shard) error {
		v := c.shards.Acquire()
		moving := v.Moving()
		v.Release()
		if moving {
			return shardedclient.ErrMoveInProgress // the window keeps its expiration
		}
		old := c.copyExpiration.Swap(opt.CopyExpiration)
		err := c.shards.BeginMove(next)
		if err != nil {
			c.copyExpiration.Store(old) // no window began: nothing copied meanwhile
		}
		return err
	})
}

// EndResharding ends the window: the old ring is dropped and the clients of
// the shards that left are closed once the calls using them have ended.
func (c *ShardedClient) EndResharding() error { return c.shards.EndMove() }

// settle prepares key for a call: it waits until gate opens (see
// shardedclient.View.Gate), then, if the key moved, moves it to its new
// owner under its lock. The call itself needs no lock: once the key has left
// its old owner nothing puts it back there.
func (c *ShardedClient) settle(ctx context.Context, v *view, gate <-chan struct{}, key string, from, to int, moved bool) error {
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !moved {
		return nil
	}
	defer c.moveLocks.Lock(key)()
	return c.moveToOwner(v, key, from, to)
}

// moveToOwner moves key from shard from to shard to, if from still holds
// it. The caller holds the key's lock.
func (c *ShardedClient) moveToOwner(v *view, key string, from, to int) error {
	item, err := v.Client(from).Get(key)
	if errors.Is(err, memcache.ErrCacheMiss) {
		return nil
	}
	if err != nil {
		return finish(v, from, err)
	}
	item.Expiration = c.copyExpiration.Load()
	if err := v.Client(to).Add(item); err != nil && !errors.Is(err, memcache.ErrNotStored) {
		return finish(v, to, err)
	}
	if err := v.Client(from).Delete(key); err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
		return finish(v, from, err)
	}
	return nil
}
