package shardedclient

import (
	"strconv"
	"testing"
	"time"
)

// A key is held by one caller at a time; other keys are not held back
// (locks are per key, not per stripe), and a key listed twice counts once.
func TestKeyLocks(t *testing.T) {
	var l KeyLocks
	unlockAB := l.Lock("b", "a", "b")
	// 5,000 other keys: with stripes, some would share one with "a" or "b".
	others := make([]string, 5000)
	for i := range others {
		others[i] = "k" + strconv.Itoa(i)
	}
	locked := make(chan func())
	go func() { locked <- l.Lock(others...) }()
	select {
	case unlock := <-locked:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("keys other than a and b wait for them")
	}
	got := make(chan func())
	go func() { got <- l.Lock("c", "b") }()
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
