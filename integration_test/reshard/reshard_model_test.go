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
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// redisModel is the reference model of one seed's run on real redis-servers.
type redisModel struct {
	modelCore
	servers []shardedredis.ShardOptions // every server, by index
	direct  []*goredis.Client
	c       *shardedredis.ShardedClient
	clients map[*goredis.Client]bool // every shard client seen: true once no longer the client's and closed
}

// TestReshardModelRedis runs the reference model, -model.ops operations per
// seed, on five real redis-servers.
func TestReshardModelRedis(t *testing.T) {
	seeds := modelSeeds(t)
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			runRedisModel(t, seed, *modelOps, nil, false)
		})
	}
	// The first seed again, a quarter of its steps, autopipelined.
	t.Run("autopipelined/seed="+strconv.FormatInt(seeds[0], 10), func(t *testing.T) {
		runRedisModel(t, seeds[0], *modelOps/4, nil, true)
	})
}

// runRedisModel runs the model; with cache set, every shard caches with it
// (see TestCacheModelRedis); with ap, autopipelined (see withAP).
func runRedisModel(t *testing.T, seed int64, ops int, cache *goredis.ClientSideCacheConfig, ap bool) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond,
		OnRejoin:     func(ctx2 context.Context, c *goredis.Client) error { return c.FlushDB(ctx2).Err() }}
	servers, direct, c := safetyFixtureAP(t, 5, 3, h, ap)
	if cache != nil {
		c = cachingClient(t, servers, 3, h, cache)
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	m := &redisModel{modelCore: newModelCore(t, seed, 10, addrs),
		servers: servers, direct: direct, c: c, clients: map[*goredis.Client]bool{}}
	observe(&m.modelCore, c)
	m.listed = m.seeClients
	m.checkList()
	m.steps(ops, m.op, m.windowOp, m.check, m.run)
}

// opts returns the ShardOptions of list.
func (m *redisModel) opts(list []listEntry) []shardedredis.ShardOptions {
	out := make([]shardedredis.ShardOptions, len(list))
	for i, e := range list {
		out[i] = m.servers[e.server]
		out[i].Name, out[i].Weight = e.name, e.weight
	}
	return out
}

// use is the model of a command's first step on key: inside a window, the
// key is moved from its old owner first (if the old owner holds it: to the
// new owner, unless a value written in this window is there already; then
// it is deleted from the old owner). It returns the key's owner.
func (m *redisModel) use(key string) int {
	to, from := m.placed(key)
	if from != to {
		if v, ok := m.store[from][key]; ok {
			if _, busy := m.store[to][key]; !busy {
				m.store[to][key] = v
			}
			delete(m.store[from], key)
		}
	}
	return to
}

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
	m.closeWindow()
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
		v, ok, err := redisValue(m.c.Get(ctx, key))
		m.expectValue("GET", key, v, ok, err, old, had)
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

// redisValue returns a GET's value, whether there was one, and any error
// but redis.Nil.
func redisValue(cmd *goredis.StringCmd) (string, bool, error) {
	v, err := cmd.Result()
	if err == goredis.Nil {
		return "", false, nil
	}
	return v, err == nil, err
}

// getShard uses the raw client GetShard hands out inside a window: it must
// be the key's new owner, the key moved there first.
func (m *redisModel) getShard(key string) {
	o := m.use(key)
	cl := m.c.GetShard(key)
	m.modelCore.getShard(key, o, rawShard{
		owners: cl == m.c.Shards()[m.c.GetShardInfo(key).Index].Client,
		get:    func() (string, bool, error) { return redisValue(cl.Get(ctx, key)) },
		set:    func(v string) error { return cl.Set(ctx, key, v, 0).Err() },
	})
}

// setShards is a cold SetShards (see modelCore.setShards); the clients of
// the servers that leave get closed.
func (m *redisModel) setShards() {
	if m.modelCore.setShards(func(next []listEntry) error { return m.c.SetShards(m.opts(next)) }) {
		m.checkClosed()
	}
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
	moving := m.modelCore.begin(func(next []listEntry) error {
		if err := m.c.BeginResharding(m.opts(next)); err != nil {
			return err
		}
		if m.c.Window() == nil {
			m.fatalf("no window after BeginResharding")
		}
		return nil
	})
	for _, k := range moving {
		delete(m.store[m.to[k]], k)
	}
}

// misuse checks that the calls out of order inside a window are refused,
// changing nothing.
func (m *redisModel) misuse() {
	switch m.rng.IntN(4) {
	case 0:
		m.refusedInWindow("SetShards", func(next []listEntry) error { return m.c.SetShards(m.opts(next)) })
	case 1:
		m.refusedInWindow("BeginResharding", func(next []listEntry) error { return m.c.BeginResharding(m.opts(next)) })
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
}

// sourceCounts is the model's prediction of one source shard's progress.
type sourceCounts struct {
	scanned, owned, moved, onNew, stale int64
}

// run runs the window's migration to the end: every key of every server of
// the old list stays (its owner now), moves (from its old owner; a value
// written on the new owner in the window wins) or is deleted (stale).
func (m *redisModel) run() {
	opt := shardedredis.MigrateOptions{BatchSize: 1 + m.rng.IntN(60), Parallelism: 1 + 3*m.rng.IntN(2), KeepWindow: m.rng.IntN(3) == 0,
		ServerSide: m.rng.IntN(2) == 0}
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
		want["addr:"+m.addrs[i]] = p
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
		if m.c.Window() == nil || !m.c.Window().Migrated {
			m.fatalf("KeepWindow: the window is not kept open, migrated")
		}
		if err := m.c.EndResharding(); err != nil {
			m.fatalf("EndResharding after the migration: %v", err)
		}
	}
	if m.c.Window() != nil {
		m.fatalf("the window is still open after the migration")
	}
	m.closeWindow()
	m.checkClosed()
}

// seeClients records the clients of the client's shards, to check that
// they are closed once they leave (checkClosed).
func (m *redisModel) seeClients() {
	for _, sh := range m.c.Shards() {
		if _, seen := m.clients[sh.Client]; !seen {
			m.clients[sh.Client] = false
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
	m.checkServers(func(i int) (map[string]string, error) { return serverContent(m.direct[i]) })
	for i, s := range m.c.Stats() {
		if s.Ejected {
			m.fatalf("shard %d (%s) is ejected outside an eject step: a command took over its ReadTimeout", i, s.Addr)
		}
	}
}

// contentScript returns every key of a server and its string value, as
// key, value, key, value, ...: KEYS and MGET in one round trip.
var contentScript = goredis.NewScript(`
local keys = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  if string.sub(k, 1, 15) ~= '__shardedcache:' then keys[#keys+1] = k end -- the resharding protocol's own
end
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
