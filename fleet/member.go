package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Backend is what a sharded client implements to take part in a fleet:
// the contract a third backend implements. The redis backend's
// ShardedClient implements it (package redis, JoinFleet).
type Backend interface {
	// Apply makes the process route by st: Stable routes by st.Shards;
	// Preparing as Stable (by st.Shards); Moving by st.Target, moving
	// each key whose owner changed off its old owner before its first
	// command. New connections to a shard carry st's epoch (see the
	// package documentation: fences), at least to the sources of a
	// Moving step. Apply is called with every state the process learns,
	// in epoch order, possibly skipping some (a process that was cut off
	// may go from Stable(L) straight to Stable(T)).
	Apply(ctx context.Context, st State) error
	// DropStale removes, from every shard of st.Target, the keys it
	// gains in the resharding and did not own before (stale copies: a
	// leftover of an earlier cold change, a stand-in's copy). Called by
	// the driver while Preparing, before Fence; a removal that lands
	// after Fence marked the server moved is a no-op there (the server
	// checks), so that a driver that paused past its lease removes
	// nothing another driver's moves put there.
	DropStale(ctx context.Context, st State) error
	// Fence raises the fence of every source of st (a shard of
	// st.Shards that loses keys) to st.MovingEpoch(): the connections
	// named with an older epoch are closed and new ones refused. It also
	// marks every server of both lists as moved for st.Change. Called by
	// the driver while Preparing; idempotent.
	Fence(ctx context.Context, st State) error
	// Migrate moves every key whose owner changed from its old owner to
	// its new one, and settles every move a client stopped waiting for.
	// It returns nil once no such key is on an old owner and no move is
	// unsettled; it may be called again (by another driver) to resume.
	Migrate(ctx context.Context, st State, progress func(Progress)) error
}

// EpochFloor is implemented by a backend whose servers keep the epochs of
// past reshardings (their fences): Join starts a new store's first state
// above them, so that a fleet that restarts with a fresh store (or a new
// prefix) is not refused by its own old fences. Floor returns the highest
// epoch any server of shards holds.
type EpochFloor interface {
	Floor(ctx context.Context, shards []Shard) (uint64, error)
}

// Progress is what Migrate reports as it goes: keys scanned on the old
// owners and keys moved, over every source so far.
type Progress struct {
	Scanned, Moved int64
	// Sources and Done count the source shards and those finished.
	Sources, Done int
}

// Member keeps one process's sharded client on the fleet's state: it
// applies the stored state before it returns from Join, then every later
// state as the store delivers it. Close stops it.
type Member struct {
	store   Store
	backend Backend
	opt     MemberOptions

	mu      sync.Mutex
	applied State // the last state applied
	rev     Revision
	err     error // the last failure to apply or to watch, nil once one succeeded

	cancel context.CancelFunc
	done   chan struct{}
	// wake is signalled after every applied state (see WaitEpoch).
	wake chan struct{}
}

// MemberOptions configure Join.
type MemberOptions struct {
	// Initial is the shard list the fleet starts with when the store
	// holds no state yet (the in-code list): Join then stores it as
	// Stable, epoch 1 (or above the servers' epochs, see EpochFloor). Nil
	// leaves an empty store empty, and Join returns ErrNoState.
	Initial []Shard
	// RetryInterval is the wait before a failed Apply or a broken watch
	// is tried again; 0 means 500 ms.
	RetryInterval time.Duration
	// OnError, when not nil, is called with each failure to apply a
	// state or to watch the store (the member retries them).
	OnError func(error)
}

// ErrNoState is returned by Join when the store holds no state and no
// initial list was given.
var ErrNoState = errors.New("fleet: the store holds no state and MemberOptions.Initial is empty")

// Join reads the fleet's state from store, stores opt.Initial first if the
// store is empty, applies it to backend, and then keeps backend on every
// later state until Close. It returns once the first state is applied, so
// that the process's first command is routed by the fleet's state; it
// returns the store's or Apply's error (nothing is left running then).
func Join(ctx context.Context, store Store, backend Backend, opt MemberOptions) (*Member, error) {
	if store == nil || backend == nil {
		return nil, fmt.Errorf("fleet: Join: nil store (%v) or backend (%v)", store == nil, backend == nil)
	}
	if opt.RetryInterval <= 0 {
		opt.RetryInterval = 500 * time.Millisecond
	}
	st, rev, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: Join: loading the state: %w", err)
	}
	if rev == 0 {
		if len(opt.Initial) == 0 {
			return nil, ErrNoState
		}
		first := State{Epoch: 1, Step: Stable, Shards: opt.Initial}
		if ef, ok := backend.(EpochFloor); ok {
			floor, err := ef.Floor(ctx, opt.Initial)
			if err != nil {
				return nil, fmt.Errorf("fleet: Join: reading the servers' epochs: %w", err)
			}
			first.Epoch = max(1, floor+1)
		}
		switch _, err := store.Swap(ctx, 0, first); {
		case err == nil, errors.Is(err, ErrConflict): // another process stored one first
		default:
			return nil, fmt.Errorf("fleet: Join: storing the initial list: %w", err)
		}
		if st, rev, err = store.Load(ctx); err != nil {
			return nil, fmt.Errorf("fleet: Join: loading the state: %w", err)
		}
	}
	if err := backend.Apply(ctx, st); err != nil {
		return nil, fmt.Errorf("fleet: Join: applying epoch %d (%s): %w", st.Epoch, st.Step, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	m := &Member{store: store, backend: backend, opt: opt, applied: st, rev: rev, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{})}
	go m.run(wctx)
	return m, nil
}

// State returns the last state the member applied.
func (m *Member) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneState(m.applied)
}

// Err returns the last failure to apply a state or to watch the store,
// or nil when the last attempt succeeded.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// WaitEpoch waits until the member has applied a state of epoch epoch or
// later, until ctx ends (then it returns ctx.Err()).
func (m *Member) WaitEpoch(ctx context.Context, epoch uint64) error {
	for {
		m.mu.Lock()
		cur, wake := m.applied.Epoch, m.wake
		m.mu.Unlock()
		if cur >= epoch {
			return nil
		}
		select {
		case <-wake:
		case <-m.done:
			return errors.New("fleet: member closed")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops following the store; the backend keeps the last state
// applied.
func (m *Member) Close() error {
	m.cancel()
	<-m.done
	return nil
}

func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		m.mu.Lock()
		rev := m.rev
		m.mu.Unlock()
		for u := range m.store.Watch(ctx, rev) {
			if u.Err != nil {
				m.fail(fmt.Errorf("fleet: watching the store: %w", u.Err))
				break
			}
			m.apply(ctx, u)
		}
		// The watch ended: reload (it may have missed states), then
		// watch again.
		if !m.sleep(ctx) {
			return
		}
		if st, rev, err := m.store.Load(ctx); err != nil {
			m.fail(fmt.Errorf("fleet: loading the state: %w", err))
		} else {
			m.apply(ctx, Update{State: st, Revision: rev})
		}
	}
}

// apply applies u unless it is not newer than what is applied, retrying a
// failed Apply every RetryInterval until it succeeds or ctx ends.
func (m *Member) apply(ctx context.Context, u Update) {
	m.mu.Lock()
	cur := m.applied.Epoch
	m.mu.Unlock()
	if u.State.Epoch <= cur {
		return
	}
	for {
		err := m.backend.Apply(ctx, u.State)
		if err == nil {
			break
		}
		m.fail(fmt.Errorf("fleet: applying epoch %d (%s): %w", u.State.Epoch, u.State.Step, err))
		if !m.sleep(ctx) {
			return
		}
	}
	m.mu.Lock()
	m.applied, m.rev, m.err = u.State, u.Revision, nil
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
}

func (m *Member) fail(err error) {
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
	if m.opt.OnError != nil {
		m.opt.OnError(err)
	}
}

// sleep waits RetryInterval; false if ctx ended first.
func (m *Member) sleep(ctx context.Context) bool {
	t := time.NewTimer(m.opt.RetryInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
