package integration_test

import (
	"errors"
	"maps"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// Keyless commands on three redis-servers, by Redis's rule for clients: one
// with no request policy runs on one shard; one tipped all_shards or
// all_nodes runs on every shard, merged into one server's reply of the
// method's type; what has no sharded meaning is refused and reaches no
// server.
func TestCommandKeylessRealRedis(t *testing.T) {
	procs, c := startRealShards(t, 3)
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
		before[i] = readCounts(t, s.Client).calls
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
		if after := readCounts(t, s.Client).calls; !maps.Equal(after, want) {
			t.Errorf("shard %d: refused commands reached it: commands %v, want %v", i, after, want)
		}
	}
}
