package fleettest

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/fleet"
)

// memberTTL is the lease of the members the suite registers: whole seconds
// (etcd's unit) and above etcd's minimum TTL (1.5 election timeouts).
const memberTTL = 3 * time.Second

// register registers id under memberTTL, checks ValidUntil against the
// call's start and end, and closes the lease when t ends.
func register(t *testing.T, s fleet.Store, id string) fleet.MemberLease {
	t.Helper()
	before := time.Now()
	l, err := s.Register(opContext(t), id, memberTTL)
	after := time.Now()
	if err != nil {
		t.Fatalf("Register(%q, %v): %v", id, memberTTL, err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if v := l.ValidUntil(); v.Before(before.Add(memberTTL)) || v.After(after.Add(memberTTL)) {
		t.Fatalf("Register(%q): ValidUntil %v after the call's start, want within [%v, %v] (the TTL from the call's start to its end)",
			id, v.Sub(before), memberTTL, after.Sub(before)+memberTTL)
	}
	return l
}

// wantMembers checks that s lists exactly want.
func wantMembers(t *testing.T, s fleet.Store, want map[string]uint64) {
	t.Helper()
	got, err := s.Members(opContext(t))
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
}

func report(t *testing.T, l fleet.MemberLease, epoch uint64) {
	t.Helper()
	if err := l.Report(opContext(t), epoch); err != nil {
		t.Fatalf("Report(%d): %v", epoch, err)
	}
}

// testMembers registers two members, reports epochs, closes one, and
// checks what Members lists and what a closed lease does.
func testMembers(t *testing.T, s fleet.Store) {
	wantMembers(t, s, map[string]uint64{})
	a := register(t, s, "process-a")
	wantMembers(t, s, map[string]uint64{"process-a": 0})
	b := register(t, s, "process-b")
	report(t, a, 7)
	report(t, b, 8)
	report(t, a, 9)
	wantMembers(t, s, map[string]uint64{"process-a": 9, "process-b": 8})
	select {
	case <-a.Lost():
		t.Fatal("Lost closed on a live lease")
	default:
	}
	if err := a.Close(opContext(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantMembers(t, s, map[string]uint64{"process-b": 8})
	select {
	case <-a.Lost():
	default:
		t.Fatal("Lost still open after Close")
	}
	if v := a.ValidUntil(); !v.IsZero() {
		t.Fatalf("ValidUntil after Close = %v, want the zero Time", v)
	}
	if err := a.Report(opContext(t), 10); !errors.Is(err, fleet.ErrLeaseLost) {
		t.Fatalf("Report after Close = %v, want an error matching fleet.ErrLeaseLost", err)
	}
	wantMembers(t, s, map[string]uint64{"process-b": 8})
	if err := a.Close(opContext(t)); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// testMemberRenewed waits past the lease's TTL twice over: the lease is
// renewed, the member still listed, and ValidUntil has moved on.
func testMemberRenewed(t *testing.T, s fleet.Store) {
	l := register(t, s, "renewed")
	report(t, l, 3)
	first := l.ValidUntil()
	time.Sleep(2 * memberTTL)
	wantMembers(t, s, map[string]uint64{"renewed": 3})
	if v := l.ValidUntil(); !v.After(first.Add(memberTTL)) {
		t.Fatalf("ValidUntil after %v = %v past the first, want more than %v (renewed)", 2*memberTTL, v.Sub(first), memberTTL)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed on a renewed lease")
	default:
	}
}

// testMemberRegisteredAgain registers one ID twice: the second lease holds
// the registration, and closing the first leaves it.
func testMemberRegisteredAgain(t *testing.T, s fleet.Store) {
	first := register(t, s, "again")
	report(t, first, 5)
	second := register(t, s, "again")
	wantMembers(t, s, map[string]uint64{"again": 0})
	report(t, second, 6)
	if err := first.Close(opContext(t)); err != nil {
		t.Fatalf("Close of the first lease: %v", err)
	}
	wantMembers(t, s, map[string]uint64{"again": 6})
}

// testRegisterInvalid checks that a bad ID or TTL is refused and nothing
// is registered.
func testRegisterInvalid(t *testing.T, s fleet.Store) {
	for _, c := range []struct {
		id  string
		ttl time.Duration
	}{{"", memberTTL}, {"a/b", memberTTL}, {"a b", memberTTL}, {"ok", 0}, {"ok", -time.Second}} {
		if l, err := s.Register(opContext(t), c.id, c.ttl); err == nil {
			_ = l.Close(context.Background())
			t.Errorf("Register(%q, %v) = nil error, want one", c.id, c.ttl)
		}
	}
	wantMembers(t, s, map[string]uint64{})
}
