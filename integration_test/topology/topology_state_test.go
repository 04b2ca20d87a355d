package topology_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// topoLib is a function library named name whose function <name>_get
// returns the value of its key.
func topoLib(name string) string {
	return "#!lua name=" + name + "\nredis.register_function('" + name +
		"_get', function(keys, args) return redis.call('GET', keys[1]) end)"
}

// libraries returns the names of the function libraries on the server at
// addr, sorted.
func libraries(t testing.TB, addr string) []string {
	t.Helper()
	libs, err := fixtures.DirectClient(t, addr, 0).FunctionList(ctx, goredis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatalf("FUNCTION LIST on %s: %v", addr, err)
	}
	names := make([]string, len(libs))
	for i, l := range libs {
		names[i] = l.Name
	}
	slices.Sort(names)
	return names
}

// configValue returns the value of param on the server at addr.
func configValue(t testing.TB, addr, param string) string {
	t.Helper()
	m, err := fixtures.DirectClient(t, addr, 0).ConfigGet(ctx, param).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s on %s: %v", param, addr, err)
	}
	return m[param]
}

// Issues 18.2 and 18.3: a library loaded through the client and the
// parameters of CONFIG SET made through it are on a shard that SetShards
// or BeginResharding adds before it serves a command: FCALL works on its
// keys (in the window too), FUNCTION LOAD of the same library fails alike
// on every shard and a new one loads everywhere, keyspace notifications
// cover it. A shard that cannot be brought in step is refused, naming it
// and the step, and nothing changes.
func TestTopologyFunctionsAndConfigFollowNewShards(t *testing.T) {
	procs := fixtures.SharedRedis(t, 4)
	fixtures.ResetServerState(t, procs)
	a, b := fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0)
	cc, d := fixtures.TopoShard("c", procs[2].Addr, 0), fixtures.TopoShard("d", procs[3].Addr, 0)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	if name, err := c.FunctionLoad(ctx, topoLib("topo")).Result(); err != nil || name != "topo" {
		t.Fatalf("FUNCTION LOAD = %q, %v", name, err)
	}
	for param, value := range map[string]string{"notify-keyspace-events": "KEA", "slowlog-max-len": "200"} {
		if err := c.ConfigSet(ctx, param, value).Err(); err != nil {
			t.Fatalf("CONFIG SET %s: %v", param, err)
		}
	}
	ps := c.PSubscribe(ctx, "__keyspace@0__:*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	// A shard that cannot be brought in step is refused.
	dead := fixtures.TopoShard("x", "127.0.0.1:1", 0)
	err = c.SetShards([]shardedredis.ShardOptions{a, b, dead})
	want := `shardedcache: shard 2 "x" (127.0.0.1:1): copying the 1 function libraries of the shards in use: dial tcp 127.0.0.1:1: connect: connection refused`
	if err == nil || err.Error() != want {
		t.Fatalf("SetShards adding a dead shard: %v, want %q", err, want)
	}
	if n := len(c.Shards()); n != 2 {
		t.Fatalf("a refused SetShards left %d shards", n)
	}

	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc}); err != nil {
		t.Fatal(err)
	}
	onC := fixtures.ByOwner(c, fixtures.Keys(300))[2][0]
	if err := c.Set(ctx, onC, "on c", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.FCall(ctx, "topo_get", []string{onC}).Text(); err != nil || v != "on c" {
		t.Fatalf("FCALL topo_get %s on the added shard = %q, %v", onC, v, err)
	}
	if err := c.FunctionLoad(ctx, topoLib("topo")).Err(); err == nil || err.Error() != "ERR Library 'topo' already exists" {
		t.Fatalf("FUNCTION LOAD of the loaded library after the add: %v", err)
	}
	if name, err := c.FunctionLoad(ctx, topoLib("topo2")).Result(); err != nil || name != "topo2" {
		t.Fatalf("FUNCTION LOAD of a new library after the add = %q, %v", name, err)
	}
	for _, p := range procs[:3] {
		if got := libraries(t, p.Addr); !slices.Equal(got, []string{"topo", "topo2"}) {
			t.Fatalf("libraries on %s: %q", p.Addr, got)
		}
		if got := configValue(t, p.Addr, "notify-keyspace-events"); got != "AKE" {
			t.Fatalf("notify-keyspace-events on %s = %q, want AKE", p.Addr, got)
		}
		if got := configValue(t, p.Addr, "slowlog-max-len"); got != "200" {
			t.Fatalf("slowlog-max-len on %s = %q, want 200", p.Addr, got)
		}
	}
	if err := ps.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for { // the Pong: every pattern is on the shards of the new list
		msg, err := ps.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*goredis.Pong); ok {
			break
		}
	}
	if err := c.Set(ctx, onC, "again", 0).Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	if m, ok := msg.(*goredis.Message); err != nil || !ok || m.Channel != "__keyspace@0__:"+onC || m.Payload != "set" {
		t.Fatalf("keyspace event of a SET on the added shard: %v, %v", msg, err)
	}

	// A resharding window adds d: in step before the window opens.
	if err := c.BeginResharding([]shardedredis.ShardOptions{a, b, cc, d}); err != nil {
		t.Fatal(err)
	}
	if got := libraries(t, procs[3].Addr); !slices.Equal(got, []string{"topo", "topo2"}) {
		t.Fatalf("libraries on the resharding's new shard: %q", got)
	}
	if got := configValue(t, procs[3].Addr, "slowlog-max-len"); got != "200" {
		t.Fatalf("slowlog-max-len on the resharding's new shard = %q", got)
	}
	var onD string
	for _, k := range fixtures.Keys(300) {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onD = fixtures.ByOwner(c, fixtures.Keys(300))[3][0]
	if v, err := c.FCall(ctx, "topo2_get", []string{onD}).Text(); err != nil || v != "v:"+onD {
		t.Fatalf("FCALL topo2_get %s in the window = %q, %v", onD, v, err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}

	// Deleted through the client: a shard that joins then has none of its
	// own either (an exact copy), here DB 1 of d's server.
	if err := fixtures.DirectClient(t, procs[3].Addr, 0).FunctionLoad(ctx, topoLib("stray")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := fixtures.DirectClient(t, procs[0].Addr, 0).FunctionLoad(ctx, topoLib("stray")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := fixtures.DirectClient(t, procs[0].Addr, 0).FunctionDelete(ctx, "stray").Err(); err != nil {
		t.Fatal(err)
	}
	if err := fixtures.DirectClient(t, procs[3].Addr, 0).FunctionLoad(ctx, topoLib("stray")).Err(); err != nil {
		t.Fatal(err)
	}
	e := fixtures.TopoShard("e", procs[3].Addr, 1)
	if err := c.SetShards([]shardedredis.ShardOptions{a, b, cc, d, e}); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if got := libraries(t, p.Addr); len(got) != 0 {
			t.Fatalf("libraries on %s after FUNCTION FLUSH and an add: %q", p.Addr, got)
		}
	}
}

// Issue 18, the property: after any sequence of SetShards, BeginResharding
// and Run, with libraries loaded and deleted and parameters set through
// the client in between (in windows too), every shard in use has exactly
// the libraries and parameters set through the client, and the options
// (DB, pool size) its configuration gives, compared with a plain map of
// what was configured. Shards are drawn over 4 servers and 2 DBs, so two
// shards may share a server; TOPOLOGY_SEED replays a run.
func TestTopologyPropertyServerStateFollowsChanges(t *testing.T) {
	procs := fixtures.SharedRedis(t, 4)
	fixtures.ResetServerState(t, procs)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TOPOLOGY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("TOPOLOGY_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	// The configuration, as a user keeps it.
	type shardConf struct {
		server, db, pool int
	}
	names := []string{"n0", "n1", "n2", "n3", "n4"}
	conf := map[string]shardConf{}
	libs := map[string]bool{}
	params := map[string]string{}

	// owner is the name of the shard on each (server, DB) of the list in
	// use: another name there would be a rename, which SetShards refuses
	// (the keys of a shard that stays would move).
	owner := map[[2]int]string{}
	draw := func() []shardedredis.ShardOptions {
		used := map[[2]int]bool{}
		taken := func(name string, sc shardConf) bool {
			p := [2]int{sc.server, sc.db}
			return used[p] || owner[p] != "" && owner[p] != name
		}
		var opts []shardedredis.ShardOptions
		for _, name := range names {
			if rng.IntN(3) == 0 && (len(opts) > 0 || name != names[len(names)-1]) {
				continue // left out (the last, when alone, stays)
			}
			sc, kept := conf[name]
			if !kept || rng.IntN(3) == 0 {
				sc = shardConf{server: rng.IntN(len(procs)), db: rng.IntN(2), pool: sc.pool}
			}
			if rng.IntN(4) == 0 || sc.pool == 0 {
				sc.pool = 3 + rng.IntN(3)
			}
			for taken(name, sc) {
				sc.server, sc.db = rng.IntN(len(procs)), rng.IntN(2)
			}
			used[[2]int{sc.server, sc.db}] = true
			conf[name] = sc
			so := fixtures.TopoShard(name, procs[sc.server].Addr, sc.db)
			so.Options.PoolSize = sc.pool
			opts = append(opts, so)
		}
		clear(owner)
		for _, so := range opts {
			owner[[2]int{conf[so.Name].server, conf[so.Name].db}] = so.Name
		}
		return opts
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: draw()})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)

	// stateOp loads or deletes a library, or sets a parameter, through the
	// client, and records what the user configured.
	stateOp := func(step string) {
		t.Helper()
		lib := fmt.Sprintf("lib%d", rng.IntN(3))
		switch rng.IntN(3) {
		case 0:
			err := c.FunctionLoad(ctx, topoLib(lib)).Err()
			switch {
			case libs[lib] && (err == nil || err.Error() != "ERR Library '"+lib+"' already exists"):
				t.Fatalf("%s: FUNCTION LOAD of the loaded %s: %v", step, lib, err)
			case !libs[lib] && err != nil:
				t.Fatalf("%s: FUNCTION LOAD %s: %v", step, lib, err)
			}
			libs[lib] = true
		case 1:
			err := c.FunctionDelete(ctx, lib).Err()
			switch {
			case !libs[lib] && (err == nil || err.Error() != "ERR Library not found"):
				t.Fatalf("%s: FUNCTION DELETE of the absent %s: %v", step, lib, err)
			case libs[lib] && err != nil:
				t.Fatalf("%s: FUNCTION DELETE %s: %v", step, lib, err)
			}
			delete(libs, lib)
		default:
			param := slices.Sorted(maps.Keys(fixtures.ConfigDefaults))[rng.IntN(len(fixtures.ConfigDefaults))]
			value := strconv.Itoa(100 + rng.IntN(100))
			if err := c.ConfigSet(ctx, param, value).Err(); err != nil {
				t.Fatalf("%s: CONFIG SET %s %s: %v", step, param, value, err)
			}
			params[param] = value
		}
	}
	// check compares the shards in use with the configuration: the list
	// (opts), then, in a window, the shards that leave.
	check := func(step string, opts []shardedredis.ShardOptions) {
		t.Helper()
		want := slices.Sorted(maps.Keys(libs))
		shards := c.Shards()
		if len(shards) < len(opts) {
			t.Fatalf("%s: %d shards, configured %d", step, len(shards), len(opts))
		}
		for i, sh := range shards {
			addr := c.ShardOptions()[i].Addr
			if i < len(opts) {
				sc := conf[sh.Name]
				o := c.ShardOptions()[i]
				if sh.Name != opts[i].Name || o.Addr != procs[sc.server].Addr || o.DB != sc.db || o.PoolSize != sc.pool {
					t.Fatalf("%s: shard %d %s has %s DB %d pool %d, configured %s %s DB %d pool %d",
						step, i, sh.Name, o.Addr, o.DB, o.PoolSize, opts[i].Name, procs[sc.server].Addr, sc.db, sc.pool)
				}
			}
			if got := libraries(t, addr); !slices.Equal(got, want) {
				t.Fatalf("%s: shard %s (%s) has libraries %q, configured %q", step, sh.Name, sh.Addr, got, want)
			}
			for param, value := range params {
				if got := configValue(t, addr, param); got != value {
					t.Fatalf("%s: shard %s (%s) has %s %q, configured %q", step, sh.Name, sh.Addr, param, got, value)
				}
			}
		}
	}

	for step := range 40 {
		name := fmt.Sprintf("step %d (seed %d)", step, seed)
		for range rng.IntN(3) {
			stateOp(name)
		}
		opts := draw()
		if rng.IntN(2) == 0 {
			if err := c.SetShards(opts); err != nil {
				t.Fatalf("%s: SetShards: %v", name, err)
			}
		} else {
			if err := c.BeginResharding(opts); err != nil {
				t.Fatalf("%s: BeginResharding: %v", name, err)
			}
			if rng.IntN(2) == 0 {
				stateOp(name + " in the window")
			}
			check(name+" in the window", opts)
			m, err := c.NewMigration(shardedredis.MigrateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx); err != nil {
				t.Fatalf("%s: Run: %v", name, err)
			}
		}
		if n := len(c.Shards()); n != len(opts) {
			t.Fatalf("%s: %d shards in use, configured %d", name, n, len(opts))
		}
		check(name, opts)
	}
}
