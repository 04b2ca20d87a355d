package integration_test

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
)

// mcModel is the reference model of one seed's run on real memcached.
type mcModel struct {
	modelCore
	direct []*gomemcache.Client // one per server, kept across steps
	c      *shardedmc.ShardedClient
	used   map[string]bool // in a window: the keys it has moved
}

// TestReshardModelMemcache runs the reference model, -model.ops operations
// per seed, on five real memcached servers (started once, emptied for each
// seed).
func TestReshardModelMemcache(t *testing.T) {
	servers := make([]*mcServer, 5)
	for i := range servers {
		servers[i] = startRealMemcached(t)
	}
	for _, seed := range modelSeeds(t) {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			runMemcacheModel(t, servers, seed, *modelOps)
		})
	}
}

func runMemcacheModel(t *testing.T, servers []*mcServer, seed int64, ops int) {
	direct := make([]*gomemcache.Client, len(servers))
	for i, s := range servers {
		direct[i] = gomemcache.New(s.addr)
		t.Cleanup(func() { _ = direct[i].Close() })
		if err := direct[i].DeleteAll(); err != nil {
			t.Fatalf("flush_all on %s: %v", s.addr, err)
		}
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	m := &mcModel{modelCore: newModelCore(t, seed, 11, addrs), direct: direct}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: m.opts(m.list)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	m.c = c
	observe(&m.modelCore, c)
	m.check()
	m.steps(ops, m.op, m.windowOp, m.check, m.end)
}

// opts returns the ShardOptions of list.
func (m *mcModel) opts(list []listEntry) []shardedmc.ShardOptions {
	out := make([]shardedmc.ShardOptions, len(list))
	for i, e := range list {
		out[i] = shardedmc.ShardOptions{Name: e.name, Weight: e.weight, Addr: m.addrs[e.server]}
	}
	return out
}

// use is the model of a call's first step on key: inside a window, the
// first use of a key whose owner changed moves it (the old owner's value
// overwrites the new owner's, or its absence deletes it). It returns the
// key's owner.
func (m *mcModel) use(key string) int {
	to, from := m.placed(key)
	if from != to && !m.used[key] {
		m.used[key] = true
		if v, ok := m.store[from][key]; ok {
			m.store[to][key] = v
			delete(m.store[from], key)
		} else {
			delete(m.store[to], key)
		}
	}
	return to
}

// op runs one random operation outside a window.
func (m *mcModel) op() {
	kind := weighted(m.rng, []string{"set", "add", "delete", "get", "append", "setshards", "begin"},
		[]int{300, 60, 100, 130, 50, 70, 60})
	m.counts[kind]++
	switch kind {
	case "setshards":
		m.setShards()
	case "begin":
		m.begin()
	default:
		m.call(kind, m.key())
	}
}

// windowOp runs one random operation inside a window.
func (m *mcModel) windowOp() {
	kind := weighted(m.rng, []string{"set", "add", "delete", "get", "append", "getmulti", "getshard", "misuse", "end"},
		[]int{300, 60, 100, 150, 50, 40, 60, 30, 50})
	m.counts["window-"+kind]++
	switch kind {
	case "getmulti":
		keys := make([]string, 1+m.rng.IntN(8))
		for i := range keys {
			keys[i] = m.key()
		}
		m.getMulti(keys)
	case "getshard":
		m.getShard(m.key())
	case "misuse":
		m.misuse()
	case "end":
		m.end()
	default:
		m.call(kind, m.key())
	}
}

// call runs a call on key through the client and applies it to the model.
func (m *mcModel) call(kind, key string) {
	o := m.use(key)
	old, had := m.store[o][key]
	switch kind {
	case "set":
		v := "v" + strconv.Itoa(m.tr.step)
		m.tr.logf("Set %s %s (owner %d)", key, v, o)
		if err := m.c.Set(&gomemcache.Item{Key: key, Value: []byte(v)}); err != nil {
			m.fatalf("Set %s: %v", key, err)
		}
		m.store[o][key] = v
	case "add":
		v := "add" + strconv.Itoa(m.tr.step)
		m.tr.logf("Add %s %s (owner %d)", key, v, o)
		err := m.c.Add(&gomemcache.Item{Key: key, Value: []byte(v)})
		if had && !errors.Is(err, gomemcache.ErrNotStored) || !had && err != nil {
			m.fatalf("Add %s: %v; the owner holds %s", key, err, present(old, had))
		}
		if !had {
			m.store[o][key] = v
		}
	case "delete":
		m.tr.logf("Delete %s (owner %d)", key, o)
		err := m.c.Delete(key)
		if had && err != nil || !had && !errors.Is(err, gomemcache.ErrCacheMiss) {
			m.fatalf("Delete %s: %v; the owner holds %s", key, err, present(old, had))
		}
		delete(m.store[o], key)
	case "get":
		m.tr.logf("Get %s (owner %d)", key, o)
		v, ok, err := mcValue(m.c.Get(key))
		m.expectValue("Get", key, v, ok, err, old, had)
	case "append":
		s := "+" + strconv.Itoa(m.tr.step)
		m.tr.logf("Append %s %s (owner %d)", key, s, o)
		err := m.c.Append(&gomemcache.Item{Key: key, Value: []byte(s)})
		if had && err != nil || !had && !errors.Is(err, gomemcache.ErrNotStored) {
			m.fatalf("Append %s: %v; the owner holds %s", key, err, present(old, had))
		}
		if had {
			m.store[o][key] = old + s
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
		if v, ok := m.store[m.use(k)][k]; ok {
			want[k] = v
		}
	}
	what := fmt.Sprint(keys)
	if len(keys) == len(m.keys) {
		what = "of every key"
	}
	m.tr.logf("GetMulti %s", what)
	items, err := m.c.GetMulti(keys)
	if err != nil {
		m.fatalf("GetMulti %s: %v", what, err)
	}
	got := map[string]string{}
	for k, it := range items {
		got[k] = string(it.Value)
	}
	if !maps.Equal(got, want) {
		m.fatalf("GetMulti %s:%s", what, diffStores(got, want))
	}
}

// getShard uses the raw client GetShard hands out: the key's owner, the key
// moved there first.
func (m *mcModel) getShard(key string) {
	o := m.use(key)
	cl := m.c.GetShard(key)
	m.modelCore.getShard(key, o, rawShard{
		owners: cl == m.c.Shards()[m.c.GetShardInfo(key).Index].Client,
		get:    func() (string, bool, error) { return mcValue(cl.Get(key)) },
		set:    func(v string) error { return cl.Set(&gomemcache.Item{Key: key, Value: []byte(v)}) },
	})
}

// setShards is a cold SetShards (see modelCore.setShards).
func (m *mcModel) setShards() {
	m.modelCore.setShards(func(next []listEntry) error { return m.c.SetShards(m.opts(next)) })
}

// begin opens a resharding window; nothing moves yet.
func (m *mcModel) begin() {
	m.modelCore.begin(func(next []listEntry) error {
		return m.c.BeginResharding(m.opts(next), shardedmc.ReshardOptions{})
	})
	m.used = map[string]bool{}
}

// misuse checks that a shard list change inside a window is refused,
// changing nothing.
func (m *mcModel) misuse() {
	if m.rng.IntN(2) == 0 {
		m.refusedInWindow("SetShards", func(next []listEntry) error { return m.c.SetShards(m.opts(next)) })
		return
	}
	m.refusedInWindow("BeginResharding", func(next []listEntry) error {
		return m.c.BeginResharding(m.opts(next), shardedmc.ReshardOptions{})
	})
}

// end ends the window: the keys it did not move stay on their old owner.
func (m *mcModel) end() {
	m.tr.logf("EndResharding (%d keys moved)", len(m.used))
	if err := m.c.EndResharding(); err != nil {
		m.fatalf("EndResharding: %v", err)
	}
	m.used = nil
	m.closeWindow()
}

// mcContent returns the keys of keys that the server d is connected to
// holds, with their values: one multi-get. (onServers does the same over
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
	if !m.window || m.rng.IntN(8) == 0 {
		m.getMulti(m.keys)
	}
	m.checkServers(func(i int) (map[string]string, error) { return mcContent(m.direct[i], m.keys) })
}
