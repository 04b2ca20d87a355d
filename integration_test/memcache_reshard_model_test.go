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
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// mcModel is the reference model of one seed's run on real memcached.
type mcModel struct {
	t       *testing.T
	rng     *rand.Rand
	tr      trail
	servers []*mcServer
	direct  []*gomemcache.Client // one per server, kept across steps
	c       *shardedmc.ShardedClient
	keys    []string
	list    []listEntry         // the client's shard list
	store   []map[string]string // per server: key -> value

	// In a resharding window: the list before it, every key's owner before
	// and after BeginResharding, and the keys the window has moved.
	window   bool
	prevList []listEntry
	from, to map[string]int
	used     map[string]bool

	counts map[string]int
}

func (m *mcModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), &m.tr)
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
	m := &mcModel{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 11)), tr: trail{seed: seed},
		servers: servers, direct: direct, keys: modelKeys(200),
		list:   []listEntry{{server: 0, name: "a"}, {server: 1, name: "b"}, {server: 2, name: "c"}},
		counts: map[string]int{}}
	for range servers {
		m.store = append(m.store, map[string]string{})
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: m.opts(m.list)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	m.c = c
	m.check()
	start := time.Now()
	for m.tr.step = 0; m.tr.step < ops; m.tr.step++ {
		if m.window {
			m.windowOp()
		} else {
			m.op()
		}
		m.check()
	}
	if m.window {
		m.tr.step = ops
		m.end()
		m.check()
	}
	t.Logf("seed %d: %d operations in %v: %v", seed, ops, time.Since(start).Round(time.Millisecond), m.counts)
}

// opts returns the ShardOptions of list.
func (m *mcModel) opts(list []listEntry) []shardedmc.ShardOptions {
	out := make([]shardedmc.ShardOptions, len(list))
	for i, e := range list {
		out[i] = shardedmc.ShardOptions{Name: e.name, Weight: e.weight, Addr: m.servers[e.server].addr}
	}
	return out
}

// owner returns the server the client places key on now.
func (m *mcModel) owner(key string) int {
	addr := m.c.Shards()[m.c.GetShardInfo(key).Index].Addr
	i := slices.IndexFunc(m.servers, func(s *mcServer) bool { return s.addr == addr })
	if i < 0 {
		m.fatalf("%s placed on unknown address %s", key, addr)
	}
	return i
}

// use is the model of a call's first step on key: inside a window, the
// first use of a key whose owner changed moves it (the old owner's value
// overwrites the new owner's, or its absence deletes it). It returns the
// key's owner.
func (m *mcModel) use(key string) int {
	to := m.owner(key)
	if !m.window {
		return to
	}
	if to != m.to[key] {
		m.fatalf("%s is placed on server %d inside the window, which placed it on %d at BeginResharding", key, to, m.to[key])
	}
	if from := m.from[key]; from != to && !m.used[key] {
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

func (m *mcModel) key() string { return m.keys[m.rng.IntN(len(m.keys))] }

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
		it, err := m.c.Get(key)
		m.expectItem(key, it, err, old, had)
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

// expectItem checks a Get's result against the model's value.
func (m *mcModel) expectItem(key string, it *gomemcache.Item, err error, want string, had bool) {
	m.t.Helper()
	switch {
	case !had && !errors.Is(err, gomemcache.ErrCacheMiss):
		m.fatalf("Get %s = %v, %v; want a miss (no value on its owner)", key, it, err)
	case had && (err != nil || string(it.Value) != want):
		m.fatalf("Get %s = %v, %v; want %q", key, it, err, want)
	}
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
	old, had := m.store[o][key]
	cl := m.c.GetShard(key)
	if want := m.c.Shards()[m.c.GetShardInfo(key).Index].Client; cl != want {
		m.fatalf("GetShard(%s) is not the client of its owner %d", key, o)
	}
	if m.rng.IntN(2) == 0 {
		m.tr.logf("GetShard(%s).Get (owner %d)", key, o)
		it, err := cl.Get(key)
		m.expectItem(key, it, err, old, had)
		return
	}
	v := "raw" + strconv.Itoa(m.tr.step)
	m.tr.logf("GetShard(%s).Set %s (owner %d)", key, v, o)
	if err := cl.Set(&gomemcache.Item{Key: key, Value: []byte(v)}); err != nil {
		m.fatalf("GetShard(%s).Set: %v", key, err)
	}
	m.store[o][key] = v
}

// setShards is a cold SetShards: no data moves. A list that renames a
// server that stays is refused.
func (m *mcModel) setShards() {
	next := randomList(m.rng, len(m.servers), m.list, m.rng.IntN(2) == 0)
	m.tr.logf("SetShards %v (from %v)", next, m.list)
	err := m.c.SetShards(m.opts(next))
	if renamesStaying(m.list, next) {
		var shift *shardedclient.PlacementShiftError
		if !errors.As(err, &shift) {
			m.fatalf("SetShards %v renames a server of %v: %v, want a *PlacementShiftError", next, m.list, err)
		}
		m.counts["setshards-refused"]++
		m.checkList()
		return
	}
	if err != nil {
		m.fatalf("SetShards %v: %v", next, err)
	}
	m.list = next
	m.checkList()
}

// begin opens a resharding window; nothing moves yet.
func (m *mcModel) begin() {
	next := randomList(m.rng, len(m.servers), m.list, m.rng.IntN(4) == 0)
	from := map[string]int{}
	for _, k := range m.keys {
		from[k] = m.owner(k)
	}
	m.tr.logf("BeginResharding %v (from %v)", next, m.list)
	if err := m.c.BeginResharding(m.opts(next), shardedmc.ReshardOptions{}); err != nil {
		m.fatalf("BeginResharding %v: %v", next, err)
	}
	m.window, m.prevList, m.list, m.from, m.to, m.used = true, m.list, next, from, map[string]int{}, map[string]bool{}
	moving := 0
	for _, k := range m.keys {
		if m.to[k] = m.owner(k); m.to[k] != from[k] {
			moving++
		}
	}
	m.tr.logf("  %d of %d keys change owner", moving, len(m.keys))
	m.checkList()
}

// misuse checks that a shard list change inside a window is refused,
// changing nothing.
func (m *mcModel) misuse() {
	var err error
	if m.rng.IntN(2) == 0 {
		m.tr.logf("SetShards in the window")
		err = m.c.SetShards(m.opts(randomList(m.rng, len(m.servers), m.list, true)))
	} else {
		m.tr.logf("BeginResharding in the window")
		err = m.c.BeginResharding(m.opts(randomList(m.rng, len(m.servers), m.list, false)), shardedmc.ReshardOptions{})
	}
	if !errors.Is(err, shardedclient.ErrMoveInProgress) {
		m.fatalf("a shard list change in a window: %v, want ErrMoveInProgress", err)
	}
	m.checkList()
}

// end ends the window: the keys it did not move stay on their old owner.
func (m *mcModel) end() {
	m.tr.logf("EndResharding (%d keys moved)", len(m.used))
	if err := m.c.EndResharding(); err != nil {
		m.fatalf("EndResharding: %v", err)
	}
	m.window, m.prevList, m.from, m.to, m.used = false, nil, nil, nil, nil
	m.checkList()
}

// checkList checks that the client's shard list is the model's (the shards
// a window removes follow it).
func (m *mcModel) checkList() {
	got := m.c.Shards()
	want := slices.Clone(m.list)
	for _, e := range m.prevList {
		if !slices.ContainsFunc(want, func(n listEntry) bool { return n.server == e.server }) {
			want = append(want, e)
		}
	}
	if len(got) != len(want) {
		m.fatalf("client has %d shards, want %d (%v)", len(got), len(want), want)
	}
	for i, e := range want {
		if got[i].Addr != m.servers[e.server].addr || got[i].Name != e.name {
			m.fatalf("client's shard %d is %q at %s, want %v", i, got[i].Name, got[i].Addr, e)
		}
	}
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
	on := make([]map[string]string, len(m.direct))
	errs := make([]error, len(m.direct))
	var wg sync.WaitGroup
	for i, d := range m.direct {
		wg.Go(func() { on[i], errs[i] = mcContent(d, m.keys) })
	}
	wg.Wait()
	for i := range m.servers {
		if errs[i] != nil {
			m.fatalf("reading server %d: %v", i, errs[i])
		}
		if !maps.Equal(on[i], m.store[i]) {
			m.fatalf("server %d diverges from the model:%s", i, diffStores(on[i], m.store[i]))
		}
	}
}
