package shardedclient

import "sync"

// watchers holds the channels that Watch returned, per Sharded (as any).
var watchers = struct {
	sync.Mutex
	m map[any]map[chan struct{}]struct{}
}{m: map[any]map[chan struct{}]struct{}{}}

// Watch returns a channel that receives a value after every change of the
// current View: SetShards, BeginMove, EndMove, an ejection, a rejoin. The
// value is sent once the new View is in place, so a receiver that then
// reads the View (Pin or Acquire) sees that change and every earlier one.
// Changes the receiver has not taken yet are merged into one value: the
// channel never blocks a change. stop ends the watch (the channel is not
// closed); it may be called more than once.
func (s *Sharded[C]) Watch() (changes <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	watchers.Lock()
	defer watchers.Unlock()
	if watchers.m[s] == nil {
		watchers.m[s] = map[chan struct{}]struct{}{}
	}
	watchers.m[s][ch] = struct{}{}
	return ch, func() {
		watchers.Lock()
		defer watchers.Unlock()
		delete(watchers.m[s], ch)
		if len(watchers.m[s]) == 0 {
			delete(watchers.m, s)
		}
	}
}

// notify tells the watchers of s that its View changed; s.mu is held.
func (s *Sharded[C]) notify() {
	watchers.Lock()
	defer watchers.Unlock()
	for ch := range watchers.m[s] {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending
		}
	}
}
