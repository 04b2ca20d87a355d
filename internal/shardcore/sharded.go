// Package shardcore is the engine under package shardedclient and the
// backends (packages redis and memcache): a set of clients of any type, one
// per shard, and a consistent-hash ring over them. It answers which shard
// owns a key, groups many keys by shard for scatter-gather, tracks each
// shard's health (failure counts, ejection and rejoining, events and
// counters), swaps the shard list at run time, opens and ends resharding
// windows (the keys whose owner changes move before their first command),
// and closes every shard. It knows nothing of Redis or memcached: a backend
// plugs in through Backend, given to New. Package shardedclient exports
// what users see of it.
//
// Lookups take no lock and allocate nothing: the shards and their ring are
// an immutable View behind an atomic pointer. A backend runs each command
// on one View (Acquire, then Release), so that a command never mixes two
// shard lists and a client replaced by SetShards is closed only once the
// commands using it have ended.
package shardcore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"sync/atomic"

	"github.com/shardedcache/shardedcache/ring"
)

// Shard is one shard: a client and its place on the ring.
type Shard[C comparable] struct {
	// Name identifies the shard on the ring (see ring.Node); optional.
	Name string
	// Weight scales the shard's share of keys; 0 means 1.
	Weight int
	// Addr is the shard's server address: for errors and logs, and for
	// the ketama presets, which label an unnamed shard by it; optional.
	Addr string
	// Client is the shard's client; it must not be nil.
	Client C
}

// Info describes the shard that owns a key.
type Info struct {
	Index  int    // position in the shard list
	Name   string // configured name, possibly empty
	Weight int    // configured weight, 0 given as 1
}

// Group is the set of keys that one shard owns, as returned by GroupKeys.
type Group struct {
	Shard     int      // index of the shard
	Keys      []string // the keys, in the order they were given
	Positions []int    // Positions[i] is the index of Keys[i] in the input
}

// Sharded is a ring of shards, each holding a client of type C. Its methods
// are safe for concurrent use.
type Sharded[C comparable] struct {
	view      atomic.Pointer[View[C]]
	preset    ring.Preset // nil: ring.Jedis{}
	health    Health[C]
	backend   Backend[C]    // its Health is health's source; ClosedErr set
	liveEpoch atomic.Uint64 // ejections, rejoins and list changes so far (see View.LiveEpoch)
	changing  atomic.Bool   // a list change prepares its view, s.mu held (see ejectSoon)
	closing   atomic.Bool   // Close has begun

	changesMu sync.Mutex
	listeners map[chan struct{}]struct{} // see Changes
	locks     KeyLocks                   // a key's lock, held while the key moves

	mu      sync.Mutex // serializes view changes (eject, rejoin, SetShards, Close)
	closed  bool
	retired []*View[C]     // replaced views that commands may still use
	wg      sync.WaitGroup // client closers, probes and retries under way
	stop    chan struct{}  // closed by Close
}

// Preset returns the placement preset of s's rings (nil: ring.Jedis{}).
func (s *Sharded[C]) Preset() ring.Preset { return s.preset }

// Backend is what a backend gives New: its client type's health policy and
// the few things the ring of shards cannot know about that client. It is
// the whole contract between this package and a backend (packages redis and
// memcache; a third backend fills the same fields). The zero Backend is a
// backend whose keys never move in a window and whose clients are closed
// as io.Closers.
type Backend[C comparable] struct {
	// Health is the policy for failing shards (see Health).
	Health Health[C]
	// Move moves keys to their new owner in a resharding window (see
	// View.Prepare); nil makes a command that needs a move fail with
	// ErrNoMover.
	Move Mover[C]
	// Close closes a shard's client, when SetShards or a window drops it
	// and at Close, for a client that holds more than its own Close
	// releases; nil closes a client that implements io.Closer with its
	// Close.
	Close func(C) error
	// ClosedErr is the error a call is given when Close closed its shard's
	// connection under it (besides its own, in a *ShardError): the
	// backend's own, such as go-redis's redis.ErrClosed; nil means
	// ErrClosed. Such a failure is the caller's, not the shard's: it
	// counts as a request only.
	ClosedErr error
	// ServerOf tells one server under two addresses written differently:
	// it returns what a shard reaches, such as its address resolved and
	// its DB ("127.0.0.1:6379/0"), or "" when it cannot tell. BeginWindow
	// then takes a shard of the new list whose ID the old list lacks for
	// the old shard that reaches the same server, so that the window
	// leaves that server's keys where they are (rather than move them
	// onto themselves, or drop them as stale copies). Nil: IDs only.
	ServerOf func(Shard[C]) string
	// RememberMoved makes every window remember the keys the backend
	// marks moved (Window.Remember), so that they are moved once: for a
	// backend that cannot tell a value written in the window from a stale
	// leftover on the new owner (memcached). The memory is one map entry
	// per key used in the window, dropped by EndWindow. In such a window,
	// View.Track also reports a key whose old owner is ejected (and whose
	// new owner is not) as moving: the backend moves it as if that owner
	// held nothing, which removes the new owner's leftover (a memcache
	// shard is flushed when it rejoins).
	RememberMoved bool
}

// New builds a Sharded over shards, in order, placed by preset p (nil is
// ring.Jedis{}), for backend b. With b.Health.ProbeInterval set it starts
// a goroutine that Close stops. It returns an error for a bad health
// policy, an empty list, a nil client (naming the shard), or any error of
// ring.New (negative weight, duplicate name, ...).
func New[C comparable](shards []Shard[C], b Backend[C], p ring.Preset) (*Sharded[C], error) {
	h := b.Health
	if err := h.normalize(); err != nil {
		return nil, err
	}
	if b.ClosedErr == nil {
		b.ClosedErr = ErrClosed
	}
	s := &Sharded[C]{preset: p, health: h, backend: b, stop: make(chan struct{})}
	v, err := s.newView(shards, nil)
	if err != nil {
		return nil, err
	}
	s.view.Store(v)
	if h.ProbeInterval > 0 {
		s.wg.Add(1)
		go s.probeLoop()
	}
	return s, nil
}

// newView builds a View over shards, reusing the health records of old's
// shards that have the same identity (their counters and ejection carry
// over).
func (s *Sharded[C]) newView(shards []Shard[C], old *View[C]) (*View[C], error) {
	if len(shards) == 0 {
		return nil, errors.New("shardedclient: no shards")
	}
	nodes := make([]ring.Node, len(shards))
	for i, sh := range shards {
		var none C
		if sh.Client == none {
			return nil, fmt.Errorf("shardedclient: shard %d (%q): nil client", i, sh.Name)
		}
		nodes[i] = ring.Node{Name: sh.Name, Weight: sh.Weight, Addr: sh.Addr}
	}
	full, err := ring.New(nodes, s.preset)
	if err != nil {
		return nil, err
	}
	v := (&View[C]{parent: s}).next(func(v *View[C]) {
		v.shards, v.full, v.live, v.health = make([]Shard[C], len(shards)), full, full, make([]*shardHealth, len(shards))
	})
	var ejected []int
	seen := make(map[string]int, len(shards))
	for i, n := range full.Nodes() {
		if j, dup := seen[full.ID(i)]; dup {
			return nil, fmt.Errorf("shardedclient: shards %d (%q) and %d (%q) are the same server (%s)", j, shards[j].Name, i, shards[i].Name, shards[i].Addr)
		}
		seen[full.ID(i)] = i
		v.shards[i] = shards[i]
		v.shards[i].Weight = n.Weight
		v.health[i] = &shardHealth{}
		if old != nil {
			if j := old.indexOf(full.ID(i)); j >= 0 {
				v.health[i] = old.health[j]
				if v.health[i].ejected.Load() {
					ejected = append(ejected, i)
				}
			}
		}
	}
	if len(ejected) > 0 && len(ejected) < len(shards) {
		if v.live, err = full.Eject(ejected...); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// View is an immutable snapshot of the shards, their full ring and the ring
// of the live (not ejected) shards. Indices are positions in the shard
// list; Locate never returns an ejected shard.
type View[C comparable] struct {
	parent *Sharded[C]
	shards []Shard[C]
	full   *ring.Ring // every shard
	live   *ring.Ring // ejected shards own nothing; == full when none is
	health []*shardHealth

	// During a move (BeginWindow), the ring keys were placed by before it,
	// and for each of its node indices the index of the same shard in
	// shards; the shards that the move removes follow the target's shards.
	prev    *ring.Ring
	prevIdx []int
	// back is live with every ejected shard rejoined (see AllLiveOwner),
	// built on first use.
	back struct {
		once sync.Once
		live *ring.Ring
	}
	// fingerprint is a hash of the shards' IDs in order (see Fingerprint),
	// computed on first use.
	fingerprint struct {
		once sync.Once
		sum  uint64
	}
	// liveEpoch counts the ejections, rejoins and list changes before this
	// view (see LiveEpoch).
	liveEpoch uint64
	// window is the move in progress in this view (BeginWindow), else nil.
	window *Window
	// barriers hold back the keys that recent moves change until the commands
	// begun on the views before them have ended (see barrier); the open
	// ones are dropped as views are built.
	barriers []*barrier

	inflight     atomic.Int64  // Acquire calls not yet released (barriers wait for them)
	pinned       atomic.Int64  // Pin calls not yet released (closing a client waits for them)
	retired      atomic.Bool   // a newer view has replaced this one
	drained      chan struct{} // closed once retired and no command uses it
	once         sync.Once
	unpinned     chan struct{} // closed once drained and no callback uses it either
	unpinnedOnce sync.Once
}

// Acquire returns the current View for one command; the caller must call
// Release when the command has ended. Until then the View's clients stay
// open even if SetShards replaces them, and the keys a later move changes
// wait for the command (see BeginWindow).
func (s *Sharded[C]) Acquire() *View[C] { return s.acquire(false) }

// Pin is Acquire for a user callback that may itself run commands (Watch,
// ForEachShard); the caller must call Unpin. The View's clients stay open
// until then, but moves do not wait for it, so the callback's own commands
// cannot deadlock on it.
func (s *Sharded[C]) Pin() *View[C] { return s.acquire(true) }

func (s *Sharded[C]) acquire(pin bool) *View[C] {
	for {
		v := s.view.Load()
		v.use(pin, 1)
		if s.view.Load() == v {
			return v
		}
		v.use(pin, -1) // replaced meanwhile: take the new one
		v.settle()
	}
}

// use counts an Acquire (or Pin) of v in or out.
func (v *View[C]) use(pin bool, n int64) {
	if pin {
		v.pinned.Add(n)
	} else {
		v.inflight.Add(n)
	}
}

// Release ends a use of v begun by Acquire.
func (v *View[C]) Release() {
	v.inflight.Add(-1)
	v.settle()
}

// Unpin ends a use of v begun by Pin.
func (v *View[C]) Unpin() {
	v.pinned.Add(-1)
	v.settle()
}

// settle closes the channels that v's counts now allow, once retired.
func (v *View[C]) settle() {
	if !v.retired.Load() || v.inflight.Load() != 0 {
		return
	}
	v.once.Do(func() { close(v.drained) })
	if v.pinned.Load() == 0 {
		v.unpinnedOnce.Do(func() { close(v.unpinned) })
	}
}

// retire marks v replaced; drained is closed once no command uses it, and
// unpinned once no callback does either.
func (v *View[C]) retire() {
	v.retired.Store(true)
	v.settle()
}

// next returns a new View that starts as a copy of v's shards, rings, health
// records, move state and still-closed barriers, changed by edit, with fresh
// counters and channels: every View is built here. (Its two counts differ
// on purpose: moves wait for commands (drained), closing a client waits
// for callbacks too (unpinned).)
func (v *View[C]) next(edit func(*View[C])) *View[C] {
	n := &View[C]{parent: v.parent, shards: v.shards, full: v.full, live: v.live, health: v.health,
		prev: v.prev, prevIdx: v.prevIdx, window: v.window, barriers: openBarriers(v.barriers),
		liveEpoch: v.parent.liveEpoch.Load()}
	edit(n)
	n.drained, n.unpinned = make(chan struct{}), make(chan struct{})
	return n
}

// Locate returns the index of the live shard that owns key.
func (v *View[C]) Locate(key string) int { return v.live.Locate(key) }

// Len returns the number of shards, ejected ones included.
func (v *View[C]) Len() int { return len(v.shards) }

// Shard returns shard i.
func (v *View[C]) Shard(i int) Shard[C] { return v.shards[i] }

// Fingerprint returns a 64-bit FNV-1a hash of v's shard list as it places
// keys: each shard's identity (ID), name and weight, in order (shards
// leaving in a move included), and whether a move is in progress. Views
// that place keys alike give the same value, whatever their ejections; a
// change of the list (a shard added, removed, moved, renamed or
// re-weighted, the order changed, a move begun or ended) gives another, but
// for hash collisions. A backend puts part of it in a cursor that names a
// shard by position, to refuse the cursor once keys may have moved between
// the shards it walks.
func (v *View[C]) Fingerprint() uint64 {
	v.fingerprint.once.Do(func() {
		h := fnv.New64a()
		for i, sh := range v.shards {
			fmt.Fprintf(h, "%s\x00%s\x00%d\x00", v.ID(i), sh.Name, sh.Weight)
		}
		fmt.Fprint(h, v.Moving())
		v.fingerprint.sum = h.Sum64()
	})
	return v.fingerprint.sum
}

// Client returns the client of shard i.
func (v *View[C]) Client(i int) C { return v.shards[i].Client }

// Label names shard i for messages, as `shard 1 "b" (10.0.0.2:6379)`.
func (v *View[C]) Label(i int) string {
	return label(i, v.shards[i].Name, v.shards[i].Addr)
}

// Err wraps err, a failure of shard i, in a *ShardError naming the shard.
// It returns nil for a nil err.
func (v *View[C]) Err(i int, err error) error {
	if err == nil {
		return nil
	}
	sh := v.shards[i]
	return &ShardError{Index: i, Name: sh.Name, Addr: sh.Addr, Err: err}
}

// Ejected reports whether shard i is ejected in this view. (A shard that a
// move is removing owns no key but is not ejected.)
func (v *View[C]) Ejected(i int) bool {
	if i < v.live.Len() {
		return v.live.Ejected(i)
	}
	return v.health[i].ejected.Load()
}

// Ring returns the ring of the live shards.
func (v *View[C]) Ring() *ring.Ring { return v.live }

// FullRing returns the ring of every shard of the list, ejected ones
// included: where keys go once every shard is live. (During a move, the
// shards that the move removes are not on it.)
func (v *View[C]) FullRing() *ring.Ring { return v.full }

// GroupKeys splits keys by owning shard. Groups are ordered by shard index;
// within a group keys keep their input order, and Positions maps each back
// to its index in keys, so that per-shard replies can be put back in order.
// Shards that own none of the keys get no group.
func (v *View[C]) GroupKeys(keys []string) []Group {
	owners := make([]int, len(keys))
	for i, k := range keys {
		owners[i] = v.live.Locate(k)
	}
	return v.GroupOwned(keys, owners)
}

// GroupOwned is GroupKeys for keys whose owners the caller has found
// already: owners[i] is the shard of keys[i], as Locate or Track returned
// it on v. Every group's keys and positions are carved from one array each.
func (v *View[C]) GroupOwned(keys []string, owners []int) []Group {
	count := make([]int, len(v.shards))
	ngroups := 0
	for _, s := range owners {
		if count[s]++; count[s] == 1 {
			ngroups++
		}
	}
	slot := make([]int, len(v.shards)) // shard -> its index in groups
	groups := make([]Group, 0, ngroups)
	flatKeys, flatPos := make([]string, len(keys)), make([]int, len(keys))
	at := 0
	for shard, n := range count {
		if n > 0 {
			slot[shard] = len(groups)
			groups = append(groups, Group{Shard: shard, Keys: flatKeys[at : at : at+n], Positions: flatPos[at : at : at+n]})
			at += n
		}
	}
	for i, k := range keys {
		g := &groups[slot[owners[i]]]
		g.Keys = append(g.Keys, k)
		g.Positions = append(g.Positions, i)
	}
	return groups
}

// ID returns shard i's identity, ring.ID of its node: its address when it
// has one (the server holds its keys, whatever the shard's name or
// position), else its name, else its slot. State that belongs to a shard
// (health, subscriptions, migration checkpoints, moves) is kept by ID
// across shard lists. Two shards of one view never share an ID.
func (v *View[C]) ID(i int) string {
	if i < v.full.Len() {
		return v.full.ID(i)
	}
	for p, j := range v.prevIdx { // a shard the move in progress removes
		if j == i {
			return v.prev.ID(p)
		}
	}
	panic("shardedclient: shard index out of range")
}

// indexOf returns the index of the shard with the given identity, or -1.
func (v *View[C]) indexOf(id string) int {
	if i := v.full.Index(id); i >= 0 {
		return i
	}
	for p, j := range v.prevIdx { // a shard the move in progress removes
		if j >= v.full.Len() && v.prev.ID(p) == id {
			return j
		}
	}
	return -1
}

// The methods below read the current View once each, without Acquire: for
// a single lookup. A command that makes several lookups, or uses a shard's
// client, runs on one View (Acquire).

// Ring returns the ring of the live shards.
func (s *Sharded[C]) Ring() *ring.Ring { return s.view.Load().live }

// Locate returns the index of the live shard that owns key.
func (s *Sharded[C]) Locate(key string) int { return s.view.Load().Locate(key) }

// GetShard returns the client of the live shard that owns key, for the
// caller to use with key directly. During a move it first moves key to its
// new owner (View.Prepare, under ctx), so that what the caller writes there
// cannot be overwritten or lost by the move. If that fails it returns the
// zero C and the error: neither owner is safe to hand out then, since a
// move whose reply was lost may have left a copy on the new owner that wins
// over a later write to the old one, and the new owner may lack the value.
func (s *Sharded[C]) GetShard(ctx context.Context, key string) (C, error) {
	v := s.Acquire()
	defer v.Release()
	var p Pending
	i := v.Track(&p, key)
	if err := v.Prepare(ctx, &p, nil); err != nil {
		var none C
		return none, err
	}
	return v.shards[i].Client, nil
}

// GetShardInfo returns the index, name and weight of the live shard that
// owns key.
func (s *Sharded[C]) GetShardInfo(key string) Info {
	v := s.view.Load()
	i := v.live.Locate(key)
	return Info{Index: i, Name: v.shards[i].Name, Weight: v.shards[i].Weight}
}

// AllShards returns a copy of the shard list, in order.
func (s *Sharded[C]) AllShards() []Shard[C] {
	return append([]Shard[C](nil), s.view.Load().shards...)
}

// Close stops the health goroutines and timers, then closes every shard's
// client (with Backend.Close, or its io.Closer), and returns a *MultiShardError (Op
// "Close") naming each shard whose Close failed, or nil. Clients of views that SetShards
// retired are closed as their commands end.
func (s *Sharded[C]) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.closing.Store(true)
	close(s.stop)
	v := s.view.Load()
	for _, h := range v.health {
		h.stopTimer()
	}
	s.mu.Unlock()
	s.wg.Wait()
	errs := make([]error, len(v.shards))
	all := make([]int, len(v.shards))
	for i, sh := range v.shards {
		all[i] = i
		if err := s.closeClient(sh.Client); err != nil {
			errs[i] = fmt.Errorf("close: %w", err)
		}
	}
	return v.MultiErr("Close", all, errs)
}

// closeClient closes c as Backend.Close says.
func (s *Sharded[C]) closeClient(c C) error {
	if s.backend.Close != nil {
		return s.backend.Close(c)
	}
	if cl, ok := any(c).(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
