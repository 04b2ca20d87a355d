package reshardresume_test

// Kill and resume (issue 10): a migration stopped twice midway (its context
// canceled) and resumed from its checkpoint each time loses no key, keeps
// every value and TTL, and leaves no copy on a shard that does not own the
// key; the keys written by the application in between keep the new value.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// resumeValue is what a key of the kill-and-resume test holds.
type resumeValue struct {
	kind string // "string", "hash" or "list"
	str  string
	hash map[string]string
	list []string
	ttl  time.Duration // 0: none
}

func TestReshardKillAndResume(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 5, 3, shardedredis.Health{})
	const n = 3000
	keys := make([]string, n)
	want := make(map[string]*resumeValue, n)
	written := time.Now()
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range keys {
			k := "r:" + strconv.Itoa(i)
			keys[i] = k
			ttl := time.Duration(1000+i%500) * time.Second
			switch i % 5 {
			case 0:
				want[k] = &resumeValue{kind: "string", str: "s" + strconv.Itoa(i), ttl: ttl}
				p.Set(ctx, k, want[k].str, ttl)
			case 1:
				want[k] = &resumeValue{kind: "string", str: "s" + strconv.Itoa(i)}
				p.Set(ctx, k, want[k].str, 0)
			case 2:
				want[k] = &resumeValue{kind: "hash", hash: map[string]string{"f": strconv.Itoa(i), "g": strconv.Itoa(i + 1)}, ttl: ttl}
				p.HSet(ctx, k, "f", i, "g", i+1)
				p.Expire(ctx, k, ttl)
			case 3:
				want[k] = &resumeValue{kind: "list", list: []string{strconv.Itoa(i), strconv.Itoa(i + 1), strconv.Itoa(i + 2)}, ttl: ttl}
				p.RPush(ctx, k, i, i+1, i+2)
				p.Expire(ctx, k, ttl)
			default:
				want[k] = &resumeValue{kind: "list", list: []string{strconv.Itoa(i)}}
				p.RPush(ctx, k, i)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The new list: "b" at a new address (server 3), "d" added (server 4).
	next := []shardedredis.ShardOptions{shards[0], shards[2], shards[3], shards[4]}
	next[2].Name, next[3].Name = "b", "d"
	from := map[string]int{}
	for _, k := range keys {
		from[k] = fixtures.ServerOf(t, c, shards, k)
	}
	to := map[string]int{}
	target, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: next})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		to[k] = fixtures.ServerOf(t, target, shards, k)
	}
	target.Close()
	var moving []string
	for _, k := range keys {
		if to[k] != from[k] {
			moving = append(moving, k)
		}
	}
	if len(moving) < n/3 {
		t.Fatalf("%d of %d keys move; want the old b's and d's share", len(moving), n)
	}
	// Stale copies on the new owners, of another type for some: removed when
	// the window opens.
	for i, k := range moving[:200] {
		d := direct[to[k]]
		if i%2 == 0 {
			err = d.Set(ctx, k, "stale", 0).Err()
		} else {
			err = d.RPush(ctx, k, "stale").Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	if err := c.BeginResharding(next); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if got := fixtures.ServerOf(t, c, shards, k); got != to[k] {
			t.Fatalf("%s on server %d in the window, want %d", k, got, to[k])
		}
	}
	byCommand := touch(t, c, direct, want, from, moving[200:260], "before")
	checkMidway(t, direct, keys, from, to)

	opt := shardedredis.MigrateOptions{BatchSize: 20, Parallelism: 2, KeysPerSecond: 3000}
	var runs [][]shardedredis.ShardProgress
	m, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	var cp *shardedredis.Checkpoint
	for stop := range 2 {
		// Stop the run once it has moved another sixth of the keys.
		if err := runUntil(m, int64(len(moving)/6)); err != context.Canceled {
			t.Fatalf("run %d: %v, want context.Canceled itself (stopped midway)", stop+1, err)
		}
		runs = append(runs, m.Progress())
		for _, p := range runs[stop] {
			if p.Failed != 0 || len(p.Failures) != 0 {
				t.Fatalf("run %d, stopped by its context: %s failed %d keys (%v), want none (cut short is not failed)", stop+1, p.Shard, p.Failed, p.Failures)
			}
		}
		cp = m.Checkpoint()
		if w := c.Window(); w == nil || cp.Window != w.ID || len(cp.Shards) != 3 {
			t.Fatalf("checkpoint %+v of window %v", cp, w)
		}
		if !slices.ContainsFunc(slices.Collect(maps.Values(cp.Shards)), func(s shardedredis.ShardCheckpoint) bool { return !s.Done }) {
			t.Fatalf("run %d stopped midway, but its checkpoint says every source is done: %+v", stop+1, cp)
		}
		if err := c.EndResharding(); !errors.Is(err, shardedredis.ErrMigrationIncomplete) {
			t.Fatalf("EndResharding after run %d stopped: %v, want ErrMigrationIncomplete", stop+1, err)
		}
		checkMidway(t, direct, keys, from, to)
		byCommand += touch(t, c, direct, want, from, moving[260+60*stop:320+60*stop], "after run "+strconv.Itoa(stop+1))
		opt.Resume = cp
		if m, err = c.NewMigration(opt); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("resumed run to the end: %v", err)
	}
	runs = append(runs, m.Progress())
	if c.Window() != nil {
		t.Fatal("the window is open after the migration finished")
	}

	// Every key moved once, by a command or by one of the runs.
	var migrated int64
	for r, progress := range runs {
		var sum shardedredis.ShardProgress
		for _, p := range progress {
			sum.Scanned, sum.Owned, sum.Moved, sum.OnNewOwner = sum.Scanned+p.Scanned, sum.Owned+p.Owned, sum.Moved+p.Moved, sum.OnNewOwner+p.OnNewOwner
			sum.Gone, sum.Failed = sum.Gone+p.Gone, sum.Failed+p.Failed
			migrated += p.Moved + p.OnNewOwner
			if p.Stale != 0 || p.Scanned != p.Owned+p.Moved+p.OnNewOwner+p.Gone+p.Stale+p.Failed {
				t.Fatalf("run %d, %s: %+v", r+1, p.Shard, p)
			}
			if r == len(runs)-1 && (p.Failed != 0 || !p.Done) {
				t.Fatalf("last run, %s: %+v, want done, nothing failed", p.Shard, p)
			}
		}
		t.Logf("run %d: scanned %d, owned %d, moved %d, on the new owner %d, gone %d, failed %d",
			r+1, sum.Scanned, sum.Owned, sum.Moved, sum.OnNewOwner, sum.Gone, sum.Failed)
	}
	if want := int64(len(moving) - byCommand); migrated != want {
		t.Fatalf("the runs moved %d keys, want %d (%d change owner, %d moved by commands)", migrated, want, len(moving), byCommand)
	}
	checkResumed(t, direct, keys, to, want, written)
	for i, d := range direct {
		size, err := fixtures.UserDBSize(d).Result()
		owned := 0
		for _, k := range keys {
			owned += fixtures.B2I(to[k] == i)
		}
		if err != nil || size != int64(owned) {
			t.Fatalf("server %d holds %d keys (%v), want the %d it owns", i, size, err, owned)
		}
	}
}

// runUntil runs m until its sources have moved at least n keys, then cancels
// it, and returns Run's error.
func runUntil(m *shardedredis.Migration, n int64) error {
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx2) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			var moved int64
			for _, p := range m.Progress() {
				moved += p.Moved + p.OnNewOwner
			}
			if moved >= n {
				cancel()
			}
		}
	}
}

// touch writes keys through the client inside the window (each moves to its
// new owner first), updating want, and returns how many of them the write
// moved (those still on their old owner).
func touch(t *testing.T, c *shardedredis.ShardedClient, direct []*goredis.Client, want map[string]*resumeValue, from map[string]int, keys []string, when string) int {
	t.Helper()
	moved := 0
	for _, k := range keys {
		on, err := direct[from[k]].Exists(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		moved += int(on)
		w := want[k]
		switch w.kind {
		case "string":
			w.str, w.ttl = "touched "+when, 0 // SET drops the TTL
			err = c.Set(ctx, k, w.str, 0).Err()
		case "hash":
			w.hash["t"] = when
			err = c.HSet(ctx, k, "t", when).Err()
		default:
			w.list = append(w.list, when)
			err = c.RPush(ctx, k, when).Err()
		}
		if err != nil {
			t.Fatalf("writing %s %s: %v", k, when, err)
		}
	}
	return moved
}

// checkMidway checks the window's invariant while the migration is stopped:
// every key is on its old owner or its new one, nowhere else; on both only
// as the same value (a move stopped between RESTORE and DEL, which the next
// one finishes).
func checkMidway(t *testing.T, direct []*goredis.Client, keys []string, from, to map[string]int) {
	t.Helper()
	held := fixtures.KeyHolders(t, direct, keys)
	for _, k := range keys {
		switch on := held[k]; {
		case len(on) == 1 && (on[0] == from[k] || on[0] == to[k]):
		case len(on) == 2 && slices.Contains(on, from[k]) && slices.Contains(on, to[k]):
			t.Logf("%s is on its old and its new owner (a move stopped before its DEL)", k)
			a, errA := direct[from[k]].Dump(ctx, k).Result()
			b, errB := direct[to[k]].Dump(ctx, k).Result()
			if errA != nil || errB != nil || a != b {
				t.Fatalf("%s on its old owner %d and its new owner %d with different values (%v, %v)", k, from[k], to[k], errA, errB)
			}
		default:
			t.Fatalf("%s is on servers %v; its old owner is %d, its new one %d", k, on, from[k], to[k])
		}
	}
}

// checkResumed checks every key on its owner alone, with its value and its
// TTL (at most the one set, at least that minus the time since it was set).
func checkResumed(t *testing.T, direct []*goredis.Client, keys []string, to map[string]int, want map[string]*resumeValue, written time.Time) {
	t.Helper()
	on := fixtures.KeyHolders(t, direct, keys)
	for _, k := range keys {
		if !slices.Equal(on[k], []int{to[k]}) {
			t.Fatalf("%s is on servers %v, want only its owner %d", k, on[k], to[k])
		}
		d, w := direct[to[k]], want[k]
		var got any
		var err error
		switch w.kind {
		case "string":
			got, err = d.Get(ctx, k).Result()
			if err == nil && got != w.str {
				err = fmt.Errorf("value %q, want %q", got, w.str)
			}
		case "hash":
			got, err = d.HGetAll(ctx, k).Result()
			if err == nil && !maps.Equal(got.(map[string]string), w.hash) {
				err = fmt.Errorf("fields %v, want %v", got, w.hash)
			}
		default:
			got, err = d.LRange(ctx, k, 0, -1).Result()
			if err == nil && !slices.Equal(got.([]string), w.list) {
				err = fmt.Errorf("elements %v, want %v", got, w.list)
			}
		}
		if err != nil {
			t.Fatalf("%s on server %d: %v", k, to[k], err)
		}
		pttl, err := d.PTTL(ctx, k).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case w.ttl == 0 && pttl != -1:
			t.Fatalf("%s has TTL %v, want none", k, pttl)
		case w.ttl != 0 && (pttl > w.ttl || pttl < w.ttl-time.Since(written)):
			t.Fatalf("%s has TTL %v, want between %v and %v", k, pttl, w.ttl-time.Since(written), w.ttl)
		}
	}
}

// cancelOn cancels a context when a command named name (a migration's
// SCAN of a source, or the RESTOREs of a batch on the new owner) is about
// to be sent, alone or in a pipeline, and then sends it under that context:
// the run is cut short in flight.
type cancelOn struct {
	name   string
	cancel context.CancelFunc
	hits   atomic.Int32
}

func (h *cancelOn) before(_ context.Context, cmds []goredis.Cmder) error {
	if slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return fixtures.IsStep(c, h.name) }) && h.hits.Add(1) == 1 {
		h.cancel()
	}
	return nil
}

// TestReshardCancelMidBatch stops a migration by its context while a SCAN
// or a batch is in flight: Run returns context.Canceled itself (not a
// shard's error wrapping it), the keys cut short are not counted as
// failed, each run counts every key it scanned once (in CI a cut while a
// batch waited once left 20 scanned keys uncounted), and the resumed run
// moves every key, each once.
func TestReshardCancelMidBatch(t *testing.T) {
	for _, name := range []string{"scan", "restore"} {
		t.Run(name, func(t *testing.T) { testReshardCancelOn(t, name, 3, 2000, 50) })
	}
}

// TestReshardCancelInLastBatch cuts the last batch of a migration's only
// source (one page, one batch) at its DUMPs, RESTOREs or DEL: Run returned
// nil then, and ended the window with every moving key still on its old
// owner, unreachable.
func TestReshardCancelInLastBatch(t *testing.T) {
	for _, name := range []string{"dump", "restore", "del"} {
		t.Run(name, func(t *testing.T) { testReshardCancelOn(t, name, 2, 40, 200) })
	}
}

// testReshardCancelOn moves n keys from the first servers-1 of servers
// shards to all of them, BatchSize batch, cut at the first command named
// name, then resumed.
func testReshardCancelOn(t *testing.T, name string, servers, n, batch int) {
	shards, direct, c := fixtures.SafetyFixture(t, servers, servers-1, shardedredis.Health{})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "cut:" + strconv.Itoa(i)
		if err := c.Set(ctx, keys[i], i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &cancelOn{name: name, cancel: cancel}
	c.AddHook(fixtures.BeforeSend(h.before))
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: batch, Parallelism: 1, InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(runCtx); err != context.Canceled {
		t.Fatalf("Run cut short at a %s: %v (%T), want context.Canceled itself", name, err, err)
	}
	if h.hits.Load() == 0 {
		t.Fatalf("no %s was sent: the run was not cut short there", name)
	}
	for _, p := range m.Progress() {
		if p.Failed != 0 || len(p.Failures) != 0 {
			t.Fatalf("%s: %d failed (%v) after a cancel, want 0: cut short is not failed", p.Shard, p.Failed, p.Failures)
		}
	}
	m2, err := c.NewMigration(shardedredis.MigrateOptions{Resume: m.Checkpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	// Each run counts every key it scanned once; the keys the cut left
	// are the resumed run's. Between them, every key that changes owner
	// moved once.
	var moved int64
	for r, progress := range [][]shardedredis.ShardProgress{m.Progress(), m2.Progress()} {
		for _, p := range progress {
			if p.Scanned != p.Owned+p.Moved+p.OnNewOwner+p.Gone+p.Stale+p.Failed {
				t.Errorf("run %d, %s: scanned %d, counted %d: %+v", r+1, p.Shard, p.Scanned, p.Owned+p.Moved+p.OnNewOwner+p.Gone+p.Stale+p.Failed, p)
			}
			moved += p.Moved + p.OnNewOwner
		}
	}
	before, after := fixtures.PlacementOf(t, shards[:servers-1]), fixtures.PlacementOf(t, shards)
	changing := 0
	for _, k := range keys {
		changing += fixtures.B2I(fixtures.ServerOf(t, before, shards, k) != fixtures.ServerOf(t, after, shards, k))
	}
	for i, k := range keys {
		to := fixtures.ServerOf(t, c, shards, k)
		for s, d := range direct {
			got, err := d.Get(ctx, k).Result()
			switch {
			case s == to && (err != nil || got != strconv.Itoa(i)):
				t.Fatalf("%s on its owner %d: %q, %v; want %d", k, s, got, err, i)
			case s != to && err != goredis.Nil:
				t.Fatalf("%s also on server %d (%q, %v); its owner is %d", k, s, got, err, to)
			}
		}
	}
	if c.Window() != nil {
		t.Fatal("the window is still open after the resumed run finished")
	}
	if moved != int64(changing) {
		t.Fatalf("the runs moved %d keys, want the %d that change owner", moved, changing)
	}
}
