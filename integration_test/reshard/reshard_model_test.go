package reshard_test

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
	"strconv"
	"testing"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardModelRedis runs the reference model, -model.ops operations per
// seed, on five real redis-servers.
func TestReshardModelRedis(t *testing.T) {
	seeds := fixtures.ModelSeeds(t)
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			fixtures.RunRedisModel(t, seed, *fixtures.ModelOps, nil, false)
		})
	}
	// The first seed again, a quarter of its steps, autopipelined.
	t.Run("autopipelined/seed="+strconv.FormatInt(seeds[0], 10), func(t *testing.T) {
		fixtures.RunRedisModel(t, seeds[0], *fixtures.ModelOps/4, nil, true)
	})
}
