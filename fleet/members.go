package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A member lease registers one process of the fleet in the store, with the
// epoch of the last state it applied, for as long as the process keeps the
// lease alive. The driver of a resharding reads the registrations
// (Store.Members) to know that every live process has taken a step before
// it takes the next one. Only backends whose servers cannot refuse a
// process that is behind need this (see Unfenced); the redis backend's
// servers fence such a process, and its members register nothing.

// MemberLease is a member's registration in the store (Store.Register),
// kept alive in the background until Close or until it cannot be renewed.
type MemberLease interface {
	// Report stores epoch as the epoch the member applied. It returns the
	// store's error, or ErrLeaseLost once the lease is lost.
	Report(ctx context.Context, epoch uint64) error
	// ValidUntil returns the instant (with Go's monotonic clock reading)
	// up to which the registration is surely still in the store: the
	// start of the last grant or renewal that the store confirmed, plus
	// the lease's TTL as the store granted it. Until then the driver
	// counts this member; after it, the driver may consider the member
	// gone. It is the zero Time once the lease is lost.
	ValidUntil() time.Time
	// Lost is closed once the lease is no longer renewed: Close, or a
	// renewal that failed until ValidUntil passed (the store unreachable,
	// the process paused), or the store's refusal of a renewal (the lease
	// expired there).
	Lost() <-chan struct{}
	// Close stops renewing the lease and removes the registration (its
	// effect is the lease's expiry, at once). Idempotent.
	Close(ctx context.Context) error
}

// ErrLeaseLost is matched (errors.Is) by MemberLease.Report's error once
// the lease is lost: register again.
var ErrLeaseLost = errors.New("fleet: the member's lease is lost")

// CheckMemberID checks a member ID given to Store.Register: 1 to 128
// characters, none of them a space, a control character or "/". The error
// names the bad ID.
func CheckMemberID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }) {
		return fmt.Errorf("fleet: member ID %q: want 1 to 128 characters without spaces, control characters or '/'", id)
	}
	return nil
}

// memMember is a registration in a MemStore.
type memMember struct {
	lease   *memMemberLease
	epoch   uint64
	expires time.Time
}

// Register implements Store: the registration expires ttl after its last
// renewal; the lease renews itself every ttl/3 until Close. A ttl under
// a millisecond is an error naming it.
func (m *MemStore) Register(ctx context.Context, id string, ttl time.Duration) (MemberLease, error) {
	if err := CheckMemberID(id); err != nil {
		return nil, err
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("fleet: register member %q: ttl %v, want at least 1ms", id, ttl)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &memMemberLease{store: m, id: id, ttl: ttl, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	m.mu.Lock()
	if m.members == nil {
		m.members = map[string]*memMember{}
	}
	m.members[id] = &memMember{lease: l, expires: start.Add(ttl)}
	m.mu.Unlock()
	l.valid.Store(start.Add(ttl))
	go l.renew()
	return l, nil
}

// Members implements Store.
func (m *MemStore) Members(ctx context.Context) (map[string]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]uint64{}
	for id, mm := range m.members {
		if now.Before(mm.expires) {
			out[id] = mm.epoch
		}
	}
	return out, nil
}

// memMemberLease is a MemStore's MemberLease.
type memMemberLease struct {
	store *MemStore
	id    string
	ttl   time.Duration
	valid syncTime

	once, stopOnce   sync.Once
	lost, stop, done chan struct{}
}

// own runs fn on l's registration, if it is still l's and alive; false
// otherwise.
func (l *memMemberLease) own(fn func(*memMember)) bool {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	mm := l.store.members[l.id]
	if mm == nil || mm.lease != l || !time.Now().Before(mm.expires) {
		return false
	}
	fn(mm)
	return true
}

func (l *memMemberLease) renew() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		if !l.own(func(mm *memMember) { mm.expires = start.Add(l.ttl) }) {
			l.lose()
			return
		}
		l.valid.Store(start.Add(l.ttl))
	}
}

func (l *memMemberLease) lose() {
	l.once.Do(func() {
		l.valid.Store(time.Time{})
		close(l.lost)
	})
}

func (l *memMemberLease) Report(ctx context.Context, epoch uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !l.own(func(mm *memMember) { mm.epoch = epoch }) {
		l.lose()
		return fmt.Errorf("%w: member %q", ErrLeaseLost, l.id)
	}
	return nil
}

func (l *memMemberLease) ValidUntil() time.Time { return l.valid.Load() }
func (l *memMemberLease) Lost() <-chan struct{} { return l.lost }

func (l *memMemberLease) Close(context.Context) error {
	l.own(func(*memMember) { delete(l.store.members, l.id) })
	l.lose()
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	return nil
}

// syncTime is a time.Time safe for concurrent use.
type syncTime struct {
	mu sync.Mutex
	t  time.Time
}

func (s *syncTime) Load() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func (s *syncTime) Store(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t
}

// Unfenced is implemented by a Backend whose servers cannot refuse a
// process that is behind the fleet's state (memcached: no scripts, no
// CLIENT KILL, so no fence). For such a backend:
//
//   - every member registers in the store under a lease
//     (MemberOptions.LeaseTTL) and reports each epoch it applied, after
//     Apply returned;
//   - the driver starts the work of a Preparing or Moving step (and so
//     stores the next step) only once every registered member has
//     reported that step's epoch or later, or its lease has run out;
//   - the member hands its lease to the backend (UseLease), which refuses
//     every command with a *LeaseExpiredError from the instant the lease
//     is no longer surely valid (MemberLease.ValidUntil) until the member
//     has registered again, applied the store's state and reported it.
//
// See the package documentation for what this promises and under which
// assumption.
type Unfenced interface {
	Backend
	// UseLease gives the backend the member's lease, member its ID; nil
	// takes it away (a backend with no lease refuses nothing, as outside
	// a fleet).
	UseLease(member string, lease MemberLease)
}

// ErrLeaseExpired is matched (errors.Is) by a *LeaseExpiredError.
var ErrLeaseExpired = errors.New("fleet: this member's lease has run out")

// LeaseExpiredError is the error of a command refused by an Unfenced
// backend because its member's lease is not surely valid: the fleet may
// have gone through steps this process has not applied. Nothing was sent.
// The member registers again and applies the store's state by itself;
// retry the command after that (Member.Err tells why it has not yet).
type LeaseExpiredError struct {
	Member     string
	ValidUntil time.Time // the lease's end; zero: lost, or registered again and not yet reported
}

func (e *LeaseExpiredError) Error() string {
	if e.ValidUntil.IsZero() {
		return fmt.Sprintf("fleet: member %s: the lease is lost; commands fail until it has registered again and applied the fleet's state", e.Member)
	}
	return fmt.Sprintf("fleet: member %s: the lease ran out %v ago; commands fail until it has registered again and applied the fleet's state", e.Member, time.Since(e.ValidUntil).Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrLeaseExpired) true.
func (e *LeaseExpiredError) Is(target error) bool { return target == ErrLeaseExpired }

// LeaseGate is what an Unfenced backend keeps of its member's lease: UseLease
// sets it, and Check, called before every command, refuses once the lease
// is not surely valid. The zero value holds no lease and refuses nothing.
// It is safe for concurrent use.
type LeaseGate struct {
	held atomic.Pointer[heldLease]
}

type heldLease struct {
	member string
	lease  MemberLease
}

// Set holds lease (nil: none) of member.
func (g *LeaseGate) Set(member string, lease MemberLease) {
	if lease == nil {
		g.held.Store(nil)
		return
	}
	g.held.Store(&heldLease{member, lease})
}

// Check returns nil when no lease is held or the held one is valid now,
// else a *LeaseExpiredError. It costs one clock read and one ValidUntil.
func (g *LeaseGate) Check() error {
	h := g.held.Load()
	if h == nil {
		return nil
	}
	if until := h.lease.ValidUntil(); !time.Now().Before(until) {
		return &LeaseExpiredError{Member: h.member, ValidUntil: until}
	}
	return nil
}
