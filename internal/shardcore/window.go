package shardcore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardedcache/shardedcache/ring"
)

// ErrMoveInProgress is returned by BeginWindow and SetShards while a move is
// in progress.
var ErrMoveInProgress = errors.New("shardedclient: a move is already in progress; end it first")

// ErrMoveIncomplete is returned by EndWindow, unforced, before the window's
// migration has finished (Window.MarkMigrated): keys not yet moved would
// stay on their old shards, unreachable.
var ErrMoveIncomplete = errors.New("shardedclient: the migration of this move has not finished; run it to the end, or end the move knowingly (forced)")

// Window is the life cycle of one move, from BeginWindow to EndWindow: open,
// then migrated once every key has been moved, then ended. Its ID tells it
// from every other window, so that a checkpoint of one migration cannot be
// resumed in another.
type Window struct {
	// ID is random, 16 hex digits.
	ID       string
	migrated atomic.Bool

	// With Backend.RememberMoved, the keys this process has moved (or found
	// absent from their old owner) in this window: they need no move again;
	// nil without Backend.RememberMoved.
	mu    sync.Mutex
	moved map[string]struct{}
}

// Remembered reports whether key was marked moved in w (see Backend.RememberMoved);
// false for a nil w.
func (w *Window) Remembered(key string) bool {
	if !w.remembers() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.moved[key]
	return ok
}

// remembers reports whether w remembers moved keys (Backend.RememberMoved).
func (w *Window) remembers() bool { return w != nil && w.moved != nil }

// Remember marks keys moved in w, if w remembers (see Backend.RememberMoved):
// View.Track no longer reports them as moving. A nil w remembers nothing.
func (w *Window) Remember(keys ...string) {
	if !w.remembers() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.moved[k] = struct{}{}
	}
}

// MarkMigrated records that every key of the window is on its new owner,
// which lets EndWindow end it unforced.
func (w *Window) MarkMigrated() { w.migrated.Store(true) }

// Migrated reports whether MarkMigrated was called.
func (w *Window) Migrated() bool { return w.migrated.Load() }

func newWindow() *Window {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &Window{ID: hex.EncodeToString(b[:])}
}

// Window returns the move in progress, or nil outside a move.
func (s *Sharded[C]) Window() *Window { return s.view.Load().window }

// Window returns the move that v belongs to, or nil for a view outside a
// move: a call remembers its moves in its own view's window, never in a
// later one.
func (v *View[C]) Window() *Window { return v.window }

// BeginWindow starts moving to a new shard list without a cold cache: keys are
// placed by the new list's ring at once, and the old ring stays as the
// previous one, so that a backend can find a key that has not reached its
// new owner yet (View.Moved) and move it there. Shards that the new list
// drops stay reachable (after the new list's shards, owning no key) until
// EndWindow. Identity, counters and ejections carry over as in SetShards; a
// shard that keeps its identity is the same shard (its data is not moved
// if its client changes, and its old client is closed once the commands
// using it have ended).
//
// Before the new view serves any command, prepare (when not nil) runs on it
// with the move's rings set (View.Moved works) and view changes held back:
// the backend removes there the stale copies that the shards gaining keys
// hold (see package redis). If prepare fails, nothing changes and its
// error is returned.
//
// A shard that leaves keeps its client, or, when leaving is not nil, the
// client leaving returns for it (the old one is then closed once the
// commands using it have ended): a fleet's sources get clients that their
// fence accepts in the same switch that stops routing keys to them, so no
// view ever routes by the old list with such clients (see package redis).
// If leaving fails, nothing changes and its error is returned; the clients
// it returned before are the caller's to close.
func (s *Sharded[C]) BeginWindow(shards []Shard[C], leaving func(Shard[C]) (C, error), prepare func(*View[C]) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, v, err := s.nextView(shards)
	if err != nil {
		return err
	}
	// Append the shards that leave, and map the old ring's indices.
	v.prevIdx = make([]int, len(cur.shards))
	matched := s.match(cur, v.full, v.shards)
	for i, sh := range cur.shards {
		j := matched[i]
		if j < 0 {
			if leaving != nil {
				if sh.Client, err = leaving(sh); err != nil {
					return err
				}
			}
			j = len(v.shards)
			v.shards = append(v.shards, sh)
			v.health = append(v.health, cur.health[i])
		}
		v.prevIdx[i] = j
	}
	// Where keys were before the move: a shard ejected now holds its own
	// keys (a copy written on a stand-in meanwhile is stale), so the old
	// ring has every shard live, and ejections during the move leave it.
	v.prev = rejoinAll(cur.live)
	if prepare != nil {
		if err := s.preparing(prepare, v); err != nil {
			return err
		}
	}
	g := &barrier{prev: v.prev, prevIdx: v.prevIdx, next: v.live, done: make(chan struct{})}
	v.barriers = append(v.barriers, g)
	w := newWindow()
	if s.backend.RememberMoved {
		w.moved = map[string]struct{}{}
	}
	v.window = w
	s.swap(v, true) // v holds the shards that leave: only replaced clients close
	s.openBarrier(g)
	return nil
}

// match maps each shard of cur to the same shard of next (a ring of the
// shards nextShards), or to -1 for one that leaves: the shard with its ID,
// else the one that reaches the same server (see Backend.ServerOf), since one
// server under an address written another way ("localhost:6379" for
// "127.0.0.1:6379") is the same shard, whose keys stay where they are.
func (s *Sharded[C]) match(cur *View[C], next *ring.Ring, nextShards []Shard[C]) []int {
	out := make([]int, cur.Len())
	var byServer map[string]int // built on first use: it resolves names
	for i := range out {
		if out[i] = next.Index(cur.ID(i)); out[i] >= 0 || s.backend.ServerOf == nil {
			continue
		}
		if byServer == nil {
			byServer = map[string]int{}
			for j := range next.Len() {
				if srv := s.backend.ServerOf(nextShards[j]); srv != "" && cur.full.Index(next.ID(j)) < 0 {
					byServer[srv] = j
				}
			}
		}
		if j, ok := byServer[s.backend.ServerOf(cur.shards[i])]; ok {
			out[i] = j
		}
	}
	return out
}

// EndWindow ends the move begun by BeginWindow: the previous ring is dropped,
// and the clients of the shards that left are closed once the commands
// using them have ended. The keys the move changed wait, before their next
// command, until the commands begun during the move have ended (one of
// them may still be moving the key). Unless force, it returns
// ErrMoveIncomplete, changing nothing, before the window's migration has
// finished (Window.MarkMigrated). Without a move in progress it does
// nothing.
func (s *Sharded[C]) EndWindow(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view.Load()
	if cur.prev == nil || s.closed {
		return nil
	}
	if !force && !cur.window.Migrated() {
		return ErrMoveIncomplete
	}
	n := cur.full.Len()
	for _, h := range cur.health[n:] {
		h.stopTimer()
	}
	g := &barrier{prev: cur.prev, prevIdx: cur.prevIdx, next: cur.live, done: make(chan struct{})}
	v := cur.next(func(v *View[C]) {
		v.shards, v.health, v.prev, v.prevIdx, v.window = cur.shards[:n:n], cur.health[:n:n], nil, nil, nil
		v.barriers = append(v.barriers, g)
	})
	s.swap(v, true)
	s.openBarrier(g)
	return nil
}

// barrier holds back the keys that a move changes (their owner in prev
// differs from their owner in next) until done: until every command begun
// on an earlier view has ended. Without it, a write begun before
// BeginWindow could land on a key's old owner after the key was moved, and
// be lost; or a move begun before EndWindow could restore a key deleted
// after it.
type barrier struct {
	prev    *ring.Ring
	prevIdx []int
	next    *ring.Ring
	done    chan struct{}
}

// openBarrier closes g.done once every retired view has drained (their
// commands have ended; callbacks that Pin a view are not waited for), or at
// Close; s.mu is held.
func (s *Sharded[C]) openBarrier(g *barrier) {
	waitFor := slices.Clone(s.retired)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(g.done)
		for _, r := range waitFor {
			select {
			case <-r.drained:
			case <-s.stop:
				return
			}
		}
	}()
}

// openBarriers returns the barriers of barriers that are still closed.
func openBarriers(barriers []*barrier) []*barrier {
	var out []*barrier
	for _, g := range barriers {
		select {
		case <-g.done:
		default:
			out = append(out, g)
		}
	}
	return out
}

// Moving reports whether a move is in progress in v.
func (v *View[C]) Moving() bool { return v.prev != nil }

// Moved returns, during a move, the shard that held key before the move
// (from) and its owner now (to), with moved true when they differ. Outside
// a move, moved is false.
func (v *View[C]) Moved(key string) (from, to int, moved bool) {
	to = v.live.Locate(key)
	if v.prev == nil {
		return to, to, false
	}
	from = v.prevIdx[v.prev.Locate(key)]
	return from, to, from != to
}

// Settled returns key's owners before and after the move, as Moved does,
// and whether no ejection changes them (ok): the old owner is not ejected,
// and the owner now is the one every ejected shard back gives (AllLiveOwner).
// An unsettled key's place depends on shards being ejected: moved or judged
// by the live ring, it would end where it is not found once they rejoin.
// In a window that remembers moves (Backend.RememberMoved), an ejected old owner
// counts as holding nothing: it leaves a key settled, which moves as a
// miss (see Track).
func (v *View[C]) Settled(key string) (from, to int, ok bool) {
	from, to, _ = v.Moved(key)
	return from, to, v.settled(key, from, to)
}

// settled is Settled's verdict for key, whose owners Moved found.
func (v *View[C]) settled(key string, from, to int) bool {
	back := v.rejoined()
	return (back == v.live || back.Locate(key) == to) && (v.prev == nil || !v.Ejected(from) || v.window.remembers())
}

// AllLiveOwner returns the shard that owns key once every ejected shard is
// back: Locate's answer when none is ejected.
func (v *View[C]) AllLiveOwner(key string) int { return v.rejoined().Locate(key) }

// rejoined returns v's live ring with every ejected shard rejoined
// (ring.Rejoin: for a preset whose rebuild re-values its points, that is
// not the full ring), the live ring itself when none is ejected.
func (v *View[C]) rejoined() *ring.Ring {
	v.back.once.Do(func() { v.back.live = rejoinAll(v.live) })
	return v.back.live
}

// rejoinAll returns r with its ejected nodes rejoined; r itself when none
// is.
func rejoinAll(r *ring.Ring) *ring.Ring {
	var ejected []int
	for i := range r.Len() {
		if r.Ejected(i) {
			ejected = append(ejected, i)
		}
	}
	if len(ejected) == 0 {
		return r
	}
	back, err := r.Rejoin(ejected...)
	if err != nil { // cannot happen: the indices are r's own
		return r
	}
	return back
}

// Previous returns the ring of the shards before the move (its indices are
// positions in the old list), or nil outside a move.
func (v *View[C]) Previous() *ring.Ring { return v.prev }

// PreviousIndex maps index i of the previous ring to v's shard list.
func (v *View[C]) PreviousIndex(i int) int { return v.prevIdx[i] }

// Plan returns the exact change of ownership that moving to nodes (the new
// shard list's names, weights and addresses) would make: ring.Compare of the
// current ring and the new one.
func (s *Sharded[C]) Plan(nodes []ring.Node) (ring.Diff, error) { return s.view.Load().Plan(nodes) }

// Plan is Sharded.Plan from v's ring: the Moves' From indices are v's shard
// indices.
func (v *View[C]) Plan(nodes []ring.Node) (ring.Diff, error) {
	target, err := ring.New(nodes, v.parent.preset)
	if err != nil {
		return ring.Diff{}, err
	}
	shards := make([]Shard[C], len(nodes))
	for j, n := range nodes {
		shards[j] = Shard[C]{Name: n.Name, Addr: n.Addr, Weight: n.Weight}
	}
	same := make([]int, len(nodes)) // a node of target -> the same shard of v, or -1
	for j := range same {
		same[j] = -1
	}
	for i, j := range v.parent.match(v, target, shards) {
		if j >= 0 && i < v.live.Len() { // not a shard a move removes
			same[j] = i
		}
	}
	return ring.CompareMatched(v.live, target, same)
}
