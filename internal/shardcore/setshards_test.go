package shardcore_test

// SetShards: add, remove, re-weight, replace a client; minimal key movement,
// carried-over health, old clients closed only once unused, errors that
// change nothing. Helpers are in health_test.go.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// locateAll returns the shard of every key.
func locateAll(s *sharded, ks []string) []int {
	out := make([]int, len(ks))
	for i, k := range ks {
		out[i] = s.Locate(k)
	}
	return out
}

// sameClients fails unless s's shards hold exactly want, in order.
func sameClients(t *testing.T, s *sharded, want []*testClient) {
	t.Helper()
	got := s.AllShards()
	if len(got) != len(want) {
		t.Fatalf("%d shards, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Client != want[i] {
			t.Fatalf("shard %d holds client %s, want %s", i, got[i].Client.name, want[i].name)
		}
	}
}

// notClosed fails if any of clients is closed.
func notClosed(t *testing.T, clients ...*testClient) {
	t.Helper()
	for _, c := range clients {
		if c.closed.Load() {
			t.Fatalf("client %s was closed", c.name)
		}
	}
}

// Adding a shard moves only the keys that the new ring gives to it; the
// other clients are kept, open, with their counters; a View acquired
// before keeps the old list.
func TestSetShardsAddMovesOnlyKeysToNewShard(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ks := testKeys(10000)
	before := locateAll(s, ks)
	for i := range 3 {
		call(s, keyOn(t, s, ks, i))
	}
	old := s.Acquire()
	d := &testClient{name: "d"}
	all := append(clients[:3:3], d)
	if err := s.SetShards(shardList(all)); err != nil {
		t.Fatal(err)
	}
	if old.Len() != 3 || len(s.AllShards()) != 4 {
		t.Fatalf("old view has %d shards, current %d; want 3 and 4", old.Len(), len(s.AllShards()))
	}
	for j, k := range ks {
		if got := old.Locate(k); got != before[j] {
			t.Fatalf("the old view places %s on %d, before on %d", k, got, before[j])
		}
	}
	old.Release()
	ref := refRing(t, "a", "b", "c", "d")
	moved := 0
	for j, k := range ks {
		got := s.Locate(k)
		if got != ref.Locate(k) {
			t.Fatalf("%s on %d, the 4-shard ring says %d", k, got, ref.Locate(k))
		}
		if got != before[j] {
			if got != 3 {
				t.Fatalf("%s moved from %d to %d, not to the new shard", k, before[j], got)
			}
			moved++
		}
	}
	if moved < 1500 || moved > 3500 {
		t.Fatalf("%d keys moved to the new shard; expected about a quarter", moved)
	}
	sameClients(t, s, all)
	notClosed(t, all...)
	st := s.Stats()
	for i := range 3 {
		if st[i].Requests != 1 || st[i].Name != clients[i].name || st[i].Addr != shardAddr(i) {
			t.Fatalf("shard %d stats %+v, want its request carried over", i, st[i])
		}
	}
	if st[3] != (shardcore.ShardStats{Name: "d", Addr: shardAddr(3)}) {
		t.Fatalf("new shard stats %+v", st[3])
	}
}

// Removing a shard moves only its keys; its client is closed; the others
// stay open.
func TestSetShardsRemoveMovesOnlyRemovedShardKeys(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ks := testKeys(10000)
	before := locateAll(s, ks)
	kept := []*testClient{clients[0], clients[2]}
	list := shardList(clients)
	if err := s.SetShards([]shardcore.Shard[*testClient]{list[0], list[2]}); err != nil {
		t.Fatal(err)
	}
	ref := refRing(t, "a", "c")
	for j, k := range ks {
		got := s.Locate(k)
		if got != ref.Locate(k) {
			t.Fatalf("%s on %d, the ring of a and c says %d", k, got, ref.Locate(k))
		}
		if before[j] != 1 && got != []int{0, -1, 1}[before[j]] {
			t.Fatalf("%s moved from %s to %s", k, clients[before[j]].name, kept[got].name)
		}
	}
	sameClients(t, s, kept)
	waitUntil(t, 5*time.Second, "the removed shard's client is not closed", clients[1].closed.Load)
	notClosed(t, kept...)
}

// Re-weighting a shard moves keys only to (or only from) it.
func TestSetShardsReweight(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ks := testKeys(10000)
	before := locateAll(s, ks)
	list := shardList(clients)
	list[2].Weight = 2
	if err := s.SetShards(list); err != nil {
		t.Fatal(err)
	}
	ref, err := ring.New([]ring.Node{{Name: "a"}, {Name: "b"}, {Name: "c", Weight: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for j, k := range ks {
		got := s.Locate(k)
		if got != ref.Locate(k) {
			t.Fatalf("%s on %d, the re-weighted ring says %d", k, got, ref.Locate(k))
		}
		if got != before[j] {
			if got != 2 {
				t.Fatalf("%s moved from %d to %d, not to the heavier shard", k, before[j], got)
			}
			moved++
		}
	}
	if moved == 0 || s.AllShards()[2].Weight != 2 || s.GetShardInfo(keyOn(t, s, ks, 2)).Weight != 2 {
		t.Fatalf("%d keys moved; shard 2 weight %d", moved, s.AllShards()[2].Weight)
	}
	sameClients(t, s, clients)
	notClosed(t, clients...)
	// And back: every key returns to its first shard.
	if err := s.SetShards(shardList(clients)); err != nil {
		t.Fatal(err)
	}
	for j, k := range ks {
		if got := s.Locate(k); got != before[j] {
			t.Fatalf("%s on %d after weight 1 again, first on %d", k, got, before[j])
		}
	}
}

// A new client under the same name moves no key; the old client is closed
// only after the View that was using it is released.
func TestSetShardsNewClientSameNameClosesOldAfterRelease(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ks := testKeys(10000)
	before := locateAll(s, ks)
	for range 4 {
		call(s, keyOn(t, s, ks, 1))
	}
	old := s.Acquire()
	b2 := &testClient{name: "b"}
	list := shardList([]*testClient{clients[0], b2, clients[2]})
	list[1].Addr = "10.0.0.99:6379" // a new address, same name: same placement, another server
	if err := s.SetShards(list); err != nil {
		t.Fatal(err)
	}
	for j, k := range ks {
		if got := s.Locate(k); got != before[j] {
			t.Fatalf("%s moved from %d to %d", k, before[j], got)
		}
	}
	if c, err := s.GetShard(context.Background(), keyOn(t, s, ks, 1)); err != nil || c != b2 {
		t.Fatalf("GetShard gives %p, want the new client", c)
	}
	if old.Client(1) != clients[1] {
		t.Fatal("the old view lost its client")
	}
	if clients[1].closed.Load() {
		t.Fatal("the old client was closed while a View using it was held")
	}
	if err := old.Client(1).do(); err != nil || clients[1].usedBad.Load() != 0 {
		t.Fatalf("old client in use: %v", err)
	}
	old.Release()
	waitUntil(t, 5*time.Second, "the replaced client is not closed after Release", clients[1].closed.Load)
	notClosed(t, clients[0], b2, clients[2])
	// Another server: its health record starts afresh.
	if st := s.Stats()[1]; st.Requests != 0 || st.Addr != "10.0.0.99:6379" {
		t.Fatalf("shard b stats %+v, want a fresh record for the new address", st)
	}
}

// A failing SetShards changes nothing: same shards, same placement, no
// client closed.
func TestSetShardsErrorsLeaveListInPlace(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ks := testKeys(2000)
	before := locateAll(s, ks)
	fresh := &testClient{name: "x"}
	list := func() []shardcore.Shard[*testClient] {
		return shardList([]*testClient{clients[0], fresh, clients[2]})
	}
	nilClient := list()
	nilClient[1].Client = nil
	dup := list()
	dup[1].Name = "a"
	neg := list()
	neg[1].Weight = -1
	for _, tc := range []struct {
		name   string
		shards []shardcore.Shard[*testClient]
		want   string
	}{
		{"empty", nil, "shardedclient: no shards"},
		{"nil client", nilClient, `shardedclient: shard 1 ("x"): nil client`},
		{"duplicate name", dup, `same name "a"`},
		{"negative weight", neg, "weight -1 is negative"},
	} {
		err := s.SetShards(tc.shards)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: SetShards = %v, want an error containing %q", tc.name, err, tc.want)
		}
		sameClients(t, s, clients)
		for j, k := range ks {
			if got := s.Locate(k); got != before[j] {
				t.Fatalf("%s: %s moved from %d to %d", tc.name, k, before[j], got)
			}
		}
		notClosed(t, append(clients, fresh)...)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetShards(list()); !errors.Is(err, shardcore.ErrClosed) {
		t.Fatalf("SetShards after Close = %v, want ErrClosed", err)
	}
	if fresh.closed.Load() {
		t.Fatal("SetShards after Close closed the new client")
	}
}

// An ejected shard that stays in the list stays ejected, with its counters,
// and rejoins later into the new list; the keys go where the new ring says.
func TestSetShardsKeepsEjectionAndRejoinsIntoNewList(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond, Probe: probeTest,
	}, clients)
	ks := testKeys(10000)
	clients[1].down.Store(true)
	call(s, keyOn(t, s, ks, 1))
	d := &testClient{name: "d"}
	all := append(clients[:3:3], d)
	if err := s.SetShards(shardList(all)); err != nil {
		t.Fatal(err)
	}
	ref := refRing(t, "a", "b", "c", "d")
	ejected, _ := ref.Eject(1)
	if st := s.Stats()[1]; !st.Ejected || st.Ejections != 1 || st.Errors != 1 || !s.Ring().Ejected(1) {
		t.Fatalf("shard b after SetShards: %+v, ring ejected %v; want still ejected", st, s.Ring().Ejected(1))
	}
	for _, k := range ks {
		if got := s.Locate(k); got != ejected.Locate(k) {
			t.Fatalf("%s on %d, want %d (new ring without b)", k, got, ejected.Locate(k))
		}
	}
	clients[1].down.Store(false)
	waitUntil(t, 5*time.Second, "b does not rejoin", func() bool { return !s.Stats()[1].Ejected })
	for _, k := range ks {
		if got := s.Locate(k); got != ref.Locate(k) {
			t.Fatalf("%s on %d after the rejoin, want %d", k, got, ref.Locate(k))
		}
	}
}

// Removing an ejected shard stops its retry: it is never probed again
// (checked against a control Sharded whose retry, armed later with the same
// RetryTimeout, has run).
func TestSetShardsRemovingEjectedShardStopsItsRetry(t *testing.T) {
	clients := newClients("a", "b", "c")
	h := shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond, Probe: probeTest}
	s := newSharded(t, h, clients)
	clients[1].down.Store(true)
	call(s, keyOn(t, s, testKeys(100), 1))
	list := shardList(clients)
	if err := s.SetShards([]shardcore.Shard[*testClient]{list[0], list[2]}); err != nil {
		t.Fatal(err)
	}
	control := newClients("x", "y")
	cs := newSharded(t, h, control)
	control[0].down.Store(true)
	call(cs, keyOn(t, cs, testKeys(100), 0))
	control[0].down.Store(false)
	waitUntil(t, 5*time.Second, "the control does not rejoin", func() bool { return !cs.Stats()[0].Ejected })
	if n := clients[1].probes.Load(); n != 0 {
		t.Fatalf("the removed shard was probed %d times", n)
	}
	waitUntil(t, 5*time.Second, "the removed shard's client is not closed", clients[1].closed.Load)
	if len(s.Stats()) != 2 || s.Stats()[0].Ejected || s.Stats()[1].Ejected {
		t.Fatalf("stats %+v", s.Stats())
	}
}

// A client replaced by SetShards must stay open until every command using
// it has ended, also when the view those commands hold was replaced before
// by an ejection (or a rejoin), not by SetShards: waiting only for the view
// that SetShards replaces directly would close the client under them.
func TestSetShardsKeepsClientOpenForViewAcquiredBeforeEjection(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}, clients)
	inFlight := s.Acquire() // a long command using client a
	clients[2].down.Store(true)
	call(s, keyOn(t, s, testKeys(100), 2)) // ejects c: a new view
	if !s.Stats()[2].Ejected {
		t.Fatal("c not ejected")
	}
	a2 := &testClient{name: "a"}
	list := shardList([]*testClient{a2, clients[1], clients[2]})
	if err := s.SetShards(list); err != nil {
		t.Fatal(err)
	}
	if inFlight.Client(0) != clients[0] {
		t.Fatal("the in-flight view lost its client")
	}
	// The old client must not be closed while inFlight is held; give the
	// retirement goroutine ample time to (wrongly) close it.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) && !clients[0].closed.Load() {
		time.Sleep(time.Millisecond)
	}
	closedEarly := clients[0].closed.Load()
	inFlight.Release()
	if closedEarly {
		t.Errorf("client a was closed while a View acquired before the ejection still used it; want it closed after that View's Release")
	}
	waitUntil(t, 5*time.Second, "the replaced client is not closed after Release", clients[0].closed.Load)
	notClosed(t, a2, clients[1], clients[2])
}
