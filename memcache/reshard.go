package memcache

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// ReshardOptions configure BeginResharding.
type ReshardOptions struct {
	// CopyExpiration is the expiration (memcached's exptime: seconds, or a
	// Unix time; 0 means none) given to a value moved from an old owner
	// that does not tell its items' remaining time to live: a server
	// without meta commands in their final syntax (memcached before
	// 1.6.10). Choose the longest TTL the application uses, or less. A value
	// moved from memcached 1.6.10 or later keeps its own TTL.
	CopyExpiration int32
}

// ReshardStats counts what the moves of a resharding window did, from its
// BeginResharding on; after EndResharding, those of the last window.
type ReshardStats struct {
	// MovedWithTTL counts values moved with their own remaining time to
	// live and their flags: their old owner has meta commands.
	MovedWithTTL int64
	// MovedWithCopyExpiration counts values moved with their flags and
	// ReshardOptions.CopyExpiration: their old owner does not tell TTLs.
	MovedWithCopyExpiration int64
	// Absent counts moving keys that had no value on their old owner.
	Absent int64
	// StaleDeleted counts the copies that new owners held of absent keys
	// (leftovers of an earlier shard list), deleted as stale.
	StaleDeleted int64
	// TooLarge counts values that their new owner refused as larger than
	// it stores (memcached's -I): dropped, as memcached drops a value it
	// cannot store, so that the key reads as a miss.
	TooLarge int64
}

// ReshardStats returns the counters of the current resharding window, or
// of the last one once it has ended (zero before the first).
func (c *ShardedClient) ReshardStats() ReshardStats {
	st := c.win.Load()
	if st == nil {
		return ReshardStats{}
	}
	return ReshardStats{
		MovedWithTTL:            st.movedTTL.Load(),
		MovedWithCopyExpiration: st.movedCopyExp.Load(),
		Absent:                  st.absent.Load(),
		StaleDeleted:            st.staleDeleted.Load(),
		TooLarge:                st.tooLarge.Load(),
	}
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
// whose owner changed, the client moves it, under the call's context.
//
// The keys of one call that move between the same two shards move together,
// over connections of the window's own to each shard's Addr (dialled with
// the shard's DialContext and Timeout), the pairs in parallel. On memcached
// 1.6.10 and later each step is one pipelined round trip per 256 keys: a meta
// get of the keys on the old owner, which reports each item's flags and
// remaining time to live; a meta set of the hits on the new owner, with
// their flags and that TTL; a delete of the new owner's copies of the
// misses; a delete of the old copies. From an old owner without meta
// commands, a value moves with ReshardOptions.CopyExpiration instead of its
// TTL, one set per key. ReshardStats says which happened.
//
// The rule that keeps every write: while the old owner still holds a key,
// its value is the truth, unless this process already moved the key inside
// this window (then the value on the new owner is newer). A copy that the
// new owner holds before the key's first move in the window is stale by
// definition (a leftover of an earlier shard list or of an ejection) and
// never wins: the move overwrites it, or deletes it when the old owner has
// nothing. The window remembers each key once no copy of it is left on its
// old owner, so that it moves once and later calls ask only its new owner:
// one map entry per key used in the window, dropped by EndResharding. A move
// that fails, or that the call's context ends, leaves the key on its old
// owner, the truth, to be moved by the next call that uses it.
//
// What depends on the server that answers:
//
//   - The call whose key could not move fails with a *MoveError that names
//     the call, the key, both shards and the step (a Get does not fail
//     with a set's error); GetMulti returns the hits it has, and a
//     *MultiShardError whose failed shards hold the *MoveError.
//   - A value larger than its new owner stores (memcached's -I differs
//     between the servers) is dropped: deleted from its old owner, as
//     memcached drops a value it cannot store, and counted in
//     ReshardStats.TooLarge; the key reads as a miss.
//   - CAS tokens are the server's: a token from a key's old owner is
//     meaningless on its new owner, and could equal by chance the token of
//     another value there. In the window, the tokens that Get, GetAndTouch
//     and GetMulti hand out for a key whose owner changes are marked with the
//     window; CompareAndSwap of such a key fails with
//     memcache.ErrCASConflict, sending nothing, unless its token bears the
//     mark: get the item again and retry, as after any conflict. (A
//     client from GetShard hands out the server's tokens, unmarked.)
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
	var gen uint8
	if last := c.win.Load(); last != nil {
		gen = last.gen + 1
	}
	return c.switchShards(shards, func(next []Shard) error {
		return c.shards.BeginWindow(next, nil, func(*view) error {
			// Before the window's first view serves a call.
			c.win.Store(&window{gen: gen, copyExpiration: opt.CopyExpiration, pools: map[*memcache.Client]*mcmeta.Pool{}})
			return nil
		})
	})
}

// EndResharding ends the window: the old ring is dropped and the clients of
// the shards that left are closed once the calls using them have ended, as
// are the window's own connections. Keys not used in the window stay on
// their old owner, unreachable.
func (c *ShardedClient) EndResharding() error {
	err := c.shards.EndWindow(true)
	c.win.Load().close()
	return err
}

// window is the state of one resharding window, from its BeginResharding to
// the next: the mark of its CAS tokens, the expiration of values moved
// without their TTL, its counters and its connections.
type window struct {
	gen            uint8 // BeginResharding calls, modulo 256: see casMark
	copyExpiration int32

	movedTTL, movedCopyExp, absent, staleDeleted, tooLarge atomic.Int64

	mu     sync.Mutex
	pools  map[*memcache.Client]*mcmeta.Pool // by shard client
	closed bool
}

// CAS tokens. memcached numbers items with a counter of its own, so a token
// is meaningful on its server only; a key's server changes in a resharding
// window (see BeginResharding), and when its shard is ejected (a stand-in
// serves it) or rejoins. A token the client hands out is the server's
// (below 2^54: memcached's counter grows by one per write), marked (bit 63
// set) in two cases:
//   - in a window, for a key whose owner changes in it: the window's
//     generation (window.gen) in bits 55 to 62, bit 54 clear;
//   - for a key that a stand-in serves (whether it moves in a window or
//     not): the view's live epoch (ejections, rejoins and shard-list
//     changes so far, View.LiveEpoch) in bits 55 to 62, bit 54 set.
//
// CompareAndSwap sends the server's token without the mark, and refuses,
// sending nothing (memcache.ErrCASConflict): a moving key's token without
// its window's mark; a stand-in-served key's token without the mark of the
// epoch it is served in; and a stand-in's mark for a key its own shard
// serves again. A token from a key's own shard stays valid there across an
// ejection (memcached's counter only grows), and an unmarked token (from
// a client of GetShard) is sent as it is.
const (
	casMark     = 1 << 63
	casStandIn  = 1 << 54
	casGenShift = 55
	casRaw      = casStandIn - 1 // the server's token
	casKind     = casMark | 0xff<<casGenShift | casStandIn
)

// acquire returns the current view and, when a window is open in it, the
// window; nil when there is none, or when a window began or ended while the
// view was taken, so that the view's window is not known for sure (its
// tokens are then left unmarked, which only makes a CompareAndSwap fail).
func (c *ShardedClient) acquire() (*view, *window) {
	w := c.shards.Window()
	st := c.win.Load() // installed before its window opens; replaced only after it ends
	v := c.shards.Acquire()
	if w == nil || !v.Moving() || c.shards.Window() != w {
		return v, nil
	}
	return v, st
}

// casID returns the CAS token to hand out for key, read from its server in
// v with the server's token raw, in window st (nil: none, or not known for
// sure): see casMark. 0, no token, stays 0.
func (st *window) casID(v *view, key string, raw uint64) uint64 {
	switch {
	case raw == 0 || raw > casRaw || st == nil && !v.HasStandIns():
		return raw
	case v.StandIn(key): // first: a stand-in's token, moving or not, is good on it only
		return raw | standInMark(v)
	case moving(v, key):
		if st == nil {
			return raw
		}
		return raw | st.mark()
	}
	return raw
}

// moving reports whether key's owner changes in v's window.
func moving(v *view, key string) bool {
	_, _, moved := v.Moved(key)
	return moved
}

// mark is the mark of st's tokens.
func (st *window) mark() uint64 { return casMark | uint64(st.gen)<<casGenShift }

// standInMark is the mark of the tokens that stand-ins hand out in v.
func standInMark(v *view) uint64 {
	return casMark | casStandIn | (v.LiveEpoch()&0xff)<<casGenShift
}

// serverToken returns the server's token to send for a CompareAndSwap of
// key with the token id on v of window st, and false when it must fail (see
// casMark): always, for a moving key, when st is not known for sure.
func (st *window) serverToken(v *view, key string, id uint64) (uint64, bool) {
	switch {
	case v.StandIn(key):
		return id & casRaw, id&casKind == standInMark(v)
	case moving(v, key):
		return id & casRaw, st != nil && id&casKind == st.mark()
	case id&(casMark|casStandIn) == casMark|casStandIn:
		return 0, false // a stand-in's token: the key's own shard serves it again
	case id&casMark != 0:
		return id & casRaw, true
	}
	return id, true
}

// close closes the window's connections; later moves (of calls begun in the
// window) dial their own.
func (st *window) close() {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	for _, p := range st.pools {
		p.Close()
	}
}

// conn returns a connection of the window's own to shard i of v and its
// pool, dialled with the shard client's DialContext and Timeout to the
// shard's Addr.
func (st *window) conn(ctx context.Context, v *view, i int) (*mcmeta.Conn, *mcmeta.Pool, error) {
	m := v.Client(i)
	st.mu.Lock()
	p := st.pools[m]
	if p == nil {
		a, err := resolve(v.Shard(i).Addr)
		if err != nil {
			st.mu.Unlock()
			return nil, nil, err
		}
		maxIdle := m.MaxIdleConns
		if maxIdle <= 0 {
			maxIdle = memcache.DefaultMaxIdleConns
		}
		p = mcmeta.NewPool(maxIdle, func(ctx context.Context) (*mcmeta.Conn, error) {
			return mcmeta.Dial(ctx, m.DialContext, a, m.Timeout)
		})
		if st.closed {
			p.Close()
		}
		st.pools[m] = p
	}
	st.mu.Unlock()
	conn, err := p.Get(ctx)
	return conn, p, err
}

// MoveError is the failure to move a key to its new owner in a resharding
// window, before the call that uses it: the key stays on its old owner.
type MoveError struct {
	// Op is the caller's call ("Get", "Set", "GetMulti", ...); empty for
	// a move made for GetShard.
	Op string
	// Key is the key whose step failed (of a step on many keys, the
	// first).
	Key string
	// From and To name the old and the new owner, as shard errors do.
	From, To string
	// Step is what failed: "get" (on the old owner), "set" (on the new
	// owner), "delete stale copy" (on the new owner), "delete old copy".
	Step string
	// Err is the cause: a *shardedclient.ShardError naming the shard that
	// failed (wrapping the caller's context error when that ended the
	// move), or the reply by which memcached refused the step (a
	// *ServerError).
	Err error

	at int // the index of the shard at fault
}

func (e *MoveError) Error() string {
	var b strings.Builder
	b.WriteString("shardedcache: ")
	if e.Op != "" {
		b.WriteString(e.Op + " ")
	}
	b.WriteString(strconv.Quote(e.Key) + ": moving the key from " + e.From + " to " + e.To + ": " + e.Step + ": ")
	b.WriteString(strings.TrimPrefix(e.Err.Error(), "shardedcache: "))
	return b.String()
}

func (e *MoveError) Unwrap() error { return e.Err }

// ServerError is a reply by which memcached refused a step of a move:
// ERROR, CLIENT_ERROR ..., SERVER_ERROR ... (such as "SERVER_ERROR out of
// memory storing object"), NS.
type ServerError = mcmeta.ServerError

// mover returns the Mover of p's keys for a call of op on a view of window
// st (nil: the newest window), or nil when no key of p moves.
func (c *ShardedClient) mover(p *shardcore.Pending, st *window, op string) shardcore.Mover[*memcache.Client] {
	if len(p.Moving()) == 0 {
		return nil
	}
	return func(ctx context.Context, v *view, keys []shardcore.MovingKey) error {
		return c.moveKeys(ctx, v, st, op, keys)
	}
}

// moveKeys moves keys, whose locks View.Prepare holds, for a call of op
// (see BeginResharding), and returns the first failure. It is also the
// client's shardcore.Mover (for GetShard), with no op and st nil.
func (c *ShardedClient) moveKeys(ctx context.Context, v *view, st *window, op string, keys []shardcore.MovingKey) error {
	if failed := c.move(ctx, v, st, op, unmoved(v, keys), nil); len(failed) > 0 {
		return failed[0]
	}
	return nil
}

// unmoved returns the keys of keys that no call has moved since they were
// tracked (another call may have, before their locks were taken), each
// once.
func unmoved(v *view, keys []shardcore.MovingKey) []shardcore.MovingKey {
	w := v.Window()
	seen := make(map[string]bool, len(keys))
	out := make([]shardcore.MovingKey, 0, len(keys))
	for _, k := range keys {
		if !seen[k.Key] && !w.Remembered(k.Key) {
			out = append(out, k)
		}
		seen[k.Key] = true
	}
	return out
}

// move moves keys, not moved yet and their locks held, for a call of op
// under ctx: the keys of each (old owner, new owner) pair in one batch, the
// pairs in parallel. found, when not nil, gets each value read from an old
// owner and not dropped, with the CAS token of its copy on the new owner
// (0 when it has none); it may be called from several goroutines. It returns
// the failure of each pair that failed.
func (c *ShardedClient) move(ctx context.Context, v *view, st *window, op string, keys []shardcore.MovingKey, found func(*memcache.Item)) []*MoveError {
	if st == nil {
		st = c.win.Load()
	}
	type pair struct{ from, to int }
	batches := map[pair][]string{}
	var pairs []pair
	for _, k := range keys {
		p := pair{k.From, k.To}
		if _, ok := batches[p]; !ok {
			pairs = append(pairs, p)
		}
		batches[p] = append(batches[p], k.Key)
	}
	failed := make([]*MoveError, len(pairs))
	var wg sync.WaitGroup
	for j, p := range pairs {
		wg.Go(func() { failed[j] = c.moveBatch(ctx, v, st, op, p.from, p.to, batches[p], found) })
	}
	wg.Wait()
	return slices.DeleteFunc(failed, func(e *MoveError) bool { return e == nil })
}

// moveBatch moves keys from shard from to shard to (see move): a get on
// from; a set on to of the hits, with their flags and TTL (CopyExpiration
// when from does not tell it); a delete on to of the misses' stale copies; a
// delete on from of the old copies. A key is remembered (in the window of
// v) once the new owner holds it; a key whose get or set failed, or that
// ctx cut short before its set, stays on from, the truth.
// Each round trip is reported to its shard's health once.
func (c *ShardedClient) moveBatch(ctx context.Context, v *view, st *window, op string, from, to int, keys []string, found func(*memcache.Item)) *MoveError {
	if c.fleet.on.Load() {
		return c.fleetMove(ctx, v, st, op, from, to, keys, found)
	}
	fail := func(step string, at int, key string, err error) *MoveError {
		return &MoveError{Op: op, Key: key, From: v.Label(from), To: v.Label(to), Step: step, Err: err, at: at}
	}
	// An ejected old owner holds nothing for the window: it is flushed when
	// it rejoins (OnRejoin's default), so its keys move as misses.
	var src *mcmeta.Conn
	var items []mcmeta.Item
	if !v.Ejected(from) {
		var srcPool *mcmeta.Pool
		var err error
		if src, srcPool, err = st.conn(ctx, v, from); err != nil {
			return fail("get", from, keys[0], v.Finish(ctx, from, err))
		}
		defer srcPool.Put(src)
		items, err = src.Get(ctx, keys)
		if err := v.Finish(ctx, from, err); err != nil {
			return fail("get", from, keys[0], err)
		}
	}
	dst, dstPool, err := st.conn(ctx, v, to)
	if err != nil {
		return fail("set", to, keys[0], v.Finish(ctx, to, err))
	}
	defer dstPool.Put(dst)

	now := time.Now()
	hit := make(map[string]bool, len(items))
	for i := range items {
		hit[items[i].Key] = true
		items[i].CAS = 0 // the old owner's token; Set gives the new one
		items[i].Expiration = st.copyExpiration
		if src.Meta() {
			items[i].Expiration = mcmeta.Expiration(items[i].TTL, now)
		}
	}
	outcomes, err := dst.Set(ctx, items)
	var first *MoveError         // the first refusal of an item
	var stored, dropped []string // no copy wanted on from any more
	for i, it := range items {
		switch {
		case i >= len(outcomes): // not answered
		case outcomes[i] == nil:
			stored = append(stored, it.Key)
		case errors.Is(outcomes[i], mcmeta.ErrTooLarge):
			dropped = append(dropped, it.Key)
			continue // its value is gone: no hit
		case first == nil:
			first = fail("set", to, it.Key, outcomes[i])
		}
		if found != nil {
			found(&memcache.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, CasID: it.CAS})
		}
	}
	if err := v.Finish(ctx, to, err); err != nil {
		return fail("set", to, items[len(outcomes)].Key, err)
	}

	absent := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return hit[k] })
	if len(absent) > 0 {
		n, err := dst.Delete(ctx, absent)
		if err := v.Finish(ctx, to, err); err != nil {
			return fail("delete stale copy", to, absent[0], err)
		}
		v.Window().Remember(absent...)
		st.absent.Add(int64(len(absent)))
		st.staleDeleted.Add(int64(n))
	}
	if gone := append(stored, dropped...); len(gone) > 0 {
		// Moved once the new owner holds them: from here the old copies are
		// stale, whether or not their delete below is answered (a delete
		// cut short may still run on the old owner, which must then not make
		// a later call take the new copy for a leftover).
		v.Window().Remember(gone...)
		_, err := src.Delete(ctx, gone)
		if err := v.Finish(ctx, from, err); err != nil {
			return fail("delete old copy", from, gone[0], err)
		}
		if src.Meta() {
			st.movedTTL.Add(int64(len(stored)))
		} else {
			st.movedCopyExp.Add(int64(len(stored)))
		}
		st.tooLarge.Add(int64(len(dropped)))
	}
	return first
}

// read reads keys from shard i of v over st's connections, under ctx,
// handing each hit to add, and returns the error as the caller sees it.
func (st *window) read(ctx context.Context, v *view, i int, keys []string, add func(*memcache.Item)) error {
	conn, pool, err := st.conn(ctx, v, i)
	if err == nil {
		var items []mcmeta.Item
		items, err = conn.Get(ctx, keys)
		pool.Put(conn)
		for _, it := range items {
			add(&memcache.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, CasID: it.CAS})
		}
	}
	return v.Finish(ctx, i, err)
}

// getMultiMoving is GetMultiContext on v, acquired with window st (nil: not
// known for sure), when some keys must move first (p, tracked on v, holds
// them); it releases v. Once the barriers of p are open and the moving keys'
// locks held, the keys that stay where they are are read from their
// owners, over the window's connections, while the others move (a moved
// key's hit is the value it moved with): all under ctx, so that the call
// returns by its deadline with the hits it has. The failed shards of the
// *MultiShardError are those of the reads and those at fault in the moves.
func (c *ShardedClient) getMultiMoving(ctx context.Context, v *view, st *window, p *shardcore.Pending, keys []string) (map[string]*memcache.Item, error) {
	defer v.Release()
	conns := cmp.Or(st, c.win.Load())
	var mu sync.Mutex
	items := make(map[string]*memcache.Item, len(keys))
	add := func(it *memcache.Item) {
		it.CasID = st.casID(v, it.Key, it.CasID)
		mu.Lock()
		items[it.Key] = it
		mu.Unlock()
	}
	outcome := map[int]error{} // shard -> its first error, for every shard reached
	err := v.Prepare(ctx, p, func(ctx context.Context, v *view, moving []shardcore.MovingKey) error {
		move := unmoved(v, moving)
		moves := make(map[string]bool, len(move))
		for _, m := range move {
			moves[m.Key] = true
			outcome[m.From], outcome[m.To] = nil, nil
		}
		groups := v.GroupKeys(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return moves[k] }))
		readErrs := make([]error, len(groups))
		var failed []*MoveError
		var wg sync.WaitGroup
		for j, g := range groups {
			wg.Go(func() { readErrs[j] = conns.read(ctx, v, g.Shard, g.Keys, add) })
		}
		wg.Go(func() { failed = c.move(ctx, v, conns, "GetMulti", move, add) })
		wg.Wait()
		for j, g := range groups {
			outcome[g.Shard] = readErrs[j]
		}
		for _, f := range failed {
			if outcome[f.at] == nil {
				outcome[f.at] = f
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	shards := slices.Sorted(maps.Keys(outcome))
	errs := make([]error, len(shards))
	for j, i := range shards {
		errs[j] = outcome[i]
	}
	return dropTombstones(items), multiErr(v, "GetMulti", shards, errs)
}

// casIDs marks and unmarks the CAS tokens of one key of a call on view v of
// window st (nil: none, or not known for sure): see casMark.
type casIDs struct {
	st  *window
	v   *view
	key string
}

// mark marks the token of it (nil: a miss), read from the key's owner, and
// returns it.
func (t casIDs) mark(it *memcache.Item) *memcache.Item {
	if it != nil {
		it.CasID = t.st.casID(t.v, t.key, it.CasID)
	}
	return it
}

// server returns the server's token to send for a CompareAndSwap with
// token id, and false when the CompareAndSwap must fail unsent.
func (t casIDs) server(id uint64) (uint64, bool) { return t.st.serverToken(t.v, t.key, id) }
