package shardcore

import (
	"errors"
	"slices"
	"strings"
)

// ErrClosed is returned by SetShards after Close, and wrapped in the error
// of a call that Close cut short (unless the backend set its own: see
// Backend.ClosedErr).
var ErrClosed = errors.New("shardedclient: closed")

// SetShards replaces the shard list at run time: add, remove, re-weight, or
// change the client of a shard. A shard keeps its ring identity (its name,
// else its address, else its position), its counters and its ejection when
// it stays in the list, so only the keys of shards added, removed or
// re-weighted move. The swap is atomic: every command runs entirely on the
// old list or the new one. Clients that the new list no longer holds are
// closed once the commands using them have ended. It fails, changing
// nothing, on the errors of New.
func (s *Sharded[C]) SetShards(shards []Shard[C]) error { return s.SetShardsPrepared(shards, nil) }

// SetShardsPrepared is SetShards with a prepare step, as in BeginWindow:
// before the new view serves any command, prepare (when not nil) runs on it
// with view changes held back (a backend brings the shards that join in
// step with the others there). If prepare fails, nothing changes and its
// error is returned.
func (s *Sharded[C]) SetShardsPrepared(shards []Shard[C], prepare func(*View[C]) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, v, err := s.nextView(shards)
	if err != nil {
		return err
	}
	if err := placementShift(cur, v); err != nil {
		return err
	}
	if prepare != nil {
		if err := s.preparing(prepare, v); err != nil {
			return err
		}
	}
	for _, h := range cur.health {
		if v.indexOfHealth(h) < 0 {
			h.stopTimer()
		}
	}
	s.swap(v, true)
	return nil
}

// ErrPlacementShift is matched (errors.Is) by a *PlacementShiftError.
var ErrPlacementShift = errors.New("the keys of shards that stay would move")

// PlacementShiftError is returned by SetShards, changing nothing, for a cold
// change that would move the keys of shards that stay in the list (the same
// server, by ID) because their placement changes: a server listed under
// another name, or an unnamed shard of the Jedis ring, which is placed by
// its position, so that removing or inserting a shard before it gives it
// another position's virtual nodes (as Jedis does for the new list). Keep
// the names (name unnamed shards), or move the keys with BeginWindow.
type PlacementShiftError struct {
	// Shards are the shards whose placement changes, as
	// `shard 1 (10.0.0.3:6379): slot:2 -> slot:1`.
	Shards []string
}

func (e *PlacementShiftError) Error() string {
	return "shardedclient: the change would move the keys of shards that stay on their server (" + strings.Join(e.Shards, "; ") +
		"): a shard is placed by its name, or, unnamed, by its position; keep the names (name unnamed shards), or move the keys with a resharding window"
}

// Is reports whether target is ErrPlacementShift.
func (e *PlacementShiftError) Is(target error) bool { return target == ErrPlacementShift }

// placementShift returns a *PlacementShiftError if a shard of cur that stays
// in next (same ID) has another placement there.
func placementShift[C comparable](cur, next *View[C]) error {
	var shifted []string
	for j := range next.full.Len() {
		i := cur.full.Index(next.full.ID(j))
		if i >= 0 && cur.full.Placement(i) != next.full.Placement(j) {
			shifted = append(shifted, next.Label(j)+": "+cur.full.Placement(i)+" -> "+next.full.Placement(j))
		}
	}
	if len(shifted) > 0 {
		return &PlacementShiftError{Shards: shifted}
	}
	return nil
}

// nextView builds the view of a new shard list, outside a move; s.mu is
// held.
func (s *Sharded[C]) nextView(shards []Shard[C]) (cur, next *View[C], err error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	cur = s.view.Load()
	if cur.prev != nil {
		return nil, nil, ErrMoveInProgress
	}
	s.liveEpoch.Add(1) // the list changes which shard stands in for which
	next, err = s.newView(shards, cur)
	if err == nil {
		next.barriers = openBarriers(cur.barriers) // a key a recent move changed still waits
	}
	return cur, next, err
}

// swap makes v the current view and retires the old one. With closeOld,
// the clients that v does not hold are closed once every retired view (an
// ejection's view shares its predecessor's clients) has no command or
// pinned callback left, or at Close.
// s.mu is held.
func (s *Sharded[C]) swap(v *View[C], closeOld bool) {
	old := s.view.Swap(v)
	old.retire()
	s.notify()
	s.retired = slices.DeleteFunc(append(s.retired, old), func(r *View[C]) bool {
		select {
		case <-r.unpinned:
			return true
		default:
			return false
		}
	})
	if !closeOld {
		return
	}
	var stale []C
	for _, sh := range old.shards {
		if !v.holds(sh.Client) {
			stale = append(stale, sh.Client)
		}
	}
	if len(stale) == 0 {
		return
	}
	waitFor := slices.Clone(s.retired)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, r := range waitFor {
			select {
			case <-r.unpinned:
			case <-s.stop: // Close: a command that never ends must not hold it up
			}
		}
		for _, c := range stale {
			_ = s.closeClient(c)
		}
	}()
}

// holds reports whether one of v's shards has client c.
func (v *View[C]) holds(c C) bool {
	return slices.ContainsFunc(v.shards, func(sh Shard[C]) bool { return sh.Client == c })
}
