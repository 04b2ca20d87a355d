package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestMigrationServerSide runs a ServerSide migration (MIGRATE between the
// servers) from one real redis-server to two, in which some keys were
// written on their new owner in the window (BUSYKEY), some are deleted
// between the SCAN and their batch's transaction, and the first batch's
// transaction fails unsent: the progress counts each key once, exactly
// where it belongs, every server holds exactly what a plain map says (moved
// keys with their TTL), and a second run moves the failed batch's keys.
func TestMigrationServerSide(t *testing.T) {
	f := newCountsFixture(t, "ms:")
	direct, c, want, busy, gone := f.direct, f.c, f.want, f.busy, f.gone
	const n = countsKeys
	moving := map[string]bool{}
	for _, k := range f.moving {
		moving[k] = true
	}
	// On the old owner: the first transaction fails unsent (its keys go to
	// failed); the others first lose the keys of gone, as to a concurrent DEL.
	var mu sync.Mutex
	failed := map[string]bool{}
	failing := true
	c.Shards()[0].Client.AddHook(beforeSend(func(ctx context.Context, cmds []goredis.Cmder) error {
		if cmds[0].Name() != "multi" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		for _, cmd := range cmds {
			k := fmt.Sprint(cmd.Args()[len(cmd.Args())-1])
			switch {
			case cmd.Name() != "exists":
			case failing:
				failed[k] = true
			case gone[k]:
				if err := direct[0].Del(ctx, k).Err(); err != nil {
					return err
				}
			}
		}
		if failing {
			failing = false
			return errors.New("injected transaction failure")
		}
		return nil
	}))
	count := func(set map[string]bool, in bool) int64 { // keys of set in failed (in) or not
		n := int64(0)
		for k := range set {
			if failed[k] == in {
				n++
			}
		}
		return n
	}
	check := func(run int, p shardedredis.ShardProgress, want shardedredis.ShardProgress) {
		t.Helper()
		if p.Scanned != want.Scanned || p.Owned != want.Owned || p.Moved != want.Moved || p.OnNewOwner != want.OnNewOwner ||
			p.Gone != want.Gone || p.Stale != 0 || p.Failed != want.Failed {
			t.Errorf("run %d progress: scanned %d owned %d moved %d onNewOwner %d gone %d stale %d failed %d\nwant         scanned %d owned %d moved %d onNewOwner %d gone %d stale 0 failed %d",
				run, p.Scanned, p.Owned, p.Moved, p.OnNewOwner, p.Gone, p.Stale, p.Failed,
				want.Scanned, want.Owned, want.Moved, want.OnNewOwner, want.Gone, want.Failed)
		}
	}
	opt := shardedredis.MigrateOptions{BatchSize: 40, InFlight: 1, Parallelism: 1, ServerSide: true, KeepWindow: true}
	m, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(ctx)
	var merr *shardedredis.MigrationError
	if !errors.As(err, &merr) || len(merr.Keys) != len(failed) || len(failed) == 0 {
		t.Fatalf("run 1: %v, want a *MigrationError naming the %d keys of the failed transaction", err, len(failed))
	}
	for _, ke := range merr.Keys {
		if !failed[ke.Key] || !strings.Contains(ke.Err.Error(), "injected transaction failure") {
			t.Errorf("run 1 failed %s (%v), not in the failed transaction", ke.Key, ke.Err)
		}
	}
	if count(busy, false) == 0 || count(gone, false) == 0 || count(busy, true)+count(gone, true) == int64(len(failed)) {
		t.Fatalf("the failed batch took every busy or gone key, or only such keys: %d busy, %d gone of its %d", count(busy, true), count(gone, true), len(failed))
	}
	check(1, m.Progress()[0], shardedredis.ShardProgress{
		Scanned:    n,
		Owned:      int64(n - len(moving)),
		Moved:      count(moving, false) - count(busy, false) - count(gone, false),
		OnNewOwner: count(busy, false),
		Gone:       count(gone, false),
		Failed:     int64(len(failed)),
	})
	// Each key on its owner alone with its value; the failed batch's keys
	// on the old owner still (and a busy one on the new owner too).
	content := func(run int) {
		t.Helper()
		for i := range n {
			k := "ms:" + strconv.Itoa(i)
			onA, onB := holdsValue(t, direct[0], k), holdsValue(t, direct[1], k)
			v, ok := want[k]
			wantA, wantB := v, ""
			switch {
			case !ok && run == 1 && failed[k]:
				wantA, wantB = "v"+strconv.Itoa(i), ""
			case !ok:
				wantA = ""
			case run == 1 && failed[k] && busy[k]:
				wantA, wantB = "v"+strconv.Itoa(i), v
			case run == 1 && failed[k]:
			case moving[k]:
				wantA, wantB = "", v
			}
			if onA != wantA || onB != wantB {
				t.Errorf("run %d: %s a=%q b=%q, want a=%q b=%q", run, k, onA, onB, wantA, wantB)
			}
			if onB != "" && i%3 == 0 && !busy[k] {
				if ttl := direct[1].PTTL(ctx, k).Val(); ttl < 50*time.Minute {
					t.Errorf("run %d: %s moved with PTTL %v, want about 1h", run, k, ttl)
				}
			}
		}
	}
	content(1)

	m2, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatalf("run 2: %v", err)
	}
	check(2, m2.Progress()[0], shardedredis.ShardProgress{
		Scanned:    int64(n-len(moving)) + int64(len(failed)),
		Owned:      int64(n - len(moving)),
		Moved:      int64(len(failed)) - count(busy, true) - count(gone, true),
		OnNewOwner: count(busy, true),
		Gone:       count(gone, true),
	})
	content(2)
	if err := c.EndResharding(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationServerSideLeavingShard: a shard that MIGRATE could not reach
// as a new owner (here, one with a credentials provider) may leave: it is an
// old owner only, and its keys move with MIGRATE to the shard that stays.
func TestMigrationServerSideLeavingShard(t *testing.T) {
	shards, direct, _ := safetyFixture(t, 2, 2, shardedredis.Health{})
	a, b := shards[0], shards[1]
	o := *b.Options
	o.CredentialsProvider = func() (string, string) { return "", "" } // the servers need none
	b.Options = &o
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 300
	onB := 0
	for i := range n {
		k := "ml:" + strconv.Itoa(i)
		if err := c.Set(ctx, k, i, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if c.GetShardInfo(k).Index == 1 {
			onB++
		}
	}
	if err := c.BeginResharding([]shardedredis.ShardOptions{b, a}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewMigration(shardedredis.MigrateOptions{ServerSide: true}); !errors.Is(err, shardedredis.ErrServerSide) {
		t.Fatalf("NewMigration with b a new owner: %v, want ErrServerSide", err)
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding([]shardedredis.ShardOptions{a}); err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{ServerSide: true})
	if err != nil {
		t.Fatalf("NewMigration with b leaving: %v", err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var moved int64
	for _, p := range m.Progress() {
		moved += p.Moved
	}
	if moved != int64(onB) || direct[1].DBSize(ctx).Val() != 0 || direct[0].DBSize(ctx).Val() != n {
		t.Fatalf("moved %d of b's %d keys; a holds %d, b %d; want all %d on a", moved, onB, direct[0].DBSize(ctx).Val(), direct[1].DBSize(ctx).Val(), n)
	}
}
