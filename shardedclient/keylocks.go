package shardedclient

import (
	"hash/maphash"
	"slices"
	"sync"
)

// keyStripes is the number of mutexes of a KeyLocks.
const keyStripes = 1024

// KeyLocks serializes work on the same keys within one process: each key
// maps to one of 1,024 mutexes (a stripe). Backends use it during
// resharding, so that moving a key to its new owner and the commands that
// use the key do not interleave. The zero value is ready to use.
type KeyLocks struct {
	stripes [keyStripes]sync.Mutex
}

var keySeed = maphash.MakeSeed()

// Lock locks the stripes of keys, in order (so that two callers never
// deadlock), and returns the function that unlocks them.
func (l *KeyLocks) Lock(keys ...string) (unlock func()) {
	stripes := make([]int, len(keys))
	for i, k := range keys {
		stripes[i] = int(maphash.String(keySeed, k) % keyStripes)
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		l.stripes[s].Lock()
	}
	return func() {
		for _, s := range slices.Backward(stripes) {
			l.stripes[s].Unlock()
		}
	}
}
