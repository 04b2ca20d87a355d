package integration_test

// The randomized reference-model test of resharding (issue 10), on the
// package's shared real redis-servers: random sequences of writes, deletes,
// reads, cold SetShards, eject-and-rejoin, BeginResharding, commands inside
// the window and Migration.Run, against a per-server model of the data
// (store[server][key] = value). After every operation each server's whole
// content (KEYS, MGET) must equal the model's, and the client's reads must
// equal the model's value on the key's owner. The model states the rule of
// issue 10: while a key moves its old owner's value is the truth, unless the
// window already moved the key; a copy on a shard that does not own the key
// is stale and never wins. AbandonResharding, which ends a window before its
// migration, is modelled too: the keys not moved stay where they are.
//
// Inside a window the client reads every key one step in eight only: a read
// moves the key, and reading every key after every step would leave the
// migration nothing to move. The servers are read after every step.
//
// Seeds: -seed (shared with the differential tests), else $RESHARD_SEED,
// else 1, 2 and a clock seed; -model.ops operations per seed.

import (
	"context"
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

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

var modelOps = flag.Int("model.ops", 2000, "operations per seed of the resharding reference-model tests")

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

// redisModel is the reference model of one seed's run on real redis-servers.
type redisModel struct {
	t      *testing.T
	rng    *rand.Rand
	tr     trail
	shards []shardedredis.ShardOptions // every server, by index
	direct []*goredis.Client
	server map[string]int // a server's index by address
	c      *shardedredis.ShardedClient
	keys   []string
	list   []listEntry         // the client's shard list
	store  []map[string]string // per server: key -> value

	// In a resharding window: the list before it, and every key's owner
	// before and after BeginResharding (server indices).
	window   bool
	prevList []listEntry
	from, to map[string]int

	clients map[*goredis.Client]bool // every shard client seen: true once no longer the client's and closed
	counts  map[string]int           // operations run, by kind
}

func (m *redisModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), &m.tr)
}

// TestReshardModelRedis runs the reference model, -model.ops operations per
// seed, on five real redis-servers.
func TestReshardModelRedis(t *testing.T) {
	for _, seed := range modelSeeds(t) {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			runRedisModel(t, seed, *modelOps)
		})
	}
}

func runRedisModel(t *testing.T, seed int64, ops int) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond,
		OnRejoin:     func(ctx2 context.Context, c *goredis.Client) error { return c.FlushDB(ctx2).Err() }}
	shards, direct, c := safetyFixture(t, 5, 3, h)
	m := &redisModel{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 10)), tr: trail{seed: seed},
		shards: shards, direct: direct, c: c, keys: modelKeys(200),
		list:   []listEntry{{server: 0, name: "a"}, {server: 1, name: "b"}, {server: 2, name: "c"}},
		server: map[string]int{}, clients: map[*goredis.Client]bool{}, counts: map[string]int{}}
	for i, s := range shards {
		m.store = append(m.store, map[string]string{})
		m.server[s.Addr] = i
	}
	m.checkList()
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
		m.run()
		m.check()
	}
	t.Logf("seed %d: %d operations in %v: %v", seed, ops, time.Since(start).Round(time.Millisecond), m.counts)
}

// opts returns the ShardOptions of list.
func (m *redisModel) opts(list []listEntry) []shardedredis.ShardOptions {
	out := make([]shardedredis.ShardOptions, len(list))
	for i, e := range list {
		out[i] = m.shards[e.server]
		out[i].Name, out[i].Weight = e.name, e.weight
	}
	return out
}

// owner returns the server the client places key on now (as serverOf,
// without its cost, paid for every key after every operation).
func (m *redisModel) owner(key string) int {
	addr := m.c.Shards()[m.c.GetShardInfo(key).Index].Addr
	i, ok := m.server[addr]
	if !ok {
		m.fatalf("%s placed on unknown address %s", key, addr)
	}
	return i
}

// use is the model of a command's first step on key: inside a window, the
// key is moved from its old owner first (if the old owner holds it: to the
// new owner, unless a value written in this window is there already; then
// it is deleted from the old owner). It returns the key's owner.
func (m *redisModel) use(key string) int {
	to := m.owner(key)
	if !m.window {
		return to
	}
	if to != m.to[key] {
		m.fatalf("%s is placed on server %d inside the window, which placed it on %d at BeginResharding", key, to, m.to[key])
	}
	if from := m.from[key]; from != to {
		if v, ok := m.store[from][key]; ok {
			if _, busy := m.store[to][key]; !busy {
				m.store[to][key] = v
			}
			delete(m.store[from], key)
		}
	}
	return to
}

func (m *redisModel) key() string { return m.keys[m.rng.IntN(len(m.keys))] }

// op runs one random operation outside a window.
func (m *redisModel) op() {
	kinds := []string{"set", "del", "get", "setnx", "append", "setshards", "eject", "begin"}
	weights := []int{300, 100, 130, 50, 50, 70, 4, 60}
	if len(m.list) < 2 {
		weights[6] = 0 // the last live shard is never ejected
	}
	kind := weighted(m.rng, kinds, weights)
	m.counts[kind]++
	switch kind {
	case "setshards":
		m.setShards()
	case "eject":
		m.eject()
	case "begin":
		m.begin()
	default:
		m.command(kind, m.key())
	}
}

// windowOp runs one random operation inside a window.
func (m *redisModel) windowOp() {
	kinds := []string{"set", "del", "get", "setnx", "append", "getshard", "misuse", "run", "abandon"}
	kind := weighted(m.rng, kinds, []int{300, 100, 150, 50, 50, 80, 40, 60, 8})
	m.counts["window-"+kind]++
	switch kind {
	case "getshard":
		m.getShard(m.key())
	case "misuse":
		m.misuse()
	case "run":
		m.run()
	case "abandon":
		m.abandon()
	default:
		m.command(kind, m.key())
	}
}

// abandon ends the window knowingly before its migration: the keys not
// moved stay on their old owners (stale copies from now on).
func (m *redisModel) abandon() {
	m.tr.logf("AbandonResharding")
	if err := m.c.AbandonResharding(); err != nil {
		m.fatalf("AbandonResharding: %v", err)
	}
	if m.c.Window() != nil {
		m.fatalf("the window is open after AbandonResharding")
	}
	m.window, m.prevList, m.from, m.to = false, nil, nil, nil
	m.checkList()
	m.checkClosed()
}

// command runs a command on key through the client and applies it to the
// model.
func (m *redisModel) command(kind, key string) {
	o := m.use(key)
	old, had := m.store[o][key]
	switch kind {
	case "set":
		v := "v" + strconv.Itoa(m.tr.step)
		m.tr.logf("SET %s %s (owner %d)", key, v, o)
		if err := m.c.Set(ctx, key, v, 0).Err(); err != nil {
			m.fatalf("SET %s: %v", key, err)
		}
		m.store[o][key] = v
	case "del":
		m.tr.logf("DEL %s (owner %d)", key, o)
		n, err := m.c.Del(ctx, key).Result()
		if want := int64(b2i(had)); err != nil || n != want {
			m.fatalf("DEL %s = %d, %v; want %d", key, n, err, want)
		}
		delete(m.store[o], key)
	case "get":
		m.tr.logf("GET %s (owner %d)", key, o)
		m.expectGet(key, m.c.Get(ctx, key), old, had)
	case "setnx":
		v := "nx" + strconv.Itoa(m.tr.step)
		m.tr.logf("SETNX %s %s (owner %d)", key, v, o)
		ok, err := m.c.SetNX(ctx, key, v, 0).Result()
		if err != nil || ok == had {
			m.fatalf("SETNX %s = %v, %v; want %v", key, ok, err, !had)
		}
		if !had {
			m.store[o][key] = v
		}
	case "append":
		s := "+" + strconv.Itoa(m.tr.step)
		m.tr.logf("APPEND %s %s (owner %d)", key, s, o)
		n, err := m.c.Append(ctx, key, s).Result()
		if err != nil || n != int64(len(old+s)) {
			m.fatalf("APPEND %s = %d, %v; want %d (%q)", key, n, err, len(old+s), old+s)
		}
		m.store[o][key] = old + s
	default:
		panic(kind)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expectGet checks a GET's reply against the model's value (had: present).
func (m *redisModel) expectGet(key string, cmd *goredis.StringCmd, want string, had bool) {
	m.t.Helper()
	v, err := cmd.Result()
	switch {
	case !had && err != goredis.Nil:
		m.fatalf("GET %s = %q, %v; want nil (no value on its owner)", key, v, err)
	case had && (err != nil || v != want):
		m.fatalf("GET %s = %q, %v; want %q", key, v, err, want)
	}
}

// getShard uses the raw client GetShard hands out inside a window: it must
// be the key's new owner, the key moved there first.
func (m *redisModel) getShard(key string) {
	o := m.use(key)
	old, had := m.store[o][key]
	cl := m.c.GetShard(key)
	if want := m.c.Shards()[m.c.GetShardInfo(key).Index].Client; cl != want {
		m.fatalf("GetShard(%s) is not the client of its owner %d", key, o)
	}
	if m.rng.IntN(2) == 0 {
		m.tr.logf("GetShard(%s).GET (owner %d)", key, o)
		m.expectGet(key, cl.Get(ctx, key), old, had)
		return
	}
	v := "raw" + strconv.Itoa(m.tr.step)
	m.tr.logf("GetShard(%s).SET %s (owner %d)", key, v, o)
	if err := cl.Set(ctx, key, v, 0).Err(); err != nil {
		m.fatalf("GetShard(%s).SET: %v", key, err)
	}
	m.store[o][key] = v
}

// setShards is a cold SetShards: no data moves. A list that renames a
// server that stays is refused (its keys would move).
func (m *redisModel) setShards() {
	next := randomList(m.rng, len(m.shards), m.list, m.rng.IntN(2) == 0)
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
	m.checkClosed()
}

// eject pauses the server of one shard until the client ejects it, writes
// while it is out (its keys go to the live shards), and waits until it has
// rejoined, flushed by OnRejoin.
func (m *redisModel) eject() {
	i := m.rng.IntN(len(m.list))
	srv := m.list[i].server
	anchor := ""
	for n := 0; anchor == ""; n++ {
		if k := "anchor-" + strconv.Itoa(n); m.c.GetShardInfo(k).Index == i {
			anchor = k
		}
	}
	m.tr.logf("eject shard %d (server %d)", i, srv)
	ejectFor(m.t, m.c, m.direct[srv], i, 500*time.Millisecond, func() {
		if m.c.GetShardInfo(anchor).Index == i {
			m.fatalf("shard %d is ejected but still owns %s", i, anchor)
		}
		for range 1 + m.rng.IntN(6) {
			k := m.key()
			if m.owner(k) == srv {
				m.fatalf("%s placed on the ejected server %d", k, srv)
			}
			m.command(weighted(m.rng, []string{"set", "del", "get", "append"}, []int{3, 1, 1, 1}), k)
		}
		if !m.c.Stats()[i].Ejected {
			m.fatalf("shard %d rejoined while the writes made without it ran: CLIENT PAUSE too short for this machine", i)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); m.c.GetShardInfo(anchor).Index != i; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			m.fatalf("shard %d rejoined (Stats) but does not own %s again", i, anchor)
		}
	}
	m.tr.logf("shard %d (server %d) rejoined, flushed", i, srv)
	m.store[srv] = map[string]string{}
}

// begin opens a resharding window: the stale copies of the keys each
// server of the new list receives are removed.
func (m *redisModel) begin() {
	next := randomList(m.rng, len(m.shards), m.list, m.rng.IntN(4) == 0)
	from := map[string]int{}
	for _, k := range m.keys {
		from[k] = m.owner(k)
	}
	m.tr.logf("BeginResharding %v (from %v)", next, m.list)
	if err := m.c.BeginResharding(m.opts(next)); err != nil {
		m.fatalf("BeginResharding %v: %v", next, err)
	}
	if m.c.Window() == nil {
		m.fatalf("no window after BeginResharding")
	}
	m.window, m.prevList, m.list, m.from, m.to = true, m.list, next, from, map[string]int{}
	moving := 0
	for _, k := range m.keys {
		m.to[k] = m.owner(k)
		if m.to[k] != from[k] {
			delete(m.store[m.to[k]], k)
			moving++
		}
	}
	m.tr.logf("  %d of %d keys change owner", moving, len(m.keys))
	m.checkList()
}

// misuse checks that the calls out of order inside a window are refused,
// changing nothing.
func (m *redisModel) misuse() {
	switch m.rng.IntN(4) {
	case 0:
		m.tr.logf("SetShards in the window")
		if err := m.c.SetShards(m.opts(randomList(m.rng, len(m.shards), m.list, true))); !errors.Is(err, shardedclient.ErrMoveInProgress) {
			m.fatalf("SetShards in a window: %v, want ErrMoveInProgress", err)
		}
	case 1:
		m.tr.logf("BeginResharding in the window")
		if err := m.c.BeginResharding(m.opts(randomList(m.rng, len(m.shards), m.list, false))); !errors.Is(err, shardedclient.ErrMoveInProgress) {
			m.fatalf("BeginResharding in a window: %v, want ErrMoveInProgress", err)
		}
	case 2:
		m.tr.logf("EndResharding before the migration")
		if err := m.c.EndResharding(); !errors.Is(err, shardedredis.ErrMigrationIncomplete) {
			m.fatalf("EndResharding before the migration: %v, want ErrMigrationIncomplete", err)
		}
	default:
		m.tr.logf("ForEachShard in the window")
		called := false
		err := m.c.ForEachShard(ctx, func(context.Context, *goredis.Client) error { called = true; return nil })
		if !errors.Is(err, shardedredis.ErrReshardingWindow) || called {
			m.fatalf("ForEachShard in a window: %v (called: %v), want ErrReshardingWindow", err, called)
		}
	}
	if m.c.Window() == nil {
		m.fatalf("a refused call ended the window")
	}
	m.checkList()
}

// sourceCounts is the model's prediction of one source shard's progress.
type sourceCounts struct {
	scanned, owned, moved, onNew, stale int64
}

// run runs the window's migration to the end: every key of every server of
// the old list stays (its owner now), moves (from its old owner; a value
// written on the new owner in the window wins) or is deleted (stale).
func (m *redisModel) run() {
	opt := shardedredis.MigrateOptions{BatchSize: 1 + m.rng.IntN(60), Parallelism: 1 + 3*m.rng.IntN(2), KeepWindow: m.rng.IntN(3) == 0}
	m.tr.logf("Migration.Run %+v", opt)
	mig, err := m.c.NewMigration(opt)
	if err != nil {
		m.fatalf("NewMigration: %v", err)
	}
	// The sources run in the old list's order, one after the other with
	// Parallelism 1: then the counts of each are exact (a key moved to a
	// source scanned later is scanned there too).
	want := map[string]sourceCounts{}
	for _, e := range m.prevList {
		i := e.server
		var p sourceCounts
		p.scanned = int64(len(m.store[i]))
		for _, k := range slices.Sorted(maps.Keys(m.store[i])) {
			switch to, v := m.to[k], m.store[i][k]; {
			case to == i:
				p.owned++
			case m.from[k] == i:
				if _, busy := m.store[to][k]; busy {
					p.onNew++
				} else {
					p.moved++
					m.store[to][k] = v
				}
				delete(m.store[i], k)
			default:
				p.stale++
				delete(m.store[i], k)
			}
		}
		want["addr:"+m.shards[i].Addr] = p
	}
	if err := mig.Run(ctx); err != nil {
		m.fatalf("Migration.Run: %v", err)
	}
	for _, p := range mig.Progress() {
		w, ok := want[p.ID]
		switch {
		case !ok:
			m.fatalf("progress of %s, not a source", p.Shard)
		case p.Failed != 0 || len(p.Failures) != 0 || !p.Done:
			m.fatalf("progress of %s: %+v, want done, no failure", p.Shard, p)
		case p.Moved != w.moved || p.OnNewOwner != w.onNew:
			m.fatalf("progress of %s: moved %d, on new owner %d; want %d, %d", p.Shard, p.Moved, p.OnNewOwner, w.moved, w.onNew)
		case p.Scanned != p.Owned+p.Moved+p.OnNewOwner+p.Gone+p.Stale+p.Failed:
			m.fatalf("progress of %s: %+v does not add up to Scanned", p.Shard, p)
		case opt.Parallelism == 1 && p.Gone == 0 && p.Scanned == w.scanned && (p.Owned != w.owned || p.Stale != w.stale):
			m.fatalf("progress of %s: owned %d, stale %d; want %d, %d", p.Shard, p.Owned, p.Stale, w.owned, w.stale)
		case p.Owned < w.owned && opt.Parallelism == 1 || p.Stale < w.stale:
			// SCAN may return a key twice (a rehash between pages): then
			// the counts of repeated keys go up, never down.
			m.fatalf("progress of %s: owned %d, stale %d; want at least %d, %d", p.Shard, p.Owned, p.Stale, w.owned, w.stale)
		}
		if p.Scanned != w.scanned && opt.Parallelism == 1 {
			m.t.Logf("%s: SCAN returned %d keys, %d distinct (a key repeated by a rehash)", p.Shard, p.Scanned, w.scanned)
		}
	}
	if opt.KeepWindow {
		if m.c.Window() == nil || !m.c.Window().Migrated() {
			m.fatalf("KeepWindow: the window is not kept open, migrated")
		}
		if err := m.c.EndResharding(); err != nil {
			m.fatalf("EndResharding after the migration: %v", err)
		}
	}
	if m.c.Window() != nil {
		m.fatalf("the window is still open after the migration")
	}
	m.window, m.prevList, m.from, m.to = false, nil, nil, nil
	m.checkList()
	m.checkClosed()
}

// checkList checks that the client's shard list is the model's (the shards
// a window removes follow it).
func (m *redisModel) checkList() {
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
		if got[i].Addr != m.shards[e.server].Addr || got[i].Name != e.name {
			m.fatalf("client's shard %d is %q at %s, want %v", i, got[i].Name, got[i].Addr, e)
		}
		if _, seen := m.clients[got[i].Client]; !seen {
			m.clients[got[i].Client] = false
		}
	}
}

// checkClosed checks that every shard client the client no longer holds
// gets closed (polling: a client closes once the commands using it end).
// The polls use a canceled context: a client not closed yet answers with
// the context's error and takes no connection.
func (m *redisModel) checkClosed() {
	held := map[*goredis.Client]bool{}
	for _, sh := range m.c.Shards() {
		held[sh.Client] = true
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for cl, closed := range m.clients {
		if closed || held[cl] {
			continue
		}
		for {
			err := cl.Ping(canceled).Err()
			if errors.Is(err, goredis.ErrClosed) {
				break
			}
			if !errors.Is(err, context.Canceled) {
				m.fatalf("the client of a shard that left (%s): Ping with a canceled context: %v", cl.Options().Addr, err)
			}
			if time.Now().After(deadline) {
				m.fatalf("the client of a shard that left (%s) is still open", cl.Options().Addr)
			}
			time.Sleep(time.Millisecond)
		}
		m.clients[cl] = true
	}
}

// check compares every server's content with the model, and what the
// client reads with the model's value on each key's owner. Inside a window
// the reads are done one step in eight: a read moves the key, and reading
// every key each step would leave the migration nothing to move.
func (m *redisModel) check() {
	if !m.window || m.rng.IntN(8) == 0 {
		owners := make([]int, len(m.keys))
		for i, k := range m.keys {
			owners[i] = m.use(k)
		}
		vals, err := m.c.MGet(ctx, m.keys...).Result()
		if err != nil || len(vals) != len(m.keys) {
			m.fatalf("MGET of every key: %d values, %v", len(vals), err)
		}
		for i, k := range m.keys {
			want, had := m.store[owners[i]][k]
			if got, ok := vals[i].(string); ok != had || got != want {
				m.fatalf("MGET: %s = %v, want %s (on its owner, server %d)", k, vals[i], present(want, had), owners[i])
			}
		}
	}
	got := make([]map[string]string, len(m.direct))
	errs := make([]error, len(m.direct))
	var wg sync.WaitGroup
	for i, d := range m.direct {
		wg.Go(func() { got[i], errs[i] = serverContent(d) })
	}
	wg.Wait()
	for i := range m.direct {
		if errs[i] != nil {
			m.fatalf("reading server %d: %v", i, errs[i])
		}
		if !maps.Equal(got[i], m.store[i]) {
			m.fatalf("server %d diverges from the model:%s", i, diffStores(got[i], m.store[i]))
		}
	}
	for i, s := range m.c.Stats() {
		if s.Ejected {
			m.fatalf("shard %d (%s) is ejected outside an eject step: a command took over its ReadTimeout", i, s.Addr)
		}
	}
}

// contentScript returns every key of a server and its string value, as
// key, value, key, value, ...: KEYS and MGET in one round trip.
var contentScript = goredis.NewScript(`
local keys = redis.call('KEYS', '*')
if #keys == 0 then return {} end
local vals = redis.call('MGET', unpack(keys))
local out = {}
for i = 1, #keys do
  out[2*i-1] = keys[i]
  out[2*i] = vals[i]
end
return out`)

// serverContent returns every string key of the server d is connected to,
// with its value.
func serverContent(d *goredis.Client) (map[string]string, error) {
	kv, err := contentScript.Run(ctx, d, nil).StringSlice()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out, nil
}
