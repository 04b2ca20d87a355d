package reshardresume_test

// SCAN returns a key more than once (Redis allows it, e.g.
// while a table shrinks). Here every SCAN reply of the migration on a
// source also repeats the keys of the source's previous reply, so that
// every key comes back twice, deterministically. Each stale copy must be
// counted once, each move once, and each run's counts must add up.

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

func TestReshardScanDuplicates(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		for _, inflight := range []int{1, 3} {
			t.Run(fmt.Sprintf("seed%d/inflight%d", seed, inflight), func(t *testing.T) {
				w := fixtures.CutFixture(t, seed, int(seed), 300)
				var mu sync.Mutex
				prev := map[string][]string{} // addr -> keys of the previous SCAN reply
				addrs := map[string]bool{}
				fixtures.OnScanReplies(w.C, func(addr string, sc *goredis.ScanCmd) {
					keys, cursor := sc.Val()
					mu.Lock()
					addrs[addr] = true
					dup := slices.Concat(keys, prev[addr])
					prev[addr] = slices.Clone(keys)
					if cursor == 0 {
						delete(prev, addr)
					}
					mu.Unlock()
					sc.SetVal(dup, cursor)
				})
				m, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 2, InFlight: inflight})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx); err != nil {
					t.Fatal(err)
				}
				c := fixtures.CheckRunCounts(t, "run", m.Progress())
				var scanned int64
				for _, p := range m.Progress() {
					scanned += p.Scanned
					t.Logf("%s: %+v", p.Shard, p)
				}
				distinct := len(w.Keys)
				if c.Moved != int64(w.Moving) {
					t.Errorf("the run moved %d keys, want the %d that change owner", c.Moved, w.Moving)
				}
				if c.Stale != int64(w.Stale) {
					t.Errorf("the run counts %d stale copies, want the %d there were (each returned twice by SCAN)", c.Stale, w.Stale)
				}
				t.Logf("scanned %d (SCAN returned every key twice); %d keys + %d stale copies on the sources", scanned, distinct, w.Stale)
				w.CheckFinal(t)
			})
		}
	}
}
