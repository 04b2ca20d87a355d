package memcache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
	"github.com/shardedcache/shardedcache/internal/memcachedtest"
	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

// fleetClient returns a client over list, closed when t ends.
func fleetClient(t *testing.T, list []fleet.Shard) *memcache.ShardedClient {
	t.Helper()
	opts := make([]memcache.ShardOptions, len(list))
	for i, sh := range list {
		opts[i] = memcache.ShardOptions{Name: sh.Name, Addr: sh.Addr}
	}
	c, err := memcache.NewShardedClient(&memcache.ShardedOptions{Shards: opts, Timeout: 2 * time.Second, MaxIdleConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverContent reads every item of the server at addr, tombstones
// included, without the client.
func serverContent(t *testing.T, addr string) map[string]mcmeta.Item {
	t.Helper()
	ctx := context.Background()
	var conns [2]*mcmeta.Conn
	for i := range conns {
		var err error
		if conns[i], err = mcmeta.DialTCP(ctx, addr, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	out := map[string]mcmeta.Item{}
	if err := conns[0].Keys(ctx, func(keys []string) error {
		items, err := conns[1].Get(ctx, keys)
		for _, it := range items {
			out[it.Key] = it
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFleetReshardInProcess: two members and a driver in one process, on
// real memcached servers, reshard 3 -> 4 while one member writes and
// deletes and the other reads keys that move. Afterwards every key has its
// last value, flags and TTL, deleted keys are gone (tombstones only on
// their owner), and no server holds a key it does not own.
func TestFleetReshardInProcess(t *testing.T) {
	addrs := make([]string, 4)
	for i := range addrs {
		addrs[i] = memcachedtest.Start(t)
	}
	list := []fleet.Shard{{Name: "a", Addr: addrs[0]}, {Name: "b", Addr: addrs[1]}, {Name: "c", Addr: addrs[2]}}
	target := append(list[:3:3], fleet.Shard{Name: "d", Addr: addrs[3]})
	ctx := context.Background()
	store := &fleet.MemStore{}
	writer, reader := fleetClient(t, list), fleetClient(t, list)
	var members []*fleet.Member
	for _, c := range []*memcache.ShardedClient{writer, reader} {
		m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	const n = 400
	key := func(i int) string { return fmt.Sprintf("key:%d", i) }
	want := map[string]string{}
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		if err := writer.Set(&gomemcache.Item{Key: key(i), Value: []byte(v), Flags: uint32(i), Expiration: 600}); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = v
	}
	done := make(chan error, 1)
	go func() {
		_, err := fleet.Reshard(ctx, store, fleetClient(t, target).FleetBackend(), target, fleet.DriverOptions{})
		done <- err
	}()
	for {
		if st, _, _ := store.Load(ctx); st.Step == fleet.Moving {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := members[0].WaitEpoch(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := members[1].WaitEpoch(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// While the migration runs: rewrite a tenth, delete a tenth, read all.
	for i := 0; i < n; i += 10 {
		v := fmt.Sprintf("w%d", i)
		if err := writer.Set(&gomemcache.Item{Key: key(i), Value: []byte(v), Flags: uint32(i), Expiration: 600}); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = v
		if err := writer.Delete(key(i + 1)); err != nil {
			t.Fatalf("Delete(%s) in Moving: %v", key(i+1), err)
		}
		delete(want, key(i+1))
		if err := writer.Delete(key(i + 1)); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Fatalf("Delete(%s) again: %v, want ErrCacheMiss", key(i+1), err)
		}
	}
	check := func(when string, c *memcache.ShardedClient) {
		t.Helper()
		for i := range n {
			it, err := c.Get(key(i))
			v, ok := want[key(i)]
			switch {
			case !ok && !errors.Is(err, gomemcache.ErrCacheMiss):
				t.Fatalf("%s: Get(%s) of a deleted key = %v, %v", when, key(i), it, err)
			case ok && (err != nil || string(it.Value) != v || it.Flags != uint32(i)):
				t.Fatalf("%s: Get(%s) = %+v, %v; want %q, flags %d", when, key(i), it, err, v, i)
			}
		}
	}
	check("during the migration", reader)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if err := m.WaitEpoch(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}
	check("after", reader)
	check("after, the writer", writer)

	nodes := make([]ring.Node, len(target))
	for i, sh := range target {
		nodes[i] = ring.Node{Name: sh.Name, Addr: sh.Addr}
	}
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	tombstones := 0
	for _, addr := range addrs {
		for k, it := range serverContent(t, addr) {
			if owner := target[r.Locate(k)]; owner.Addr != addr {
				t.Errorf("%s on %s, owned by %s", k, addr, owner.Name)
			}
			if it.Flags == memcache.TombstoneFlags && string(it.Value) == memcache.TombstoneValue {
				tombstones++
				continue
			}
			if v, ok := want[k]; !ok || string(it.Value) != v || it.TTL < 500 {
				t.Errorf("%s holds %q (TTL %d s), want %q (TTL about 600 s)", k, it.Value, it.TTL, v)
			}
		}
	}
	t.Logf("%d tombstones on the owners of deleted moving keys", tombstones)
	for _, m := range members {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
	if got, _ := store.Members(ctx); len(got) != 0 {
		t.Errorf("members after Close: %v", got)
	}
}

// heldMigration is a driver's backend whose migration waits for release,
// so that a test acts while the fleet is in Moving.
type heldMigration struct {
	fleet.Unfenced
	release chan struct{}
}

func (h heldMigration) Migrate(ctx context.Context, st fleet.State, p func(fleet.Progress)) error {
	<-h.release
	return h.Unfenced.Migrate(ctx, st, p)
}

// TestFleetLateAddLoses: a move in another process that read a key's old
// owner and adds the value to the new owner late (after a delete or a
// write of the key there) changes nothing: the delete's tombstone and the
// write's value hold the key, and the add stores only over nothing.
func TestFleetLateAddLoses(t *testing.T) {
	list := []fleet.Shard{{Name: "a", Addr: memcachedtest.Start(t)}}
	target := append(list[:1:1], fleet.Shard{Name: "b", Addr: memcachedtest.Start(t)})
	ctx := context.Background()
	store := &fleet.MemStore{}
	c := fleetClient(t, list)
	m, err := c.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	nodes := []ring.Node{{Name: "a", Addr: target[0].Addr}, {Name: "b", Addr: target[1].Addr}}
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	var moving []string // keys that move from a to b
	for i := 0; len(moving) < 2; i++ {
		if k := fmt.Sprintf("k%d", i); r.Locate(k) == 1 {
			moving = append(moving, k)
		}
	}
	deleted, rewritten := moving[0], moving[1]
	for _, k := range moving {
		if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("old"), Flags: 3}); err != nil {
			t.Fatal(err)
		}
	}
	hold := heldMigration{fleetClient(t, target).FleetBackend().(fleet.Unfenced), make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := fleet.Reshard(ctx, store, hold, target, fleet.DriverOptions{})
		done <- err
	}()
	if err := m.WaitEpoch(ctx, 3); err != nil { // Moving
		t.Fatal(err)
	}
	// The late mover reads both keys on the old owner now...
	dial := func(addr string) *mcmeta.Conn {
		conn, err := mcmeta.DialTCP(ctx, addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	src, dst := dial(list[0].Addr), dial(target[1].Addr)
	read, err := src.Get(ctx, moving)
	if err != nil || len(read) != 2 {
		t.Fatalf("the late mover's read: %+v, %v", read, err)
	}
	// ...this process deletes one and rewrites the other...
	if err := c.Delete(deleted); err != nil {
		t.Fatalf("Delete(%s) of a value in Moving: %v", deleted, err)
	}
	if err := c.Set(&gomemcache.Item{Key: rewritten, Value: []byte("new"), Flags: 4}); err != nil {
		t.Fatal(err)
	}
	// ...and the late mover's adds come.
	for _, it := range read {
		if stored, _, err := dst.Add(ctx, mcmeta.Item{Key: it.Key, Value: it.Value, Flags: it.Flags}); err != nil || stored {
			t.Errorf("the late add of %s = stored %v, %v; want not stored", it.Key, stored, err)
		}
		if outcome, err := src.DeleteIf(ctx, it.Key, it.CAS); err != nil || outcome != "absent" {
			t.Errorf("the late mover's delete of %s on the old owner = %q, %v; want absent (moved by this process)", it.Key, outcome, err)
		}
	}
	wantState := func(when string) {
		t.Helper()
		if it, err := c.Get(deleted); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("%s: Get(%s) = %+v, %v; want a miss", when, deleted, it, err)
		}
		if it, err := c.Get(rewritten); err != nil || string(it.Value) != "new" || it.Flags != 4 {
			t.Errorf("%s: Get(%s) = %+v, %v; want new, flags 4", when, rewritten, it, err)
		}
		if items, err := c.GetMulti(moving); err != nil || len(items) != 1 || string(items[rewritten].Value) != "new" {
			t.Errorf("%s: GetMulti = %v, %v; want only %s", when, items, err, rewritten)
		}
	}
	wantState("in Moving")
	close(hold.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := m.WaitEpoch(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wantState("after")
}
