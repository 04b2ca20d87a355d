package shardcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shardedcache/shardedcache/ring"
)

// fakeClient records whether it was closed and fails its Close when asked.
type fakeClient struct {
	name    string
	closed  bool
	failErr error
}

func (f *fakeClient) Close() error {
	f.closed = true
	return f.failErr
}

func newTest(t *testing.T, p ring.Preset) (*Sharded[*fakeClient], []*fakeClient) {
	t.Helper()
	clients := []*fakeClient{{name: "a"}, {name: "b", failErr: errors.New("boom")}, {name: "c"}}
	var shards []Shard[*fakeClient]
	for i, c := range clients {
		shards = append(shards, Shard[*fakeClient]{Name: c.name, Weight: i, Addr: "10.0.0." + fmt.Sprint(i+1) + ":6379", Client: c})
	}
	s, err := New(shards, Backend[*fakeClient]{}, p)
	if err != nil {
		t.Fatal(err)
	}
	return s, clients
}

func TestGetShardFollowsRing(t *testing.T) {
	s, clients := newTest(t, nil)
	r, err := ring.New([]ring.Node{{Name: "a"}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		key := fmt.Sprintf("key:%d", i)
		want := r.Locate(key)
		if got, err := s.GetShard(context.Background(), key); err != nil || got != clients[want] {
			t.Fatalf("GetShard(%q) = %s, ring says %d", key, got.name, want)
		}
		info := s.GetShardInfo(key)
		if info.Index != want || info.Name != clients[want].name || info.Weight != max(want, 1) {
			t.Fatalf("GetShardInfo(%q) = %+v, want index %d", key, info, want)
		}
	}
	if len(s.AllShards()) != 3 || s.AllShards()[0].Weight != 1 {
		t.Fatalf("AllShards = %+v", s.AllShards())
	}
}

func TestGroupKeys(t *testing.T) {
	s, _ := newTest(t, nil)
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	v := s.Acquire()
	defer v.Release()
	groups := v.GroupKeys(keys)
	seen := make([]bool, len(keys))
	for gi, g := range groups {
		if gi > 0 && groups[gi-1].Shard >= g.Shard {
			t.Fatal("groups are not ordered by shard")
		}
		if !slices.IsSorted(g.Positions) || len(g.Keys) != len(g.Positions) {
			t.Fatalf("group %d: positions %v out of input order", g.Shard, g.Positions)
		}
		for j, k := range g.Keys {
			p := g.Positions[j]
			if keys[p] != k || s.Locate(k) != g.Shard || seen[p] {
				t.Fatalf("group %d: key %q at position %d misplaced", g.Shard, k, p)
			}
			seen[p] = true
		}
	}
	if len(groups) != 3 || slices.Contains(seen, false) {
		t.Fatalf("%d groups; every key in exactly one group: %v", len(groups), !slices.Contains(seen, false))
	}
	if got := v.GroupKeys(nil); len(got) != 0 {
		t.Fatalf("GroupKeys(nil) = %v", got)
	}
	// The groups are carved from one array each, yet do not alias:
	// appending to one group's Keys or Positions changes no other group.
	before := make([][]string, len(groups))
	beforePos := make([][]int, len(groups))
	for i, g := range groups {
		before[i], beforePos[i] = slices.Clone(g.Keys), slices.Clone(g.Positions)
	}
	for i := range groups {
		groups[i].Keys = append(groups[i].Keys, "extra")
		groups[i].Positions = append(groups[i].Positions, -1)
	}
	for i, g := range groups {
		if !slices.Equal(g.Keys[:len(g.Keys)-1], before[i]) || !slices.Equal(g.Positions[:len(g.Positions)-1], beforePos[i]) {
			t.Errorf("group %d changed by an append to another: %v %v, was %v %v", i, g.Keys, g.Positions, before[i], beforePos[i])
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New[*fakeClient](nil, Backend[*fakeClient]{}, nil); err == nil || err.Error() != "shardedclient: no shards" {
		t.Fatalf("no shards: %v", err)
	}
	_, err := New([]Shard[*fakeClient]{{Name: "a", Client: &fakeClient{}}, {Name: "b"}}, Backend[*fakeClient]{}, nil)
	if err == nil || err.Error() != `shardedclient: shard 1 ("b"): nil client` {
		t.Fatalf("nil client: %v", err)
	}
	_, err = New([]Shard[*fakeClient]{{Name: "a", Client: &fakeClient{}}, {Name: "a", Client: &fakeClient{}}}, Backend[*fakeClient]{}, nil)
	if err == nil || !strings.Contains(err.Error(), `same name "a"`) {
		t.Fatalf("duplicate name: %v", err)
	}
	var nilIface []Shard[fmt.Stringer]
	if _, err := New(append(nilIface, Shard[fmt.Stringer]{}), Backend[fmt.Stringer]{}, nil); err == nil {
		t.Fatal("nil interface client accepted")
	}
}

func TestCloseClosesAllAndNamesFailures(t *testing.T) {
	s, clients := newTest(t, nil)
	err := s.Close()
	for _, c := range clients {
		if !c.closed {
			t.Fatalf("client %s not closed", c.name)
		}
	}
	var se *ShardError
	if !errors.As(err, &se) || se.Index != 1 || se.Name != "b" || se.Addr != "10.0.0.2:6379" {
		t.Fatalf("Close error %v, want a ShardError for shard 1", err)
	}
	var multi *MultiShardError
	if !errors.As(err, &multi) || multi.Op != "Close" || multi.Reached != 3 || len(multi.Shards) != 1 {
		t.Fatalf("Close error %#v, want a *MultiShardError for Close naming one of 3 shards", err)
	}
	if want := `shardedcache: Close: 1 of 3 shards failed: shard 1 "b" (10.0.0.2:6379): close: boom`; err.Error() != want {
		t.Fatalf("Close error %q, want %q", err, want)
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	s, _ := newTest(t, nil)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _, _ = s.GetShard(ctx, "user:42") }); n != 0 {
		t.Fatalf("GetShard allocates %v times", n)
	}
}
