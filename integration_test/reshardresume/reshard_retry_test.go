package reshardresume_test

// Failures that are not cancels (a RESTORE refused) mixed with cancels,
// and a Migration run again.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardRerunSameMigration runs a Migration whose first batch's
// RESTOREs are refused once (a *MigrationError), then runs the same
// Migration again, as MigrationError's doc allows ("Run again"): its
// Progress must still count every key once.
func TestReshardRerunSameMigration(t *testing.T) {
	direct, c, keys, moving := fixtures.OneToTwo(t, "rr:", 200)
	m, _ := fixtures.RunRefused(t, c, 1, shardedredis.MigrateOptions{BatchSize: 20, Parallelism: 1, InFlight: 1})
	p1 := m.Progress()[0]
	fixtures.CheckRunCounts(t, "run 1", m.Progress())
	if err := m.Run(ctx); err != nil {
		t.Fatalf("run 2 of the same Migration: %v", err)
	}
	p2 := m.Progress()[0]
	t.Logf("after run 1: %+v", p1)
	t.Logf("after run 2: %+v", p2)
	fixtures.CheckRunCounts(t, "same Migration after its second Run", m.Progress())
	fixtures.CheckOneToTwo(t, direct, keys, moving, p2.Moved+p2.OnNewOwner)
}

// TestReshardRefusedThenCutInSamePage: in run 1 the RESTOREs of a page's
// first batch are refused (Failed, retry list) and the run is cut while the
// page's second batch waits for the rate limiter (the page is not
// committed). The refusal lasts through run 2 (resumed): its keys are tried
// from the retry list and again from the page scanned again, whose
// RESTOREs, holding them, are refused whole. Run 3 then moves them. Each
// key must be counted once per run, listed once, and moved once over the
// runs (run 2 once failed 43 for 32 keys, and run 3 counted 43 moves).
func TestReshardRefusedThenCutInSamePage(t *testing.T) {
	direct, c, keys, moving := fixtures.OneToTwo(t, "rc:", 60)
	var mu sync.Mutex
	refusing := true
	var refusedKeys map[string]bool
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.AddHook(fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		mu.Lock()
		defer mu.Unlock()
		if !refusing || !slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return fixtures.IsStep(c, "restore") }) {
			return nil
		}
		if refusedKeys == nil {
			refusedKeys = map[string]bool{}
			for _, cmd := range cmds {
				if step, keys := fixtures.MoveStep(cmd); step == "restore" {
					for _, k := range keys {
						refusedKeys[k] = true
					}
				}
			}
			time.AfterFunc(300*time.Millisecond, cancel) // while the next batch waits
			return errors.New("injected: RESTORE refused")
		}
		for _, cmd := range cmds {
			if _, keys := fixtures.MoveStep(cmd); slices.ContainsFunc(keys, func(k string) bool { return refusedKeys[k] }) {
				return errors.New("injected: RESTORE refused")
			}
		}
		return nil
	}))
	// One page of 60 keys, batches of 20, 20 keys a second: the second
	// batch waits a second.
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Parallelism: 1, InFlight: 1, KeysPerSecond: 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(runCtx); err != context.Canceled {
		t.Fatalf("run 1: %v, want context.Canceled", err)
	}
	fixtures.CheckRunCounts(t, "run 1", m.Progress())
	cp := m.Checkpoint()
	t.Logf("run 1: %+v; checkpoint %+v; refused %d keys", m.Progress()[0], cp, len(refusedKeys))
	var counted int64
	counted += m.Progress()[0].Moved + m.Progress()[0].OnNewOwner

	m2, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Resume: cp})
	if err != nil {
		t.Fatal(err)
	}
	err = m2.Run(ctx)
	var merr *shardedredis.MigrationError
	if !errors.As(err, &merr) {
		t.Fatalf("run 2: %v, want a *MigrationError", err)
	}
	p2 := m2.Progress()[0]
	fixtures.CheckRunCounts(t, "run 2", m2.Progress())
	counted += p2.Moved + p2.OnNewOwner
	cp2 := m2.Checkpoint()
	retry := cp2.Shards[p2.ID].Retry
	distinct := slices.Compact(slices.Sorted(slices.Values(retry)))
	named := map[string]int{}
	for _, ke := range merr.Keys {
		named[ke.Key]++
	}
	t.Logf("run 2: %+v; retry list %d keys (%d distinct); MigrationError names %d keys (%d distinct)", p2, len(retry), len(distinct), len(merr.Keys), len(named))
	// Its retry of the refused keys fails, and so does the page scanned
	// again, whose RESTOREs hold them too: each key counts once.
	if p2.Failed != int64(len(distinct)) {
		t.Errorf("run 2 failed %d, want the %d distinct keys it lists", p2.Failed, len(distinct))
	}
	for k := range refusedKeys {
		if !slices.Contains(distinct, k) {
			t.Errorf("refused key %s is not on run 2's retry list", k)
		}
	}
	if len(retry) != len(distinct) {
		t.Errorf("run 2's checkpoint retries %d keys, %d distinct", len(retry), len(distinct))
	}
	if len(merr.Keys) != len(named) {
		t.Errorf("run 2's error names %d failed keys, %d distinct", len(merr.Keys), len(named))
	}

	mu.Lock()
	refusing = false
	mu.Unlock()
	m3, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Resume: cp2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m3.Run(ctx); err != nil {
		t.Fatalf("run 3: %v", err)
	}
	p3 := m3.Progress()[0]
	fixtures.CheckRunCounts(t, "run 3", m3.Progress())
	counted += p3.Moved + p3.OnNewOwner
	t.Logf("run 3: %+v", p3)
	fixtures.CheckOneToTwo(t, direct, keys, moving, counted)
}

// TestReshardCutDuringRetry: run 1 has every RESTORE of its first few
// batches refused (a *MigrationError, a long retry list); run 2 resumes and
// is cut at its nth RESTORE (before it is sent, or after its reply) while
// it moves the retry list, in batches of 4; run 3 finishes. Each run counts
// every key once; the runs move each changing key once.
func TestReshardCutDuringRetry(t *testing.T) {
	for nth := int32(1); nth <= 14; nth++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/after=%v", nth, after), func(t *testing.T) {
				direct, c, keys, moving := fixtures.OneToTwo(t, fmt.Sprintf("cr%d:", nth), 300)
				m, merr := fixtures.RunRefused(t, c, 10, shardedredis.MigrateOptions{BatchSize: 10, Parallelism: 1, InFlight: 1})
				first := fixtures.CheckRunCounts(t, "run 1", m.Progress())
				counted, failed := first.Moved, first.Failed
				cp := m.Checkpoint()
				nRetry := len(cp.Shards[m.Progress()[0].ID].Retry)
				if int64(nRetry) != failed || len(merr.Keys) != nRetry {
					t.Errorf("run 1: failed %d, %d keys named, %d to retry", failed, len(merr.Keys), nRetry)
				}
				h := &fixtures.CutAt{Name: "restore", Nth: nth, After: after}
				c.AddHook(h.Hook())
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				h.Arm(cancel)
				m2, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 4, Parallelism: 1, InFlight: 1, Resume: cp})
				if err != nil {
					t.Fatal(err)
				}
				err = m2.Run(runCtx)
				h.Arm(nil)
				if h.Hits < nth {
					t.Skipf("run 2 sent %d RESTOREs, fewer than %d", h.Hits, nth)
				}
				if err != context.Canceled {
					t.Fatalf("run 2: %v, want context.Canceled", err)
				}
				second := fixtures.CheckRunCounts(t, "run 2", m2.Progress())
				counted += second.Moved
				if f2 := second.Failed; f2 != 0 {
					t.Errorf("run 2 failed %d after a cancel", f2)
				}
				cp2 := m2.Checkpoint()
				retry2 := cp2.Shards[m2.Progress()[0].ID].Retry
				t.Logf("run 1 left %d to retry; run 2 %+v, left %d to retry", nRetry, m2.Progress()[0], len(retry2))
				m3, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 4, Resume: cp2})
				if err != nil {
					t.Fatal(err)
				}
				if err := m3.Run(ctx); err != nil {
					t.Fatalf("run 3: %v", err)
				}
				counted += fixtures.CheckRunCounts(t, "run 3", m3.Progress()).Moved
				fixtures.CheckOneToTwo(t, direct, keys, moving, counted)
				if c.Window() != nil {
					t.Error("the window is still open")
				}
			})
		}
	}
}

// TestReshardRetryListedTwiceMovesOnce resumes from a checkpoint whose
// retry list names each key twice, as one taken while a retried key failed
// again once did: each key moves, and is counted, once (a key listed twice
// was moved, then found on its new owner, and counted twice).
func TestReshardRetryListedTwiceMovesOnce(t *testing.T) {
	direct, c, keys, moving := fixtures.OneToTwo(t, "rt:", 200)
	m, merr := fixtures.RunRefused(t, c, 2, shardedredis.MigrateOptions{BatchSize: 20, Parallelism: 1, InFlight: 1})
	cp := m.Checkpoint()
	for id, sc := range cp.Shards {
		sc.Retry = append(sc.Retry, sc.Retry...)
		cp.Shards[id] = sc
	}
	m2, err := c.NewMigration(shardedredis.MigrateOptions{Resume: cp})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatalf("resumed: %v", err)
	}
	first, second := fixtures.CheckRunCounts(t, "run 1", m.Progress()), fixtures.CheckRunCounts(t, "run 2", m2.Progress())
	if second.Moved != int64(len(merr.Keys)) {
		t.Errorf("run 2 moved %d keys, want the %d listed (twice each)", second.Moved, len(merr.Keys))
	}
	fixtures.CheckOneToTwo(t, direct, keys, moving, first.Moved+second.Moved)
}
