package integration_test

// Resharding never loses a write: the old owner is the truth, stale copies
// never win, misuse is refused. Regression tests of issue 10's cases, on
// the package's shared real redis-servers (sharedRedis).

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
)

// safetyFixture returns n shared redis-servers as named shards "a", "b",
// ..., a direct client to each, and a sharded client over the first k.
func safetyFixture(t *testing.T, n, k int, h shardedredis.Health) ([]shardedredis.ShardOptions, []*goredis.Client, *shardedredis.ShardedClient) {
	t.Helper()
	return safetyFixtureAP(t, n, k, h, false)
}

// safetyFixtureAP is safetyFixture, autopipelined when ap is (see withAP).
func safetyFixtureAP(t *testing.T, n, k int, h shardedredis.Health, ap bool) ([]shardedredis.ShardOptions, []*goredis.Client, *shardedredis.ShardedClient) {
	t.Helper()
	procs := sharedRedis(t, n)
	shards := make([]shardedredis.ShardOptions, n)
	direct := make([]*goredis.Client, n)
	for i, p := range procs {
		shards[i] = shardedredis.ShardOptions{Name: string(rune('a' + i)), Addr: p.addr, Options: &goredis.Options{
			ReadTimeout: 200 * time.Millisecond, MaxRetries: -1}}
		direct[i] = goredis.NewClient(&goredis.Options{Addr: p.addr, MaxRetries: -1})
		t.Cleanup(func() { direct[i].Close() })
	}
	opt := &shardedredis.ShardedOptions{Shards: shards[:k], Health: h}
	if ap {
		withAP(opt)
	}
	c, err := shardedredis.NewShardedClient(withAPEnv(opt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return shards, direct, c
}

// sendHook is a hook for a shard client: before, when set, is called with
// each command (alone, as a slice of one) or pipeline that the client is
// about to send, and an error from it fails every command of it, unsent;
// after, when set, is called once the client has its replies.
type sendHook struct {
	before func(ctx context.Context, cmds []goredis.Cmder) error
	after  func(ctx context.Context, cmds []goredis.Cmder)
}

// beforeSend is a sendHook with before f.
func beforeSend(f func(ctx context.Context, cmds []goredis.Cmder) error) sendHook {
	return sendHook{before: f}
}

func (h sendHook) DialHook(n goredis.DialHook) goredis.DialHook { return n }

func (h sendHook) ProcessHook(n goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		return h.send(ctx, []goredis.Cmder{cmd}, func() error {
			err := n(ctx, cmd)
			if err != nil && cmd.Err() == nil {
				cmd.SetErr(err) // as go-redis's Process will
			}
			return err
		})
	}
}

func (h sendHook) ProcessPipelineHook(n goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		return h.send(ctx, cmds, func() error { return n(ctx, cmds) })
	}
}

func (h sendHook) send(ctx context.Context, cmds []goredis.Cmder, next func() error) error {
	if h.before != nil {
		if err := h.before(ctx, cmds); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
	}
	err := next()
	if h.after != nil {
		h.after(ctx, cmds)
	}
	return err
}

// placementOf returns a client over shards, closed when t ends, that tells
// where each key goes under that list (GetShardInfo), as a client switched
// to it will place it.
func placementOf(t *testing.T, shards []shardedredis.ShardOptions) *shardedredis.ShardedClient {
	t.Helper()
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverOf returns the index in direct of the server that c places key on.
func serverOf(t *testing.T, c *shardedredis.ShardedClient, shards []shardedredis.ShardOptions, key string) int {
	t.Helper()
	addr := c.Shards()[c.GetShardInfo(key).Index].Addr
	i := slices.IndexFunc(shards, func(s shardedredis.ShardOptions) bool { return s.Addr == addr })
	if i < 0 {
		t.Fatalf("key %q on unknown address %s", key, addr)
	}
	return i
}

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

// runMigration runs a complete migration of the window and returns its
// progress.
func runMigration(t *testing.T, c *shardedredis.ShardedClient) []shardedredis.ShardProgress {
	t.Helper()
	m, err := c.NewMigration(shardedredis.MigrateOptions{BatchSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return m.Progress()
}

// Case 1: a leftover of an earlier cold SetShards on the key's new owner
// never wins over the value on its old owner.
func TestReshardLeftoverOnDestinationNeverWins(t *testing.T) {
	shards, direct, c := safetyFixture(t, 4, 3, shardedredis.Health{})
	var k string
	for i := 0; k == ""; i++ {
		key := "k" + strconv.Itoa(i)
		if serverOf(t, c, shards, key) == 0 {
			c2, _ := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
			if serverOf(t, c2, shards, key) == 3 {
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
	progress := runMigration(t, c)
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
	shards, direct, c := safetyFixture(t, 3, 3, h)
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = "e" + strconv.Itoa(i)
		if err := c.Set(ctx, keys[i], "old", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onB := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return serverOf(t, c, shards, k) != 1 })
	if len(onB) == 0 {
		t.Fatal("no key on b")
	}
	ejectFor(t, c, direct[1], 1, 400*time.Millisecond, func() {
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
	runMigration(t, c)
	for _, k := range onB {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "latest" {
			t.Fatalf("Get(%q) = %q, %v; want latest", k, v, err)
		}
		if got := holdersOf(t, direct, k); len(got) != 1 || got[0] != serverOf(t, c, shards, k) {
			t.Fatalf("%q on servers %v", k, got)
		}
	}
}

// ejectFor pauses the server of shard i (CLIENT PAUSE) for d, fails one
// command on it so that it is ejected (FailureLimit 1), runs during, and
// waits until the shard has rejoined.
func ejectFor(t *testing.T, c *shardedredis.ShardedClient, server *goredis.Client, i int, d time.Duration, during func()) {
	t.Helper()
	pauseUntilEjected(t, c, server, i, d)
	during()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats()[i].Ejected {
		if time.Now().After(deadline) {
			t.Fatal("shard did not rejoin")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pauseUntilEjected pauses server, shard i of c, for d (CLIENT PAUSE) and
// sends GETs of keys it owns until one times out and c ejects it.
func pauseUntilEjected(t *testing.T, c *shardedredis.ShardedClient, server *goredis.Client, i int, d time.Duration) {
	t.Helper()
	if err := server.Do(ctx, "client", "pause", d.Milliseconds(), "all").Err(); err != nil {
		t.Fatal(err)
	}
	for k := 0; !c.Stats()[i].Ejected; k++ {
		key := "probe-" + strconv.Itoa(k)
		if c.GetShardInfo(key).Index == i {
			_ = c.Get(ctx, key).Err() // times out: the shard's failure
		}
		if k > 100000 {
			t.Fatal("shard not ejected")
		}
	}
}

// Case 3: a write through GetShard inside a window lands on a key that has
// already moved: no field is lost.
func TestReshardGetShardInWindowMovesTheKeyFirst(t *testing.T) {
	shards, direct, c := safetyFixture(t, 4, 3, shardedredis.Health{})
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
	runMigration(t, c)
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
	all := placementOf(t, shards)
	for i := 0; i < 100000; i++ {
		k := "m" + strconv.Itoa(i)
		if serverOf(t, all, shards, k) == to && serverOf(t, c, shards, k) != to {
			return k
		}
	}
	t.Fatal("no key moves")
	return ""
}

// Case 4: shard "b" at a new address is a move of all its keys, planned and
// migrated.
func TestReshardSameNameNewAddressMovesItsKeys(t *testing.T) {
	shards, direct, c := safetyFixture(t, 4, 3, shardedredis.Health{})
	const n = 600
	for i := range n {
		if err := c.Set(ctx, "n"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onB, err := userDBSize(direct[1]).Result()
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
	runMigration(t, c)
	for i := range n {
		k := "n" + strconv.Itoa(i)
		if v, err := c.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("Get(%q) = %d, %v", k, v, err)
		}
	}
	if left, _ := userDBSize(direct[1]).Result(); left != 0 {
		t.Fatalf("the old address of b still holds %d keys", left)
	}
	if now, _ := userDBSize(direct[3]).Result(); now != onB {
		t.Fatalf("the new address of b holds %d keys, want %d", now, onB)
	}
}

// Case 5: the window's life cycle refuses calls out of order; a checkpoint
// belongs to its window; a finished checkpoint is not an empty one.
func TestReshardLifeCycleRefusesMisuse(t *testing.T) {
	shards, direct, c := safetyFixture(t, 4, 3, shardedredis.Health{})
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
	half, cancel := contextWithTimeout(100 * time.Millisecond)
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
	shards, direct, _ := safetyFixture(t, 3, 1, h) // a, b, c
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[1:], Health: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	abc := placementOf(t, shards)
	var k string // on b with [b, c], on a with [a, b, c]
	for i := 0; k == "" && i < 100000; i++ {
		if key := "s" + strconv.Itoa(i); serverOf(t, c, shards, key) == 1 && serverOf(t, abc, shards, key) == 0 {
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
	pauseUntilEjected(t, c, direct[1], 1, 3*time.Second) // b
	// While b cannot answer, the window cannot clean it: refused, naming b.
	err = c.BeginResharding(shards[1:])
	var se *shardedclient.ShardError
	if !errors.As(err, &se) || se.Name != "b" || c.Window() != nil {
		t.Fatalf("BeginResharding with the ejected b unreachable: %v, want b's ShardError and no window", err)
	}
	// The pause ends (b stays ejected: RetryTimeout 1 h).
	poll(t, 10*time.Second, "b answers again", func() error { return direct[1].Ping(ctx).Err() })
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
	if v := holdsValue(t, direct[0], k); v != "new" {
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
	shards, direct, c := safetyFixture(t, 2, 1, shardedredis.Health{})
	both := placementOf(t, shards)
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
	procs := sharedRedis(t, 3)
	list := []shardedredis.ShardOptions{topoShard("a", procs[0].addr, 0), topoShard("b", procs[1].addr, 0), topoShard("c", procs[2].addr, 0)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: list[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := keys(300)
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
