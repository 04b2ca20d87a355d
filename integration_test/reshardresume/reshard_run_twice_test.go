package reshardresume_test

// the same Migration run twice at once; a Migration of an
// ended window run in a newer one; Progress read while a Migration is run
// again.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardConcurrentRunSameMigration: run 1 leaves a retry list (its first
// RESTOREs refused). Then Run A of the same Migration starts its retry
// pass, whose RESTOREs are held and then refused, and Run B of the same
// Migration starts meanwhile: B waits for A (it once returned nil at once
// and ended the window with A's keys still on their old owner), then
// retries them itself and moves them.
func TestReshardConcurrentRunSameMigration(t *testing.T) {
	direct, c, keys, moving := fixtures.OneToTwo(t, "zcr:", 200)
	m, merr := fixtures.RunRefused(t, c, 1, shardedredis.MigrateOptions{BatchSize: 20, Parallelism: 1, InFlight: 1})
	nRetry := len(merr.Keys)
	if nRetry == 0 {
		t.Fatal("run 1 failed no key")
	}
	held, release := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	holding.Store(true)
	c.AddHook(fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return fixtures.IsStep(c, "restore") }) || !holding.Swap(false) {
			return nil
		}
		close(held)
		<-release
		return errors.New("injected: RESTORE refused (run A's retry)")
	}))
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- m.Run(ctx) }()
	<-held
	go func() { errB <- m.Run(ctx) }()
	select {
	case err := <-errB:
		t.Fatalf("run B returned %v while run A was under way", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-errA; !errors.As(err, &merr) || len(merr.Keys) != nRetry {
		t.Fatalf("run A: %v, want a *MigrationError naming its %d retried keys", err, nRetry)
	}
	if err := <-errB; err != nil || c.Window() != nil {
		t.Fatalf("run B: %v, window ended: %v; want nil, ended", err, c.Window() == nil)
	}
	var moved int64
	for _, p := range m.Progress() {
		moved += p.Moved + p.OnNewOwner
	}
	fixtures.CheckOneToTwo(t, direct, keys, moving, moved) // the Migration's counts cover its three runs
}

// TestReshardStaleMigrationInNewWindow: a Migration of window 1 (three shards
// to two), run after window 1 was abandoned and window 2 (two shards to
// one) began, returns ErrNoResharding and touches nothing (it once
// indexed window 2's shard list by window 1's positions, and panicked).
func TestReshardStaleMigrationInNewWindow(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 3, 3, shardedredis.Health{})
	for i := range 300 {
		if err := c.Set(ctx, fmt.Sprintf("zst:%d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(shards[:2]); err != nil {
		t.Fatal(err)
	}
	m1, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(shards[:1]); err != nil {
		t.Fatal(err)
	}
	var before []int64
	for _, d := range direct {
		before = append(before, fixtures.UserDBSize(d).Val())
	}
	if err := m1.Run(ctx); !errors.Is(err, shardedredis.ErrNoResharding) {
		t.Fatalf("window 1's Migration run in window 2: %v, want ErrNoResharding", err)
	}
	for i, d := range direct {
		if n := fixtures.UserDBSize(d).Val(); n != before[i] {
			t.Errorf("server %d holds %d keys after the stale run, %d before", i, n, before[i])
		}
	}
	if c.Window() == nil {
		t.Error("the stale run ended window 2")
	}
}

// TestReshardProgressWhileRerun polls Progress while the same Migration is run
// again and again (a key's RESTORE always refused, so that each Run starts
// with a retry, takeRetry): no snapshot may count more outcomes than
// Scanned.
func TestReshardProgressWhileRerun(t *testing.T) {
	_, c, keys, moving := fixtures.OneToTwo(t, "zpr:", 40)
	var bad string
	for _, k := range keys {
		if moving[k] {
			bad = k
			break
		}
	}
	c.AddHook(fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			if step, keys := fixtures.MoveStep(cmd); step == "restore" && slices.Contains(keys, bad) {
				return errors.New("injected: RESTORE refused")
			}
		}
		return nil
	}))
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 50, Parallelism: 1, InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var snaps, over atomic.Int64
	var mu sync.Mutex
	var example string
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, p := range m.Progress() {
					snaps.Add(1)
					if sum := p.Owned + p.Moved + p.OnNewOwner + p.Gone + p.Stale + p.Failed; sum > p.Scanned {
						if over.Add(1) == 1 {
							mu.Lock()
							example = fmt.Sprintf("scanned %d, owned %d moved %d onNewOwner %d gone %d stale %d failed %d (sum %d)",
								p.Scanned, p.Owned, p.Moved, p.OnNewOwner, p.Gone, p.Stale, p.Failed, sum)
							mu.Unlock()
						}
					}
				}
			}
		}()
	}
	runs := 0
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) && over.Load() == 0 {
		var merr *shardedredis.MigrationError
		if err := m.Run(ctx); !errors.As(err, &merr) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("run %d: %v, want a *MigrationError", runs+1, err)
		}
		runs++
	}
	stop.Store(true)
	wg.Wait()
	fixtures.CheckRunCounts(t, "after the reruns", m.Progress())
	t.Logf("%d runs of one Migration, %d snapshots", runs, snaps.Load())
	if over.Load() > 0 {
		t.Errorf("%d snapshots counted more outcomes than Scanned; the first: %s", over.Load(), example)
	}
}
