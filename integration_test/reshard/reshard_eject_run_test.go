package reshard_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// A Run whose ctx is already cancelled does not wait for another Run of the
// same Migration that is stuck (here: its SCAN held by a hook); it returns
// context.Canceled at once.
func TestReshardCancelledRunDoesNotWait(t *testing.T) {
	_, c, _, _ := fixtures.OneToTwo(t, "crw:", 50)
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	c.AddHook(fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		if cmds[0].Name() == "scan" {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil
	}))
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 10, Parallelism: 1, InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- m.Run(context.Background()) }()
	<-entered
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	second := make(chan error, 1)
	start := time.Now()
	go func() { second <- m.Run(cctx) }()
	select {
	case err := <-second:
		t.Logf("second Run returned %v after %v", err, time.Since(start))
	case <-time.After(2 * time.Second):
		close(release)
		err := <-second
		t.Errorf("a Run with a cancelled ctx blocked %v behind a stuck Run (returned %v only once it was released); want context.Canceled at once", time.Since(start), err)
		<-first
		return
	}
	close(release)
	<-first
}

// Ejecting and rejoining the source shard (server 0) or the destination
// (server 1) for 300 ms during Run: Run does not return ErrNoResharding,
// and once a run returns nil every key is on its owner. With the
// destination ejected, the live ring placed its keys on the source: taken
// for keys that stay, they were left behind and lost once the window ended
// (52 of 400).
func TestReshardEjectDuringRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		victim int
	}{{"source", 0}, {"destination", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
				ProbeTimeout: 100 * time.Millisecond}
			direct, c, keys, moving := fixtures.OneToTwoWith(t, "ej:", 400, h)
			m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 20, Parallelism: 1, InFlight: 1, KeysPerSecond: 400})
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			go func() { res <- m.Run(ctx) }()
			time.Sleep(150 * time.Millisecond)
			fixtures.EjectFor(t, c, direct[tc.victim], tc.victim, 300*time.Millisecond, func() {})
			err = <-res
			t.Logf("run 1: %v", err)
			for i := 0; err != nil && i < 5; i++ {
				if errors.Is(err, shardedredis.ErrNoResharding) {
					t.Fatalf("run %d: ErrNoResharding in the Migration's own window (window open: %v)", i+1, c.Window() != nil)
				}
				time.Sleep(200 * time.Millisecond)
				err = m.Run(ctx)
				t.Logf("run %d: %v", i+2, err)
			}
			if err != nil {
				t.Fatalf("final run: %v", err)
			}
			var moved int64
			for _, p := range m.Progress() { // over its runs
				moved += p.Moved + p.OnNewOwner
			}
			fixtures.CheckOneToTwo(t, direct, keys, moving, moved)
			fixtures.CheckValues(t, c, keys)
		})
	}
}

// While the destination is ejected, a run moves nothing and keeps every key
// that an ejected shard owns after the move where it is, each named as
// failed with ErrEjected, and the window stays open; once the destination
// is back, the next run moves exactly those keys.
func TestReshardWaitsForEjectedDestination(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond}
	direct, c, keys, moving := fixtures.OneToTwoWith(t, "ed:", 60, h)
	nMoving := 0
	for _, k := range keys {
		nMoving += fixtures.B2I(moving[k])
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.EjectFor(t, c, direct[1], 1, 2500*time.Millisecond, func() {
		var merr *shardedredis.MigrationError
		if err := m.Run(ctx); !errors.As(err, &merr) || len(merr.Shards) != 0 || len(merr.Keys) != nMoving {
			t.Fatalf("run with the destination ejected: %v, want a *MigrationError naming the %d keys bound for it", err, nMoving)
		}
		for _, e := range merr.Keys {
			if !moving[e.Key] || !errors.Is(e, shardedredis.ErrEjected) || e.From != m.Progress()[0].Shard || !strings.Contains(e.To, `"b"`) {
				t.Errorf("failure %v: want a key moving from a to b, with ErrEjected", e)
			}
		}
		p := m.Progress()[0]
		if p.Scanned != int64(len(keys)) || p.Owned != int64(len(keys)-nMoving) || p.Failed != int64(nMoving) || p.Moved+p.OnNewOwner+p.Gone+p.Stale != 0 || p.Done {
			p.Failures = nil
			t.Errorf("progress %+v: want %d scanned, %d owned, %d failed, nothing else", p, len(keys), len(keys)-nMoving, nMoving)
		}
		if c.Window() == nil {
			t.Error("the window ended with keys left for the ejected destination")
		}
	})
	if err := m.Run(ctx); err != nil {
		t.Fatalf("run once the destination is back: %v", err)
	}
	fixtures.CheckOneToTwo(t, direct, keys, moving, m.Progress()[0].Moved)
	if c.Window() != nil {
		t.Error("the window is still open after the migration")
	}
}

// A command inside the window on a key bound for an ejected shard does not
// move it to the shard standing in: a, b become a, c, and c is ejected, so
// a stands in for the keys moving from b to c. A GET there used to move
// them from b to a, where the migration later deleted them as stale copies
// (lost). Now the GET misses on a, as for any ejected shard's key, the key
// stays on b, and the migration moves it to c once c is back.
func TestReshardCommandLeavesKeyForEjectedDestination(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond}
	shards, direct, c := fixtures.SafetyFixture(t, 3, 2, h)
	ac := []shardedredis.ShardOptions{shards[0], shards[2]}
	next := fixtures.PlacementOf(t, ac)
	var toC []string // on b, moving to c
	for i := 0; len(toC) < 20; i++ {
		k := "cl:" + strconv.Itoa(i)
		if err := c.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if fixtures.ServerOf(t, c, shards, k) == 1 && next.GetShardInfo(k).Index == 1 {
			toC = append(toC, k)
		}
	}
	if err := c.BeginResharding(ac); err != nil {
		t.Fatal(err)
	}
	fixtures.EjectFor(t, c, direct[2], 1, 1500*time.Millisecond, func() {
		for _, k := range toC {
			if err := c.Get(ctx, k).Err(); err != goredis.Nil {
				t.Errorf("GET %s with its new owner c ejected: %v, want redis.Nil (a stands in)", k, err)
			}
			if v := fixtures.HoldsValue(t, direct[1], k); v != "v"+k {
				t.Errorf("%s left b (b holds %q) while c is ejected", k, v)
			}
		}
	})
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range toC {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v"+k || fixtures.HoldsValue(t, direct[2], k) != "v"+k {
			t.Errorf("Get(%s) = %q, %v after the migration; want it on c", k, v, err)
		}
	}
}
