package shardcore

import (
	"context"
	"slices"
	"sync"
)

// KeyLocks serializes work on the same keys within one process: a key is
// locked by one caller at a time, and a caller that asks for a key another
// holds waits until that caller unlocks. Backends use it during resharding,
// so that moving a key to its new owner and the commands that use the key
// do not interleave. Locks are exact, one per key, not stripes shared by
// many keys: a migration batch that holds hundreds of keys for a few round
// trips holds back only the commands on those keys (with 1,024 stripes, a
// batch of 250 keys held back a fifth of all keys, and two batches nearly
// always shared a stripe and waited for each other). The zero value is
// ready to use.
type KeyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // key -> closed when its holder unlocks
}

// Lock locks keys (a key given twice counts once), in sorted order, so
// that two callers never deadlock, and returns the function that unlocks
// them. If ctx ends while it waits for a key another caller holds, it
// unlocks the keys it has taken and returns ctx.Err(): a caller waits for
// another's move no longer than its own deadline.
func (l *KeyLocks) Lock(ctx context.Context, keys ...string) (unlock func(), err error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	done := make(chan struct{}) // one for every key of this call: they are unlocked together
	release := func(taken []string) {
		l.mu.Lock()
		for _, k := range taken {
			delete(l.held, k)
		}
		l.mu.Unlock()
		close(done)
	}
	for n, k := range keys {
		for {
			l.mu.Lock()
			if l.held == nil {
				l.held = make(map[string]chan struct{})
			}
			other, busy := l.held[k]
			if !busy {
				l.held[k] = done
			}
			l.mu.Unlock()
			if !busy {
				break
			}
			select {
			case <-other:
			case <-ctx.Done():
				release(keys[:n])
				return nil, ctx.Err()
			}
		}
	}
	return func() { release(keys) }, nil
}
