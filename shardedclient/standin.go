package shardedclient

import (
	"context"
	"fmt"
	"sync"
)

// While a shard is ejected, its keys are served by live stand-ins (the live
// ring's owners), and what the commands write lands there. Once it rejoins,
// those copies are stale: no command reads them while it stays, but the
// next ejection of the shard would serve them again, over whatever was
// written or deleted on the shard meanwhile (a deleted key came back). So
// the keys that commands use on a stand-in are remembered, per ejected
// shard, and deleted from their stand-ins once the shard has rejoined and
// the commands begun before its rejoin have ended (see SetStandInCleaner).

// maxStandInKeys bounds the keys remembered for one ejected shard; beyond
// it, the rest are not cleaned, and the rejoin's event says so.
const maxStandInKeys = 1 << 20

// standIns are the keys of an ejected shard that commands used on a
// stand-in: key -> the stand-in's ID.
type standIns struct {
	mu       sync.Mutex
	keys     map[string]string
	overflow int // keys not remembered (maxStandInKeys reached)
}

func (s *standIns) add(key, standIn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return
	}
	if len(s.keys) >= maxStandInKeys {
		s.overflow++
		return
	}
	if s.keys == nil {
		s.keys = map[string]string{}
	}
	s.keys[key] = standIn
}

// take returns the keys remembered, by stand-in ID, and how many were
// not, and forgets them.
func (s *standIns) take() (map[string][]string, int) {
	s.mu.Lock()
	keys, overflow := s.keys, s.overflow
	s.keys, s.overflow = nil, 0
	s.mu.Unlock()
	byStandIn := map[string][]string{}
	for k, id := range keys {
		byStandIn[id] = append(byStandIn[id], k)
	}
	return byStandIn, overflow
}

// StandInCleaner deletes keys from shard i of v, a stand-in that served them
// while their shard was ejected (see SetStandInCleaner).
type StandInCleaner[C comparable] func(ctx context.Context, v *View[C], i int, keys []string) error

// SetStandInCleaner sets how the copies that stand-ins hold of a rejoined
// shard's keys are deleted; without it they stay (see standIns). Call it
// once, before the first command.
func (s *Sharded[C]) SetStandInCleaner(clean StandInCleaner[C]) { s.cleaner = clean }

// noteStandIn remembers key, served by shard to of v, when an ejection
// made to its stand-in.
func (v *View[C]) noteStandIn(key string, to int) {
	if v.live == v.full || v.parent.cleaner == nil {
		return
	}
	if o := v.rejoined().Locate(key); o != to && v.health[o].ejected.Load() {
		v.health[o].standIns.add(key, v.ID(to))
	}
}

// cleanStandIns deletes the copies that stand-ins hold of the keys of h's
// shard, which rejoined in the view after old: once the commands on old
// (and older views) have ended, from each stand-in that does not serve the
// key again by then (another ejection). It reports its failures and the
// keys it could not remember as events of the shard.
func (s *Sharded[C]) cleanStandIns(old *View[C], h *shardHealth) {
	byStandIn, overflow := h.standIns.take()
	if len(byStandIn) == 0 && overflow == 0 {
		return
	}
	select {
	case <-old.drained:
	case <-s.stop:
		return
	}
	v := s.Acquire()
	defer v.Release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Close cuts the deletes short
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	owner := v.indexOfHealth(h)
	for id, keys := range byStandIn {
		i := v.indexOf(id)
		if i < 0 {
			continue // the stand-in left the list: its copies went with it
		}
		var stale []string
		for _, k := range keys {
			if v.Locate(k) != i { // served by its own shard again
				stale = append(stale, k)
			}
		}
		if err := s.cleaner(ctx, v, i, stale); err != nil && owner >= 0 {
			s.event(v, EventFailure, owner, fmt.Errorf("deleting the copies of %d keys on stand-in %s: %w", len(stale), v.Label(i), err))
		}
	}
	if overflow > 0 && owner >= 0 {
		s.event(v, EventFailure, owner, fmt.Errorf("%d keys used on stand-ins during the ejection were not remembered (more than %d): their copies stay", overflow, maxStandInKeys))
	}
}

// HasStandIns reports whether some shard of v is ejected, its keys served
// by stand-ins.
func (v *View[C]) HasStandIns() bool { return v.live != v.full }

// StandIn reports whether key is served by a stand-in in v: the shard that
// owns it with every shard live is ejected.
func (v *View[C]) StandIn(key string) bool {
	return v.live != v.full && v.rejoined().Locate(key) != v.live.Locate(key)
}

// LiveEpoch counts the ejections and rejoins that came before v: two views
// with the same epoch (of the same shard list) have the same stand-ins. A
// backend ties what a stand-in hands out (memcache CAS tokens) to it.
func (v *View[C]) LiveEpoch() uint64 { return v.liveEpoch }
