package reshard_test

// Resharding never loses a write: the old owner is the truth, stale copies
// never win, misuse is refused. Regression tests of issue 10's cases, on
// the package's shared real redis-servers (SharedRedis).

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// holdersOf returns the servers that hold key.
func holdersOf(t *testing.T, direct []*goredis.Client, key string) []int {
	t.Helper()
	var out []int
	for i, d := range direct {
		n, err := d.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, i)
		}
	}
	return out
}

// Case 1: a leftover of an earlier cold SetShards on the key's new owner
// never wins over the value on its old owner.
func TestReshardLeftoverOnDestinationNeverWins(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 4, 3, shardedredis.Health{})
	var k string
	for i := 0; k == ""; i++ {
		key := "k" + strconv.Itoa(i)
		if fixtures.ServerOf(t, c, shards, key) == 0 {
			c2, _ := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
			if fixtures.ServerOf(t, c2, shards, key) == 3 {
				k = key
			}
			c2.Close()
		}
	}
	if err := c.Set(ctx, k, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetShards(shards); err != nil { // cold: a keeps a leftover "v1"
		t.Fatal(err)
	}
	if err := c.Set(ctx, k, "v2", 0).Err(); err != nil { // on d
		t.Fatal(err)
	}
	if err := c.BeginResharding(shards[:3]); err != nil { // d leaves: k goes back to a
		t.Fatal(err)
	}
	if got := holdersOf(t, direct, k); !slices.Equal(got, []int{3}) {
		t.Fatalf("after BeginResharding %q is on servers %v, want only d (a's stale copy removed)", k, got)
	}
	progress := fixtures.RunMigration(t, c)
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v2" {
		t.Fatalf("Get(%q) = %q, %v; want v2, the last write", k, v, err)
	}
	if got := holdersOf(t, direct, k); !slices.Equal(got, []int{0}) {
		t.Fatalf("%q is on servers %v, want only a", k, got)
	}
	d := progress[slices.IndexFunc(progress, func(p shardedredis.ShardProgress) bool { return p.ID == "addr:"+shards[3].Addr })]
	if d.Moved != 1 || d.Scanned != 1 || d.OnNewOwner != 0 || d.Failed != 0 || !d.Done {
		t.Fatalf("d's progress %+v, want 1 scanned, 1 moved", d)
	}
}

// Case 2: values written on a neighbour while a shard was ejected are stale
// once it rejoins; a resharding that removes the shard keeps its values.
func TestReshardEjectionLeftoverNeverWins(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		ProbeTimeout: 100 * time.Millisecond,
		OnRejoin:     func(ctx2 context.Context, c *goredis.Client) error { return c.FlushDB(ctx2).Err() }}
	shards, direct, c := fixtures.SafetyFixture(t, 3, 3, h)
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = "e" + strconv.Itoa(i)
		if err := c.Set(ctx, keys[i], "old", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onB := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return fixtures.ServerOf(t, c, shards, k) != 1 })
	if len(onB) == 0 {
		t.Fatal("no key on b")
	}
	fixtures.EjectFor(t, c, direct[1], 1, 400*time.Millisecond, func() {
		for _, k := range onB { // while b is out: on its neighbours
			if err := c.Set(ctx, k, "while-ejected", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, k := range onB { // b is back (flushed): the latest values go to b
		if err := c.Set(ctx, k, "latest", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding([]shardedredis.ShardOptions{shards[0], shards[2]}); err != nil {
		t.Fatal(err)
	}
	for _, k := range onB { // the neighbours' copies are gone; b's are the truth
		if got := holdersOf(t, direct, k); !slices.Equal(got, []int{1}) {
			t.Fatalf("after BeginResharding %q is on %v, want only b", k, got)
		}
	}
	fixtures.RunMigration(t, c)
	for _, k := range onB {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "latest" {
			t.Fatalf("Get(%q) = %q, %v; want latest", k, v, err)
		}
		if got := holdersOf(t, direct, k); len(got) != 1 || got[0] != fixtures.ServerOf(t, c, shards, k) {
			t.Fatalf("%q on servers %v", k, got)
		}
	}
}

// Case 3: a write through GetShard inside a window lands on a key that has
// already moved: no field is lost.
func TestReshardGetShardInWindowMovesTheKeyFirst(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 4, 3, shardedredis.Health{})
	k := keyMovingTo(t, c, shards, 3)
	if err := c.HSet(ctx, k, "f1", "1", "f2", "2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	if err := c.GetShard(k).HSet(ctx, k, "f3", "3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ForEachShard(ctx, func(ctx2 context.Context, cl *goredis.Client) error { return nil }); !errors.Is(err, shardedredis.ErrReshardingWindow) {
		t.Fatalf("ForEachShard in a window: %v, want ErrReshardingWindow", err)
	}
	fixtures.RunMigration(t, c)
	got, err := c.HGetAll(ctx, k).Result()
	if err != nil || len(got) != 3 || got["f1"] != "1" || got["f2"] != "2" || got["f3"] != "3" {
		t.Fatalf("HGETALL %q = %v, %v; want f1, f2, f3", k, got, err)
	}
	if h := holdersOf(t, direct, k); !slices.Equal(h, []int{3}) {
		t.Fatalf("%q on %v", k, h)
	}
}

// keyMovingTo returns a key that c places elsewhere and that the list of all
// shards places on shard to.
func keyMovingTo(t *testing.T, c *shardedredis.ShardedClient, shards []shardedredis.ShardOptions, to int) string {
	t.Helper()
	all := fixtures.PlacementOf(t, shards)
	for i := 0; i < 100000; i++ {
		k := "m" + strconv.Itoa(i)
		if fixtures.ServerOf(t, all, shards, k) == to && fixtures.ServerOf(t, c, shards, k) != to {
			return k
		}
	}
	t.Fatal("no key moves")
	return ""
}

// Case 4: shard "b" at a new address is a move of all its keys, planned and
// migrated.
func TestReshardSameNameNewAddressMovesItsKeys(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 4, 3, shardedredis.Health{})
	const n = 600
	for i := range n {
		if err := c.Set(ctx, "n"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onB, err := fixtures.UserDBSize(direct[1]).Result()
	if err != nil || onB == 0 {
		t.Fatalf("b holds %d keys: %v", onB, err)
	}
	moved := slices.Clone(shards[:3])
	moved[1].Addr = shards[3].Addr // "b" at d's server
	plan, err := c.PlanResharding(moved)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 1 || plan.Moved < 0.2 || plan.Moved > 0.5 {
		t.Fatalf("plan %v: want one move, b's share, from the old b to the new", plan)
	}
	if err := c.BeginResharding(moved); err != nil {
		t.Fatal(err)
	}
	fixtures.RunMigration(t, c)
	for i := range n {
		k := "n" + strconv.Itoa(i)
		if v, err := c.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("Get(%q) = %d, %v", k, v, err)
		}
	}
	if left, _ := fixtures.UserDBSize(direct[1]).Result(); left != 0 {
		t.Fatalf("the old address of b still holds %d keys", left)
	}
	if now, _ := fixtures.UserDBSize(direct[3]).Result(); now != onB {
		t.Fatalf("the new address of b holds %d keys, want %d", now, onB)
	}
}

// Case 5: the window's life cycle refuses calls out of order; a checkpoint
// belongs to its window; a finished checkpoint is not an empty one.
func TestReshardLifeCycleRefusesMisuse(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 4, 3, shardedredis.Health{})
	const n = 2000
	for i := range n {
		if err := c.Set(ctx, "l"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.EndResharding(); err != nil {
		t.Fatalf("EndResharding without a window: %v", err)
	}
	if _, err := c.NewMigration(shardedredis.MigrateOptions{}); !errors.Is(err, shardedredis.ErrNoResharding) {
		t.Fatalf("NewMigration without a window: %v", err)
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 10, KeysPerSecond: 5000})
	if err != nil {
		t.Fatal(err)
	}
	half, cancel := fixtures.ContextWithTimeout(100 * time.Millisecond)
	err = m.Run(half)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stopped run: %v", err)
	}
	if err := c.EndResharding(); !errors.Is(err, shardedredis.ErrMigrationIncomplete) {
		t.Fatalf("EndResharding mid-migration: %v, want ErrMigrationIncomplete", err)
	}
	if err := c.BeginResharding(shards); !errors.Is(err, shardedclient.ErrMoveInProgress) {
		t.Fatalf("BeginResharding in a window: %v", err)
	}
	cp := m.Checkpoint()
	if len(cp.Shards) != 3 || cp.Window != c.Window().ID {
		t.Fatalf("checkpoint %+v", cp)
	}
	m2, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Resume: cp})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v, err := c.Get(ctx, "l"+strconv.Itoa(i)).Int(); err != nil || v != i {
			t.Fatalf("l%d = %d, %v; on servers %v; progress %+v / %+v", i, v, err, holdersOf(t, direct, "l"+strconv.Itoa(i)), m.Progress(), m2.Progress())
		}
	}
	done := m2.Checkpoint()
	for id, s := range done.Shards {
		if !s.Done {
			t.Fatalf("finished checkpoint: shard %s not done", id)
		}
	}
	// Another window refuses both checkpoints.
	if err := c.BeginResharding(shards[:3]); err != nil {
		t.Fatal(err)
	}
	for _, old := range []*shardedredis.Checkpoint{cp, done} {
		if _, err := c.NewMigration(shardedredis.MigrateOptions{Resume: old}); !errors.Is(err, shardedredis.ErrCheckpoint) {
			t.Fatalf("a checkpoint of another window: %v, want ErrCheckpoint", err)
		}
	}
	incomplete := &shardedredis.Checkpoint{Window: c.Window().ID, Shards: map[string]shardedredis.ShardCheckpoint{}}
	if _, err := c.NewMigration(shardedredis.MigrateOptions{Resume: incomplete}); !errors.Is(err, shardedredis.ErrCheckpoint) {
		t.Fatalf("an empty checkpoint: %v, want ErrCheckpoint", err)
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
	if c.Window() != nil {
		t.Fatal("window after AbandonResharding")
	}
}

// A stale copy on a shard that is ejected when the window opens is removed
// too: it must not win once the shard takes its keys back.
func TestReshardStaleCopyOnEjectedShardRemoved(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}
	shards, direct, _ := fixtures.SafetyFixture(t, 3, 1, h) // a, b, c
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[1:], Health: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	abc := fixtures.PlacementOf(t, shards)
	var k string // on b with [b, c], on a with [a, b, c]
	for i := 0; k == "" && i < 100000; i++ {
		if key := "s" + strconv.Itoa(i); fixtures.ServerOf(t, c, shards, key) == 1 && fixtures.ServerOf(t, abc, shards, key) == 0 {
			k = key
		}
	}
	if err := c.Set(ctx, k, "old", 0).Err(); err != nil { // on b
		t.Fatal(err)
	}
	if err := c.SetShards(shards); err != nil { // cold: k on a, b keeps "old"
		t.Fatal(err)
	}
	if err := c.Set(ctx, k, "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fixtures.PauseUntilEjected(t, c, direct[1], 1, 3*time.Second) // b
	// While b cannot answer, the window cannot clean it: refused, naming b.
	err = c.BeginResharding(shards[1:])
	var se *shardedclient.ShardError
	if !errors.As(err, &se) || se.Name != "b" || c.Window() != nil {
		t.Fatalf("BeginResharding with the ejected b unreachable: %v, want b's ShardError and no window", err)
	}
	// The pause ends (b stays ejected: RetryTimeout 1 h).
	fixtures.Poll(t, 10*time.Second, "b answers again", func() error { return direct[1].Ping(ctx).Err() })
	if err := c.BeginResharding(shards[1:]); err != nil {
		t.Fatal(err)
	}
	if n, _ := direct[1].Exists(ctx, k).Result(); n != 0 {
		t.Fatalf("after BeginResharding b still holds its stale copy of %q", k)
	}
	// k's new owner b is ejected: c stands in and misses, as for any key
	// of an ejected shard, and k stays on a (not moved to c, where it would
	// be lost once b is back).
	if err := c.Get(ctx, k).Err(); err != goredis.Nil {
		t.Fatalf("Get(%q) with its new owner b ejected: %v; want redis.Nil", k, err)
	}
	if v := fixtures.HoldsValue(t, direct[0], k); v != "new" {
		t.Fatalf("a holds %q for %q; want new, kept until b is back", v, k)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var merr *shardedredis.MigrationError // b, ejected, is not scanned
	if err := m.Run(ctx); !errors.As(err, &merr) || len(merr.Shards) != 1 || !errors.As(merr.Shards[0], &se) || se.Name != "b" {
		t.Fatalf("migration with b ejected: %v", err)
	}
	if n, _ := direct[1].Exists(ctx, k).Result(); n != 0 {
		t.Fatal("b holds a copy of k: it would win when b rejoins")
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
}

// A write begun before BeginResharding that lands on a key's old owner
// after the switch is not left behind: the migration waits for it before
// it scans. Here a BLMOVE blocked on the old list writes its destination,
// a key that moves, only once the migration has begun.
func TestMigrationWaitsForEarlierWrites(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 2, 1, shardedredis.Health{})
	both := fixtures.PlacementOf(t, shards)
	key := func(prefix string, owner int) string { // a key that owner holds under both shards
		for i := 0; ; i++ {
			if k := prefix + strconv.Itoa(i); both.GetShardInfo(k).Index == owner {
				return k
			}
		}
	}
	src, dst := key("wg:src:", 0), key("wg:dst:", 1)
	moved := make(chan error, 1)
	go func() { moved <- c.BLMove(ctx, src, dst, "LEFT", "RIGHT", 10*time.Second).Err() }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := direct[0].Info(ctx, "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "blocked_clients:1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("BLMOVE does not block")
		}
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	select {
	case err := <-ran:
		t.Fatalf("Run returned (%v) while a command begun before the window still ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := direct[0].LPush(ctx, src, "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-moved; err != nil {
		t.Fatalf("BLMOVE: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := holdersOf(t, direct, dst); !slices.Equal(got, []int{1}) {
		t.Fatalf("%s is on servers %v after the migration, want [1] (its new owner)", dst, got)
	}
	if got := direct[1].LRange(ctx, dst, 0, -1).Val(); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("%s = %v on its new owner, want [v]", dst, got)
	}
}

// A copy that no command reads is not a key of the keyspace: after
// AbandonResharding, the keys the window did not move stay on their old
// owners, unreachable, and KEYS and SCAN leave them out, listing exactly
// the keys that EXISTS finds. (DBSIZE sums the servers' counts: it counts
// them until a migration or a later BeginResharding sweeps them.)
func TestKeysAndScanLeaveOutStaleCopies(t *testing.T) {
	procs := fixtures.SharedRedis(t, 3)
	list := []shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0), fixtures.TopoShard("c", procs[2].Addr, 0)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: list[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(list); err != nil {
		t.Fatal(err)
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
	var existing []string
	for _, k := range ks {
		if c.Exists(ctx, k).Val() == 1 {
			existing = append(existing, k)
		}
	}
	if len(existing) == len(ks) || len(existing) == 0 {
		t.Fatalf("%d of %d keys exist after the abandoned window: the test needs some left behind", len(existing), len(ks))
	}
	listed, err := c.Keys(ctx, "*").Result()
	if slices.Sort(listed); err != nil || !slices.Equal(listed, slices.Sorted(slices.Values(existing))) {
		t.Errorf("KEYS lists %d keys, %v; want the %d that exist", len(listed), err, len(existing))
	}
	var scanned []string
	for it := c.Scan(ctx, 0, "", 50).Iterator(); it.Next(ctx); {
		scanned = append(scanned, it.Val())
	}
	if slices.Sort(scanned); !slices.Equal(slices.Compact(scanned), slices.Sorted(slices.Values(existing))) {
		t.Errorf("SCAN lists %d keys; want the %d that exist", len(scanned), len(existing))
	}
}
