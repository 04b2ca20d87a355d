package topology_test

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Issue 11.6: while a shard is ejected, a keyless command that changes
// every shard (FLUSHDB, FLUSHALL, SCRIPT LOAD and FLUSH, FUNCTION LOAD and
// DELETE, CONFIG SET), alone or in a pipeline, fails with an *EjectedError
// naming the ejected shard and is sent to no shard; the reads (DBSIZE,
// KEYS, SCAN) cover the live shards. Once the shard rejoins, FLUSHDB
// empties all three servers (before: the rejoined shard kept its keys).
func TestTopologyKeyspaceWritesWithShardEjected(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	fixtures.ResetServerState(t, procs)
	out := fixtures.StartRedisProc(t, fixtures.RealRedisBin(t), "")
	shards := []shardedredis.ShardOptions{
		fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0), fixtures.TopoShard("c", out.Addr, 0),
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards,
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	owners := fixtures.ByOwner(c, ks)
	live := int64(len(owners[0]) + len(owners[1]))
	servers := []*goredis.Client{fixtures.DirectClient(t, procs[0].Addr, 0), fixtures.DirectClient(t, procs[1].Addr, 0), fixtures.DirectClient(t, out.Addr, 0)}
	held := func(servers ...*goredis.Client) []int64 {
		t.Helper()
		n := make([]int64, len(servers))
		for i, s := range servers {
			var err error
			if n[i], err = s.DBSize(ctx).Result(); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	want := []int64{int64(len(owners[0])), int64(len(owners[1])), int64(len(owners[2]))}
	if got := held(servers...); !slices.Equal(got, want) {
		t.Fatalf("servers hold %v keys, want %v", got, want)
	}

	out.Signal(t, syscall.SIGSTOP)
	for i := 0; !c.Stats()[2].Ejected; i++ {
		if i == 2 {
			t.Fatalf("shard c not ejected after 2 failed GETs: %+v", c.Stats()[2])
		}
		if err := c.Get(ctx, owners[2][i]).Err(); err == nil {
			t.Fatal("GET on the stopped shard succeeded")
		}
	}
	ref := shardedclient.ShardRef{Index: 2, Name: "c", Addr: out.Addr}
	wantEjected := func(what string, err error, command string) {
		t.Helper()
		var e *shardedredis.EjectedError
		if !errors.As(err, &e) || !errors.Is(err, shardedredis.ErrEjected) || e.Command != command ||
			len(e.Shards) != 1 || e.Shards[0] != ref {
			t.Fatalf("%s with shard c ejected: %v (%T), want an *EjectedError for %s naming shard c", what, err, err, command)
		}
		text := fmt.Sprintf(`shardedcache: %s: sent to no shard: it must reach every shard, and shard 2 "c" (%s) is ejected; run it once they rejoin, or on chosen shards with ForEachShard`, command, out.Addr)
		if err.Error() != text {
			t.Fatalf("%s: error text\n %s\nwant\n %s", what, err, text)
		}
	}
	const lib = "#!lua name=ejected\nredis.register_function('ejected', function(keys, args) return 1 end)"
	writes := []struct {
		command string
		run     func() error
	}{
		{"flushdb", func() error { return c.FlushDB(ctx).Err() }},
		{"flushall", func() error { return c.FlushAll(ctx).Err() }},
		{"script|flush", func() error { return c.ScriptFlush(ctx).Err() }},
		{"script|load", func() error { return c.ScriptLoad(ctx, "return 1").Err() }},
		{"function|load", func() error { return c.FunctionLoad(ctx, lib).Err() }},
		{"function|delete", func() error { return c.FunctionDelete(ctx, "ejected").Err() }},
		{"function|flush", func() error { return c.FunctionFlush(ctx).Err() }},
		{"config|set", func() error { return c.ConfigSet(ctx, "slowlog-max-len", "200").Err() }},
	}
	for _, w := range writes {
		wantEjected(w.command, w.run(), w.command)
	}
	var flush *goredis.StatusCmd
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, owners[0][0], "piped", 0)
		flush = p.FlushDB(ctx)
		return nil
	})
	if len(cmds) != 2 || cmds[0].Err() != nil {
		t.Fatalf("pipeline: %v, SET %v", cmds, cmds[0].Err())
	}
	wantEjected("FLUSHDB in a pipeline", flush.Err(), "flushdb")
	wantEjected("the pipeline", err, "flushdb")

	if got := held(servers[:2]...); !slices.Equal(got, want[:2]) {
		t.Fatalf("the live servers hold %v keys after the refused writes, want %v", got, want[:2])
	}
	for _, s := range servers[:2] {
		if n, err := s.ConfigGet(ctx, "slowlog-max-len").Result(); err != nil || n["slowlog-max-len"] != "128" {
			t.Fatalf("slowlog-max-len on a live server = %v, %v; want 128 (the refused CONFIG SET sent nowhere)", n, err)
		}
		if libs, err := s.FunctionList(ctx, goredis.FunctionListQuery{}).Result(); err != nil || len(libs) != 0 {
			t.Fatalf("FUNCTION LIST on a live server = %v, %v; want none", libs, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != live {
		t.Fatalf("DBSIZE with shard c ejected = %d, %v; want the live shards' %d", n, err, live)
	}
	if got, err := c.Keys(ctx, "*").Result(); err != nil || int64(len(got)) != live {
		t.Fatalf("KEYS with shard c ejected: %d keys, %v; want %d", len(got), err, live)
	}
	var scanned int64
	for iter := c.Scan(ctx, 0, "", 100).Iterator(); iter.Next(ctx); {
		scanned++
	}
	if scanned != live {
		t.Fatalf("SCAN with shard c ejected saw %d keys, want %d", scanned, live)
	}

	out.Signal(t, syscall.SIGCONT)
	fixtures.Poll(t, 10*time.Second, "shard c rejoins", func() error {
		if c.Stats()[2].Ejected {
			return errors.New("still ejected")
		}
		return nil
	})
	if got := held(servers[2]); got[0] != want[2] {
		t.Fatalf("the rejoined server holds %d keys, want its %d", got[0], want[2])
	}
	if s, err := c.FlushDB(ctx).Result(); err != nil || s != "OK" {
		t.Fatalf("FLUSHDB after shard c rejoined = %q, %v", s, err)
	}
	if got := held(servers...); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Fatalf("servers hold %v keys after FLUSHDB, want none", got)
	}
}

// Issue 11.8: inside a Watch callback over 3 shards, DBSIZE, KEYS, SCAN and
// a TxPipelined with FLUSHDB are refused, sent nowhere, with the
// *UnsupportedError that a plain TxPipelined with FLUSHDB gives; commands
// on the watched key's shard still run.
func TestTopologyWatchRefusesKeyspaceWide(t *testing.T) {
	procs := fixtures.SharedRedis(t, 3)
	shards := make([]shardedredis.ShardOptions, 3)
	for i, p := range procs {
		shards[i] = fixtures.TopoShard(fmt.Sprintf("w%d", i), p.Addr, 0)
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	ks := fixtures.Keys(90)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	notInTx := func(command string) string {
		return "shardedcache: " + command + ": it runs on several shards, so not in a transaction; use ForEachShard or GetShard to run it on chosen shards"
	}
	_, plain := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.FlushDB(ctx)
		return nil
	})
	if plain == nil || plain.Error() != notInTx("flushdb") || !errors.Is(plain, shardedredis.ErrUnsupported) {
		t.Fatalf("TxPipelined with FLUSHDB: %v", plain)
	}
	watched := ks[0]
	err = c.Watch(ctx, func(tx *goredis.Tx) error {
		checks := []struct {
			command string
			err     error
		}{
			{"dbsize", tx.DBSize(ctx).Err()},
			{"keys", tx.Keys(ctx, "*").Err()},
			{"scan", tx.Scan(ctx, 0, "", 10).Err()},
		}
		_, txErr := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, watched, "in-tx", 0)
			p.FlushDB(ctx)
			return nil
		})
		checks = append(checks, struct {
			command string
			err     error
		}{"flushdb", txErr})
		for _, ch := range checks {
			var ue *shardedredis.UnsupportedError
			if !errors.As(ch.err, &ue) || ch.err.Error() != notInTx(ch.command) {
				return fmt.Errorf("%s inside Watch: %v, want %q", ch.command, ch.err, notInTx(ch.command))
			}
		}
		if txErr.Error() != plain.Error() {
			return fmt.Errorf("TxPipelined with FLUSHDB inside Watch: %v, plain: %v", txErr, plain)
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, watched, "watched", 0)
			return nil
		})
		return err
	}, watched)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(len(ks)) {
		t.Fatalf("DBSIZE after the refused FLUSHDBs = %d, %v; want %d", n, err, len(ks))
	}
	if v, err := c.Get(ctx, watched).Result(); err != nil || v != "watched" {
		t.Fatalf("GET %s = %q, %v; want the transaction's write", watched, v, err)
	}
}
