package redis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/redis/internal/methods"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// Redis's rule for a keyless command with no request policy: any one
// shard, the first live one.
func TestRouteKeylessToAnyShard(t *testing.T) {
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	ctx := context.Background()
	for _, cmd := range []goredis.Cmder{
		goredis.NewStringCmd(ctx, "echo", "hi"),
		goredis.NewTimeCmd(ctx, "time"),
		goredis.NewIntCmd(ctx, "lastsave"),
		goredis.NewCmd(ctx, "eval", "return 1", 0),
		goredis.NewMapStringStringCmd(ctx, "config", "get", "maxmemory"),
		goredis.NewCmd(ctx, "command", "count"),
		goredis.NewCmd(ctx, "pubsub", "numsub"), // no channel: no key
	} {
		var r keyShards
		if err := route(v, cmd, &r); err != nil || r.shard != noKeys {
			t.Errorf("%v: shard %d, %v; want any one shard", cmd.Args(), r.shard, err)
		}
	}
	if s := anyShard(v); s != 0 {
		t.Errorf("anyShard = %d, want 0", s)
	}
}

// With shard 0 ejected, a keyless command runs on shard 1, and ECHO, TIME
// and EVAL without keys answer as one server does.
func TestKeylessCommandsSkipEjectedShard(t *testing.T) {
	m1, m2 := miniredis.RunT(t), miniredis.RunT(t)
	c, err := NewShardedClient(&ShardedOptions{
		Shards: []ShardOptions{{Name: "dead", Addr: "127.0.0.1:1"}, {Name: "b", Addr: m1.Addr()}, {Name: "c", Addr: m2.Addr()}},
		Health: Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := 0; !c.Stats()[0].Ejected; i++ {
		if i == 100 {
			t.Fatal("shard 0 not ejected")
		}
		_ = c.Shards()[0].Client.Ping(ctx) // fails; the health counts it
		_ = c.Set(ctx, keyOn(t, c, 0, i), "v", 0).Err()
	}
	v := c.shards.Acquire()
	s := anyShard(v)
	v.Release()
	if s != 1 {
		t.Fatalf("anyShard = %d with shard 0 ejected, want 1", s)
	}
	_ = c.Shards()[1].Client.Ping(ctx) // its connection set up before counting
	before := m1.CommandCount()
	if got, err := c.Echo(ctx, "hi").Result(); err != nil || got != "hi" {
		t.Errorf("ECHO = %q, %v", got, err)
	}
	if got, err := c.Eval(ctx, "return 41 + 1", nil).Int(); err != nil || got != 42 {
		t.Errorf("EVAL with no keys = %d, %v", got, err)
	}
	if got, err := c.Time(ctx).Result(); err != nil || got.IsZero() {
		t.Errorf("TIME = %v, %v", got, err)
	}
	if n := m1.CommandCount() - before; n != 3 {
		t.Errorf("shard 1 got %d commands, want ECHO, EVAL and TIME", n)
	}
	if n := m2.CommandCount(); n != 0 {
		t.Errorf("shard 2 got %d commands, want none", n)
	}
}

// keyOn returns a key that the ring places on shard i.
func keyOn(t *testing.T, c *ShardedClient, i, from int) string {
	t.Helper()
	for n := from; n < from+10000; n++ {
		k := fmt.Sprintf("k%d", n)
		if c.GetShardInfo(k).Index == i {
			return k
		}
	}
	t.Fatalf("no key on shard %d", i)
	return ""
}

// The table's refusals, typed or through Do, with what to use instead.
func TestRouteRefusals(t *testing.T) {
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	ctx := context.Background()
	cases := []struct {
		cmd  goredis.Cmder
		want string
	}{
		{goredis.NewCmd(ctx, "select", 1), "shardedcache: select: the database is a setting of each connection; set DB in the shards' Options"},
		{goredis.NewStatusCmd(ctx, "client", "setname", "x"), "shardedcache: client|setname: a connection's name is set per connection; set ClientName in the shards' Options"},
		{goredis.NewCmd(ctx, "HELLO", 3), "shardedcache: hello: the protocol and authentication are set per connection; set Protocol, Username and Password in the shards' Options"},
		{goredis.NewCmd(ctx, "auth", "pw"), "shardedcache: auth: authentication is per connection; set Username and Password (or a CredentialsProvider) in the shards' Options"},
		{goredis.NewCmd(ctx, "multi"), "shardedcache: multi: a transaction must stay on one connection of one shard; use TxPipelined, TxPipeline or Watch"},
		{goredis.NewCmd(ctx, "subscribe", "ch"), "shardedcache: subscribe: a subscription holds its connection; use Subscribe, PSubscribe or SSubscribe"},
		{goredis.NewSlowLogCmd(ctx, "slowlog", "get", 1), "shardedcache: slowlog|get: each server's slow log has its own entry ids and count, so the logs of several do not merge into one; use ForEachShard or GetShard to run it on chosen shards"},
		{goredis.NewCmd(ctx, "slowlog", "get", 1), "shardedcache: slowlog|get: each server's slow log has its own entry ids and count, so the logs of several do not merge into one; use ForEachShard or GetShard to run it on chosen shards"},
		{goredis.NewStringCmd(ctx, "info"), "shardedcache: info: each server reports on itself, and the reports of several do not merge into one server's reply; use ForEachShard or GetShard to run it on chosen shards"},
		{goredis.NewCmd(ctx, "FT.SEARCH", "idx", "*"), "shardedcache: ft.search: a search index covers only the keys of its own shard, so its queries have no sharded meaning; run FT commands on each shard with ForEachShard"},
		{goredis.NewCmd(ctx, "cluster", "info"), "shardedcache: cluster: the shards are independent servers, not a Redis Cluster; use a redis.ClusterClient for a Redis Cluster"},
		{goredis.NewCmd(ctx, "shutdown"), "shardedcache: shutdown: it acts on one server, and Redis names no shard for it; use ForEachShard or GetShard to run it on chosen shards"},
		{goredis.NewCmd(ctx, "TS.MGET", "FILTER", "a=b"), "shardedcache: ts.mget: FILTER selects series on every shard, and go-redis's maps of series do not merge; use ForEachShard or GetShard to run it on chosen shards"},
	}
	for _, c := range cases {
		var r keyShards
		err := route(v, c.cmd, &r)
		var u *UnsupportedError
		if !errors.As(err, &u) || !errors.Is(err, ErrUnsupported) || err.Error() != c.want {
			t.Errorf("%v: %v\n  want %s", c.cmd.Args(), err, c.want)
		}
	}
}

// Commands added after Redis 7.0 route by their keys.
func TestRouteNewCommandsByKeys(t *testing.T) {
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	ctx := context.Background()
	rec := methods.NewRecorder()
	defer rec.Close()
	rec.HGetEX(ctx, "user:1", "name")
	rec.HExpire(ctx, "user:2", time.Minute, "a", "b")
	rec.BFAdd(ctx, "bloom:3", "x")
	rec.JSONSet(ctx, "doc:4", "$", "{}")
	rec.VAdd(ctx, "vs:5", "e", &goredis.VectorValues{Val: []float64{1, 2}})
	rec.TSAdd(ctx, "ts:6", 1, 2.5)
	rec.ARSet(ctx, "ar:7", 0, "x")
	keys := []string{"user:1", "user:2", "bloom:3", "doc:4", "vs:5", "ts:6", "ar:7"}
	for i, cmd := range rec.Cmds {
		var r keyShards
		err := route(v, cmd, &r)
		if want := c.GetShardInfo(keys[i]).Index; err != nil || r.shard != want {
			t.Errorf("%v: shard %d, %v; want %d", cmd.Args(), r.shard, err, want)
		}
	}
	// MSETEX sets all its keys or none: on one shard only.
	a, b := keyOn(t, c, 0, 0), keyOn(t, c, 1, 0)
	rec.MSetEX(ctx, goredis.MSetEXArgs{}, a, "1", b, "2")
	var r keyShards
	err := route(v, rec.Cmds[len(rec.Cmds)-1], &r)
	var cross *CrossShardError
	if !errors.As(err, &cross) || cross.Command != "msetex" || len(cross.Shards) != 2 {
		t.Errorf("MSETEX over two shards: %v, want a CrossShardError", err)
	}
}

// A transaction with a keyless command of one server runs on the shard of
// its keys (or any one shard when it has none).
func TestTxKeylessCommandJoinsKeysShard(t *testing.T) {
	m := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t), miniredis.RunT(t)}
	var opts []ShardOptions
	for _, s := range m {
		opts = append(opts, ShardOptions{Addr: s.Addr()})
	}
	c, err := NewShardedClient(&ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	k := keyOn(t, c, 2, 0)
	var echo *goredis.StringCmd
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		echo = p.Echo(ctx, "x")
		p.Set(ctx, k, "v", 0)
		return nil
	}); err != nil || echo.Val() != "x" {
		t.Fatalf("MULTI ECHO SET EXEC: %v, ECHO = %q", err, echo.Val())
	}
	if got, _ := m[2].Get(k); got != "v" {
		t.Errorf("shard 2 holds %q, want v", got)
	}
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		echo = p.Echo(ctx, "y")
		return nil
	}); err != nil || echo.Val() != "y" {
		t.Fatalf("MULTI ECHO EXEC: %v, ECHO = %q", err, echo.Val())
	}
}

// The merge of every pair of response policy and go-redis type that
// fanOutOf accepts gives one server's reply, exactly.
func TestMergeIntoGoRedisTypes(t *testing.T) {
	ctx := context.Background()
	info := func(args ...any) *commands.Info {
		i, err := commands.Lookup(args)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	reply := func(v any) part {
		cmd := goredis.NewCmd(ctx)
		if err, ok := v.(error); ok {
			cmd.SetErr(err)
		} else {
			cmd.SetVal(v)
		}
		return part{cmd: cmd}
	}
	cases := []struct {
		name  string
		cmd   goredis.Cmder
		info  *commands.Info
		parts []any
		want  any
	}{
		{"LATENCY RESET counts summed into a status", goredis.NewStatusCmd(ctx, "latency", "reset"), info("latency", "reset"), []any{int64(2), int64(3), int64(0)}, "5"},
		{"LATENCY RESET through Do", goredis.NewCmd(ctx, "latency", "reset"), info("latency", "reset"), []any{int64(2), int64(3)}, int64(5)},
		{"ACL DELUSER: one shard's count", goredis.NewIntCmd(ctx, "acl", "deluser", "u"), info("acl", "deluser", "u"), []any{int64(1), int64(1)}, int64(1)},
		{"CONFIG SET all succeeded", goredis.NewStatusCmd(ctx, "config", "set", "a", "b"), info("config", "set", "a", "b"), []any{"OK", "OK"}, "OK"},
		{"SCRIPT KILL: one succeeded", goredis.NewStatusCmd(ctx, "script", "kill"), info("script", "kill"), []any{errors.New("NOTBUSY"), "OK"}, "OK"},
		{"SCRIPT LOAD: the sha", goredis.NewStringCmd(ctx, "script", "load", "return 1"), info("script", "load", "return 1"), []any{"e0e1f9fa", "e0e1f9fa"}, "e0e1f9fa"},
		{"DBSIZE summed", goredis.NewIntCmd(ctx, "dbsize"), info("dbsize"), []any{int64(4), int64(0), int64(6)}, int64(10)},
		{"WAIT: the least", goredis.NewIntCmd(ctx, "wait", 1, 0), info("wait", 1, 0), []any{int64(2), int64(1)}, int64(1)},
		{"SCRIPT EXISTS: on every shard", goredis.NewBoolSliceCmd(ctx, "script", "exists", "a", "b"), info("script", "exists", "a", "b"),
			[]any{[]any{int64(1), int64(1)}, []any{int64(1), int64(0)}}, []bool{true, false}},
		{"KEYS concatenated", goredis.NewStringSliceCmd(ctx, "keys", "*"), info("keys", "*"), []any{[]any{"a"}, []any{}, []any{"b", "c"}}, []string{"a", "b", "c"}},
		{"PUBSUB CHANNELS concatenated", goredis.NewStringSliceCmd(ctx, "pubsub", "channels"), info("pubsub", "channels"), []any{[]any{"x"}, []any{"y"}}, []string{"x", "y"}},
	}
	// A view of one server: every key its parts list is served (see serves).
	c1, _ := miniShards(t, 1)
	one := c1.shards.Acquire()
	defer one.Release()
	for _, c := range cases {
		if err := fanOutOf(c.info, c.cmd); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		f := &fanout{v: one, cmd: c.cmd, info: c.info}
		for _, p := range c.parts {
			f.parts = append(f.parts, reply(p))
		}
		if err := f.merge(); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var got any
		switch cmd := c.cmd.(type) {
		case *goredis.Cmd:
			got = cmd.Val()
		case *goredis.StatusCmd:
			got = cmd.Val()
		case *goredis.StringCmd:
			got = cmd.Val()
		case *goredis.IntCmd:
			got = cmd.Val()
		case *goredis.BoolSliceCmd:
			if !slices.Equal(cmd.Val(), c.want.([]bool)) {
				t.Errorf("%s: %v, want %v", c.name, cmd.Val(), c.want)
			}
			continue
		case *goredis.StringSliceCmd:
			if !slices.Equal(cmd.Val(), c.want.([]string)) {
				t.Errorf("%s: %q, want %q", c.name, cmd.Val(), c.want)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
	}
}

// A channel is placed as a key is, but names no key: in a resharding
// window, PUBLISH (and PUBSUB NUMSUB) to a channel named as a key that moves
// leaves the key where it is, to the migration; the channel goes to its
// owner on the new ring, where the subscriptions are.
func TestChannelDoesNotMoveKeyOfItsName(t *testing.T) {
	c, servers := miniShards(t, 3)
	var opts []ShardOptions
	for i, m := range servers {
		opts = append(opts, ShardOptions{Name: fmt.Sprintf("s%d", i), Addr: m.Addr()})
	}
	ctx := context.Background()
	if err := c.SetShards(opts[:2]); err != nil {
		t.Fatal(err)
	}
	name := ""
	before := map[string]int{}
	for i := range 200 {
		k := fmt.Sprintf("name:%d", i)
		before[k] = c.GetShardInfo(k).Index
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	for k := range before {
		if c.GetShardInfo(k).Index == 2 {
			name = k
			break
		}
	}
	if name == "" {
		t.Fatal("no key moves to the new shard")
	}
	if n, err := c.Publish(ctx, name, "m").Result(); err != nil || n != 0 {
		t.Fatalf("PUBLISH %s = %d, %v", name, n, err)
	}
	if _, err := c.PubSubNumSub(ctx, name).Result(); err != nil {
		t.Fatal(err)
	}
	if !servers[before[name]].Exists(name) || servers[2].Exists(name) {
		t.Errorf("after PUBLISH to a channel named %q: the key is on its old owner %v, its new one %v; want it left on the old one",
			name, servers[before[name]].Exists(name), servers[2].Exists(name))
	}
	if v, err := c.Get(ctx, name).Result(); v != "v" || err != nil || !servers[2].Exists(name) {
		t.Errorf("GET %s = %q, %v; want v, moved to the new owner", name, v, err)
	}
}

// A keyShards reused from command to command, as processPipeline and
// processTx reuse theirs, routes each as a fresh one would: keysOf resets
// every field it does not keep (pending), whatever the command before set
// (the owners and spacing of a split MGET, an MSET's step, a refused key,
// a channel).
func TestKeyShardsReusedRoutesAsFresh(t *testing.T) {
	c := unreachableShards(t, 4)
	v := c.shards.Acquire()
	defer v.Release()
	ctx := context.Background()
	var keys []any
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("key:%d", i))
	}
	cmds := []goredis.Cmder{
		goredis.NewSliceCmd(ctx, append([]any{"mget"}, keys...)...),
		goredis.NewStringCmd(ctx, "get", "key:7"),
		goredis.NewStatusCmd(ctx, "mset", "key:1", "a", "key:2", "b", "key:3", "c"),
		goredis.NewStringCmd(ctx, "get", internalPrefix+"x"),
		goredis.NewIntCmd(ctx, "del", "key:3", "key:4", "key:5"),
		goredis.NewIntCmd(ctx, "publish", "key:9", "hello"),
		goredis.NewStringCmd(ctx, "echo", "hi"),
		goredis.NewSliceCmd(ctx, "mget", "key:11"),
		goredis.NewSliceCmd(ctx, "mget"), // arity
		goredis.NewSliceCmd(ctx, append([]any{"mget"}, keys[5:]...)...),
		// The same command again (keysOf does not look it up again), in
		// another case, with its arity broken, as bytes; containers,
		// families and unknown commands, which it looks up each time.
		goredis.NewStringCmd(ctx, "get", "key:8"),
		goredis.NewStringCmd(ctx, "get", "key:9"),
		goredis.NewStringCmd(ctx, "get"),
		goredis.NewStringCmd(ctx, "get", "key:10"),
		goredis.NewStringCmd(ctx, "GET", "key:11"),
		goredis.NewStringCmd(ctx, "GET", "key:12"),
		goredis.NewCmd(ctx, []byte("get"), "key:13"),
		goredis.NewCmd(ctx, []byte("get"), "key:14"),
		goredis.NewSliceCmd(ctx, "config", "get", "maxmemory"),
		goredis.NewStatusCmd(ctx, "config", "set", "maxmemory", "1"),
		goredis.NewStatusCmd(ctx, "config"),
		goredis.NewStatusCmd(ctx, "config", "resetstat"),
		goredis.NewCmd(ctx, "nosuch", "key:1"),
		goredis.NewCmd(ctx, "nosuch", "key:2"),
		goredis.NewCmd(ctx, "ft.search", "idx", "q"),
		goredis.NewCmd(ctx, "ft.search", "idx", "q"),
		goredis.NewCmd(ctx, "ft.info", "idx"),
		goredis.NewIntCmd(ctx, "del", "key:1"),
		goredis.NewIntCmd(ctx, "del", "key:1", "key:2", "key:3"),
	}
	var reused keyShards
	for _, cmd := range cmds {
		errReused := route(v, cmd, &reused)
		var fresh keyShards
		errFresh := route(v, cmd, &fresh)
		reused.pending, fresh.pending = shardcore.Pending{}, shardcore.Pending{}
		if fmt.Sprint(errReused) != fmt.Sprint(errFresh) || !reflect.DeepEqual(reused, fresh) {
			t.Errorf("%v: reused %+v, %v; fresh %+v, %v", cmd.Args(), reused, errReused, fresh, errFresh)
		}
	}
}
