// Package fleetstep is a backend's record of the fleet step it applied
// (package fleet's Backend.Apply), shared by the redis and memcache
// backends: steps are applied one at a time and only forward (a state
// whose epoch is not newer than the applied one does nothing), and
// commands that wait for the next step are woken when it is applied.
package fleetstep

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardedcache/shardedcache/fleet"
)

// Applied is the step a client applied. Its zero value is ready: no step
// applied (epoch 0).
type Applied struct {
	mu    sync.Mutex // serializes Apply
	state fleet.State
	epoch atomic.Uint64
	// changed is closed, and replaced, at every applied step; nil until
	// the first wait or step.
	changed atomic.Pointer[chan struct{}]
}

// Apply validates st (fleet.State.Validate's error) and, when its epoch is
// newer than the applied one, runs step with the applied state, under a
// lock that serializes Apply; if step succeeds, st is the applied state
// and every Wait re-checks its condition. step's error is returned and
// changes nothing here.
func (a *Applied) Apply(st fleet.State, step func(prev fleet.State) error) error {
	if err := st.Validate(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st.Epoch <= a.state.Epoch {
		return nil
	}
	if err := step(a.state); err != nil {
		return err
	}
	a.state = st
	a.epoch.Store(st.Epoch)
	ch := make(chan struct{})
	if old := a.changed.Swap(&ch); old != nil {
		close(*old)
	}
	return nil
}

// Epoch returns the epoch of the applied step (0: none), without a lock.
func (a *Applied) Epoch() uint64 { return a.epoch.Load() }

// ErrWaited is Wait's error when its bound ran out first.
var ErrWaited = errors.New("fleetstep: no step satisfied the condition within the wait")

// Wait returns nil once done reports true (checked now, then after every
// step applied), ErrWaited after d, or ctx's error if ctx ends first.
func (a *Applied) Wait(ctx context.Context, d time.Duration, done func() bool) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		wait := a.changedChan()
		if done() {
			return nil
		}
		select {
		case <-wait:
		case <-timer.C:
			return ErrWaited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changedChan returns the channel that the next applied step closes.
func (a *Applied) changedChan() chan struct{} {
	for {
		if p := a.changed.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		a.changed.CompareAndSwap(nil, &ch)
	}
}
