package redis_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Keyless commands on three redis-servers, by Redis's rule for clients: one
// with no request policy runs on one shard; one tipped all_shards or
// all_nodes runs on every shard, merged into one server's reply of the
// method's type; what has no sharded meaning is refused and reaches no
// server.
func TestCommandKeylessRealRedis(t *testing.T) {
	procs, c := fixtures.StartRealShards(t, 3)
	shards := c.Shards()

	// Any one shard.
	if got, err := c.Echo(ctx, "hi").Result(); err != nil || got != "hi" {
		t.Errorf("ECHO = %q, %v", got, err)
	}
	if got, err := c.Eval(ctx, "return tonumber(ARGV[1]) * 2", nil, 21).Int(); err != nil || got != 42 {
		t.Errorf("EVAL with no keys = %d, %v", got, err)
	}
	if got, err := c.ConfigGet(ctx, "maxmemory-policy").Result(); err != nil || !maps.Equal(got, map[string]string{"maxmemory-policy": "noeviction"}) {
		t.Errorf("CONFIG GET = %v, %v", got, err)
	}
	if got, err := c.LastSave(ctx).Result(); err != nil || got <= 0 {
		t.Errorf("LASTSAVE = %d, %v", got, err)
	}

	// Every shard, merged: LATENCY RESET's count (Redis 7.4's agg_sum) in
	// the *redis.StatusCmd of LatencyReset, as go-redis reads an integer.
	if got, err := c.LatencyReset(ctx).Result(); err != nil || got != "0" {
		t.Errorf("LatencyReset = %q, %v", got, err)
	}
	if got, err := c.Do(ctx, "latency", "reset").Result(); err != nil || got != int64(0) {
		t.Errorf("Do LATENCY RESET = %#v, %v", got, err)
	}
	if got, err := c.ACLSetUser(ctx, "alice", "on", ">pw", "~*", "+get").Result(); err != nil || got != "OK" {
		t.Errorf("ACL SETUSER = %q, %v", got, err)
	}
	for i, s := range shards {
		if users, err := s.Client.ACLUsers(ctx).Result(); err != nil || len(users) != 2 || users[0] != "alice" {
			t.Errorf("shard %d users %q, %v; want alice and default", i, users, err)
		}
	}
	if got, err := c.ACLDelUser(ctx, "alice").Result(); err != nil || got != 1 {
		t.Errorf("ACL DELUSER = %d, %v; want one server's count", got, err)
	}

	// Refused before sending, typed or through Do alike.
	before := make([]map[string]int64, len(procs))
	for i, s := range shards {
		before[i] = fixtures.ReadCounts(t, s.Client).Calls
	}
	for name, err := range map[string]error{
		"SlowLogGet":      c.SlowLogGet(ctx, 1).Err(),
		"Do SLOWLOG GET":  c.Do(ctx, "slowlog", "get", 1).Err(),
		"Do SELECT":       c.Do(ctx, "select", 1).Err(),
		"ClientSetName":   c.Process(ctx, goredis.NewStatusCmd(ctx, "client", "setname", "x")),
		"Info":            c.Info(ctx).Err(),
		"Do FT.SEARCH":    c.Do(ctx, "FT.SEARCH", "idx", "*").Err(),
		"FunctionStats":   c.FunctionStats(ctx).Err(),
		"Do SUBSCRIBE ch": c.Do(ctx, "subscribe", "ch").Err(),
	} {
		var u *shardedredis.UnsupportedError
		if !errors.As(err, &u) {
			t.Errorf("%s: %v, want an UnsupportedError", name, err)
		}
	}
	for i, s := range shards {
		want := maps.Clone(before[i])
		want["info"]++ // the INFO that read before[i]
		if after := fixtures.ReadCounts(t, s.Client).Calls; !maps.Equal(after, want) {
			t.Errorf("shard %d: refused commands reached it: commands %v, want %v", i, after, want)
		}
	}
}

// A sharded client of one shard is one server: what it refuses over several
// shards (a report of one server, SORT with BY and GET patterns, a keyless
// command of every shard in a transaction, Watch with no keys, a wrong
// arity) runs there and gets the server's own reply; connection state is
// still refused, and over three shards the same calls are refused.
func TestCommandOneShardIsOneServer(t *testing.T) {
	_, c := fixtures.StartRealShards(t, 1)
	server := c.Shards()[0].Client

	info, err := c.Info(ctx, "server").Result()
	runID := server.InfoMap(ctx, "server").Item("Server", "run_id")
	if err != nil || runID == "" || !strings.Contains(info, "\r\nrun_id:"+runID+"\r\n") {
		t.Errorf("INFO server = %q, %v; want the server's, run_id %q", info, err, runID)
	}

	if err := server.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "slow", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	log, err := c.SlowLogGet(ctx, 1).Result()
	if err != nil || len(log) != 1 || !slices.Equal(log[0].Args, []string{"set", "slow", "1"}) {
		t.Errorf("SLOWLOG GET 1 = %+v, %v; want the SET", log, err)
	}
	if err := server.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err(); err != nil {
		t.Fatal(err)
	}

	if err := c.RPush(ctx, "list", 1, 2, 3).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.MSet(ctx, "w_1", 3, "w_2", 2, "w_3", 1, "o_1", "a", "o_2", "b", "o_3", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Sort(ctx, "list", &goredis.Sort{By: "w_*", Get: []string{"o_*"}}).Result(); err != nil || !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("SORT list BY w_* GET o_* = %q, %v; want [c b a]", got, err)
	}

	var ping *goredis.StatusCmd
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		ping = p.Ping(ctx)
		return nil
	}); err != nil || ping.Val() != "PONG" {
		t.Errorf("PING in TxPipelined = %q, %v", ping.Val(), err)
	}

	var incr *goredis.IntCmd
	err = c.Watch(ctx, func(tx *goredis.Tx) error {
		if err := tx.Ping(ctx).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			incr = p.Incr(ctx, "n")
			return nil
		})
		return err
	})
	if err != nil || incr.Val() != 1 {
		t.Errorf("Watch with no keys: INCR = %d, %v", incr.Val(), err)
	}

	if err := c.MGet(ctx).Err(); err == nil || err.Error() != "ERR wrong number of arguments for 'mget' command" {
		t.Errorf("MGET with no key: %v; want the server's error", err)
	}

	for name, err := range map[string]error{
		"Do SELECT":     c.Do(ctx, "select", 1).Err(),
		"ClientSetName": c.Process(ctx, goredis.NewStatusCmd(ctx, "client", "setname", "x")),
	} {
		if !errors.Is(err, shardedredis.ErrUnsupported) {
			t.Errorf("%s: %v, want an UnsupportedError", name, err)
		}
	}
}

// Over three shards, what runs on one server is refused, sent nowhere.
func TestCommandThreeShardsRefuseOneServer(t *testing.T) {
	_, c := fixtures.StartRealShards(t, 3)
	for name, err := range map[string]error{
		"INFO":            c.Info(ctx, "server").Err(),
		"SLOWLOG GET":     c.SlowLogGet(ctx, 1).Err(),
		"SORT BY GET":     c.Sort(ctx, "list", &goredis.Sort{By: "w_*", Get: []string{"o_*"}}).Err(),
		"Watch (no keys)": c.Watch(ctx, func(*goredis.Tx) error { return nil }),
		"PING in TxPipelined": func() error {
			_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Ping(ctx); return nil })
			return err
		}(),
	} {
		if !errors.Is(err, shardedredis.ErrUnsupported) {
			t.Errorf("%s: %v, want an UnsupportedError", name, err)
		}
	}
}

// A command split over three redis-servers that fails on one of them names
// that shard: FUNCTION LOAD of a library that shard 1 already has is a
// *shardedclient.MultiShardError with shard 1's own reply, and the other
// shards loaded it (FUNCTION LIST there shows it).
func TestSplitWriteErrorNamesShardRealRedis(t *testing.T) {
	_, c := fixtures.StartRealShards(t, 3)
	shards := c.Shards()
	const lib = "#!lua name=mylib\nredis.register_function('one', function() return 1 end)"
	if err := shards[1].Client.FunctionLoad(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	err := c.FunctionLoad(ctx, lib).Err()
	var multi *shardedclient.MultiShardError
	var reply goredis.Error
	if !errors.As(err, &multi) || !errors.As(err, &reply) || multi.Op != "function load" || multi.Reached != 3 ||
		len(multi.Shards) != 1 || multi.Shards[0].Index != 1 || multi.Shards[0].Addr != shards[1].Addr ||
		multi.Shards[0].Err.Error() != "ERR Library 'mylib' already exists" {
		t.Fatalf("FUNCTION LOAD: %v, want a MultiShardError naming shard 1 with its reply", err)
	}
	want := "shardedcache: function load: 1 of 3 shards failed: shard 1 (" + shards[1].Addr + "): ERR Library 'mylib' already exists"
	if err.Error() != want {
		t.Errorf("error %q\n want %q", err, want)
	}
	for i, sh := range shards {
		libs, err := sh.Client.FunctionList(ctx, goredis.FunctionListQuery{}).Result()
		if err != nil || len(libs) != 1 || libs[0].Name != "mylib" {
			t.Errorf("shard %d: libraries %v, %v; want mylib", i, libs, err)
		}
	} // Now every shard has it: one server's reply, as nothing was applied.
	if err := c.FunctionLoad(ctx, lib).Err(); err == nil || err.Error() != "ERR Library 'mylib' already exists" || errors.As(err, &multi) {
		t.Errorf("FUNCTION LOAD everywhere refused: %v, want the servers' own reply", err)
	}
}
