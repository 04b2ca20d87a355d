package memcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/internal/fleetstep"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// A memcache fleet (see package fleet, and this package's documentation,
// "A fleet of processes"). memcached has no scripts and no CLIENT KILL, so
// its servers cannot refuse a process that is behind: the backend is
// fleet.Unfenced, and the fleet's safety rests on the members' leases and
// on the moves below, made of memcached's compare-and-set commands.

// The fleet's timing constants.
const (
	// MoveWindow bounds a move of a key in a fleet: its add on the new
	// owner is sent within MoveWindow of its read of the old owner, and
	// only while the member's lease is valid, or the move is abandoned
	// (the key stays on its old owner, the truth).
	MoveWindow = 2 * time.Second
	// TombstoneTTL is the life, in seconds, of the tombstone that a
	// delete of a moving key leaves on its new owner (see Tombstone):
	// longer than MoveWindow plus memcached's one-second clock and a
	// margin for the remaining assumption (see the documentation).
	TombstoneTTL = 10
	// FleetWait bounds how long a command on a moving key waits, in the
	// Preparing step, for this process to apply the Moving step before it
	// returns an error matching ErrFleetPreparing (its context may end
	// the wait sooner).
	FleetWait = 5 * time.Second
	// settleWait is how long the migration waits, after its last move,
	// before the driver may store Stable: every move begun before it has
	// sent its add by then (MoveWindow), plus a margin for it to land.
	settleWait = MoveWindow + time.Second
)

// The tombstone: a delete of a moving key in a fleet's Moving step stores it
// on the key's new owner instead of deleting (an add of the old value,
// delayed, must find the key taken). The client reads it as a miss, always;
// it expires after TombstoneTTL. Its flags and value are reserved.
const (
	TombstoneFlags = 0xdeadc0de
	TombstoneValue = "shardedcache:deleted"
)

// IsTombstone reports whether it is a tombstone: its flags are
// TombstoneFlags (whatever its value: an Append or Prepend that raced with
// the Delete keeps the flags, and the key stays deleted).
func IsTombstone(it *memcache.Item) bool { return it != nil && it.Flags == TombstoneFlags }

func isTombstoneMeta(it mcmeta.Item) bool { return it.Flags == TombstoneFlags }

// tombstoned reports whether key, on its owner m, holds a fleet's
// tombstone: only a moving key in a fleet's Moving step can. A call that
// acts on the key's value (Append, Prepend, Replace, Touch, GetAndTouch,
// Increment, Decrement) then answers as memcached does for a key that holds
// nothing, sending nothing more: it would otherwise land on the tombstone
// (a value nobody wrote, or a tombstone that never expires). One that
// races with the Delete lands on it and is read as deleted after it.
func (c *ShardedClient) tombstoned(m *memcache.Client, t casIDs) bool {
	if !c.fleet.on.Load() || !t.v.Moving() || !moving(t.v, t.key) {
		return false
	}
	it, err := m.Get(t.key)
	return err == nil && IsTombstone(it)
}

// addOverTombstone is Add of item on its owner m for a fleet: an Add that
// finds a tombstone (the key deleted during the change) replaces it if it is
// still the same item (compare-and-swap), as an Add on an absent key does;
// memcache.ErrNotStored otherwise.
func addOverTombstone(m *memcache.Client, item *memcache.Item) error {
	err := m.Add(item)
	if !errors.Is(err, memcache.ErrNotStored) {
		return err
	}
	tomb, gerr := m.Get(item.Key)
	if gerr != nil || !IsTombstone(tomb) {
		return err
	}
	tomb.Value, tomb.Flags, tomb.Expiration = item.Value, item.Flags, item.Expiration
	if cerr := m.CompareAndSwap(tomb); cerr != nil {
		if errors.Is(cerr, memcache.ErrCASConflict) || errors.Is(cerr, memcache.ErrCacheMiss) || errors.Is(cerr, memcache.ErrNotStored) {
			return memcache.ErrNotStored // written or gone meanwhile: the Add came after
		}
		return cerr
	}
	return nil
}

// ErrFleetPreparing is matched (errors.Is) by the error of a command on a
// key that moves in the fleet's resharding, when the fleet's Preparing
// step did not give way to Moving within FleetWait. Nothing was sent.
var ErrFleetPreparing = errors.New("shardedcache: the key moves in the fleet's resharding, which is still preparing")

// The modes of a fleet client, by the step it applied.
const (
	modeStable int32 = iota
	modePreparing
	modeMoving
)

// fleetState is a client's part in a fleet (JoinFleet).
type fleetState struct {
	on      atomic.Bool
	joined  atomic.Bool     // JoinFleet succeeded, or is under way
	barrier fleet.LeaseGate // the member's lease: commands refused once it runs out
	mode    atomic.Int32    // modeStable, modePreparing, modeMoving
	step    fleetstep.Applied
}

// check refuses a command once the member's lease is not surely valid.
func (f *fleetState) check() error { return f.barrier.Check() }

// awaitMoving waits, at most FleetWait and within ctx, while the client is
// in the Preparing step.
func (f *fleetState) awaitMoving(ctx context.Context) error {
	err := f.step.Wait(ctx, FleetWait, func() bool { return f.mode.Load() != modePreparing })
	if errors.Is(err, fleetstep.ErrWaited) {
		return fmt.Errorf("%w (waited %v)", ErrFleetPreparing, FleetWait)
	}
	return err
}

// JoinFleet makes c a member of the fleet whose state store holds (see
// package fleet): it registers c's process under a lease, reads the
// fleet's shard list (storing c's own list first, as the fleet's, when the
// store is empty and opt.Initial is nil), switches c to it, and keeps c on
// every later state until the returned Member is closed. A resharding is
// driven by one process (fleet.Reshard with c.FleetBackend). A client
// joins once: a second JoinFleet returns fleet.ErrJoined.
//
// A fleet's shards are named (ShardOptions.Name: the store places keys by
// name) and need memcached 1.6.10 or later (meta commands) while they
// move; their client options are c's shared ones (ShardedOptions.Timeout,
// MaxIdleConns), since the store holds none. From Join on, every call
// fails with a *fleet.LeaseExpiredError, sending nothing, while the
// member's lease is not surely valid (see the package documentation). It
// returns the store's error, an error naming an unnamed shard, or the
// failure to apply the first state.
func (c *ShardedClient) JoinFleet(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error) {
	if opt.Initial == nil {
		for i, sh := range c.shards.AllShards() {
			if sh.Name == "" {
				return nil, fmt.Errorf("shardedcache: shard %d (%s) has no name: a fleet places keys by shard name", i, sh.Addr)
			}
			opt.Initial = append(opt.Initial, fleet.Shard{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight})
		}
	}
	if !c.fleet.joined.CompareAndSwap(false, true) {
		return nil, fleet.ErrJoined
	}
	m, err := fleet.Join(ctx, store, c.FleetBackend(), opt)
	if err != nil {
		c.fleet.joined.Store(false)
	}
	return m, err
}

// FleetBackend returns c as a fleet.Backend (a fleet.Unfenced one): for
// JoinFleet, and for fleet.Reshard and fleet.Resume, which drive a
// resharding of the fleet from this process.
func (c *ShardedClient) FleetBackend() fleet.Backend {
	c.fleet.on.Store(true)
	return fleetBackend{c}
}

// fleetBackend is a ShardedClient as a fleet.Unfenced backend.
type fleetBackend struct{ c *ShardedClient }

var (
	_ fleet.Unfenced      = fleetBackend{}
	_ fleet.TargetChecker = fleetBackend{}
)

// CheckTarget implements fleet.TargetChecker: every shard of st.Target is
// a memcached server (not a Redis Cluster, no DB), and each one new to the
// fleet answers.
func (b fleetBackend) CheckTarget(ctx context.Context, st fleet.State) error {
	opts, err := shardOptions(st.Target)
	if err != nil {
		return err
	}
	for i, sh := range st.Target {
		if slices.Contains(st.Shards, sh) {
			continue
		}
		m := memcache.New(opts[i].Addr)
		err := runErr(ctx, m.Ping)
		_ = m.Close()
		if err != nil {
			return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr, err)
		}
	}
	return nil
}

// UseLease implements fleet.Unfenced.
func (b fleetBackend) UseLease(member string, l fleet.MemberLease) { b.c.fleet.barrier.Set(member, l) }

// Fence implements fleet.Backend: memcached has no fence; nothing is sent.
func (b fleetBackend) Fence(context.Context, fleet.State) error { return nil }

// shardOptions converts a fleet's list; a shard with a DB is an error.
func shardOptions(list []fleet.Shard) ([]ShardOptions, error) {
	opts := make([]ShardOptions, len(list))
	for i, sh := range list {
		switch {
		case sh.DB != 0:
			return nil, fmt.Errorf("shardedcache: fleet shard %q has DB %d: memcached has none", sh.Name, sh.DB)
		case sh.Cluster:
			return nil, fmt.Errorf("shardedcache: fleet shard %q is a Redis Cluster: a memcache fleet's shards are memcached servers", sh.Name)
		}
		opts[i] = ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
	}
	return opts, nil
}

// Apply implements fleet.Backend. Stable: the client routes by st.Shards
// (a window open is ended: the driver migrated every key). Preparing and
// Moving: the client is on st.Shards with a resharding window to
// st.Target open (opened at the first of the two steps it applies, after
// which Moving only changes the mode); in Preparing a command on a key
// that moves waits for Moving (at most FleetWait), in Moving such a key is
// moved first (see the package documentation). Opening the window waits,
// within ctx, for the calls begun before it on keys that move to end, so
// that when Apply returns (and the member reports the epoch) none of this
// process's calls routed by an older step is still running. An epoch not
// newer than the applied one does nothing.
func (b fleetBackend) Apply(ctx context.Context, st fleet.State) error {
	return b.c.fleet.step.Apply(st, func(prev fleet.State) error { return b.c.applyStep(ctx, prev, st) })
}

// applyStep switches c from the applied state prev to st (see Apply).
func (c *ShardedClient) applyStep(ctx context.Context, prev, st fleet.State) error {
	f := &c.fleet
	from, err := shardOptions(st.Shards)
	if err != nil {
		return err
	}
	open := c.shards.Window() != nil
	switch st.Step {
	case fleet.Stable:
		f.mode.Store(modeStable)
		if open {
			_ = c.EndResharding() // forced: the driver migrated every key
		}
		err = c.SetShards(from)
	case fleet.Preparing, fleet.Moving:
		f.mode.Store(map[fleet.Step]int32{fleet.Preparing: modePreparing, fleet.Moving: modeMoving}[st.Step])
		if open && prev.Change == st.Change {
			break // the window of this resharding is open: only the mode changes
		}
		err = c.openFleetWindow(ctx, open, from, st.Target)
	}
	return err
}

// openFleetWindow puts c on from and opens a window to target, ending the
// open one first, then waits for the calls of the views before it.
func (c *ShardedClient) openFleetWindow(ctx context.Context, open bool, from []ShardOptions, target []fleet.Shard) error {
	to, err := shardOptions(target)
	if err != nil {
		return err
	}
	if open {
		_ = c.EndResharding()
	}
	if err := c.SetShards(from); err != nil {
		return err
	}
	if err := c.BeginResharding(to, ReshardOptions{}); err != nil {
		return err
	}
	v := c.shards.Acquire()
	defer v.Release()
	return v.WaitBarriers(ctx)
}

// fleetRings returns the rings of st's lists, placed by c's preset.
func (c *ShardedClient) fleetRings(st fleet.State) (from, to *ring.Ring, err error) {
	build := func(list []fleet.Shard) (*ring.Ring, error) {
		nodes := make([]ring.Node, len(list))
		for i, sh := range list {
			nodes[i] = ring.Node{Name: sh.Name, Weight: sh.Weight, Addr: sh.Addr}
		}
		return ring.New(nodes, c.shards.Preset())
	}
	if from, err = build(st.Shards); err != nil {
		return nil, nil, err
	}
	to, err = build(st.Target)
	return from, to, err
}

// adminConn dials a connection of its own to sh, with c's shared timeout.
func (c *ShardedClient) adminConn(ctx context.Context, sh fleet.Shard) (*mcmeta.Conn, error) {
	a, err := resolve(sh.Addr)
	if err != nil {
		return nil, err
	}
	conn, err := mcmeta.Dial(ctx, nil, a, c.shared.Timeout)
	if err == nil && !conn.Meta() {
		conn.Close()
		err = errors.New("a fleet needs memcached 1.6.10 or later (meta commands)")
	}
	return conn, err
}

// scanShard lists the keys of sh (lru_crawler metadump) and hands each page
// to fn, over connections of its own; a server busy with another crawl is
// asked again, every 100 ms, within ctx.
func (c *ShardedClient) scanShard(ctx context.Context, sh fleet.Shard, fn func(keys []string) error) error {
	dump, err := c.adminConn(ctx, sh)
	if err != nil {
		return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr, err)
	}
	defer dump.Close()
	for {
		err := dump.Keys(ctx, fn)
		var se *mcmeta.ServerError
		if !errors.As(err, &se) || len(se.Line) < 4 || se.Line[:4] != "BUSY" {
			if err != nil {
				return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr, err)
			}
			return nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// DropStale implements fleet.Backend: it lists the keys of every shard of
// st.Target and deletes those that the shard gains in the resharding
// (copies left by an ejection's stand-in or an earlier cold change, and
// tombstones). The driver calls it once every member applied Preparing:
// no process writes a key that moves on its new owner then.
func (b fleetBackend) DropStale(ctx context.Context, st fleet.State) error {
	c := b.c
	fromRing, toRing, err := c.fleetRings(st)
	if err != nil {
		return err
	}
	for i, sh := range st.Target {
		del, err := c.adminConn(ctx, sh)
		if err != nil {
			return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr, err)
		}
		err = c.scanShard(ctx, sh, func(keys []string) error {
			var stale []string
			for _, k := range keys {
				if toRing.Locate(k) == i && st.Shards[fromRing.Locate(k)].Name != sh.Name {
					stale = append(stale, k)
				}
			}
			_, err := del.Delete(ctx, stale)
			return err
		})
		del.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Migrate implements fleet.Backend: it lists the keys of every shard that
// loses keys and moves those that move, as a command's first use does
// (see the package documentation), until a pass over every source finds
// none; then it waits settleWait, so that every move begun before its
// end has landed before the driver stores Stable. It returns the first
// failure, naming the shard.
func (b fleetBackend) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	c := b.c
	v := c.shards.Acquire()
	defer v.Release()
	win := c.win.Load()
	if !v.Moving() || win == nil {
		return fmt.Errorf("shardedcache: Migrate of epoch %d: the client has not applied the Moving step", st.Epoch)
	}
	fromRing, toRing, err := c.fleetRings(st)
	if err != nil {
		return err
	}
	diff, err := ring.Compare(fromRing, toRing)
	if err != nil {
		return err
	}
	var sources []fleet.Shard
	for i, sh := range st.Shards {
		if movesFrom(diff, i) {
			sources = append(sources, sh)
		}
	}
	var p fleet.Progress
	p.Sources = len(sources)
	for pass := 0; ; pass++ {
		found := 0
		for _, sh := range sources {
			err := c.scanShard(ctx, sh, func(keys []string) error {
				var moving []shardcore.MovingKey
				for _, k := range keys {
					if from, to, moved := v.Moved(k); moved && v.Shard(from).Name == sh.Name {
						moving = append(moving, shardcore.MovingKey{Key: k, From: from, To: to})
					}
				}
				p.Scanned += int64(len(keys))
				found += len(moving)
				if failed := c.move(ctx, v, win, "", moving, nil); len(failed) > 0 {
					return failed[0]
				}
				p.Moved += int64(len(moving))
				if progress != nil {
					progress(p)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if pass == 0 {
				p.Done++
			}
		}
		if found == 0 {
			break
		}
	}
	if progress != nil {
		progress(p)
	}
	select {
	case <-time.After(settleWait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// movesFrom reports whether d moves keys off shard i.
func movesFrom(d ring.Diff, i int) bool {
	for _, m := range d.Moves {
		if m.From == i {
			return true
		}
	}
	return false
}

// fleetMove moves keys from shard from to shard to of v in a fleet (see
// move): in the Preparing step it first waits for Moving. For each key:
// if the new owner holds it (a value or a tombstone), the old owner's
// copy, older, is deleted; else the old owner's item is read (value,
// flags, TTL, CAS token) and added to the new owner (add: a newer write or
// tombstone there wins), within MoveWindow and a valid lease, then
// deleted from the old owner if its token is unchanged. A key the old
// owner does not hold is on neither shard, or already on the new one.
func (c *ShardedClient) fleetMove(ctx context.Context, v *view, st *window, op string, from, to int, keys []string, found func(*memcache.Item)) *MoveError {
	fail := func(step string, at int, key string, err error) *MoveError {
		return &MoveError{Op: op, Key: key, From: v.Label(from), To: v.Label(to), Step: step, Err: err, at: at}
	}
	if err := c.fleet.awaitMoving(ctx); err != nil {
		return fail("wait for the fleet's Moving step", to, keys[0], err)
	}
	if c.fleet.mode.Load() != modeMoving {
		return nil // Stable over the target: the driver moved every key
	}
	dst, dstPool, err := st.conn(ctx, v, to)
	if err != nil {
		return fail("get", to, keys[0], v.Finish(ctx, to, err))
	}
	defer dstPool.Put(dst)
	src, srcPool, err := st.conn(ctx, v, from)
	if err != nil {
		return fail("get", from, keys[0], v.Finish(ctx, from, err))
	}
	defer srcPool.Put(src)
	if !dst.Meta() || !src.Meta() {
		return fail("get", from, keys[0], errors.New("a fleet needs memcached 1.6.10 or later (meta commands)"))
	}
	onNew, err := dst.Get(ctx, keys)
	if err := v.Finish(ctx, to, err); err != nil {
		return fail("get", to, keys[0], err)
	}
	held := make(map[string]bool, len(onNew))
	var done []string
	for _, it := range onNew {
		held[it.Key] = true
		done = append(done, it.Key)
		if found != nil && !isTombstoneMeta(it) {
			found(&memcache.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, CasID: it.CAS})
		}
	}
	if len(done) > 0 {
		// A copy a move left behind (its process died between its steps).
		_, err := src.Delete(ctx, done)
		if err := v.Finish(ctx, from, err); err != nil {
			return fail("delete old copy", from, done[0], err)
		}
	}
	var rest []string
	for _, k := range keys {
		if !held[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		v.Window().Remember(keys...)
		return nil
	}
	start := time.Now()
	onOld, err := src.Get(ctx, rest)
	if err := v.Finish(ctx, from, err); err != nil {
		return fail("get", from, rest[0], err)
	}
	var taken []string // added by another process meanwhile
	for _, it := range onOld {
		if err := c.fleet.check(); err != nil {
			return fail("set", to, it.Key, err)
		}
		if time.Since(start) > MoveWindow {
			return fail("set", to, it.Key, fmt.Errorf("the move took longer than %v since its read of the old owner; abandoned", MoveWindow))
		}
		add := mcmeta.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, Expiration: mcmeta.Expiration(it.TTL, time.Now())}
		stored, cas, err := dst.Add(ctx, add)
		var dropped bool
		switch {
		case errors.Is(err, mcmeta.ErrTooLarge):
			dropped, err = true, nil
			st.tooLarge.Add(1)
		case err == nil && !stored:
			taken = append(taken, it.Key)
			continue
		}
		if err := v.Finish(ctx, to, err); err != nil {
			return fail("set", to, it.Key, err)
		}
		outcome, err := src.DeleteIf(ctx, it.Key, it.CAS)
		if err := v.Finish(ctx, from, err); err != nil {
			return fail("delete old copy", from, it.Key, err)
		}
		if outcome == "changed" && !dropped {
			// Written on the old owner since it was read: only a process
			// that ignored the protocol does that. Keep that value the
			// truth: take back the copy, unless it was overwritten.
			_, err := dst.DeleteIf(ctx, it.Key, cas)
			return fail("delete old copy", from, it.Key, errors.Join(errors.New("the old owner's copy changed during the move"), v.Finish(ctx, to, err)))
		}
		if !dropped {
			st.movedTTL.Add(1)
			if found != nil {
				found(&memcache.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, CasID: cas})
			}
		}
	}
	if found != nil && len(taken) > 0 {
		now, err := dst.Get(ctx, taken)
		if err := v.Finish(ctx, to, err); err != nil {
			return fail("get", to, taken[0], err)
		}
		for _, it := range now {
			if !isTombstoneMeta(it) {
				found(&memcache.Item{Key: it.Key, Value: it.Value, Flags: it.Flags, CasID: it.CAS})
			}
		}
	}
	st.absent.Add(int64(len(rest) - len(onOld)))
	v.Window().Remember(keys...)
	return nil
}

// bury is Delete of a moving key in a fleet, on its new owner m: it stores
// a tombstone (see TombstoneFlags) and returns memcache.ErrCacheMiss when
// the key held no value.
func bury(m *memcache.Client, key string) error {
	it, err := m.Get(key)
	if err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
		return err
	}
	if err := m.Set(&memcache.Item{Key: key, Value: []byte(TombstoneValue), Flags: TombstoneFlags, Expiration: TombstoneTTL}); err != nil {
		return err
	}
	if it == nil || IsTombstone(it) {
		return memcache.ErrCacheMiss
	}
	return nil
}
