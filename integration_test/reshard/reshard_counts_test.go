package integration_test

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
)

// delHook, on the old owner's client, deletes the keys of gone from the
// server (as a concurrent DEL would) before the DUMPs of a pipeline reach
// it, and fails the first DEL that names failKey, recording its keys (see
// before, a beforeSend hook).
type delHook struct {
	direct  *goredis.Client
	gone    map[string]bool
	failKey string
	mu      *sync.Mutex
	failed  *[]string
}

func (h delHook) before(ctx context.Context, cmds []goredis.Cmder) error {
	for _, cmd := range cmds {
		step, keys := moveStep(cmd)
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

// countsKeys is the number of keys of a countsFixture.
const countsKeys = 600

// countsFixture is a client over one real redis-server, holding countsKeys
// keys prefix0 ... (one in three with a one-hour TTL), in a resharding
// window to two: moving lists the keys whose owner changes, in key order;
// busy, the first 30 of them, were written on their new owner in the window
// (want holds that value); gone, the next 20, are to be deleted by the test
// between the SCAN and their move (want no longer holds them).
type countsFixture struct {
	shards     []shardedredis.ShardOptions
	direct     []*goredis.Client
	c          *shardedredis.ShardedClient
	next       *shardedredis.ShardedClient // placement under the new list
	want       map[string]string
	moving     []string
	busy, gone map[string]bool
}

func newCountsFixture(t *testing.T, prefix string, busyDirect bool) *countsFixture {
	t.Helper()
	f := &countsFixture{want: map[string]string{}, busy: map[string]bool{}, gone: map[string]bool{}}
	f.shards, f.direct, f.c = safetyFixture(t, 2, 1, shardedredis.Health{})
	f.next = placementOf(t, f.shards)
	for i := range countsKeys {
		k := prefix + strconv.Itoa(i)
		ttl := time.Duration(0)
		if i%3 == 0 {
			ttl = time.Hour
		}
		if err := f.c.Set(ctx, k, "v"+strconv.Itoa(i), ttl).Err(); err != nil {
			t.Fatal(err)
		}
		f.want[k] = "v" + strconv.Itoa(i)
		if f.next.GetShardInfo(k).Index == 1 {
			f.moving = append(f.moving, k)
		}
	}
	if len(f.moving) < 100 {
		t.Fatalf("only %d keys move", len(f.moving))
	}
	if err := f.c.BeginResharding(f.shards); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.moving[:30] {
		f.busy[k] = true
		write := f.c.Set // moved first, then written on b
		if busyDirect {
			write = f.direct[1].Set // on b while a holds the key: MIGRATE's BUSYKEY
		}
		if err := write(ctx, k, "new:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
		f.want[k] = "new:" + k
	}
	for _, k := range f.moving[30:50] {
		f.gone[k] = true
		delete(f.want, k)
	}
	return f
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
	f := newCountsFixture(t, "mc:", false)
	direct, c, next, want, moving, busy, gone := f.direct, f.c, f.next, f.want, f.moving, f.busy, f.gone
	const n = countsKeys
	var mu sync.Mutex
	var failedDel []string
	c.Shards()[0].Client.AddHook(beforeSend(delHook{direct: direct[0], gone: gone, failKey: moving[len(moving)/2], mu: &mu, failed: &failedDel}.before))

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
			onA, onB := holdsValue(t, direct[0], k), holdsValue(t, direct[1], k)
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

// holdsValue returns key's string value on server d, "" when it is not there.
func holdsValue(t *testing.T, d *goredis.Client, key string) string {
	t.Helper()
	v, err := d.Get(ctx, key).Result()
	if err != nil && err != goredis.Nil {
		t.Fatal(err)
	}
	return v
}
