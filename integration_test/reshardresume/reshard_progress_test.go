package reshardresume_test

import (
	"sync"
	"testing"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardProgressWhileRunning polls Progress while a migration runs
// (its doc: "safe to call while Run runs"): a snapshot should never count
// more keys in Owned+Moved+OnNewOwner+Gone+Stale+Failed than in Scanned.
func TestReshardProgressWhileRunning(t *testing.T) {
	w := fixtures.CutFixture(t, 42, 0, 4000)
	m, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 10, Parallelism: 2, InFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var snaps, over int
	var worst shardedredis.ShardProgress
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, p := range m.Progress() {
				snaps++
				if sum := p.Owned + p.Moved + p.OnNewOwner + p.Gone + p.Stale + p.Failed; sum > p.Scanned {
					over++
					if sum-p.Scanned > worst.Owned+worst.Moved+worst.OnNewOwner+worst.Gone+worst.Stale+worst.Failed-worst.Scanned {
						worst = p
					}
				}
			}
		}
	}()
	err = m.Run(ctx)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CheckRunCounts(t, "run", m.Progress())
	if over > 0 {
		t.Errorf("%d of %d snapshots counted more keys than scanned; e.g. scanned %d, owned %d moved %d (sum %d)",
			over, snaps, worst.Scanned, worst.Owned, worst.Moved, worst.Owned+worst.Moved+worst.OnNewOwner+worst.Gone+worst.Stale+worst.Failed)
	}
	w.CheckFinal(t)
}
