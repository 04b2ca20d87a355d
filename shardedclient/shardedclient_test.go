package shardedclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// table is a target that is not a cache: a database table, named.
type table struct {
	name   string
	down   bool // its calls fail
	closed int  // Close calls
}

func (t *table) Close() error { t.closed++; return nil }

var errDown = errors.New("connection refused (test)")

func tables(names ...string) []shardedclient.Shard[*table] {
	out := make([]shardedclient.Shard[*table], len(names))
	for i, n := range names {
		out[i] = shardedclient.Shard[*table]{Name: n, Client: &table{name: n}}
	}
	return out
}

// Keys are placed as the ring places them (the Jedis preset by default):
// the owner Sharded gives is the ring's, for every key.
func TestShardedPlacesAsTheRing(t *testing.T) {
	list := tables("users_0", "users_1", "users_2")
	list[2].Weight = 2
	s, err := shardedclient.New(list, shardedclient.Health[*table]{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := ring.New([]ring.Node{{Name: "users_0"}, {Name: "users_1"}, {Name: "users_2", Weight: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		key := fmt.Sprintf("user:%d", i)
		want := r.Locate(key)
		if got := s.Locate(key); got != want {
			t.Fatalf("Locate(%q) = %d; the ring says %d", key, got, want)
		}
		if got := s.GetShard(key); got != list[want].Client {
			t.Fatalf("GetShard(%q) = %s; want %s", key, got.name, list[want].Client.name)
		}
		if got := s.GetShardInfo(key); got != (shardedclient.Info{Index: want, Name: list[want].Name, Weight: max(list[want].Weight, 1)}) {
			t.Fatalf("GetShardInfo(%q) = %+v", key, got)
		}
	}
}

// Do reports each call's outcome to the shard's health: in EjectMode a
// shard that fails FailureLimit times in a row is ejected, its keys go to
// the shards the ring names, and the failure reaches the caller as a
// *ShardError naming the shard; a subscriber of Changes hears of it.
func TestShardedDoEjects(t *testing.T) {
	list := tables("a", "b", "c")
	s, err := shardedclient.New(list, shardedclient.Health[*table]{Mode: shardedclient.EjectMode, FailureLimit: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	changes, stop := s.Changes()
	defer stop()
	key := "k1"
	for s.Locate(key) != 1 {
		key += "x"
	}
	list[1].Client.down = true
	call := func(ctx context.Context, t *table) error {
		if t.down {
			return errDown
		}
		return nil
	}
	for n := range 2 {
		err := s.Do(context.Background(), key, call)
		var se *shardedclient.ShardError
		if !errors.As(err, &se) || se.Name != "b" || !errors.Is(err, errDown) {
			t.Fatalf("call %d: %v; want a *ShardError naming b around errDown", n+1, err)
		}
	}
	stats := s.Stats()
	if !stats[1].Ejected || stats[1].Ejections != 1 || stats[1].Errors != 2 || stats[1].Requests != 2 {
		t.Fatalf("b's stats after 2 failures: %+v; want ejected once, 2 errors of 2 requests", stats[1])
	}
	select {
	case <-changes:
	default:
		t.Fatal("no change heard after the ejection")
	}
	want := s.Ring().Locate(key)
	if want == 1 || s.Locate(key) != want {
		t.Fatalf("after b's ejection %q is on %d (ring: %d); want another shard", key, s.Locate(key), want)
	}
	if err := s.Do(context.Background(), key, call); err != nil {
		t.Fatalf("a call on the stand-in: %v", err)
	}
}

// SetShards closes the clients of shards that leave (once no call uses
// them), Close the others;
// SetShards after Close returns ErrClosed. Bad lists name the bad value.
func TestShardedSetShardsAndClose(t *testing.T) {
	list := tables("a", "b", "c")
	s, err := shardedclient.New(list, shardedclient.Health[*table]{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetShards(list[:2]); err != nil {
		t.Fatal(err)
	}
	if got := len(s.AllShards()); got != 2 {
		t.Fatalf("after SetShards(a, b): %d shards; want 2", got)
	}
	if err := s.Close(); err != nil { // waits for the closing of c too
		t.Fatal(err)
	}
	for _, sh := range list {
		if sh.Client.closed != 1 {
			t.Fatalf("%s closed %d times; want once (c by SetShards, a and b by Close)", sh.Name, sh.Client.closed)
		}
	}
	if err := s.SetShards(list); !errors.Is(err, shardedclient.ErrClosed) {
		t.Fatalf("SetShards after Close: %v; want ErrClosed", err)
	}
	for _, tc := range []struct {
		list []shardedclient.Shard[*table]
		want string
	}{
		{nil, "shardedclient: no shards"},
		{[]shardedclient.Shard[*table]{{Name: "a"}}, `shardedclient: shard 0 ("a"): nil client`},
		{append(tables("a"), tables("a")...), `ring: nodes 0 and 1 have the same name "a"`},
	} {
		if _, err := shardedclient.New(tc.list, shardedclient.Health[*table]{}, nil); err == nil || err.Error() != tc.want {
			t.Errorf("New(%d shards) = %v; want %q", len(tc.list), err, tc.want)
		}
	}
}
