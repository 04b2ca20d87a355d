package reshard_test

// Shards ejected when the window opens (and back before the migration ends),
// and a preset whose rebuild re-values its points: regressions from a
// helper's attack on real redis-servers.

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// ejectReachable pauses server i for pause, fails one command on it so
// that it is ejected, and waits until it answers again: it stays ejected
// until RetryTimeout.
func ejectReachable(t *testing.T, c *shardedredis.ShardedClient, direct []*goredis.Client, i int, pause time.Duration) {
	t.Helper()
	fixtures.PauseUntilEjected(t, c, direct[i], i, pause)
	fixtures.Poll(t, 10*time.Second, "paused server answers", func() error { return direct[i].Ping(ctx).Err() })
	if !c.Stats()[i].Ejected {
		t.Fatal("shard rejoined before the test could use its ejection")
	}
}

// runUntilNil waits until shard i has rejoined, then runs one Migration
// until it returns nil (at most 20 runs), and checks its counts.
func runUntilNil(t *testing.T, c *shardedredis.ShardedClient, i int) {
	t.Helper()
	fixtures.Poll(t, 10*time.Second, "rejoin", func() error {
		if c.Stats()[i].Ejected {
			return errors.New("still ejected")
		}
		return nil
	})
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; ; n++ {
		err := m.Run(ctx)
		if err == nil {
			break
		}
		if n == 20 {
			t.Fatalf("run %d: %v", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fixtures.CheckRunCounts(t, "the last run", m.Progress())
}

// A bystander b, ejected (but reachable) when the window opens (a, b, c ->
// a, b, c, d): BeginResharding judged b's own keys by the ring without b,
// took them for stale copies on b and deleted them (67 of 300 lost).
func TestReshardBystanderEjectedAtBegin(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 1500 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond}
	shards, direct, c := fixtures.SafetyFixture(t, 4, 3, h)
	keys := fixtures.SetKeys(t, c, "bb:", 300)
	ejectReachable(t, c, direct, 1, 500*time.Millisecond)
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	runUntilNil(t, c, 1)
	fixtures.CheckValues(t, c, keys)
}

// a, b -> a, c with b ejected (reachable) when the window opens, and
// values written on its stand-in a meanwhile: once b is back and the
// migration done, b's keys hold b's values; the stand-in's copies are stale
// and never win (they won on BUSYKEY).
func TestReshardLeavingEjectedAtBegin(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 1500 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond}
	shards, direct, c := fixtures.SafetyFixture(t, 3, 2, h)
	keys := fixtures.SetKeys(t, c, "lb:", 200)
	var onB []string
	for _, k := range keys {
		if fixtures.ServerOf(t, c, shards, k) == 1 {
			onB = append(onB, k)
		}
	}
	ejectReachable(t, c, direct, 1, 500*time.Millisecond)
	for _, k := range onB[:len(onB)/2] { // written on the stand-in a
		if err := c.Set(ctx, k, "standin", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding([]shardedredis.ShardOptions{shards[0], shards[2]}); err != nil {
		t.Fatal(err)
	}
	runUntilNil(t, c, 2) // b follows the new list's shards while it leaves
	fixtures.CheckValues(t, c, keys)
}

// With libmemcached KETAMA and HashAfter (a rebuild re-values the points,
// as libmemcached does), the ring after an ejection and a rejoin is not the
// full ring though every shard is live. Settled compared with the full
// ring, so the migration left keys "for an ejected shard" forever and the
// window could not end.
func TestReshardRehashPresetWindowEnds(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond}
	shards, direct, _ := fixtures.SafetyFixture(t, 3, 2, h)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2], Health: h,
		Placement: ring.Libmemcached{Distribution: ring.LibmemcachedKetama, HashAfter: ring.HashMD5}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	keys := fixtures.SetKeys(t, c, "rh:", 100)
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	fixtures.EjectFor(t, c, direct[1], 1, 400*time.Millisecond, func() {}) // b out and back
	runUntilNil(t, c, 1)
	if c.Window() != nil {
		t.Error("the window is open after the migration")
	}
	fixtures.CheckValues(t, c, keys)
}
