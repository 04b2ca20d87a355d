package integration_test

// What the reference-model tests of resharding (reshard_model_test.go on
// redis-server, memcache_reshard_model_test.go on memcached) share: seeds,
// keyspace, random shard lists, the trail of operations, and modelCore,
// the model of a shard list, of every server's data and of a window's
// bookkeeping, with the steps that are the same on both backends.

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/shardedclient"
)

var modelOps = flag.Int("model.ops", 2000, "operations per seed of the resharding reference-model tests")

// longRuns is set by SHARDEDCACHE_LONG=1: the exhaustive tests then run
// every seed (scaled), keeping the README's test command within about ten
// minutes on 2 cores otherwise.
var longRuns = os.Getenv("SHARDEDCACHE_LONG") == "1"

// scaled returns full under SHARDEDCACHE_LONG=1, else short.
func scaled(short, full int) int {
	if longRuns {
		return full
	}
	return short
}

// modelSeeds returns the seeds of the reference-model tests: -seed, else
// $RESHARD_SEED, else 1, 2 and the clock's (clockSeed).
func modelSeeds(t *testing.T) []int64 {
	t.Helper()
	if *seedFlag != 0 {
		return []int64{*seedFlag}
	}
	if s := os.Getenv("RESHARD_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("RESHARD_SEED=%q: %v", s, err)
		}
		return []int64{n}
	}
	return []int64{1, 2, clockSeed}
}

// modelKeys is the fixed keyspace of the reference-model tests.
func modelKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("mk:%03d", i)
	}
	return keys
}

// listEntry is one shard of a shard list the model builds: a server (its
// index among the test's servers), the shard's name and weight.
type listEntry struct {
	server int
	name   string
	weight int
}

func (e listEntry) String() string {
	if e.weight != 0 {
		return fmt.Sprintf("%s@%d*%d", e.name, e.server, e.weight)
	}
	return fmt.Sprintf("%s@%d", e.name, e.server)
}

var modelNames = []string{"a", "b", "c", "d", "e", "f", "g"}

// randomList returns a shard list over nServers servers: a random non-empty
// subset, in random order, named by a random permutation of modelNames (so
// that a name sometimes moves to another server: a move of its keys). With
// keep, the servers of cur keep their name and weight: a cold change that
// SetShards accepts.
func randomList(rng *rand.Rand, nServers int, cur []listEntry, keep bool) []listEntry {
	n := 3 + rng.IntN(nServers-2)
	if rng.IntN(5) == 0 {
		n = 1 + rng.IntN(2)
	}
	names := slices.Clone(modelNames)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var out []listEntry
	for _, s := range rng.Perm(nServers)[:n] {
		e := listEntry{server: s}
		if rng.IntN(6) == 0 {
			e.weight = 2
		}
		if i := slices.IndexFunc(cur, func(c listEntry) bool { return c.server == s }); keep && i >= 0 {
			e = cur[i]
			names = slices.DeleteFunc(names, func(n string) bool { return n == e.name })
		}
		out = append(out, e)
	}
	for i := range out {
		if out[i].name == "" {
			out[i].name, names = names[0], names[1:]
		}
	}
	return out
}

// renamesStaying reports whether next gives a server of cur another name: a
// cold SetShards refuses that (its keys would move), with a
// *shardedclient.PlacementShiftError.
func renamesStaying(cur, next []listEntry) bool {
	for _, n := range next {
		if i := slices.IndexFunc(cur, func(c listEntry) bool { return c.server == n.server }); i >= 0 && cur[i].name != n.name {
			return true
		}
	}
	return false
}

// weighted picks an operation: ops[i] with probability weights[i]/sum.
func weighted(rng *rand.Rand, ops []string, weights []int) string {
	sum := 0
	for _, w := range weights {
		sum += w
	}
	r := rng.IntN(sum)
	for i, w := range weights {
		if r < w {
			return ops[i]
		}
		r -= w
	}
	panic("unreachable")
}

// trail keeps the last operations, for failure messages.
type trail struct {
	seed int64
	step int
	ops  []string
}

func (tr *trail) logf(format string, args ...any) {
	tr.ops = append(tr.ops, fmt.Sprintf("%5d  ", tr.step)+fmt.Sprintf(format, args...))
	if len(tr.ops) > 40 {
		tr.ops = tr.ops[len(tr.ops)-40:]
	}
}

func (tr *trail) String() string {
	return fmt.Sprintf("seed %d (rerun: -seed=%d), op %d; last operations:\n%s", tr.seed, tr.seed, tr.step, strings.Join(tr.ops, "\n"))
}

// diffStores describes, key by key, how got differs from want.
func diffStores(got, want map[string]string) string {
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	n := 0
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if gok == wok && g == w {
			continue
		}
		if n++; n > 10 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %s: got %s, want %s;", k, present(g, gok), present(w, wok))
	}
	return b.String()
}

func present(v string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return strconv.Quote(v)
}

// modelCore is the part of a reference model that does not depend on the
// backend: the seed's random source and trail, the keyspace, the client's
// shard list, every server's data, and in a resharding window the list
// before it and every key's owner before and after BeginResharding (server
// indices).
type modelCore struct {
	t      *testing.T
	rng    *rand.Rand
	tr     trail
	addrs  []string            // every server's address, by index
	keys   []string            // the keyspace
	list   []listEntry         // the client's shard list
	store  []map[string]string // per server: key -> value
	counts map[string]int      // operations run, by kind

	window   bool
	prevList []listEntry
	from, to map[string]int

	// shards returns the client's shard list (name and address by index)
	// and place the index of key's shard in it.
	shards func() []shardedclient.ShardRef
	place  func(key string) int
	// listed, when set, is called with every shard list checkList saw.
	listed func()
}

// newModelCore returns the core of a model over the servers at addrs, the
// list a, b, c on the first three, an empty store.
func newModelCore(t *testing.T, seed int64, stream uint64, addrs []string) modelCore {
	m := modelCore{t: t, rng: rand.New(rand.NewPCG(uint64(seed), stream)), tr: trail{seed: seed},
		addrs: addrs, keys: modelKeys(200),
		list:   []listEntry{{server: 0, name: "a"}, {server: 1, name: "b"}, {server: 2, name: "c"}},
		counts: map[string]int{}}
	for range addrs {
		m.store = append(m.store, map[string]string{})
	}
	return m
}

// modelClient is what a model reads of the sharded client under test.
type modelClient[C comparable] interface {
	Shards() []shardedclient.Shard[C]
	GetShardInfo(key string) shardedclient.Info
}

// observe makes m read its shard list and placement from c.
func observe[C comparable](m *modelCore, c modelClient[C]) {
	m.shards = func() []shardedclient.ShardRef {
		shards := c.Shards()
		out := make([]shardedclient.ShardRef, len(shards))
		for i, sh := range shards {
			out[i] = shardedclient.ShardRef{Index: i, Name: sh.Name, Addr: sh.Addr}
		}
		return out
	}
	m.place = func(key string) int { return c.GetShardInfo(key).Index }
}

// steps runs ops random operations, op outside a window and windowOp
// inside, and check after each; end closes a window still open at the end.
func (m *modelCore) steps(ops int, op, windowOp, check, end func()) {
	start := time.Now()
	for m.tr.step = 0; m.tr.step < ops; m.tr.step++ {
		if m.window {
			windowOp()
		} else {
			op()
		}
		check()
	}
	if m.window {
		m.tr.step = ops
		end()
		check()
	}
	m.t.Logf("seed %d: %d operations in %v: %v", m.tr.seed, ops, time.Since(start).Round(time.Millisecond), m.counts)
}

func (m *modelCore) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), &m.tr)
}

func (m *modelCore) key() string { return m.keys[m.rng.IntN(len(m.keys))] }

// owner returns the server the client places key on now.
func (m *modelCore) owner(key string) int {
	addr := m.shards()[m.place(key)].Addr
	i := slices.Index(m.addrs, addr)
	if i < 0 {
		m.fatalf("%s placed on unknown address %s", key, addr)
	}
	return i
}

// placed is the common part of a model's use of key: inside a window the
// key must be placed where BeginResharding placed it. It returns the key's
// owner and its old owner (the same outside a window).
func (m *modelCore) placed(key string) (to, from int) {
	to = m.owner(key)
	if !m.window {
		return to, to
	}
	if to != m.to[key] {
		m.fatalf("%s is placed on server %d inside the window, which placed it on %d at BeginResharding", key, to, m.to[key])
	}
	return to, m.from[key]
}

// expectValue checks a read of key (what names the call) against the
// model's value on its owner: got, ok is the value read and whether there
// was one, err any other error.
func (m *modelCore) expectValue(what, key, got string, ok bool, err error, want string, had bool) {
	m.t.Helper()
	switch {
	case err != nil:
		m.fatalf("%s %s: %v; want %s", what, key, err, present(want, had))
	case ok != had || got != want:
		m.fatalf("%s %s = %s; want %s (the value on its owner)", what, key, present(got, ok), present(want, had))
	}
}

// rawShard is the raw client GetShard handed out for one key, as the model
// uses it: a read (value, whether there was one, other error) and a write.
type rawShard struct {
	owners bool // it is the client of the key's owner
	get    func() (string, bool, error)
	set    func(v string) error
}

// getShard uses the raw client GetShard handed out for key, whose owner is
// o (the key moved there first by the model's use): a read must see the
// model's value, a write lands on the owner.
func (m *modelCore) getShard(key string, o int, raw rawShard) {
	if !raw.owners {
		m.fatalf("GetShard(%s) is not the client of its owner %d", key, o)
	}
	old, had := m.store[o][key]
	if m.rng.IntN(2) == 0 {
		m.tr.logf("GetShard(%s) read (owner %d)", key, o)
		v, ok, err := raw.get()
		m.expectValue("GetShard read", key, v, ok, err, old, had)
		return
	}
	v := "raw" + strconv.Itoa(m.tr.step)
	m.tr.logf("GetShard(%s) write %s (owner %d)", key, v, o)
	if err := raw.set(v); err != nil {
		m.fatalf("GetShard(%s) write: %v", key, err)
	}
	m.store[o][key] = v
}

// setShards is a cold SetShards to a random list through apply: no data
// moves. A list that renames a server that stays is refused (its keys would
// move) with a *shardedclient.PlacementShiftError. It reports whether the
// list changed.
func (m *modelCore) setShards(apply func([]listEntry) error) bool {
	next := randomList(m.rng, len(m.addrs), m.list, m.rng.IntN(2) == 0)
	m.tr.logf("SetShards %v (from %v)", next, m.list)
	err := apply(next)
	if renamesStaying(m.list, next) {
		var shift *shardedclient.PlacementShiftError
		if !errors.As(err, &shift) {
			m.fatalf("SetShards %v renames a server of %v: %v, want a *PlacementShiftError", next, m.list, err)
		}
		m.counts["setshards-refused"]++
		m.checkList()
		return false
	}
	if err != nil {
		m.fatalf("SetShards %v: %v", next, err)
	}
	m.list = next
	m.checkList()
	return true
}

// begin opens a resharding window to a random list through open, and
// records every key's owner before and after; nothing moves yet. It
// returns the keys whose owner changes.
func (m *modelCore) begin(open func([]listEntry) error) []string {
	next := randomList(m.rng, len(m.addrs), m.list, m.rng.IntN(4) == 0)
	from := map[string]int{}
	for _, k := range m.keys {
		from[k] = m.owner(k)
	}
	m.tr.logf("BeginResharding %v (from %v)", next, m.list)
	if err := open(next); err != nil {
		m.fatalf("BeginResharding %v: %v", next, err)
	}
	m.window, m.prevList, m.list, m.from, m.to = true, m.list, next, from, map[string]int{}
	var moving []string
	for _, k := range m.keys {
		if m.to[k] = m.owner(k); m.to[k] != from[k] {
			moving = append(moving, k)
		}
	}
	m.tr.logf("  %d of %d keys change owner", len(moving), len(m.keys))
	m.checkList()
	return moving
}

// refusedInWindow checks that a shard list change inside a window
// (SetShards or BeginResharding, through change, to a random list) is
// refused with ErrMoveInProgress, changing nothing.
func (m *modelCore) refusedInWindow(what string, change func([]listEntry) error) {
	m.tr.logf("%s in the window", what)
	if err := change(randomList(m.rng, len(m.addrs), m.list, what == "SetShards")); !errors.Is(err, shardedclient.ErrMoveInProgress) {
		m.fatalf("%s in a window: %v, want ErrMoveInProgress", what, err)
	}
	m.checkList()
}

// closeWindow is the model of a window's end: the keys it did not move stay
// where they are.
func (m *modelCore) closeWindow() {
	m.window, m.prevList, m.from, m.to = false, nil, nil, nil
	m.checkList()
}

// checkList checks that the client's shard list is the model's (the shards
// a window removes follow it).
func (m *modelCore) checkList() {
	got := m.shards()
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
		if got[i].Addr != m.addrs[e.server] || got[i].Name != e.name {
			m.fatalf("client's shard %d is %q at %s, want %v", i, got[i].Name, got[i].Addr, e)
		}
	}
	if m.listed != nil {
		m.listed()
	}
}

// checkServers compares every server's content, read by content (one call
// per server, in parallel), with the model.
func (m *modelCore) checkServers(content func(server int) (map[string]string, error)) {
	got := make([]map[string]string, len(m.addrs))
	errs := make([]error, len(m.addrs))
	var wg sync.WaitGroup
	for i := range m.addrs {
		wg.Go(func() { got[i], errs[i] = content(i) })
	}
	wg.Wait()
	for i := range m.addrs {
		if errs[i] != nil {
			m.fatalf("reading server %d: %v", i, errs[i])
		}
		if !maps.Equal(got[i], m.store[i]) {
			m.fatalf("server %d diverges from the model:%s", i, diffStores(got[i], m.store[i]))
		}
	}
}
