package shardedclient

// Watch returns a channel that receives a value after every change of the
// current View: SetShards, BeginMove, EndMove, an ejection, a rejoin. The
// value is sent once the new View is in place, so a receiver that then
// reads the View (Pin or Acquire) sees that change and every earlier one.
// Changes the receiver has not taken yet are merged into one value: the
// channel never blocks a change. stop ends the watch (the channel is not
// closed); it may be called more than once.
func (s *Sharded[C]) Watch() (changes <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watchers == nil {
		s.watchers = map[chan struct{}]struct{}{}
	}
	s.watchers[ch] = struct{}{}
	return ch, func() {
		s.watchMu.Lock()
		defer s.watchMu.Unlock()
		delete(s.watchers, ch)
	}
}

// notify tells the watchers of s that its View changed; s.mu is held.
func (s *Sharded[C]) notify() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending
		}
	}
}
