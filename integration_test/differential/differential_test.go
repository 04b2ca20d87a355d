package differential_test

// The differential test: one seeded script of commands runs on a single
// server (a plain *goredis.Client) and on a ShardedClient over four servers;
// every reply and, every 500 commands, the whole keyspace must agree, and
// every key must be on the server the ring names.
//
//	go test -race -run Differential ./integration_test/differential -seed 42
//	DIFF_SEED=42 go test -run Differential ./integration_test/differential
//
// Here the servers are miniredis; realredis_test.go runs the same script on
// redis-server processes.

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

func TestDifferentialMiniredis(t *testing.T) {
	seed := fixtures.DiffSeed(t)
	t.Logf("seed=%d (rerun with -seed %d or DIFF_SEED=%d)", seed, seed, seed)
	for _, v := range fixtures.DiffVariants {
		t.Run(v.Name, func(t *testing.T) {
			single := miniredis.RunT(t)
			sc := goredis.NewClient(&goredis.Options{Addr: single.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = sc.Close() })
			servers, sharded := fixtures.StartShardsAP(t, 4, v.P, v.AP)
			fixtures.RunDifferential(t, fixtures.DiffEnv{
				Seed: seed, Pipeline: v.Pipeline, Single: sc, Sharded: sharded,
				Holders: func(key string) []int { return fixtures.Holders(servers, key) },
			})
		})
	}
}

// Raw keyless commands (Do) that the sharded client runs on every shard:
// the merged reply must be the single server's, or the command must be
// refused with ErrUnsupported before any shard sees it, as the typed
// methods are. The random script found the first case (seeds whose raw
// KEYS matches nothing); the others are the same fan-out path with other
// response policies.
func TestDifferentialRawFanOut(t *testing.T) {
	single := miniredis.RunT(t)
	sc := goredis.NewClient(&goredis.Options{Addr: single.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = sc.Close() })
	servers, sharded := fixtures.StartShards(t, 4, nil)
	for _, c := range []fixtures.Client{sc, sharded} {
		if err := c.ScriptLoad(ctx, "return 1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	sent := func() int {
		n := 0
		for _, s := range servers {
			n += s.CommandCount()
		}
		return n
	}
	for _, args := range [][]any{
		{"keys", "nomatch:*"}, // response policy: default (concatenate)
		{"script", "exists", fixtures.SHA("return 1"), fixtures.SHA("not loaded")}, // agg_logical_and
		{"info"}, // special
	} {
		before := sent()
		want, got := sc.Do(ctx, args...), sharded.Do(ctx, args...)
		if errors.Is(got.Err(), shardedredis.ErrUnsupported) {
			if n := sent() - before; n != 0 {
				t.Errorf("%s: refused (%v), but %d commands reached the shards", fixtures.CmdString(got), got.Err(), n)
			}
			continue
		}
		if ws, gs, same := fixtures.CompareReplies(fixtures.Op{}, want, got); !same {
			t.Errorf("%s: not refused (%d commands reached the shards), and the merged reply differs from one server's:\n  single server: %s\n  sharded:       %s (%#v)",
				fixtures.CmdString(got), sent()-before, ws, gs, got.Val())
		}
	}
}
