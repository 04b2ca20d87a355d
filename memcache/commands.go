package memcache

import (
	"context"
	"maps"
	"sync/atomic"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/internal/workers"
)

// Every method of *memcache.Client, with its signature, on the shard(s)
// that the package documentation names. Each method without a context
// calls its Context variant with context.Background(), which runs the call
// in the caller's goroutine.
//
// Every single-key call sends one request to the shard that owns its key
// and returns: memcache.ErrMalformedKey, sending nothing, for a key
// memcached refuses; memcached's answer as gomemcache returns it
// (ErrCacheMiss, ErrNotStored, ErrCASConflict unchanged); or, when the
// shard cannot be reached or its connection breaks, a
// *shardedclient.ShardError naming the shard. A Context variant whose ctx is
// done before the call returns ctx.Err(), sending nothing; if ctx ends
// before the shard answers, it returns a *shardedclient.ShardError naming
// the shard and wrapping ctx.Err(), while the request runs on: its own
// outcome (an answer, or the shard's socket timeout) is what the shard's
// health counts, never the caller's cancel or deadline.

// Get gets the item for key from the shard that owns it. It returns
// memcache.ErrCacheMiss for a miss and memcache.ErrMalformedKey, sending
// nothing, for a key memcached refuses.
func (c *ShardedClient) Get(key string) (*memcache.Item, error) {
	return c.GetContext(context.Background(), key)
}

// GetContext is Get, failing with ctx.Err() if ctx ends first (see above).
func (c *ShardedClient) GetContext(ctx context.Context, key string) (*memcache.Item, error) {
	return onKey(ctx, c, "Get", key, func(m *memcache.Client, t casIDs) (*memcache.Item, error) {
		it, err := m.Get(t.key) // t.key, not key: a closure that captures nothing is not allocated
		if IsTombstone(it) {
			return nil, memcache.ErrCacheMiss
		}
		return t.mark(it), err
	})
}

// GetAndTouch gets the item for key and sets its expiration (memcached's
// gat), on the shard that owns key.
func (c *ShardedClient) GetAndTouch(key string, expiration int32) (*memcache.Item, error) {
	return c.GetAndTouchContext(context.Background(), key, expiration)
}

// GetAndTouchContext is GetAndTouch, failing with ctx.Err() if ctx ends
// first (see above).
func (c *ShardedClient) GetAndTouchContext(ctx context.Context, key string, expiration int32) (*memcache.Item, error) {
	return onKey(ctx, c, "GetAndTouch", key, func(m *memcache.Client, t casIDs) (*memcache.Item, error) {
		if c.tombstoned(m, t) {
			return nil, memcache.ErrCacheMiss
		}
		it, err := m.GetAndTouch(key, expiration)
		if IsTombstone(it) {
			return nil, memcache.ErrCacheMiss
		}
		return t.mark(it), err
	})
}

// Set writes item, unconditionally, on the shard that owns item.Key.
func (c *ShardedClient) Set(item *memcache.Item) error {
	return c.SetContext(context.Background(), item)
}

// SetContext is Set, failing with ctx.Err() if ctx ends first (see above).
func (c *ShardedClient) SetContext(ctx context.Context, item *memcache.Item) error {
	return onItem(ctx, c, "Set", item, (*memcache.Client).Set)
}

// Add writes item if its key holds no value; memcache.ErrNotStored if it does.
func (c *ShardedClient) Add(item *memcache.Item) error {
	return c.AddContext(context.Background(), item)
}

// AddContext is Add, failing with ctx.Err() if ctx ends first (see above).
func (c *ShardedClient) AddContext(ctx context.Context, item *memcache.Item) error {
	return onItem(ctx, c, "Add", item, func(m *memcache.Client, item *memcache.Item) error {
		if c.fleet.on.Load() {
			return addOverTombstone(m, item)
		}
		return m.Add(item)
	})
}

// Replace writes item if its key holds a value; memcache.ErrNotStored if not.
func (c *ShardedClient) Replace(item *memcache.Item) error {
	return c.ReplaceContext(context.Background(), item)
}

// ReplaceContext is Replace, failing with ctx.Err() if ctx ends first (see
// above).
func (c *ShardedClient) ReplaceContext(ctx context.Context, item *memcache.Item) error {
	return onValueErr(ctx, c, "Replace", item.Key, memcache.ErrNotStored, func(m *memcache.Client) error { return m.Replace(item) })
}

// Append appends item's value to the value of its key, if there is one;
// memcache.ErrNotStored if not.
func (c *ShardedClient) Append(item *memcache.Item) error {
	return c.AppendContext(context.Background(), item)
}

// AppendContext is Append, failing with ctx.Err() if ctx ends first (see
// above).
func (c *ShardedClient) AppendContext(ctx context.Context, item *memcache.Item) error {
	return onValueErr(ctx, c, "Append", item.Key, memcache.ErrNotStored, func(m *memcache.Client) error { return m.Append(item) })
}

// Prepend prepends item's value to the value of its key, if there is one;
// memcache.ErrNotStored if not.
func (c *ShardedClient) Prepend(item *memcache.Item) error {
	return c.PrependContext(context.Background(), item)
}

// PrependContext is Prepend, failing with ctx.Err() if ctx ends first (see
// above).
func (c *ShardedClient) PrependContext(ctx context.Context, item *memcache.Item) error {
	return onValueErr(ctx, c, "Prepend", item.Key, memcache.ErrNotStored, func(m *memcache.Client) error { return m.Prepend(item) })
}

// CompareAndSwap writes item, got earlier by Get, if its value was not
// changed meanwhile: memcache.ErrCASConflict if it was, and the server's
// answer (memcache.ErrNotStored or memcache.ErrCacheMiss) if it was evicted.
// In a resharding window, for a key whose owner changes, it also fails with
// memcache.ErrCASConflict, sending nothing, when item was not got in the
// window through this client: its token is another server's (see
// BeginResharding). Likewise across an ejection: while a stand-in serves
// the key (its shard ejected), a token got before then is refused, and once
// the shard is back, a token the stand-in handed out is.
func (c *ShardedClient) CompareAndSwap(item *memcache.Item) error {
	return c.CompareAndSwapContext(context.Background(), item)
}

// CompareAndSwapContext is CompareAndSwap, failing with ctx.Err() if ctx
// ends first (see above).
func (c *ShardedClient) CompareAndSwapContext(ctx context.Context, item *memcache.Item) error {
	_, err := onKey(ctx, c, "CompareAndSwap", item.Key, func(m *memcache.Client, t casIDs) (struct{}, error) {
		id, ok := t.server(item.CasID)
		if !ok {
			return struct{}{}, memcache.ErrCASConflict
		}
		sent := *item
		sent.CasID = id
		return struct{}{}, m.CompareAndSwap(&sent)
	})
	return err
}

// Delete deletes key; memcache.ErrCacheMiss if it held nothing.
func (c *ShardedClient) Delete(key string) error {
	return c.DeleteContext(context.Background(), key)
}

// DeleteContext is Delete, failing with ctx.Err() if ctx ends first (see
// above).
func (c *ShardedClient) DeleteContext(ctx context.Context, key string) error {
	_, err := onKey(ctx, c, "Delete", key, func(m *memcache.Client, t casIDs) (struct{}, error) {
		if c.fleet.on.Load() && t.v.Moving() && moving(t.v, key) {
			return struct{}{}, bury(m, key) // a fleet's moving key: see fleetMove
		}
		return struct{}{}, m.Delete(key)
	})
	return err
}

// Touch sets the expiration of key (seconds from now, or a Unix time);
// memcache.ErrCacheMiss if it holds nothing.
func (c *ShardedClient) Touch(key string, seconds int32) error {
	return c.TouchContext(context.Background(), key, seconds)
}

// TouchContext is Touch, failing with ctx.Err() if ctx ends first (see above).
func (c *ShardedClient) TouchContext(ctx context.Context, key string, seconds int32) error {
	return onValueErr(ctx, c, "Touch", key, memcache.ErrCacheMiss, func(m *memcache.Client) error { return m.Touch(key, seconds) })
}

// Increment adds delta to the decimal value of key and returns the new
// value (wrapping at 2^64); memcache.ErrCacheMiss if key holds nothing.
func (c *ShardedClient) Increment(key string, delta uint64) (uint64, error) {
	return c.IncrementContext(context.Background(), key, delta)
}

// IncrementContext is Increment, failing with ctx.Err() if ctx ends first
// (see above).
func (c *ShardedClient) IncrementContext(ctx context.Context, key string, delta uint64) (uint64, error) {
	return onValue(ctx, c, "Increment", key, memcache.ErrCacheMiss, func(m *memcache.Client) (uint64, error) { return m.Increment(key, delta) })
}

// Decrement subtracts delta from the decimal value of key, stopping at 0,
// and returns the new value; memcache.ErrCacheMiss if key holds nothing.
func (c *ShardedClient) Decrement(key string, delta uint64) (uint64, error) {
	return c.DecrementContext(context.Background(), key, delta)
}

// DecrementContext is Decrement, failing with ctx.Err() if ctx ends first
// (see above).
func (c *ShardedClient) DecrementContext(ctx context.Context, key string, delta uint64) (uint64, error) {
	return onValue(ctx, c, "Decrement", key, memcache.ErrCacheMiss, func(m *memcache.Client) (uint64, error) { return m.Decrement(key, delta) })
}

// GetMulti gets many keys: it splits them by shard and asks the shards in
// parallel, one multi-get each. The map holds every hit it got, including
// those of shards that failed part way, and never a miss. If some shards
// failed, the error is a *MultiShardError naming each of them (Op
// "GetMulti"), and the map still holds the other shards' hits. If a key is
// malformed, it returns nil and memcache.ErrMalformedKey, sending nothing.
func (c *ShardedClient) GetMulti(keys []string) (map[string]*memcache.Item, error) {
	return c.GetMultiContext(context.Background(), keys)
}

// GetMultiContext is GetMulti. If ctx is done before the call, it returns
// nil and ctx.Err(), sending nothing; the shards that have not answered when
// ctx ends are failed in the error, each with ctx.Err() as cause (so
// errors.Is(err, context.Canceled) holds), and the hits of the others are
// returned. (Their health counts their requests' own outcomes.)
func (c *ShardedClient) GetMultiContext(ctx context.Context, keys []string) (map[string]*memcache.Item, error) {
	for _, k := range keys {
		if !legalKey(k) {
			return nil, memcache.ErrMalformedKey
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.fleet.check(); err != nil {
		return nil, err
	}
	v, st := c.acquire()
	var p shardcore.Pending
	owners := make([]int, len(keys))
	for i, k := range keys {
		owners[i] = v.Track(&p, k)
	}
	if len(p.Moving()) > 0 {
		return c.getMultiMoving(ctx, v, st, &p, keys)
	}
	if err := v.Prepare(ctx, &p, nil); err != nil {
		v.Release()
		return nil, err
	}
	groups := v.GroupOwned(keys, owners) // no key located twice
	shards := make([]int, len(groups))
	for j, g := range groups {
		shards[j] = g.Shard
	}
	parts, err := fanOut(ctx, v, "GetMulti", shards, func(j int, m *memcache.Client) (map[string]*memcache.Item, error) {
		return m.GetMulti(groups[j].Keys)
	})
	items := dropTombstones(mergeInto(parts))
	if st != nil || v.HasStandIns() {
		for k, it := range items {
			it.CasID = st.casID(v, k, it.CasID)
		}
	}
	return items, err
}

// dropTombstones removes the tombstones of a fleet (read as misses) from
// items.
func dropTombstones(items map[string]*memcache.Item) map[string]*memcache.Item {
	maps.DeleteFunc(items, func(_ string, it *memcache.Item) bool { return IsTombstone(it) })
	return items
}

// mergeInto returns the union of parts (maps of distinct keys that
// gomemcache made for this call): the only non-empty one as it is, else a
// map made at the size of the union, so that it never grows.
func mergeInto(parts []map[string]*memcache.Item) map[string]*memcache.Item {
	total, last := 0, -1
	for j, p := range parts {
		if len(p) > 0 {
			total += len(p)
			last = j
		}
	}
	if last >= 0 && total == len(parts[last]) {
		return parts[last]
	}
	items := make(map[string]*memcache.Item, total)
	for _, p := range parts {
		maps.Copy(items, p)
	}
	return items
}

// DeleteAll deletes every item of every shard (flush_all on each, in
// parallel). If some shards failed, it returns a *MultiShardError (Op
// "DeleteAll") naming each; the others were flushed.
func (c *ShardedClient) DeleteAll() error { return c.DeleteAllContext(context.Background()) }

// DeleteAllContext is DeleteAll; the shards that have not answered when ctx
// ends are failed in the error, with ctx.Err() as cause.
func (c *ShardedClient) DeleteAllContext(ctx context.Context) error {
	// gomemcache's DeleteAll picks a server for the empty key, which every
	// selector of this package refuses; FlushAll sends the same flush_all.
	return c.onEveryShard(ctx, "DeleteAll", (*memcache.Client).FlushAll)
}

// FlushAll flushes every shard (flush_all on each, in parallel). If some
// shards failed, it returns a *MultiShardError (Op "FlushAll") naming each;
// the others were flushed.
func (c *ShardedClient) FlushAll() error { return c.FlushAllContext(context.Background()) }

// FlushAllContext is FlushAll; the shards that have not answered when ctx
// ends are failed in the error, with ctx.Err() as cause.
func (c *ShardedClient) FlushAllContext(ctx context.Context) error {
	return c.onEveryShard(ctx, "FlushAll", (*memcache.Client).FlushAll)
}

// Ping checks that every shard answers (memcached's version command, on
// each in parallel). If some do not, it returns a *MultiShardError (Op
// "Ping") naming each.
func (c *ShardedClient) Ping() error { return c.PingContext(context.Background()) }

// PingContext is Ping; the shards that have not answered when ctx ends
// are failed in the error, with ctx.Err() as cause.
func (c *ShardedClient) PingContext(ctx context.Context) error {
	return c.onEveryShard(ctx, "Ping", (*memcache.Client).Ping)
}

// view is the snapshot of the shards that one call runs on.
type view = shardcore.View[*memcache.Client]

// onKey runs op, the call name on key, with the client of the shard that
// owns key and the marking of key's CAS tokens (see casMark): first
// memcache.ErrMalformedKey, with nothing sent, for a key memcached refuses;
// then ctx.Err() if ctx is done, or ctx.Err() in a ShardError naming the
// shard if ctx ends before op returns; in a resharding window, a *MoveError
// if key could not move to its new owner; else op's result, its error passed
// through finish. The call runs on one View, released when op returns (also
// when ctx ended first).
func onKey[T any](ctx context.Context, c *ShardedClient, name, key string, op func(*memcache.Client, casIDs) (T, error)) (T, error) {
	var zero T
	if !legalKey(key) {
		return zero, memcache.ErrMalformedKey
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if err := c.fleet.check(); err != nil {
		return zero, err
	}
	k := keyCall[T]{c: c, name: name, key: key, op: op}
	k.v, k.st = c.acquire()
	k.i = k.v.Track(&k.p, key)
	if ctx.Done() == nil { // ctx never ends: the call runs here, and allocates nothing of its own
		return k.run(ctx)
	}
	h := new(keyCall[T]) // shared with the call's goroutine (k stays on the stack)
	*h = k
	return withContext(ctx, func() (T, error) { return h.run(ctx) }, func(err error) error { return h.v.Err(h.i, err) })
}

// keyCall is one call of onKey: op, the call name on key, on shard i of
// view v (acquired), with what key needs first in p.
type keyCall[T any] struct {
	c    *ShardedClient
	name string
	key  string
	op   func(*memcache.Client, casIDs) (T, error)
	v    *view
	st   *window
	p    shardcore.Pending
	i    int
}

// run prepares k's key (barriers, a move in a resharding window), runs k's op
// and releases k's view.
func (k *keyCall[T]) run(ctx context.Context) (T, error) {
	defer k.v.Release()
	if err := k.v.Prepare(ctx, &k.p, k.c.mover(&k.p, k.st, k.name)); err != nil {
		var zero T
		return zero, err
	}
	r, err := k.op(k.v.Client(k.i), casIDs{k.st, k.v, k.key})
	return r, finish(k.v, k.i, err)
}

// onKeyErr is onKey for calls that return only an error and hand out no
// CAS token.
func onKeyErr(ctx context.Context, c *ShardedClient, name, key string, op func(*memcache.Client) error) error {
	_, err := onKey(ctx, c, name, key, func(m *memcache.Client, _ casIDs) (struct{}, error) { return struct{}{}, op(m) })
	return err
}

// onValue is onKey for a call that acts on the key's value: on a fleet's
// tombstone it fails with absent, memcached's answer for a key that holds
// nothing, sending nothing more (see tombstoned).
func onValue[T any](ctx context.Context, c *ShardedClient, name, key string, absent error, op func(*memcache.Client) (T, error)) (T, error) {
	return onKey(ctx, c, name, key, func(m *memcache.Client, t casIDs) (T, error) {
		if c.tombstoned(m, t) {
			var zero T
			return zero, absent
		}
		return op(m)
	})
}

// onValueErr is onValue for calls that return only an error.
func onValueErr(ctx context.Context, c *ShardedClient, name, key string, absent error, op func(*memcache.Client) error) error {
	_, err := onValue(ctx, c, name, key, absent, func(m *memcache.Client) (struct{}, error) { return struct{}{}, op(m) })
	return err
}

// onItem is onKeyErr for the storage calls, keyed by item.Key.
func onItem(ctx context.Context, c *ShardedClient, name string, item *memcache.Item, op func(*memcache.Client, *memcache.Item) error) error {
	return onKeyErr(ctx, c, name, item.Key, func(m *memcache.Client) error { return op(m, item) })
}

// onEveryShard runs op on every shard, in parallel.
func (c *ShardedClient) onEveryShard(ctx context.Context, name string, op func(*memcache.Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v := c.shards.Acquire()
	shards := make([]int, v.Len())
	for i := range shards {
		shards[i] = i
	}
	_, err := fanOut(ctx, v, name, shards, func(_ int, m *memcache.Client) (struct{}, error) { return struct{}{}, op(m) })
	return err
}

// fanOut runs call(j, client of shards[j]) for every j, in parallel, on the
// acquired view v, which it releases once every call has returned (also
// those that ctx abandoned). It returns the results in order and, if some
// failed, a *MultiShardError; a shard that has not answered when ctx ends
// fails with ctx.Err().
func fanOut[T any](ctx context.Context, v *view, name string, shards []int, call func(j int, m *memcache.Client) (T, error)) ([]T, error) {
	f := &fan[T]{ctx: ctx, v: v, shards: shards, call: call, results: make([]T, len(shards)), errs: make([]error, len(shards))}
	if f.pending.Add(int32(len(shards))) == 0 {
		v.Release()
	}
	workers.Each(len(shards), nil, f.one)
	return f.results, multiErr(f.v, name, shards, f.errs)
}

// fan is one call of fanOut: one allocation for its state, whatever the
// number of shards.
type fan[T any] struct {
	ctx     context.Context
	v       *view
	shards  []int
	call    func(j int, m *memcache.Client) (T, error)
	results []T
	errs    []error
	pending atomic.Int32 // calls not returned yet; the last releases v
}

// one runs the call of shards[j] into results[j] and errs[j]: in the
// calling goroutine when ctx never ends, else in one of its own that ctx
// may abandon (see withContext).
func (f *fan[T]) one(j int) {
	if f.ctx.Done() == nil {
		f.results[j], f.errs[j] = f.run(j)
	} else {
		f.results[j], f.errs[j] = withContext(f.ctx, func() (T, error) { return f.run(j) }, nil)
	}
}

func (f *fan[T]) run(j int) (T, error) {
	defer func() {
		if f.pending.Add(-1) == 0 {
			f.v.Release()
		}
	}()
	i := f.shards[j]
	r, err := f.call(j, f.v.Client(i))
	f.v.Report(context.Background(), i, err) // gomemcache took no context (see finish)
	return r, err
}

// withContext runs fn and returns its result, or, if ctx is done first,
// ctx.Err() passed through ended (nil: unchanged). gomemcache takes no
// context, so fn runs in a goroutine of its own, which ends when fn returns:
// at the latest when the shard client's socket timeout expires. When ctx can
// never end (context.Background()), fn runs in the caller's goroutine. fn
// always runs, whatever ctx.
func withContext[T any](ctx context.Context, fn func() (T, error), ended func(error) error) (T, error) {
	done := ctx.Done()
	if done == nil {
		return fn()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: fn's goroutine never waits for a reader
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-done:
		select {
		case r := <-ch: // fn finished too: its result is the truth
			return r.v, r.err
		default:
			var zero T
			if ended == nil {
				return zero, ctx.Err()
			}
			return zero, ended(ctx.Err())
		}
	}
}

// runErr runs fn under ctx (see withContext).
func runErr(ctx context.Context, fn func() error) error {
	_, err := withContext(ctx, func() (struct{}, error) { return struct{}{}, fn() }, nil)
	return err
}

// legalKey reports whether key is safe to send on memcached's text
// protocol (mcmeta.LegalKey): 1 to 250 bytes, none of them a space, a
// control character or DEL. It is gomemcache's rule plus the empty key,
// which gomemcache lets through: "set  0 0 N" is an error line to
// memcached, which then reads the item's value as a command of its own.
func legalKey(key string) bool { return mcmeta.LegalKey(key) }
