package differential_test

// The differential test of differential_test.go on real redis-server
// processes: one single server and four shards per variant. The script adds
// the commands that real Redis 7 has and miniredis lacks (SORT, LCS,
// BITFIELD, ZDIFF, ZRANGESTORE, GEOSEARCHSTORE, FUNCTION/FCALL, ...).
//
// Locally the test is skipped when redis-server is not in PATH; in CI
// (CI=true) that fails it.

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// startRedisServer starts a redis-server for the differential test (see
// StartRedisProc), its blocking commands timing out within 10 ms (hz 100;
// the default hz 10 checks timeouts every 100 ms), and returns its address.
func startRedisServer(t *testing.T, bin string) string {
	t.Helper()
	return fixtures.StartRedisProc(t, bin, "", "--hz", "100").Addr
}

func TestDifferentialRealRedis(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	seed := fixtures.DiffSeed(t)
	t.Logf("seed=%d (rerun with -seed %d or DIFF_SEED=%d); %s", seed, seed, seed, redisVersion(bin))
	for _, v := range fixtures.DiffVariants {
		t.Run(v.Name, func(t *testing.T) {
			newClient := func(addr string) *goredis.Client {
				c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			single := newClient(startRedisServer(t, bin))
			shards := make([]shardedredis.ShardOptions, 4)
			direct := make([]*goredis.Client, len(shards)) // the shards' servers, asked directly
			for i := range shards {
				addr := startRedisServer(t, bin)
				shards[i] = shardedredis.ShardOptions{Addr: addr, Options: &goredis.Options{MaxRetries: -1}}
				direct[i] = newClient(addr)
			}
			opt := &shardedredis.ShardedOptions{Shards: shards, Placement: v.P}
			if v.AP {
				fixtures.WithAP(opt)
			}
			sharded, err := shardedredis.NewShardedClient(fixtures.WithAPEnv(opt))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := sharded.Close(); err != nil {
					t.Error(err)
				}
			})
			fixtures.RunDifferential(t, fixtures.DiffEnv{
				Seed: seed, Real: true, Pipeline: v.Pipeline, Single: single, Sharded: sharded,
				Holders: func(key string) []int {
					var out []int
					for i, c := range direct {
						n, err := c.Exists(ctx, key).Result()
						if err != nil {
							t.Fatalf("seed=%d: EXISTS %q on shard %d: %v", seed, key, i, err)
						}
						if n > 0 {
							out = append(out, i)
						}
					}
					return out
				},
			})
		})
	}
}

func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}
