package reshardcut_test

// Attacks on the migration's counts (commit e7a9c08): cut a run by its
// context at many points, resume it from its checkpoint, and check each
// run's counts, the moves summed over runs, and where every key ends up.

import (
	"context"
	"fmt"
	"testing"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardCutEverywhere cuts the first run at the nth SCAN, DUMP,
// RESTORE, DEL or UNLINK, before it is sent or after its reply, for many n
// and seeds (1 and 2; 1 to 3 under SHARDEDCACHE_LONG=1), and resumes it to
// the end.
func TestReshardCutEverywhere(t *testing.T) {
	names := []string{"scan", "dump", "restore", "del", "unlink"}
	cases := 0
	for seed := int64(1); seed <= int64(fixtures.Scaled(2, 3)); seed++ {
		for _, name := range names {
			for _, nth := range []int32{1, 2, 3, 5, 8, 13, 21} {
				for _, after := range []bool{false, true} {
					variant := int(seed) + int(nth)
					conc := (nth+int32(seed))%2 == 0
					label := fmt.Sprintf("seed%d/%s/%d/after=%v/v%d/conc=%v", seed, name, nth, after, variant%3, conc)
					cases++
					t.Run(label, func(t *testing.T) {
						cutOnce(t, seed, variant, name, nth, after, conc)
					})
				}
			}
		}
	}
	t.Logf("%d cut points", cases)
}

func cutOnce(t *testing.T, seed int64, variant int, name string, nth int32, after, conc bool) {
	w := fixtures.CutFixture(t, seed, variant, 300)
	opt := shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 1, InFlight: 1}
	if conc {
		opt = shardedredis.MigrateOptions{BatchSize: 9, Parallelism: 3, InFlight: 3}
	}
	h := &fixtures.CutAt{Name: name, Nth: nth, After: after}
	w.C.AddHook(h.Hook())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.Arm(cancel)
	m, err := w.C.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(runCtx)
	h.Arm(nil)
	h.Mu.Lock()
	fired := h.Fired
	h.Mu.Unlock()
	if !fired {
		t.Skipf("the cut never fired (%d %s)", h.Hits, name)
	}
	first := fixtures.CheckRunCounts(t, "run 1", m.Progress())
	moved, stale := first.Moved, first.Stale
	for _, p := range m.Progress() {
		if p.Failed != 0 {
			t.Errorf("run 1, %s: failed %d after a cancel: %v", p.Shard, p.Failed, p.Failures)
		}
	}
	switch {
	case err == nil:
		// Only a cut after the last reply may let the run finish.
		if w.C.Window() == nil {
			t.Logf("run 1 finished despite the cut")
		}
	case err != context.Canceled:
		t.Fatalf("run 1: %v (%T), want context.Canceled", err, err)
	default:
		if w.C.Window() == nil {
			t.Fatal("the window ended after a cut run")
		}
		mv, st := w.ResumeToEnd(t, shardedredis.MigrateOptions{BatchSize: 7}, m.Checkpoint())
		moved, stale = moved+mv, stale+st
	}
	if err == nil && !after {
		t.Errorf("run 1 was cut before a %s was sent, yet returned nil", name)
	}
	if moved != int64(w.Moving) {
		t.Errorf("the runs moved %d keys, want the %d that change owner", moved, w.Moving)
	}
	if stale != int64(w.Stale) {
		t.Errorf("the runs count %d stale copies, want the %d there were", stale, w.Stale)
	}
	w.CheckFinal(t)
}

// TestReshardCutLast cuts the first run at the last few SCANs, DUMPs,
// RESTOREs and DELs it sends (counted on a full run of the same fixture
// first), one source after the other: a cut in the last batch of the last
// page of the last source. Seeds 1 and 2 (1 to 3 under SHARDEDCACHE_LONG=1).
func TestReshardCutLast(t *testing.T) {
	cases := 0
	for seed := int64(1); seed <= int64(fixtures.Scaled(2, 3)); seed++ {
		for variant := range 3 {
			for _, name := range []string{"scan", "dump", "restore", "del", "unlink"} {
				// Count the commands of a full run.
				total := countSends(t, seed, variant, name)
				for j := int32(0); j < 3 && j < total; j++ {
					for _, after := range []bool{false, true} {
						cases++
						t.Run(fmt.Sprintf("seed%d/v%d/%s/last-%d/after=%v", seed, variant, name, j, after), func(t *testing.T) {
							cutOnce(t, seed, variant, name, total-j, after, false)
						})
					}
				}
			}
		}
	}
	t.Logf("%d cut points", cases)
}

func countSends(t *testing.T, seed int64, variant int, name string) int32 {
	var total int32
	t.Run(fmt.Sprintf("count/seed%d/v%d/%s", seed, variant, name), func(t *testing.T) {
		w := fixtures.CutFixture(t, seed, variant, 300)
		h := &fixtures.CutAt{Name: name, Nth: -1}
		w.C.AddHook(h.Hook())
		h.Arm(func() {})
		m, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 1, InFlight: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx); err != nil {
			t.Fatal(err)
		}
		h.Mu.Lock()
		total = h.Hits
		h.Mu.Unlock()
	})
	return total
}
