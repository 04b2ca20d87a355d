package shardcore

import (
	"context"
	"errors"
	"slices"
)

// The moving-key protocol, in one place. During a move (BeginWindow) and for a
// while after each step of it, a command's keys may need two things before
// the command runs:
//
//   - to wait for a barrier: a key that a step changed waits until the commands
//     begun on the views before that step have ended (one of them may still
//     write the key on its old owner);
//   - to be moved: a key whose owner changed and that may still be on its
//     old owner is moved there first (by the backend's Mover), with its
//     lock held (KeyLocks), so that the move and other commands on the
//     key do not interleave.
//
// A backend tracks each key of a command on the command's View (Track, which
// also tells the key's owner), then calls Prepare once before sending
// anything. Outside a move, with no barrier open, both cost a few loads and
// allocate nothing.

// MovingKey is a key whose owner changes in the move in progress: From is
// the index of its owner before the move and To of its owner now, both in
// the View's shard list.
type MovingKey struct {
	Key      string
	From, To int
}

// Mover moves keys from their old owner to their new one, on v; their
// locks are held by the caller. It returns nil when every key is on its
// new owner (or on neither shard), else an error naming what failed.
type Mover[C comparable] func(ctx context.Context, v *View[C], keys []MovingKey) error

// Pending is what a command's keys need before the command runs: the barriers
// to wait for and the keys to move. The zero value is empty; a backend keeps
// one per command (or per pipeline) and fills it with View.Track.
type Pending struct {
	barriers []<-chan struct{}
	moving   []MovingKey
}

// Moving returns the keys to move that p holds.
func (p *Pending) Moving() []MovingKey { return p.moving }

// Reset empties p, keeping its storage.
func (p *Pending) Reset() {
	p.barriers, p.moving = p.barriers[:0], p.moving[:0]
}

// Track records in p what key needs before a command may use it on v, and
// returns the index of the shard that owns key now (the live shard that
// Locate returns). A key that an ejected shard owns before or after the
// move (not Settled) is not moved: it stays where it is, as an ejected
// shard's keys do, and the command uses the live shard standing in; moved
// there, it would be lost once the ejected shard rejoins. (In a window that
// remembers moves, a key whose only ejected owner is its old one is
// settled: it is reported moving, From ejected.)
func (v *View[C]) Track(p *Pending, key string) int {
	for _, g := range v.barriers {
		if g.changes(key) && !slices.Contains(p.barriers, (<-chan struct{})(g.done)) {
			p.barriers = append(p.barriers, g.done)
		}
	}
	if v.prev == nil {
		return v.live.Locate(key)
	}
	from, to, moved := v.Moved(key)
	if moved && !v.window.Remembered(key) && v.settled(key, from, to) {
		p.moving = append(p.moving, MovingKey{Key: key, From: from, To: to})
	}
	return to
}

// Prepare waits until every barrier of p is open, then moves p's keys with
// move, or with the backend's Mover (Backend.Move) when move is nil, their
// locks held only while they move:
// once a key has left its old owner nothing puts it back there (commands of
// older views have ended, and the migration takes the same locks), so the
// command itself needs no lock. It returns ctx.Err() if ctx ends while
// waiting, ErrNoMover if keys must move and no Mover was set, and the
// Mover's error.
func (v *View[C]) Prepare(ctx context.Context, p *Pending, move Mover[C]) error {
	for _, g := range p.barriers {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(p.moving) == 0 {
		return nil
	}
	s := v.parent
	if move == nil {
		move = s.backend.Move
	}
	if move == nil {
		return ErrNoMover
	}
	names := make([]string, len(p.moving))
	for i, k := range p.moving {
		names[i] = k.Key
	}
	unlock, err := s.locks.Lock(ctx, names...)
	if err != nil {
		return err
	}
	defer unlock()
	return move(ctx, v, p.moving)
}

// WaitBarriers waits until every barrier of v is open: until the commands begun
// on the views before v's recent moves (BeginWindow, EndWindow) have ended, so
// that none of them can still write a key on the owner it had before. (An
// ejection or a rejoin adds no barrier: a write that lands late on a stand-in
// is a stand-in's copy, stale by definition, and one that lands late on
// the shard that owns the key is where the key is.) A migration waits so before it scans the old
// owners: a key that such a command writes after the scan has passed it
// would be left behind. It returns ctx.Err() if ctx ends first.
func (v *View[C]) WaitBarriers(ctx context.Context) error {
	for _, g := range v.barriers {
		select {
		case <-g.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ErrNoMover is returned by View.Prepare when keys must move and the
// backend set no Mover.
var ErrNoMover = errors.New("shardedclient: keys must move and no Mover is set")

// changes reports whether g still holds key back: g is not yet open and
// key's owner differs between the rings on either side of g's step.
func (g *barrier) changes(key string) bool {
	select {
	case <-g.done:
		return false
	default:
	}
	return g.prevIdx[g.prev.Locate(key)] != g.next.Locate(key)
}
