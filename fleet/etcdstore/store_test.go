package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	"github.com/shardedcache/shardedcache/fleet/fleettest"
	"github.com/shardedcache/shardedcache/internal/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newClient connects to endpoint; the client is closed when t ends.
func newClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var prefixes atomic.Int64

// newPrefix returns a prefix that no other test uses (tests may run with
// -count > 1 against one server).
func newPrefix() string { return fmt.Sprintf("/etcdstore-test/%d", prefixes.Add(1)) }

// newStore returns a Store through client under prefix.
func newStore(t testing.TB, client *clientv3.Client, prefix string) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.New(client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	endpoint := etcdtest.StartShared(t)
	fleettest.TestStore(t, func(t *testing.T) fleet.Store { return newStore(t, newClient(t, endpoint), newPrefix()) })
}

// fixtureState is a Moving state with every field set.
func fixtureState() fleet.State {
	return fleet.State{
		Epoch:  7,
		Step:   fleet.Moving,
		Change: "0123456789abcdef",
		Shards: []fleet.Shard{{Name: "a", Addr: "10.0.0.1:6379"}, {Name: "b", Addr: "10.0.0.2:6379", DB: 2, Weight: 3}},
		Target: []fleet.Shard{{Name: "a", Addr: "10.0.0.1:6379"}, {Name: "c", Addr: "10.0.0.3:6380", Weight: 1}},
	}
}

func TestBadInput(t *testing.T) {
	var client clientv3.Client // never called
	for _, tc := range []struct {
		client *clientv3.Client
		prefix string
		want   string
	}{
		{nil, "/p", "etcdstore: nil etcd client"},
		{&client, "", `etcdstore: empty prefix (want one such as "/shardedcache/myfleet")`},
		{&client, "/p/", `etcdstore: prefix "/p/" ends with "/" (the store appends "/state", "/driver" and "/members/")`},
	} {
		if s, err := etcdstore.New(tc.client, tc.prefix); err == nil || err.Error() != tc.want {
			t.Errorf("New(%v, %q) = %v, %v; want error %q", tc.client, tc.prefix, s, err, tc.want)
		}
	}
	s, err := etcdstore.New(&client, "/p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(t.Context(), 0); err == nil || err.Error() != "etcdstore: lock /p/driver: ttl 0s, want > 0" {
		t.Errorf("Lock(ttl 0) = %v", err)
	}
	if _, err := s.Swap(t.Context(), 0, fleet.State{}); !errors.Is(err, fleet.ErrInvalidState) {
		t.Errorf("Swap(zero state) = %v, want fleet.ErrInvalidState", err)
	}
	ch := s.Watch(t.Context(), -1)
	if u := <-ch; u.Err == nil || u.Err.Error() != "etcdstore: watch /p/state from revision -1 < 0" {
		t.Errorf("Watch(-1) delivered %+v", u)
	}
	if u, ok := <-ch; ok {
		t.Errorf("Watch(-1) delivered %+v after its error", u)
	}
}

// TestStateJSON checks the stored JSON byte for byte (other tools and
// versions read it), and what Load and Watch make of values that other
// writers may leave: unknown fields (read), invalid states, non-JSON and
// a deleted key (errors naming the key and revision).
func TestStateJSON(t *testing.T) {
	endpoint := etcdtest.StartShared(t)
	client := newClient(t, endpoint)
	prefix := newPrefix()
	s := newStore(t, client, prefix)
	ctx := t.Context()
	rev, err := s.Swap(ctx, 0, fixtureState())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"epoch":7,"step":"moving","change":"0123456789abcdef",` +
		`"shards":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"b","addr":"10.0.0.2:6379","db":2,"weight":3}],` +
		`"target":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"c","addr":"10.0.0.3:6380","weight":1}]}`
	resp, err := client.Get(ctx, prefix+"/state")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want || resp.Kvs[0].ModRevision != int64(rev) {
		t.Fatalf("stored %v, want %s at revision %d", resp.Kvs, want, rev)
	}

	watch := s.Watch(ctx, rev)
	put := func(value string) int64 {
		t.Helper()
		resp, err := client.Put(ctx, prefix+"/state", value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	// A later version's extra field is ignored.
	newer := put(`{"epoch":7,"step":"moving","change":"0123456789abcdef","future":[1,2],` + want[len(`{"epoch":7,"step":"moving","change":"0123456789abcdef",`):])
	if got, gotRev, err := s.Load(ctx); err != nil || !reflect.DeepEqual(got, fixtureState()) || gotRev != fleet.Revision(newer) {
		t.Fatalf("Load = %+v, %d, %v; want %+v, %d", got, gotRev, err, fixtureState(), newer)
	}
	if u := <-watch; u.Err != nil || !reflect.DeepEqual(u.State, fixtureState()) || u.Revision != fleet.Revision(newer) {
		t.Fatalf("watch delivered %+v, want %+v at %d", u, fixtureState(), newer)
	}

	for _, tc := range []struct {
		value, want string
		is          error
	}{
		{`{"epoch":0,"step":"stable","shards":[{"name":"a","addr":"x"}]}`,
			"etcdstore: " + prefix + "/state at revision %d: fleet: invalid state: epoch 0 (the first state is epoch 1)", fleet.ErrInvalidState},
		{`not json`,
			"etcdstore: " + prefix + "/state at revision %d is not a state: invalid character 'o' in literal null (expecting 'u')", nil},
	} {
		rev := put(tc.value)
		wantErr := fmt.Sprintf(tc.want, rev)
		if _, _, err := s.Load(ctx); err == nil || err.Error() != wantErr || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Load of %s = %v, want %q", tc.value, err, wantErr)
		}
		w := s.Watch(ctx, fleet.Revision(rev-1))
		if u := <-w; u.Err == nil || u.Err.Error() != wantErr {
			t.Errorf("Watch of %s delivered %+v, want error %q", tc.value, u, wantErr)
		}
		wantClosed(t, w)
	}
	if u := <-watch; u.Err == nil || u.Err.Error() != fmt.Sprintf("etcdstore: %s/state at revision %d: fleet: invalid state: epoch 0 (the first state is epoch 1)", prefix, newer+1) {
		t.Fatalf("the first watch delivered %+v, want the invalid state's error", u)
	}
	wantClosed(t, watch)

	del, err := client.Delete(ctx, prefix+"/state")
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx, fleet.Revision(del.Header.Revision-1))
	wantErr := fmt.Sprintf("etcdstore: watch %s/state: the key was deleted at revision %d", prefix, del.Header.Revision)
	if u := <-w; u.Err == nil || u.Err.Error() != wantErr {
		t.Errorf("Watch of the deletion delivered %+v, want error %q", u, wantErr)
	}
	wantClosed(t, w)
	if got, gotRev, err := s.Load(ctx); err != nil || gotRev != 0 || !reflect.DeepEqual(got, fleet.State{}) {
		t.Errorf("Load after the deletion = %+v, %d, %v; want the zero state at 0", got, gotRev, err)
	}
}

// wantClosed checks that ch is closed, with nothing left in it.
func wantClosed(t *testing.T, ch <-chan fleet.Update) {
	t.Helper()
	select {
	case u, ok := <-ch:
		if ok {
			t.Fatalf("watch delivered %+v after its last update", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch not closed 10 s after its last update")
	}
}

// TestWatchCompaction checks that a watch keeps delivering across a
// compaction of the revisions it has passed, and that a watch from a
// compacted revision ends at once with an error matching
// rpctypes.ErrCompacted.
func TestWatchCompaction(t *testing.T) {
	endpoint := etcdtest.StartShared(t)
	client := newClient(t, endpoint)
	s := newStore(t, client, newPrefix())
	ctx := t.Context()
	swap := func(rev fleet.Revision, epoch uint64) fleet.Revision {
		t.Helper()
		st := fixtureState()
		st.Epoch = epoch
		next, err := s.Swap(ctx, rev, st)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	r1 := swap(0, 1)
	r2 := swap(r1, 2)
	live := s.Watch(ctx, r1)
	if u := <-live; u.Err != nil || u.Revision != r2 || u.State.Epoch != 2 {
		t.Fatalf("watch from %d delivered %+v, want epoch 2 at %d", r1, u, r2)
	}
	if _, err := client.Compact(ctx, int64(r2)); err != nil {
		t.Fatal(err)
	}
	r3 := swap(r2, 3)
	if u := <-live; u.Err != nil || u.Revision != r3 || u.State.Epoch != 3 {
		t.Fatalf("watch across the compaction delivered %+v, want epoch 3 at %d", u, r3)
	}

	stale := s.Watch(ctx, r1-1) // from r1, compacted
	u := <-stale
	if !errors.Is(u.Err, rpctypes.ErrCompacted) || u.Revision != 0 || !reflect.DeepEqual(u.State, fleet.State{}) {
		t.Fatalf("watch from a compacted revision delivered %+v, want only an error matching %v", u, rpctypes.ErrCompacted)
	}
	wantClosed(t, stale)
	if got := <-s.Watch(ctx, r2); got.Err != nil || got.Revision != r3 {
		t.Fatalf("watch from the compaction revision %d delivered %+v, want epoch 3 at %d", r2, got, r3)
	}
}

// TestLeaseLost pauses etcd past the lock's TTL: the holder's Lost closes
// while etcd is still frozen (the client gave up renewing), and once etcd
// resumes it expires the lease, so another process gets the lock.
func TestLeaseLost(t *testing.T) {
	srv := etcdtest.StartServer(t)
	// Two processes (clients) on one prefix, so one lock.
	holder := newStore(t, newClient(t, srv.Endpoint), "/lease")
	waiter := newStore(t, newClient(t, srv.Endpoint), "/lease")

	lease, err := holder.Lock(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume(t)
		}
	})
	select {
	case <-lease.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost still open 10 s after etcd froze (TTL 1 s)")
	}
	srv.Resume(t)
	resumed = true

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	next, err := waiter.Lock(ctx, time.Second)
	if err != nil {
		t.Fatalf("Lock after the holder's lease expired: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the lost lease: %v", err)
	}
	select {
	case <-next.Lost():
		t.Fatal("the new holder's Lost closed by the old holder's Unlock")
	default:
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClientClosed checks that closing the client ends a Store's watches
// with an error and closes its leases' Lost.
func TestClientClosed(t *testing.T) {
	endpoint := etcdtest.StartShared(t)
	client := newClient(t, endpoint)
	prefix := newPrefix()
	s := newStore(t, client, prefix)
	lease, err := s.Lock(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	watch := s.Watch(t.Context(), 0)
	client.Close()
	select {
	case <-lease.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost still open 10 s after the client closed")
	}
	want := "etcdstore: watch " + prefix + "/state: the watch channel closed (etcd client closed)"
	if u := <-watch; u.Err == nil || u.Err.Error() != want {
		t.Fatalf("watch delivered %+v after the client closed, want error %q", u, want)
	}
	wantClosed(t, watch)
}
