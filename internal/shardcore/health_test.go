package shardcore_test

// Shard failure: Report, the failure and eject modes, retries and probes,
// events and Stats, with a fake client whose "down" flag makes its commands
// and probes fail the way a refused connection does.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// errDown is the transport error of a testClient that is down.
var errDown = errors.New("dial tcp: connect: connection refused (test)")

// testClient is a shard's client: down makes its commands and probes fail;
// Close is recorded.
type testClient struct {
	name    string
	down    atomic.Bool
	closed  atomic.Bool
	probes  atomic.Int64 // probes run on it
	usedBad atomic.Int64 // commands or probes started after it was closed
}

func (c *testClient) Close() error {
	c.closed.Store(true)
	return nil
}

// do runs one command on c: errDown when c is down.
func (c *testClient) do() error {
	if c.closed.Load() {
		c.usedBad.Add(1)
	}
	if c.down.Load() {
		return errDown
	}
	return nil
}

// probeTest is a Health.Probe: it fails while the client is down.
func probeTest(_ context.Context, c *testClient) error {
	c.probes.Add(1)
	return c.do()
}

type sharded = shardcore.Sharded[*testClient]

// newClients returns one testClient per name.
func newClients(names ...string) []*testClient {
	out := make([]*testClient, len(names))
	for i, n := range names {
		out[i] = &testClient{name: n}
	}
	return out
}

// shardAddr is the address given to shard i.
func shardAddr(i int) string { return fmt.Sprintf("10.0.0.%d:6379", i+1) }

// shardList makes a named shard of weight 1 per client, at shardAddr(i).
func shardList(clients []*testClient) []shardcore.Shard[*testClient] {
	out := make([]shardcore.Shard[*testClient], len(clients))
	for i, c := range clients {
		out[i] = shardcore.Shard[*testClient]{Name: c.name, Addr: shardAddr(i), Client: c}
	}
	return out
}

// newSharded builds a Sharded over clients with h; t.Cleanup closes it.
func newSharded(t *testing.T, h shardcore.Health[*testClient], clients []*testClient) *sharded {
	t.Helper()
	return newBackend(t, shardcore.Backend[*testClient]{Health: h}, clients)
}

// newBackend builds a Sharded over clients for b; t.Cleanup closes it.
func newBackend(t *testing.T, b shardcore.Backend[*testClient], clients []*testClient) *sharded {
	t.Helper()
	s, err := shardcore.New(shardList(clients), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// call runs one command for key as a backend does: on one View, on the
// shard that owns key, reporting the outcome to the shard's health (Finish).
// It returns the shard used and the error, wrapped in a ShardError.
func call(s *sharded, key string) (int, error) {
	v := s.Acquire()
	defer v.Release()
	i := v.Locate(key)
	return i, v.Finish(context.Background(), i, v.Client(i).do())
}

// testKeys returns "key:0" .. "key:<n-1>".
func testKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("key:%d", i)
	}
	return out
}

// refRing is the ring of named shards of weight 1, built independently.
func refRing(t *testing.T, names ...string) *ring.Ring {
	t.Helper()
	nodes := make([]ring.Node, len(names))
	for i, n := range names {
		nodes[i] = ring.Node{Name: n}
	}
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keyOn returns the first key of ks that r places on shard i.
func keyOn(t *testing.T, r interface{ Locate(string) int }, ks []string, i int) string {
	t.Helper()
	for _, k := range ks {
		if r.Locate(k) == i {
			return k
		}
	}
	t.Fatalf("no key on shard %d", i)
	return ""
}

// waitUntil polls cond every millisecond until it holds, or fails the test
// after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// eventLog collects the events of OnEvent, which may come from timer
// goroutines.
type eventLog struct {
	mu     sync.Mutex
	events []shardcore.Event
}

func (l *eventLog) add(e shardcore.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) all() []shardcore.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]shardcore.Event(nil), l.events...)
}

// kinds returns the kinds of the events, as strings.
func (l *eventLog) kinds() []string {
	var out []string
	for _, e := range l.all() {
		out = append(out, fmt.Sprintf("%s:%d", e.Kind, e.Shard))
	}
	return out
}

func (l *eventLog) count(kind shardcore.EventKind) int {
	n := 0
	for _, e := range l.all() {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// Report counts every command and its transport failures; a canceled
// context counts as a request but not as a failure.
func TestHealthReportCountsRequestsAndErrors(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{}, clients)
	ctx := context.Background()
	v := s.Acquire()
	for range 5 {
		v.Report(ctx, 1, nil)
	}
	for range 3 {
		v.Report(ctx, 1, errDown)
	}
	v.Report(ctx, 1, fmt.Errorf("get: %w", context.Canceled))
	v.Report(ctx, 2, errDown)
	v.Release()
	want := []shardcore.ShardStats{
		{Name: "a", Addr: shardAddr(0)},
		{Name: "b", Addr: shardAddr(1), Requests: 9, Errors: 3},
		{Name: "c", Addr: shardAddr(2), Requests: 1, Errors: 1},
	}
	if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Stats = %+v\nwant    %+v", got, want)
	}
}

// In FailureMode (the default) nothing is ever ejected: a dead shard's keys
// fail with its ShardError and no key moves.
func TestHealthFailureModeNeverEjects(t *testing.T) {
	clients := newClients("a", "b", "c")
	var log eventLog
	s := newSharded(t, shardcore.Health[*testClient]{FailureLimit: 1, OnEvent: log.add}, clients)
	ks := testKeys(10000)
	ref := refRing(t, "a", "b", "c")
	clients[1].down.Store(true)
	failed := 0
	for _, k := range ks {
		i, err := call(s, k)
		if i != ref.Locate(k) {
			t.Fatalf("%s ran on shard %d, ring says %d", k, i, ref.Locate(k))
		}
		var se *shardcore.ShardError
		switch {
		case i != 1 && err != nil:
			t.Fatalf("%s on live shard %d: %v", k, i, err)
		case i == 1 && (!errors.As(err, &se) || se.Index != 1 || se.Name != "b" || se.Addr != shardAddr(1) || !errors.Is(err, errDown)):
			t.Fatalf("%s on the dead shard: %v, want its ShardError", k, err)
		case i == 1:
			failed++
		}
	}
	st := s.Stats()[1]
	if st.Ejected || st.Ejections != 0 || st.Errors != uint64(failed) || st.Requests != uint64(failed) {
		t.Fatalf("dead shard stats %+v, want %d requests and errors, not ejected", st, failed)
	}
	if log.count(shardcore.EventFailure) != failed || len(log.all()) != failed {
		t.Fatalf("events: %d failures of %d events, want %d failures only", log.count(shardcore.EventFailure), len(log.all()), failed)
	}
	if s.Ring().Ejected(1) {
		t.Fatal("the ring ejected shard 1 in failure mode")
	}
}

// In EjectMode the FailureLimit-th consecutive failure ejects the shard; a
// success in between starts the count again.
func TestHealthEjectAfterExactlyFailureLimit(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 3, RetryTimeout: time.Hour}, clients)
	key := keyOn(t, s, testKeys(100), 1)
	fail := func(n int) {
		clients[1].down.Store(true)
		for range n {
			if i, err := call(s, key); i != 1 || err == nil {
				t.Fatalf("%s: shard %d, %v; want a failure of shard 1", key, i, err)
			}
		}
	}
	fail(2)
	clients[1].down.Store(false)
	if i, err := call(s, key); i != 1 || err != nil {
		t.Fatalf("success: shard %d, %v", i, err)
	}
	fail(2) // 2 consecutive: still in
	if st := s.Stats()[1]; st.Ejected || st.Ejections != 0 {
		t.Fatalf("ejected after 2 consecutive failures (limit 3): %+v", st)
	}
	fail(1) // the 3rd consecutive
	st := s.Stats()[1]
	if !st.Ejected || st.Ejections != 1 || st.Requests != 6 || st.Errors != 5 {
		t.Fatalf("after the 3rd consecutive failure: %+v; want ejected once, 6 requests, 5 errors", st)
	}
	if i := s.Locate(key); i == 1 {
		t.Fatal("Locate returns the ejected shard")
	}
}

// An ejected shard's keys go where ring.Ring.Eject sends them (the Jedis
// ring: the next node clockwise, i.e. the ring without it); no other key
// moves; Locate, GetShard, GroupKeys never return it.
func TestHealthEjectMovesOnlyEjectedShardKeys(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour}, clients)
	ks := testKeys(10000)
	ref := refRing(t, "a", "b", "c")
	ejected, err := ref.Eject(1)
	if err != nil {
		t.Fatal(err)
	}
	without := refRing(t, "a", "c") // the ring without b, for the clockwise check
	clients[1].down.Store(true)
	key := keyOn(t, ref, ks, 1)
	call(s, key)
	call(s, key)
	if !s.Stats()[1].Ejected || !s.Ring().Ejected(1) {
		t.Fatal("shard 1 not ejected after 2 failures")
	}
	moved := 0
	for _, k := range ks {
		before, got := ref.Locate(k), s.Locate(k)
		if got != ejected.Locate(k) {
			t.Fatalf("%s on shard %d, ring.Eject(1) says %d", k, got, ejected.Locate(k))
		}
		if next := []int{0, 2}[without.Locate(k)]; got != next {
			t.Fatalf("%s on shard %d, the next shard clockwise is %d", k, got, next)
		}
		switch {
		case got == 1:
			t.Fatalf("%s on the ejected shard", k)
		case before != 1 && got != before:
			t.Fatalf("%s moved from live shard %d to %d", k, before, got)
		case before == 1:
			moved++
		}
		if c, err := s.GetShard(context.Background(), k); err != nil || c != clients[got] {
			t.Fatalf("GetShard(%s) = %s, want %s", k, c.name, clients[got].name)
		}
	}
	if moved < 2000 || moved > 5000 {
		t.Fatalf("%d of %d keys were on shard 1; expected about a third", moved, len(ks))
	}
	v := s.Acquire()
	defer v.Release()
	for _, g := range v.GroupKeys(ks) {
		if g.Shard == 1 {
			t.Fatal("GroupKeys gives the ejected shard a group")
		}
	}
	// The moved keys now succeed (served by the live shards).
	for _, k := range ks[:300] {
		if _, err := call(s, k); err != nil {
			t.Fatalf("%s after the ejection: %v", k, err)
		}
	}
}

// The last live shard is never ejected: its keys fail instead.
func TestHealthLastLiveShardIsNeverEjected(t *testing.T) {
	clients := newClients("a", "b", "c")
	var log eventLog
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour, OnEvent: log.add}, clients)
	ks := testKeys(1000)
	for _, c := range clients {
		c.down.Store(true)
	}
	for _, k := range ks {
		call(s, k)
	}
	var live []int
	for i, st := range s.Stats() {
		if !st.Ejected {
			live = append(live, i)
		}
	}
	if len(live) != 1 {
		t.Fatalf("live shards %v, want exactly one", live)
	}
	for _, k := range ks {
		i, err := call(s, k)
		if i != live[0] || err == nil {
			t.Fatalf("%s: shard %d, %v; want the failure of the last shard %d", k, i, err, live[0])
		}
	}
	if n := log.count(shardcore.EventEjected); n != 2 {
		t.Fatalf("%d ejected events, want 2: %v", n, log.kinds())
	}
	if st := s.Stats()[live[0]]; st.Ejections != 0 {
		t.Fatalf("last shard stats %+v", st)
	}
}

// Concurrent failures of one shard eject it once.
func TestHealthConcurrentFailuresEjectOnce(t *testing.T) {
	clients := newClients("a", "b", "c")
	var log eventLog
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour, OnEvent: log.add}, clients)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				v := s.Acquire() // views from before and after the ejection
				v.Report(context.Background(), 1, errDown)
				v.Release()
			}
		})
	}
	wg.Wait()
	st := s.Stats()[1]
	if !st.Ejected || st.Ejections != 1 || log.count(shardcore.EventEjected) != 1 {
		t.Fatalf("stats %+v, %d ejected events; want one ejection", st, log.count(shardcore.EventEjected))
	}
	if st.Errors != 800 || st.Requests != 800 {
		t.Fatalf("shard 1: %d requests, %d errors; want 800 reports of failure", st.Requests, st.Errors)
	}
}

// OnEvent sees each failure, the ejection and the rejoin, naming the shard
// by index, name and address.
func TestHealthEventsNameTheShard(t *testing.T) {
	clients := newClients("a", "b", "c")
	var log eventLog
	s := newSharded(t, shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 2, RetryTimeout: 50 * time.Millisecond,
		Probe:   func(context.Context, *testClient) error { return nil }, // the first retry succeeds
		OnEvent: log.add,
	}, clients)
	key := keyOn(t, s, testKeys(100), 2)
	clients[2].down.Store(true)
	start := time.Now()
	call(s, key)
	call(s, key)
	waitUntil(t, 5*time.Second, "shard 2 does not rejoin", func() bool { return !s.Stats()[2].Ejected })
	events := log.all()
	if got := fmt.Sprint(log.kinds()); got != "[failure:2 failure:2 ejected:2 rejoined:2]" {
		t.Fatalf("events %s", got)
	}
	for i, e := range events {
		if e.Shard != 2 || e.Name != "c" || e.Addr != shardAddr(2) || e.Time.Before(start) || e.Time.After(time.Now()) {
			t.Fatalf("event %d = %+v, want shard 2 %q at %s", i, e, "c", shardAddr(2))
		}
		if wantErr := e.Kind != shardcore.EventRejoined; wantErr != errors.Is(e.Err, errDown) || !wantErr && e.Err != nil {
			t.Fatalf("event %d (%s) has error %v", i, e.Kind, e.Err)
		}
	}
	if events[3].Time.Sub(events[2].Time) < 50*time.Millisecond {
		t.Fatalf("rejoined %v after the ejection, before the retry timeout", events[3].Time.Sub(events[2].Time))
	}
}

// After RetryTimeout a failing probe keeps the shard ejected (one failure
// event per retry, no second ejection); once the probe succeeds it rejoins
// and every key is placed as before the ejection.
func TestHealthRetryProbeDecidesRejoin(t *testing.T) {
	clients := newClients("a", "b", "c")
	var log eventLog
	var rejoins atomic.Int64
	s := newSharded(t, shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		Probe: probeTest, OnEvent: log.add,
		OnRejoin: func(context.Context, *testClient) error { rejoins.Add(1); return nil },
	}, clients)
	ks := testKeys(10000)
	ref := refRing(t, "a", "b", "c")
	ejected, _ := ref.Eject(0)
	clients[0].down.Store(true)
	call(s, keyOn(t, ref, ks, 0))
	waitUntil(t, 5*time.Second, "fewer than 3 retry probes", func() bool { return clients[0].probes.Load() >= 3 })
	if st := s.Stats()[0]; !st.Ejected || st.Ejections != 1 {
		t.Fatalf("after failed probes: %+v; want still ejected, once", st)
	}
	if rejoins.Load() != 0 {
		t.Fatal("OnRejoin ran although the probe failed")
	}
	for _, k := range ks {
		if got := s.Locate(k); got != ejected.Locate(k) {
			t.Fatalf("%s on %d while ejected, want %d", k, got, ejected.Locate(k))
		}
	}
	// Each failed retry is a failure event of shard 0.
	for _, e := range log.all()[2:] {
		if e.Kind != shardcore.EventFailure || e.Shard != 0 || !errors.Is(e.Err, errDown) {
			t.Fatalf("event after the ejection: %+v, want a failure of shard 0", e)
		}
	}
	clients[0].down.Store(false)
	waitUntil(t, 5*time.Second, "shard 0 does not rejoin", func() bool { return !s.Stats()[0].Ejected })
	if s.Ring().Ejected(0) || rejoins.Load() != 1 {
		t.Fatalf("ring ejected=%v, OnRejoin ran %d times", s.Ring().Ejected(0), rejoins.Load())
	}
	for _, k := range ks {
		if got := s.Locate(k); got != ref.Locate(k) {
			t.Fatalf("%s on %d after the rejoin, originally %d", k, got, ref.Locate(k))
		}
	}
	if st := s.Stats()[0]; st.Ejections != 1 || st.Ejected {
		t.Fatalf("stats after the rejoin %+v", st)
	}
	// The count starts again: FailureLimit (1) new failures eject it again.
	clients[0].down.Store(true)
	call(s, keyOn(t, ref, ks, 0))
	if st := s.Stats()[0]; !st.Ejected || st.Ejections != 2 {
		t.Fatalf("after a new failure: %+v, want ejected a second time", st)
	}
}

// With no Probe, an ejected shard rejoins once RetryTimeout has passed.
func TestHealthEjectWithoutProbeRejoinsAfterRetryTimeout(t *testing.T) {
	clients := newClients("a", "b", "c")
	s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond}, clients)
	clients[1].down.Store(true)
	start := time.Now()
	call(s, keyOn(t, s, testKeys(100), 1))
	if !s.Stats()[1].Ejected {
		t.Fatal("not ejected")
	}
	waitUntil(t, 5*time.Second, "shard 1 does not rejoin", func() bool { return !s.Stats()[1].Ejected })
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("rejoined after %v, before RetryTimeout", d)
	}
}

// OnRejoin runs after a successful probe, while the shard is still out; its
// error keeps the shard out for another RetryTimeout.
func TestHealthOnRejoinErrorKeepsShardOut(t *testing.T) {
	clients := newClients("a", "b", "c")
	ks := testKeys(3000)
	var s *sharded
	var calls atomic.Int64
	var wrong atomic.Value // the first violation seen inside OnRejoin
	s = newSharded(t, shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 20 * time.Millisecond,
		Probe: func(_ context.Context, c *testClient) error { c.probes.Add(1); return nil },
		OnRejoin: func(ctx context.Context, c *testClient) error {
			n := calls.Add(1)
			if c != clients[1] {
				wrong.CompareAndSwap(nil, fmt.Sprintf("OnRejoin got client %s", c.name))
			}
			if _, ok := ctx.Deadline(); !ok {
				wrong.CompareAndSwap(nil, "OnRejoin's context has no deadline")
			}
			if !s.Stats()[1].Ejected || !s.Ring().Ejected(1) {
				wrong.CompareAndSwap(nil, "OnRejoin ran after the shard rejoined")
			}
			for _, k := range ks {
				if s.Locate(k) == 1 {
					wrong.CompareAndSwap(nil, "a key is on shard 1 while OnRejoin runs")
					break
				}
			}
			if n < 3 {
				return errors.New("flush failed")
			}
			return nil
		},
	}, clients)
	clients[1].down.Store(true)
	call(s, keyOn(t, s, ks, 1))
	waitUntil(t, 5*time.Second, "shard 1 does not rejoin", func() bool { return !s.Stats()[1].Ejected })
	if w := wrong.Load(); w != nil {
		t.Fatal(w)
	}
	if calls.Load() != 3 || clients[1].probes.Load() != 3 {
		t.Fatalf("OnRejoin ran %d times, probe %d times; want 3 and 3 (two errors, then success)", calls.Load(), clients[1].probes.Load())
	}
}

// ProbeInterval finds a dead shard with no traffic at all: in EjectMode it
// is ejected after exactly FailureLimit failed probes (ejected shards are not
// probed by the loop); in FailureMode its errors are counted, nothing moves.
func TestHealthProbeIntervalFindsDeadShardWithoutTraffic(t *testing.T) {
	t.Run("eject", func(t *testing.T) {
		clients := newClients("a", "b", "c")
		s := newSharded(t, shardcore.Health[*testClient]{
			Mode: shardcore.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour,
			ProbeInterval: 5 * time.Millisecond, Probe: probeTest,
		}, clients)
		clients[2].down.Store(true)
		waitUntil(t, 5*time.Second, "shard 2 not ejected by probes", func() bool { return s.Stats()[2].Ejected })
		// Shards 0 and 1 keep being probed; shard 2 no more.
		p0 := clients[0].probes.Load()
		waitUntil(t, 5*time.Second, "the probe loop stopped", func() bool { return clients[0].probes.Load() >= p0+3 })
		st := s.Stats()
		if st[2].Requests != 2 || st[2].Errors != 2 || st[2].Ejections != 1 || clients[2].probes.Load() != 2 {
			t.Fatalf("dead shard %+v after %d probes; want exactly 2 failed probes, then ejected", st[2], clients[2].probes.Load())
		}
		if st[0].Errors != 0 || st[0].Requests < 3 {
			t.Fatalf("live shard %+v", st[0])
		}
	})
	t.Run("failure", func(t *testing.T) {
		clients := newClients("a", "b", "c")
		s := newSharded(t, shardcore.Health[*testClient]{ProbeInterval: 5 * time.Millisecond, Probe: probeTest}, clients)
		clients[2].down.Store(true)
		waitUntil(t, 5*time.Second, "probes do not count shard 2's errors", func() bool { return s.Stats()[2].Errors >= 3 })
		if st := s.Stats()[2]; st.Ejected || st.Ejections != 0 || s.Ring().Ejected(2) {
			t.Fatalf("failure mode ejected: %+v", st)
		}
	})
}

func TestHealthValidationErrors(t *testing.T) {
	clients := newClients("a", "b")
	for _, tc := range []struct {
		h    shardcore.Health[*testClient]
		want string
	}{
		{shardcore.Health[*testClient]{FailureLimit: -1}, "shardedclient: failure limit -1 is negative"},
		{shardcore.Health[*testClient]{RetryTimeout: -time.Second}, "shardedclient: negative retry timeout, probe interval or probe timeout"},
		{shardcore.Health[*testClient]{ProbeInterval: -time.Second, Probe: probeTest}, "shardedclient: negative retry timeout, probe interval or probe timeout"},
		{shardcore.Health[*testClient]{ProbeTimeout: -time.Second}, "shardedclient: negative retry timeout, probe interval or probe timeout"},
		{shardcore.Health[*testClient]{ProbeInterval: time.Second}, "shardedclient: a probe interval needs a Probe"},
		{shardcore.Health[*testClient]{Mode: 2}, "shardedclient: unknown mode 2"},
	} {
		s, err := shardcore.New(shardList(clients), shardcore.Backend[*testClient]{Health: tc.h}, nil)
		if s != nil || err == nil || err.Error() != tc.want {
			t.Errorf("New(Health %+v) = %v, %v; want error %q", tc.h, s, err, tc.want)
		}
	}
	for _, c := range clients {
		if c.closed.Load() {
			t.Fatalf("a failed New closed client %s", c.name)
		}
	}
}

// Close stops the probe loop and the retry timers: no goroutine is left, and
// no probe runs after Close (checked against a second Sharded whose retry,
// armed later with the same RetryTimeout, has run).
func TestHealthCloseStopsTimersAndProbeLoop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clients := newClients("a", "b", "c")
	h := shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeInterval: 2 * time.Millisecond, Probe: probeTest,
	}
	s, err := shardcore.New(shardList(clients), shardcore.Backend[*testClient]{Health: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the probe loop does not run", func() bool { return clients[0].probes.Load() >= 2 })
	clients[1].down.Store(true)
	call(s, keyOn(t, s, testKeys(100), 1))
	if !s.Stats()[1].Ejected {
		t.Fatal("shard 1 not ejected")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, c := range clients {
		if !c.closed.Load() {
			t.Fatalf("client %s not closed", c.name)
		}
	}
	probes := make([]int64, len(clients))
	for i, c := range clients {
		probes[i] = c.probes.Load()
	}
	// A control whose shard is ejected now, with the same RetryTimeout.
	control := newClients("x", "y")
	hc := h
	hc.ProbeInterval = 0
	cs := newSharded(t, hc, control)
	control[0].down.Store(true)
	call(cs, keyOn(t, cs, testKeys(100), 0))
	control[0].down.Store(false)
	waitUntil(t, 5*time.Second, "the control shard does not rejoin", func() bool { return !cs.Stats()[0].Ejected })
	for i, c := range clients {
		if n := c.probes.Load(); n != probes[i] || c.usedBad.Load() != 0 {
			t.Fatalf("client %s: %d probes after Close (%d on the closed client)", c.name, n-probes[i], c.usedBad.Load())
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close must not close a client under a retry probe that is still running:
// Close stops "the health goroutines and timers, then closes every shard",
// and a retry whose timer has already fired (it runs on time.AfterFunc's
// goroutine) is one of them: Close waits for it before closing clients.
func TestHealthCloseWaitsForRunningRetryProbe(t *testing.T) {
	clients := newClients("a", "b", "c")
	entered := make(chan struct{}, 1)
	done := make(chan struct{})
	var running, closedUnder atomic.Bool
	h := shardcore.Health[*testClient]{
		Mode: shardcore.EjectMode, FailureLimit: 1, RetryTimeout: 10 * time.Millisecond,
		ProbeTimeout: 300 * time.Millisecond,
		Probe: func(ctx context.Context, c *testClient) error {
			running.Store(true)
			select {
			case entered <- struct{}{}:
			default:
			}
			<-ctx.Done() // a hung server: the probe ends at ProbeTimeout
			closedUnder.Store(c.closed.Load())
			running.Store(false)
			close(done)
			return ctx.Err()
		},
	}
	s, err := shardcore.New(shardList(clients), shardcore.Backend[*testClient]{Health: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients[1].down.Store(true)
	call(s, keyOn(t, s, testKeys(100), 1))
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the retry probe does not start")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stillRunning := running.Load()
	<-done // let the probe end before the test does
	if stillRunning || closedUnder.Load() {
		t.Errorf("Close returned while the retry probe of shard 1 was running (running=%v) and closed its client under it (closed during probe=%v); want Close to wait for the retry before closing clients",
			stillRunning, closedUnder.Load())
	}
}
