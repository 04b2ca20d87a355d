package fleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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

// ErrJoined is returned by a backend's JoinFleet when its client is a
// member already: a client is one member of one fleet (two members would
// share its connections, fences and lease, and closing either would leave
// the other unprotected).
var ErrJoined = errors.New("fleet: this client has joined a fleet already")

// TargetChecker is implemented by a backend that can tell, before a
// resharding begins, that it could not carry it out: a shard of the target
// that does not answer, or of a kind it cannot move keys to. Reshard calls
// CheckTarget with the Preparing state it is about to store, and stores
// nothing when it fails: a change that could never end is not begun
// (nothing calls a change off once it is stored).
type TargetChecker interface {
	CheckTarget(ctx context.Context, st State) error
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

	applyMu sync.Mutex // serializes apply and the lease's renewal
	// lease is the member's registration (Unfenced backends), nil
	// otherwise; replaced when it was lost and the member registered again.
	lease MemberLease
}

// MemberOptions configure Join.
type MemberOptions struct {
	// Initial is the shard list the fleet starts with when the store
	// holds no state yet (the in-code list): Join then stores it as
	// Stable, epoch 1 (or above the servers' epochs, see EpochFloor). Nil
	// leaves an empty store empty, and Join returns ErrNoState.
	Initial []Shard
	// RetryInterval is the wait before a failed Apply or a broken watch
	// is tried again; 0 means 500 ms, a negative one is an error.
	RetryInterval time.Duration
	// OnError, when not nil, is called with each failure to apply a
	// state or to watch the store (the member retries them).
	OnError func(error)
	// ID names the member in the store's registrations (Unfenced
	// backends only; see CheckMemberID); "" means a random one of 16 hex
	// digits. Each process needs its own.
	ID string
	// LeaseTTL is the member's lease (Unfenced backends only): how long a
	// driver waits for a member that stopped renewing (crashed, paused,
	// cut off from the store) before it goes on without it, and how long
	// this process keeps serving when it cannot reach the store. 0
	// means 5 s, a negative one is an error.
	LeaseTTL time.Duration
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
	if isNil(store) || isNil(backend) {
		return nil, fmt.Errorf("fleet: Join: nil store (%v) or backend (%v)", isNil(store), isNil(backend))
	}
	if err := nonNegative("Join", "MemberOptions.RetryInterval", opt.RetryInterval); err != nil {
		return nil, err
	}
	if err := nonNegative("Join", "MemberOptions.LeaseTTL", opt.LeaseTTL); err != nil {
		return nil, err
	}
	if opt.RetryInterval == 0 {
		opt.RetryInterval = 500 * time.Millisecond
	}
	if opt.LeaseTTL == 0 {
		opt.LeaseTTL = 5 * time.Second
	}
	if opt.ID == "" {
		opt.ID = newChangeID()
	}
	// An Unfenced backend's member registers before it reads the state:
	// a driver that does not list it yet has stored its step before this
	// Load, which therefore returns that step or a later one.
	unfenced, _ := backend.(Unfenced)
	var lease MemberLease
	if unfenced != nil {
		var err error
		if lease, err = store.Register(ctx, opt.ID, opt.LeaseTTL); err != nil {
			return nil, fmt.Errorf("fleet: Join: registering member %s: %w", opt.ID, err)
		}
	}
	m, err := join(ctx, store, backend, opt, lease)
	if err != nil && lease != nil {
		_ = lease.Close(context.WithoutCancel(ctx))
	}
	return m, err
}

func join(ctx context.Context, store Store, backend Backend, opt MemberOptions, lease MemberLease) (*Member, error) {
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
	if lease != nil {
		if err := lease.Report(ctx, st.Epoch); err != nil {
			return nil, fmt.Errorf("fleet: Join: reporting epoch %d: %w", st.Epoch, err)
		}
		backend.(Unfenced).UseLease(opt.ID, lease)
	}
	wctx, cancel := context.WithCancel(context.Background())
	m := &Member{store: store, backend: backend, opt: opt, applied: st, rev: rev, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}), lease: lease}
	go m.run(wctx)
	return m, nil
}

// ID returns the member's ID in the store's registrations (MemberOptions.ID).
func (m *Member) ID() string { return m.opt.ID }

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
// applied. An Unfenced backend's member also ends its registration, so
// that drivers no longer wait for it, and takes its lease from the
// backend, which then refuses nothing (it is no longer a member). The
// error is the store's failure to end the registration (it then ends
// when the lease expires).
func (m *Member) Close() error {
	m.cancel()
	<-m.done
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if m.lease == nil {
		return nil
	}
	m.backend.(Unfenced).UseLease(m.opt.ID, nil)
	ctx, cancel := context.WithTimeout(context.Background(), m.opt.LeaseTTL)
	defer cancel()
	return m.lease.Close(ctx)
}

func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	if m.lease != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { m.keepLease(ctx) })
	}
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

// keepLease registers the member again whenever its lease is lost (the
// store unreachable for the TTL, the process paused): a new lease, then
// the store's state applied, then reported, and only then handed to the
// backend, which refuses every command meanwhile. It retries every
// RetryInterval until ctx ends.
func (m *Member) keepLease(ctx context.Context) {
	for {
		m.applyMu.Lock()
		lost := m.lease.Lost()
		m.applyMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-lost:
		}
		for !m.renewLease(ctx) {
			if !m.sleep(ctx) {
				return
			}
		}
	}
}

// renewLease registers the member under a new lease, applies the store's
// state and reports it; false (with OnError called) when a step failed.
func (m *Member) renewLease(ctx context.Context) bool {
	lease, err := m.store.Register(ctx, m.opt.ID, m.opt.LeaseTTL)
	if err != nil {
		m.fail(fmt.Errorf("fleet: registering member %s again: %w", m.opt.ID, err))
		return false
	}
	m.applyMu.Lock()
	old := m.lease
	m.lease = lease
	m.applyMu.Unlock()
	_ = old.Close(ctx) // lost already: it stops its renewals
	st, rev, err := m.store.Load(ctx)
	if err != nil {
		m.fail(fmt.Errorf("fleet: loading the state: %w", err))
		return false
	}
	// apply reports the epoch and hands the lease to the backend once the
	// state is applied, even one already applied.
	return m.applyLocked(ctx, Update{State: st, Revision: rev}, true)
}

// apply applies u unless it is not newer than what is applied, retrying a
// failed Apply every RetryInterval until it succeeds or ctx ends; then it
// reports the epoch (Unfenced backends).
func (m *Member) apply(ctx context.Context, u Update) {
	m.applyLocked(ctx, u, false)
}

// applyLocked is apply under applyMu; again also reports a state already
// applied. It returns whether the state is applied and reported.
func (m *Member) applyLocked(ctx context.Context, u Update, again bool) bool {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	cur := m.applied
	m.mu.Unlock()
	if u.State.Epoch <= cur.Epoch {
		return !again || m.report(ctx, cur.Epoch)
	}
	for {
		err := m.backend.Apply(ctx, u.State)
		if err == nil {
			break
		}
		m.fail(fmt.Errorf("fleet: applying epoch %d (%s): %w", u.State.Epoch, u.State.Step, err))
		if !m.sleep(ctx) {
			return false
		}
	}
	m.mu.Lock()
	m.applied, m.rev, m.err = u.State, u.Revision, nil
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
	return m.report(ctx, u.State.Epoch)
}

// report stores epoch in the member's registration, retrying every
// RetryInterval while the store fails and the lease lives, and then hands
// the lease to the backend; true without a lease. Called under applyMu.
func (m *Member) report(ctx context.Context, epoch uint64) bool {
	if m.lease == nil {
		return true
	}
	for {
		err := m.lease.Report(ctx, epoch)
		if err == nil {
			m.backend.(Unfenced).UseLease(m.opt.ID, m.lease)
			return true
		}
		m.fail(fmt.Errorf("fleet: member %s: reporting epoch %d: %w", m.opt.ID, epoch, err))
		if errors.Is(err, ErrLeaseLost) || !m.sleep(ctx) {
			return false // keepLease registers again
		}
	}
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

// isNil reports whether v is nil, or a nil pointer in an interface (a
// typed nil, such as a (*MemStore)(nil) given as a Store).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
