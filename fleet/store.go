package fleet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Revision orders the versions of the fleet's State in a store: every
// successful Swap gives a larger one. 0 means "nothing stored yet".
type Revision int64

// Update is one version of the fleet's State as a Watch delivers it, or
// the error that ended the watch (Err; State and Revision are then zero).
type Update struct {
	State    State
	Revision Revision
	Err      error
}

// Store is the coordination store that the processes of a fleet share: one
// State record, compare-and-swap on it, a watch of it, a lock with a
// lease for the driver of a resharding, and the members' registrations
// under leases (used with Unfenced backends only). It is an interface so that other
// stores can be added; MemStore serves one process (and tests), and the
// module github.com/shardedcache/shardedcache/fleet/etcdstore serves a
// fleet through etcd. A Store is safe for concurrent use.
//
// With a backend whose servers fence the processes that are behind
// (redis), safety does not rest on the store: the store orders the steps
// and tells the processes of them. With an Unfenced backend (memcache),
// it rests on the members' leases too (see the package documentation).
type Store interface {
	// Load returns the stored State and its Revision, or the zero State
	// and Revision 0 when nothing is stored yet.
	Load(ctx context.Context) (State, Revision, error)
	// Swap stores next if the stored Revision is still rev (0: nothing is
	// stored) and returns the new Revision; otherwise it stores nothing
	// and returns an error matching ErrConflict. next must be valid
	// (State.Validate).
	Swap(ctx context.Context, rev Revision, next State) (Revision, error)
	// Watch delivers every State stored after rev, in order, on the
	// returned channel, which is closed once ctx ends or the watch fails
	// (a last Update with Err). States stored in a quick succession may
	// be merged: the channel may skip to the newest.
	Watch(ctx context.Context, rev Revision) <-chan Update
	// Lock takes the store's driver lock, waiting while another holder
	// has it, until ctx ends. The lock is held until Unlock or until the
	// holder cannot renew its lease for ttl (Lost is then closed).
	Lock(ctx context.Context, ttl time.Duration) (Lease, error)
	// Register registers member id (see CheckMemberID; one per process,
	// unique in the fleet) under a new lease of ttl (> 0; a store may
	// round it up), with epoch 0 reported, and keeps the lease alive in
	// the background until the returned lease's Close. Registering an id
	// again moves it to the new lease. Errors: a bad id or ttl (nothing
	// is sent), the store's.
	Register(ctx context.Context, id string, ttl time.Duration) (MemberLease, error)
	// Members returns the registered members whose lease is alive in the
	// store, each with the epoch it last reported.
	Members(ctx context.Context) (map[string]uint64, error)
}

// Lease is a held driver lock (Store.Lock).
type Lease interface {
	// Lost is closed once the lock is no longer held: Unlock, or a lease
	// that could not be renewed.
	Lost() <-chan struct{}
	// Unlock releases the lock.
	Unlock(ctx context.Context) error
}

// ErrConflict is matched (errors.Is) by Store.Swap's error when the
// stored revision is not the one given: another process stored a state
// first.
var ErrConflict = errors.New("fleet: the stored state changed meanwhile (revision conflict)")

// MemStore is a Store held in memory: for one process (its sharded clients
// then reshard through the same protocol as a fleet) and for tests. The
// zero value is empty and ready.
type MemStore struct {
	mu       sync.Mutex
	state    State
	rev      Revision
	changed  chan struct{} // closed and replaced at every Swap
	lock     chan struct{} // one slot: the driver lock
	lockOnce sync.Once
	members  map[string]*memMember // by member ID
}

func (m *MemStore) init() {
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
}

// Load implements Store.
func (m *MemStore) Load(ctx context.Context) (State, Revision, error) {
	if err := ctx.Err(); err != nil {
		return State{}, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneState(m.state), m.rev, nil
}

// Swap implements Store.
func (m *MemStore) Swap(ctx context.Context, rev Revision, next State) (Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := next.Validate(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if rev != m.rev {
		return 0, ErrConflict
	}
	m.state, m.rev = cloneState(next), m.rev+1
	close(m.changed)
	m.changed = make(chan struct{})
	return m.rev, nil
}

// Watch implements Store.
func (m *MemStore) Watch(ctx context.Context, rev Revision) <-chan Update {
	out := make(chan Update, 1)
	go func() {
		defer close(out)
		for {
			m.mu.Lock()
			m.init()
			st, cur, changed := cloneState(m.state), m.rev, m.changed
			m.mu.Unlock()
			if cur > rev {
				select {
				case out <- Update{State: st, Revision: cur}:
					rev = cur
				case <-ctx.Done():
					return
				}
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Lock implements Store. A MemStore's lock has no lease to lose: ttl is
// unused, and Lost closes at Unlock only.
func (m *MemStore) Lock(ctx context.Context, _ time.Duration) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.lockOnce.Do(func() { m.lock = make(chan struct{}, 1) })
	select {
	case m.lock <- struct{}{}:
		return &memLease{store: m, lost: make(chan struct{})}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memLease struct {
	store *MemStore
	once  sync.Once
	lost  chan struct{}
}

func (l *memLease) Lost() <-chan struct{} { return l.lost }

func (l *memLease) Unlock(context.Context) error {
	l.once.Do(func() {
		close(l.lost)
		<-l.store.lock
	})
	return nil
}

func cloneState(st State) State {
	st.Shards, st.Target = slices.Clone(st.Shards), slices.Clone(st.Target)
	return st
}
