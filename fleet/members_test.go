package fleet

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// unfenced is a recorder that is an Unfenced backend: it keeps the lease
// it is given in a LeaseGate, and its Apply of a Preparing step waits for
// release when hold is set (a member slow to take the step).
type unfenced struct {
	recorder
	gate    LeaseGate
	hold    bool
	held    chan struct{} // closed when Apply waits
	release chan struct{}
}

func newUnfenced(hold bool) *unfenced {
	return &unfenced{hold: hold, held: make(chan struct{}), release: make(chan struct{})}
}

func (u *unfenced) Apply(ctx context.Context, st State) error {
	if u.hold && st.Step == Preparing {
		u.hold = false
		close(u.held)
		<-u.release
	}
	return u.recorder.Apply(ctx, st)
}

func (u *unfenced) UseLease(member string, l MemberLease) {
	if l == nil {
		_ = u.record("uselease none")
	} else {
		_ = u.record("uselease " + member)
	}
	u.gate.Set(member, l)
}

func members(t *testing.T, s Store) map[string]uint64 {
	t.Helper()
	m, err := s.Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReshardWaitsForMembers: with an Unfenced backend, the driver does
// nothing of the Preparing step while a member has not applied it.
func TestReshardWaitsForMembers(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	slow := newUnfenced(true)
	m, err := Join(ctx, store, slow, MemberOptions{Initial: listL, ID: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if got := slow.take(); !slices.Equal(got, []string{"apply 1 stable", "uselease slow"}) {
		t.Errorf("Join: %q, want the state applied, then the lease handed over", got)
	}
	if got := members(t, store); !maps.Equal(got, map[string]uint64{"slow": 1}) {
		t.Errorf("Members after Join = %v", got)
	}
	driver := newUnfenced(false)
	done := make(chan error, 1)
	go func() {
		_, err := Reshard(ctx, store, driver, listT, DriverOptions{})
		done <- err
	}()
	<-slow.held
	// Several polls of the driver while the member holds back.
	time.Sleep(10 * memberPoll)
	if got := driver.take(); !slices.Equal(got, []string{"apply 2 preparing"}) {
		t.Errorf("driver while a member is at epoch 1: %q, want only its own apply of Preparing", got)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"dropstale 2", "fence 2 at 3", "apply 3 moving", "migrate 3", "apply 4 stable"}
	if got := driver.take(); !slices.Equal(got, want) {
		t.Errorf("driver: %q, want %q", got, want)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.WaitEpoch(wctx, 4); err != nil {
		t.Fatal(err)
	}
	for members(t, store)["slow"] != 4 {
		time.Sleep(time.Millisecond) // reported just after WaitEpoch's wake-up
	}
	if err := slow.gate.Check(); err != nil {
		t.Errorf("the member's gate with a live lease: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := members(t, store); len(got) != 0 {
		t.Errorf("Members after Close = %v, want none", got)
	}
	if got := slow.take(); got[len(got)-1] != "uselease none" {
		t.Errorf("member's last calls %q, want the lease taken back at Close", got)
	}
}

// TestReshardSkipsExpiredMember: a registration that is no longer renewed
// (a crashed or paused process) holds the driver up until it expires, no
// longer.
func TestReshardSkipsExpiredMember(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.members = map[string]*memMember{"paused": {epoch: 1, expires: time.Now().Add(300 * time.Millisecond)}}
	store.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := Reshard(wctx, store, newUnfenced(false), listT, DriverOptions{})
	if err != nil || st.Epoch != 4 {
		t.Fatalf("Reshard past an expired member = %+v, %v", st, err)
	}
	// A driver whose context ends while a member is behind names it.
	store.mu.Lock()
	store.members = map[string]*memMember{"stuck": {epoch: 4, expires: time.Now().Add(time.Hour)}}
	store.mu.Unlock()
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	_, err = Reshard(short, store, newUnfenced(false), listL, DriverOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "behind: stuck at 4") {
		t.Errorf("Reshard with a member stuck at epoch 4 = %v, want the deadline naming it", err)
	}
}

// TestMemberLeaseLost: a member whose registration is gone (expired in the
// store) refuses commands, registers again, applies the state, reports it,
// and serves again.
func TestMemberLeaseLost(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	b := newUnfenced(false)
	m, err := Join(ctx, store, b, MemberOptions{Initial: listL, ID: "m1", LeaseTTL: 300 * time.Millisecond, RetryInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.applyMu.Lock()
	first := m.lease
	m.applyMu.Unlock()
	// The registration disappears from the store, as an expired lease's.
	store.mu.Lock()
	delete(store.members, "m1")
	store.mu.Unlock()
	<-first.Lost()
	var gate LeaseGate
	gate.Set("m1", first)
	var lerr *LeaseExpiredError
	if err := gate.Check(); !errors.As(err, &lerr) || !errors.Is(err, ErrLeaseExpired) || lerr.Member != "m1" || !lerr.ValidUntil.IsZero() {
		t.Errorf("Check with the lost lease = %v, want a *LeaseExpiredError of m1 with no ValidUntil", err)
	}
	for members(t, store)["m1"] != 1 {
		time.Sleep(time.Millisecond)
	}
	for b.gate.Check() != nil {
		time.Sleep(time.Millisecond)
	}
	m.applyMu.Lock()
	second := m.lease
	m.applyMu.Unlock()
	if second == first {
		t.Error("the member kept its lost lease")
	}
	if got := b.take(); !slices.Equal(got, []string{"apply 1 stable", "uselease m1", "uselease m1"}) {
		t.Errorf("backend calls %q, want the lease handed over at Join and again after registering anew", got)
	}
}
