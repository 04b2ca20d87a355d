package shardcore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// mustLock locks keys of l with no deadline.
func mustLock(t *testing.T, l *KeyLocks, keys ...string) func() {
	unlock, err := l.Lock(context.Background(), keys...)
	if err != nil {
		t.Error(err)
	}
	return unlock
}

// A key is held by one caller at a time; other keys are not held back
// (locks are per key, not per stripe), and a key listed twice counts once.
func TestKeyLocks(t *testing.T) {
	var l KeyLocks
	unlockAB := mustLock(t, &l, "b", "a", "b")
	// 5,000 other keys: with stripes, some would share one with "a" or "b".
	others := make([]string, 5000)
	for i := range others {
		others[i] = "k" + strconv.Itoa(i)
	}
	locked := make(chan func())
	go func() { locked <- mustLock(t, &l, others...) }()
	select {
	case unlock := <-locked:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("keys other than a and b wait for them")
	}
	got := make(chan func())
	go func() { got <- mustLock(t, &l, "c", "b") }()
	select {
	case <-got:
		t.Fatal(`Lock("c", "b") did not wait for "b"`)
	case <-time.After(50 * time.Millisecond):
	}
	unlockAB()
	select {
	case unlock := <-got:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal(`Lock("c", "b") still waits once "b" is unlocked`)
	}
	if len(l.held) != 0 {
		t.Fatalf("keys still held: %v", l.held)
	}
}

// A caller waits for a key another holds no longer than its context: Lock
// returns ctx's error and unlocks the keys it had taken ("a", before "b"),
// which another caller then takes at once.
func TestKeyLocksWaitEndsWithContext(t *testing.T) {
	var l KeyLocks
	unlockB := mustLock(t, &l, "b")
	defer unlockB()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	unlock, err := l.Lock(ctx, "a", "b")
	if !errors.Is(err, context.DeadlineExceeded) || unlock != nil {
		t.Fatalf("Lock(a, b) with b held, past its deadline = %v, %v; want nil, context.DeadlineExceeded", unlock != nil, err)
	}
	if _, held := l.held["a"]; held || len(l.held) != 1 {
		t.Fatalf("held after the failed Lock: %v, want only b", l.held)
	}
	mustLock(t, &l, "a")()
}
