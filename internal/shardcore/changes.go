package shardcore

// Changes returns a channel that receives a value after every change of the
// current View: SetShards, BeginWindow, EndWindow, an ejection, a rejoin. The
// value is sent once the new View is in place, so a receiver that then
// reads the View (Pin or Acquire) sees that change and every earlier one.
// Changes the receiver has not taken yet are merged into one value: the
// channel never blocks a change. stop ends the subscription (the channel is not
// closed); it may be called more than once.
func (s *Sharded[C]) Changes() (changes <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	s.changesMu.Lock()
	defer s.changesMu.Unlock()
	if s.listeners == nil {
		s.listeners = map[chan struct{}]struct{}{}
	}
	s.listeners[ch] = struct{}{}
	return ch, func() {
		s.changesMu.Lock()
		defer s.changesMu.Unlock()
		delete(s.listeners, ch)
	}
}

// notify tells the listeners of s that its View changed; s.mu is held.
func (s *Sharded[C]) notify() {
	s.changesMu.Lock()
	defer s.changesMu.Unlock()
	for ch := range s.listeners {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending
		}
	}
}
