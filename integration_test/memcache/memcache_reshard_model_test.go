package memcache_test

// The randomized reference-model test of memcache resharding (issue 10), on
// five real memcached servers: random writes, deletes, reads, cold
// SetShards, BeginResharding, calls inside the window and EndResharding,
// against a per-server model of the data. After every operation each
// server's content (every key of the keyspace, read directly) must equal
// the model's, and the client's reads the model's value on the key's
// owner. The rule modelled: inside a window the first use of a key whose
// owner changed moves it; the old owner's value is the truth (it
// overwrites a stale copy on the new owner, and its absence deletes one),
// and the window remembers the key, so that it moves once. Seeds as in
// TestReshardModelRedis.

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// mcModel is the reference model of one seed's run on real memcached.
type mcModel struct {
	fixtures.ModelCore
	direct []*gomemcache.Client // one per server, kept across steps
	c      *shardedmc.ShardedClient
	used   map[string]bool // in a window: the keys it has moved
}

// TestReshardModelMemcache runs the reference model, -model.ops operations
// per seed, on five real memcached servers (started once, emptied for each
// seed).
func TestReshardModelMemcache(t *testing.T) {
	servers := make([]*fixtures.MCServer, 5)
	for i := range servers {
		servers[i] = fixtures.StartRealMemcached(t)
	}
	for _, seed := range fixtures.ModelSeeds(t) {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			runMemcacheModel(t, servers, seed, *fixtures.ModelOps)
		})
	}
}

func runMemcacheModel(t *testing.T, servers []*fixtures.MCServer, seed int64, ops int) {
	direct := make([]*gomemcache.Client, len(servers))
	for i, s := range servers {
		direct[i] = gomemcache.New(s.Addr)
		t.Cleanup(func() { _ = direct[i].Close() })
		if err := direct[i].DeleteAll(); err != nil {
			t.Fatalf("flush_all on %s: %v", s.Addr, err)
		}
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	m := &mcModel{ModelCore: fixtures.NewModelCore(t, seed, 11, addrs), direct: direct}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: m.opts(m.List)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	m.c = c
	fixtures.Observe(&m.ModelCore, c)
	m.check()
	m.Steps(ops, m.op, m.windowOp, m.check, m.end)
}

// opts returns the ShardOptions of list.
func (m *mcModel) opts(list []fixtures.ListEntry) []shardedmc.ShardOptions {
	out := make([]shardedmc.ShardOptions, len(list))
	for i, e := range list {
		out[i] = shardedmc.ShardOptions{Name: e.Name, Weight: e.Weight, Addr: m.Addrs[e.Server]}
	}
	return out
}

// use is the model of a call's first step on key: inside a window, the
// first use of a key whose owner changed moves it (the old owner's value
// overwrites the new owner's, or its absence deletes it). It returns the
// key's owner.
func (m *mcModel) use(key string) int {
	to, from := m.Placed(key)
	if from != to && !m.used[key] {
		m.used[key] = true
		if v, ok := m.Store[from][key]; ok {
			m.Store[to][key] = v
			delete(m.Store[from], key)
		} else {
			delete(m.Store[to], key)
		}
	}
	return to
}

// op runs one random operation outside a window.
func (m *mcModel) op() {
	kind := fixtures.Weighted(m.Rng, []string{"set", "add", "delete", "get", "append", "setshards", "begin"},
		[]int{300, 60, 100, 130, 50, 70, 60})
	m.Counts[kind]++
	switch kind {
	case "setshards":
		m.setShards()
	case "begin":
		m.begin()
	default:
		m.call(kind, m.Key())
	}
}

// windowOp runs one random operation inside a window.
func (m *mcModel) windowOp() {
	kind := fixtures.Weighted(m.Rng, []string{"set", "add", "delete", "get", "append", "getmulti", "getshard", "misuse", "end"},
		[]int{300, 60, 100, 150, 50, 40, 60, 30, 50})
	m.Counts["window-"+kind]++
	switch kind {
	case "getmulti":
		keys := make([]string, 1+m.Rng.IntN(8))
		for i := range keys {
			keys[i] = m.Key()
		}
		m.getMulti(keys)
	case "getshard":
		m.getShard(m.Key())
	case "misuse":
		m.misuse()
	case "end":
		m.end()
	default:
		m.call(kind, m.Key())
	}
}

// call runs a call on key through the client and applies it to the model.
func (m *mcModel) call(kind, key string) {
	o := m.use(key)
	old, had := m.Store[o][key]
	switch kind {
	case "set":
		v := "v" + strconv.Itoa(m.Tr.Step)
		m.Tr.Logf("Set %s %s (owner %d)", key, v, o)
		if err := m.c.Set(&gomemcache.Item{Key: key, Value: []byte(v)}); err != nil {
			m.Fatalf("Set %s: %v", key, err)
		}
		m.Store[o][key] = v
	case "add":
		v := "add" + strconv.Itoa(m.Tr.Step)
		m.Tr.Logf("Add %s %s (owner %d)", key, v, o)
		err := m.c.Add(&gomemcache.Item{Key: key, Value: []byte(v)})
		if had && !errors.Is(err, gomemcache.ErrNotStored) || !had && err != nil {
			m.Fatalf("Add %s: %v; the owner holds %s", key, err, fixtures.Present(old, had))
		}
		if !had {
			m.Store[o][key] = v
		}
	case "delete":
		m.Tr.Logf("Delete %s (owner %d)", key, o)
		err := m.c.Delete(key)
		if had && err != nil || !had && !errors.Is(err, gomemcache.ErrCacheMiss) {
			m.Fatalf("Delete %s: %v; the owner holds %s", key, err, fixtures.Present(old, had))
		}
		delete(m.Store[o], key)
	case "get":
		m.Tr.Logf("Get %s (owner %d)", key, o)
		v, ok, err := mcValue(m.c.Get(key))
		m.ExpectValue("Get", key, v, ok, err, old, had)
	case "append":
		s := "+" + strconv.Itoa(m.Tr.Step)
		m.Tr.Logf("Append %s %s (owner %d)", key, s, o)
		err := m.c.Append(&gomemcache.Item{Key: key, Value: []byte(s)})
		if had && err != nil || !had && !errors.Is(err, gomemcache.ErrNotStored) {
			m.Fatalf("Append %s: %v; the owner holds %s", key, err, fixtures.Present(old, had))
		}
		if had {
			m.Store[o][key] = old + s
		}
	default:
		panic(kind)
	}
}

// mcValue returns a Get's value, whether there was one, and any error but
// a cache miss.
func mcValue(it *gomemcache.Item, err error) (string, bool, error) {
	if errors.Is(err, gomemcache.ErrCacheMiss) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(it.Value), true, nil
}

// getMulti reads keys with one GetMulti; inside a window it moves those
// not yet moved, batched per old owner.
func (m *mcModel) getMulti(keys []string) {
	want := map[string]string{}
	for _, k := range keys {
		if v, ok := m.Store[m.use(k)][k]; ok {
			want[k] = v
		}
	}
	what := fmt.Sprint(keys)
	if len(keys) == len(m.Keys) {
		what = "of every key"
	}
	m.Tr.Logf("GetMulti %s", what)
	items, err := m.c.GetMulti(keys)
	if err != nil {
		m.Fatalf("GetMulti %s: %v", what, err)
	}
	got := map[string]string{}
	for k, it := range items {
		got[k] = string(it.Value)
	}
	if !maps.Equal(got, want) {
		m.Fatalf("GetMulti %s:%s", what, fixtures.DiffStores(got, want))
	}
}

// GetShard uses the raw client GetShard hands out: the key's owner, the key
// moved there first.
func (m *mcModel) getShard(key string) {
	o := m.use(key)
	cl := m.c.GetShard(key)
	m.ModelCore.GetShard(key, o, fixtures.RawShard{
		Owners: cl == m.c.Shards()[m.c.GetShardInfo(key).Index].Client,
		Get:    func() (string, bool, error) { return mcValue(cl.Get(key)) },
		Set:    func(v string) error { return cl.Set(&gomemcache.Item{Key: key, Value: []byte(v)}) },
	})
}

// SetShards is a cold SetShards (see ModelCore.SetShards).
func (m *mcModel) setShards() {
	m.ModelCore.SetShards(func(next []fixtures.ListEntry) error { return m.c.SetShards(m.opts(next)) })
}

// begin opens a resharding window; nothing moves yet.
func (m *mcModel) begin() {
	m.ModelCore.Begin(func(next []fixtures.ListEntry) error {
		return m.c.BeginResharding(m.opts(next), shardedmc.ReshardOptions{})
	})
	m.used = map[string]bool{}
}

// misuse checks that a shard list change inside a window is refused,
// changing nothing.
func (m *mcModel) misuse() {
	if m.Rng.IntN(2) == 0 {
		m.RefusedInWindow("SetShards", func(next []fixtures.ListEntry) error { return m.c.SetShards(m.opts(next)) })
		return
	}
	m.RefusedInWindow("BeginResharding", func(next []fixtures.ListEntry) error {
		return m.c.BeginResharding(m.opts(next), shardedmc.ReshardOptions{})
	})
}

// end ends the window: the keys it did not move stay on their old owner.
func (m *mcModel) end() {
	m.Tr.Logf("EndResharding (%d keys moved)", len(m.used))
	if err := m.c.EndResharding(); err != nil {
		m.Fatalf("EndResharding: %v", err)
	}
	m.used = nil
	m.CloseWindow()
}

// mcContent returns the keys of keys that the server d is connected to
// holds, with their values: one multi-get. (OnServers does the same over
// new connections, one server after the other; the model reads every
// server after each of thousands of operations.)
func mcContent(d *gomemcache.Client, keys []string) (map[string]string, error) {
	items, err := d.GetMulti(keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for k, it := range items {
		out[k] = string(it.Value)
	}
	return out, nil
}

// check compares every server's content with the model, and what the
// client reads (one GetMulti of every key) with the model's value on each
// key's owner; inside a window the reads are done one step in eight (a read
// moves the key).
func (m *mcModel) check() {
	if !m.Window || m.Rng.IntN(8) == 0 {
		m.getMulti(m.Keys)
	}
	m.CheckServers(func(i int) (map[string]string, error) { return mcContent(m.direct[i], m.Keys) })
}
