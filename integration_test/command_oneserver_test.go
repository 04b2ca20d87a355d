package integration_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// A sharded client of one shard is one server: what it refuses over several
// shards (a report of one server, SORT with BY and GET patterns, a keyless
// command of every shard in a transaction, Watch with no keys, a wrong
// arity) runs there and gets the server's own reply; connection state is
// still refused, and over three shards the same calls are refused.
func TestCommandOneShardIsOneServer(t *testing.T) {
	_, c := startRealShards(t, 1)
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
	_, c := startRealShards(t, 3)
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
