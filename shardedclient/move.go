package shardedclient

import (
	"errors"

	"github.com/shardedcache/shardedcache/ring"
)

// ErrMoveInProgress is returned by BeginMove and SetShards while a move is
// in progress.
var ErrMoveInProgress = errors.New("shardedclient: a move is already in progress; end it first")

// BeginMove starts moving to a new shard list without a cold cache: keys are
// placed by the new list's ring at once, and the old ring stays as the
// previous one, so that a backend can find a key that has not reached its
// new owner yet (View.Moved) and move it there. Shards that the new list
// drops stay reachable (after the new list's shards, owning no key) until
// EndMove. Identity, counters and ejections carry over as in SetShards; a
// shard that keeps its identity is the same shard (its data is not moved
// if its client changes).
func (s *Sharded[C]) BeginMove(shards []Shard[C]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, v, err := s.nextView(shards)
	if err != nil {
		return err
	}
	// Append the shards that leave, and map the old ring's indices.
	v.prevIdx = make([]int, len(cur.shards))
	for i, sh := range cur.shards {
		j := v.indexOf(identity(i, sh))
		if j < 0 {
			j = len(v.shards)
			v.shards = append(v.shards, sh)
			v.health = append(v.health, cur.health[i])
		}
		v.prevIdx[i] = j
	}
	v.prev = cur.live
	s.swap(v, false)
	return nil
}

// EndMove ends the move begun by BeginMove: the previous ring is dropped,
// and the clients of the shards that left are closed once the commands
// using them have ended. Without a move in progress it does nothing.
func (s *Sharded[C]) EndMove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view.Load()
	if cur.prev == nil || s.closed {
		return nil
	}
	n := cur.full.Len()
	for _, h := range cur.health[n:] {
		h.stopTimer()
	}
	v := &View[C]{parent: s, shards: cur.shards[:n:n], full: cur.full, live: cur.live,
		health: cur.health[:n:n], drained: make(chan struct{})}
	s.swap(v, true)
	return nil
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

// Previous returns the ring of the shards before the move (its indices are
// positions in the old list), or nil outside a move.
func (v *View[C]) Previous() *ring.Ring { return v.prev }

// PreviousIndex maps index i of the previous ring to v's shard list.
func (v *View[C]) PreviousIndex(i int) int { return v.prevIdx[i] }

// Plan returns the exact change of ownership that moving to nodes (the new
// shard list's names, weights and addresses) would make: ring.Compare of the
// current ring and the new one.
func (s *Sharded[C]) Plan(nodes []ring.Node) (ring.Diff, error) {
	target, err := ring.New(nodes, s.opts...)
	if err != nil {
		return ring.Diff{}, err
	}
	return ring.Compare(s.view.Load().live, target)
}
