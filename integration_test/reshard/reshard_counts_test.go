package reshard_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// delHook, on the old owner's client, deletes the keys of gone from the
// server (as a concurrent DEL would) before the DUMPs of a pipeline reach
// it, and fails the first DEL that names failKey, recording its keys (see
// before, a BeforeSend hook).
type delHook struct {
	direct  *goredis.Client
	gone    map[string]bool
	failKey string
	mu      *sync.Mutex
	failed  *[]string
}

func (h delHook) before(ctx context.Context, cmds []goredis.Cmder) error {
	for _, cmd := range cmds {
		step, keys := fixtures.MoveStep(cmd)
		switch step {
		case "dump":
			for _, k := range keys {
				if h.gone[k] {
					if err := h.direct.Del(ctx, k).Err(); err != nil {
						return err
					}
				}
			}
		case "del":
			h.mu.Lock()
			hit := len(*h.failed) == 0 && slices.Contains(keys, h.failKey)
			if hit {
				*h.failed = append(*h.failed, keys...)
			}
			h.mu.Unlock()
			if hit {
				return errors.New("injected DEL failure")
			}
		}
	}
	return nil
}

// TestMigrationCounts runs a migration from one server to two in
// which some keys were written by commands in the window (so moved before
// the migration, not scanned), some are deleted between the SCAN and their
// mark, and the finish (DEL) of one batch fails: the progress counts each
// key once, exactly where it belongs, and every server holds exactly what
// a plain map says (the keys of the failed finish on both, still marked on
// a); a second migration settles them (restored: it finishes their
// moves) and counts them moved.
func TestMigrationCounts(t *testing.T) {
	f := fixtures.NewCountsFixture(t, "mc:", false)
	direct, c, next, want, moving, busy, gone := f.Direct, f.C, f.Next, f.Want, f.Moving, f.Busy, f.Gone
	const n = fixtures.CountsKeys
	var mu sync.Mutex
	var failedDel []string
	c.Shards()[0].Client.AddHook(fixtures.BeforeSend(delHook{direct: direct[0], gone: gone, failKey: moving[len(moving)/2], mu: &mu, failed: &failedDel}.before))

	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 40, InFlight: 1, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(ctx)
	var merr *shardedredis.MigrationError
	if !errors.As(err, &merr) {
		t.Fatalf("run 1: %v, want a *MigrationError", err)
	}
	if len(failedDel) < 2 {
		t.Fatalf("the failed DEL named %d keys; want a batch", len(failedDel))
	}
	failed := map[string]bool{}
	for _, k := range failedDel {
		failed[k] = true
	}
	if len(merr.Keys) != len(failed) {
		t.Errorf("run 1 failed %d keys, want the %d of the failed DEL", len(merr.Keys), len(failed))
	}
	for _, ke := range merr.Keys {
		if !failed[ke.Key] {
			t.Errorf("run 1 failed %s, not in the failed DEL", ke.Key)
		}
	}
	p := m.Progress()
	if len(p) != 1 {
		t.Fatalf("progress of %d sources", len(p))
	}
	got := p[0]
	wantP := shardedredis.ShardProgress{
		Scanned: int64(n - len(busy)),
		Owned:   int64(n - len(moving)),
		Moved:   int64(len(moving) - len(busy) - len(gone) - len(failed)),
		Gone:    int64(len(gone)),
		Failed:  int64(len(failed)),
	}
	if got.Scanned != wantP.Scanned || got.Owned != wantP.Owned || got.Moved != wantP.Moved ||
		got.OnNewOwner != wantP.OnNewOwner || got.Gone != wantP.Gone || got.Stale != 0 || got.Failed != wantP.Failed {
		t.Errorf("run 1 progress: scanned %d owned %d moved %d onNewOwner %d gone %d stale %d failed %d\nwant         scanned %d owned %d moved %d onNewOwner %d gone %d stale 0 failed %d",
			got.Scanned, got.Owned, got.Moved, got.OnNewOwner, got.Gone, got.Stale, got.Failed,
			wantP.Scanned, wantP.Owned, wantP.Moved, wantP.OnNewOwner, wantP.Gone, wantP.Failed)
	}
	// Every server holds exactly its keys: the failed ones on both.
	check := func(run int, bothOK map[string]bool) {
		t.Helper()
		for i := range n {
			k := "mc:" + strconv.Itoa(i)
			onA, onB := fixtures.HoldsValue(t, direct[0], k), fixtures.HoldsValue(t, direct[1], k)
			v, ok := want[k]
			newOwner := next.GetShardInfo(k).Index
			switch {
			case !ok:
				if onA != "" || onB != "" {
					t.Errorf("run %d: %s deleted, yet a=%q b=%q", run, k, onA, onB)
				}
			case bothOK[k]:
				if onA == "" || onB != v {
					t.Errorf("run %d: %s (DEL failed) a=%q b=%q, want both, b %q", run, k, onA, onB, v)
				}
			case newOwner == 0 && (onA != v || onB != ""):
				t.Errorf("run %d: %s stays on a: a=%q b=%q, want %q on a only", run, k, onA, onB, v)
			case newOwner == 1 && (onA != "" || onB != v):
				t.Errorf("run %d: %s moves to b: a=%q b=%q, want %q on b only", run, k, onA, onB, v)
			}
			if newOwner == 1 && ok && i%3 == 0 && !busy[k] {
				if ttl := direct[1].PTTL(ctx, k).Val(); ttl < 50*time.Minute {
					t.Errorf("run %d: %s moved with PTTL %v, want about 1h", run, k, ttl)
				}
			}
		}
	}
	t.Logf("run 1: %+v (moved by commands %d, gone %d, failed finish of %d keys)", got, len(busy), len(gone), len(failed))
	check(1, failed)

	m2, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 40, InFlight: 1, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatalf("run 2: %v", err)
	}
	got = m2.Progress()[0]
	if got.Scanned != int64(n-len(moving)+len(failed)) || got.Owned != int64(n-len(moving)) ||
		got.Moved != int64(len(failed)) || got.Gone != 0 || got.OnNewOwner != 0 || got.Failed != 0 || got.Stale != 0 {
		t.Errorf("run 2 progress: scanned %d owned %d moved %d onNewOwner %d gone %d stale %d failed %d; want scanned %d owned %d moved %d, no other",
			got.Scanned, got.Owned, got.Moved, got.OnNewOwner, got.Gone, got.Stale, got.Failed,
			n-len(moving)+len(failed), n-len(moving), len(failed))
	}
	check(2, nil)
}
