package reshard_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Regression tests for races of the resharding window found in review.

// fourNamed starts four miniredis and a client over the first three.
func fourNamed(t *testing.T, h shardedredis.Health, p ring.Preset) ([]*miniredis.Miniredis, *shardedredis.ShardedClient, []shardedredis.ShardOptions) {
	t.Helper()
	var servers []*miniredis.Miniredis
	var shards []shardedredis.ShardOptions
	for i := range 4 {
		s := miniredis.RunT(t)
		servers = append(servers, s)
		shards = append(shards, shardedredis.ShardOptions{Name: fmt.Sprintf("r%c", 'a'+i), Addr: s.Addr(),
			Options: &goredis.Options{MaxRetries: -1, DialerRetries: 1}})
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3], Health: h, Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return servers, c, shards
}

// movingKey returns a key (prefix + n) that the fourth shard takes over, and
// its owner among the three.
func movingKey(t *testing.T, c *shardedredis.ShardedClient, shards []shardedredis.ShardOptions, prefix string) (string, int) {
	t.Helper()
	plan, err := ring.New([]ring.Node{{Name: shards[0].Name}, {Name: shards[1].Name}, {Name: shards[2].Name}, {Name: shards[3].Name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		k := prefix + strconv.Itoa(i)
		if plan.Locate(k) == 3 {
			return k, c.GetShardInfo(k).Index
		}
	}
	t.Fatal("no key moves")
	return "", 0
}

// hold blocks the first command matching match on client until release is
// closed, and closes entered when it arrives.
type hold struct {
	match            func(goredis.Cmder) bool
	entered, release chan struct{}
	once             *sync.Once
}

func newHold(match func(goredis.Cmder) bool) hold {
	return hold{match: match, entered: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
}

func (h hold) wait(cmd goredis.Cmder) {
	if h.match(cmd) {
		h.once.Do(func() { close(h.entered); <-h.release })
	}
}

// hook is h as a shard client's hook.
func (h hold) hook() fixtures.SendHook {
	return fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			h.wait(cmd)
		}
		return nil
	})
}

// A write begun before BeginResharding, and acknowledged, is not lost: the
// key's first command in the window waits for it, then moves its value.
func TestReshardWriteInFlightAtBeginKept(t *testing.T) {
	servers, c, shards := fourNamed(t, shardedredis.Health{}, nil)
	k, from := movingKey(t, c, shards, "w")
	c.Set(ctx, k, "old", 0)
	h := newHold(func(cmd goredis.Cmder) bool { return cmd.Name() == "set" && cmd.Args()[2] == "new" })
	c.Shards()[from].Client.AddHook(h.hook())
	var wg sync.WaitGroup
	var setErr error
	wg.Go(func() { setErr = c.Set(ctx, k, "new", 0).Err() })
	<-h.entered
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	var got string
	wg.Go(func() { got, _ = c.Get(ctx, k).Result() }) // waits for the SET
	time.Sleep(20 * time.Millisecond)
	close(h.release)
	wg.Wait()
	if setErr != nil || got != "new" {
		t.Fatalf("SET: %v; window GET = %q, want new", setErr, got)
	}
	if v, _ := servers[3].Get(k); v != "new" || servers[from].Exists(k) {
		t.Fatalf("new owner holds %q; old owner still has it: %v", v, servers[from].Exists(k))
	}
}

// A key deleted just after EndResharding stays deleted, even when a command
// of the window was still moving it; also when a new resharding, in which
// the key does not move, begins at once (the earlier step's barrier carries
// over).
func TestReshardDeleteAfterEndSticks(t *testing.T) {
	for _, beginAgain := range []bool{false, true} {
		t.Run(fmt.Sprintf("begin-again=%v", beginAgain), func(t *testing.T) {
			servers, c, shards := fourNamed(t, shardedredis.Health{}, nil)
			k, _ := movingKey(t, c, shards, "d")
			c.Set(ctx, k, "v", 0)
			if err := c.BeginResharding(shards); err != nil {
				t.Fatal(err)
			}
			h := newHold(func(cmd goredis.Cmder) bool { return fixtures.IsStep(cmd, "restore") })
			c.Shards()[3].Client.AddHook(h.hook())
			var wg sync.WaitGroup
			wg.Go(func() { _ = c.Get(ctx, k).Err() })
			<-h.entered
			if err := c.AbandonResharding(); err != nil {
				t.Fatal(err)
			}
			if beginAgain {
				if err := c.BeginResharding(shards); err != nil {
					t.Fatal(err)
				}
			}
			var n int64
			var delErr error
			wg.Go(func() { n, delErr = c.Del(ctx, k).Result() }) // waits for the GET's move
			time.Sleep(20 * time.Millisecond)
			close(h.release)
			wg.Wait()
			if delErr != nil || n != 1 {
				t.Fatalf("DEL = %d, %v; want 1", n, delErr)
			}
			if err := c.Get(ctx, k).Err(); err != goredis.Nil || len(fixtures.Holders(servers, k)) != 0 {
				t.Fatalf("deleted key came back: %v on %v", err, fixtures.Holders(servers, k))
			}
		})
	}
}

// A blocking command on a moved key holds no lock: a push from another
// goroutine reaches it.
func TestReshardBlockingCommandDoesNotBlockOthers(t *testing.T) {
	_, c, shards := fourNamed(t, shardedredis.Health{}, nil)
	k, _ := movingKey(t, c, shards, "q")
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var got []string
	var popErr error
	wg.Go(func() { got, popErr = c.BLPop(ctx, 5*time.Second, k).Result() })
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.LPush(ctx, k, "x").Err(); err != nil {
		t.Fatal(err)
	}
	pushed := time.Since(start)
	wg.Wait()
	if popErr != nil || len(got) != 2 || got[1] != "x" || pushed > time.Second {
		t.Fatalf("BLPOP = %v, %v; LPUSH took %v", got, popErr, pushed)
	}
}

// Inside Watch, during resharding, unwatched keys are moved before use, and
// the client itself can be called from fn.
func TestReshardWatch(t *testing.T) {
	_, c, shards := fourNamed(t, shardedredis.Health{}, ring.Jedis{KeyTags: true})
	plan, err := ring.New([]ring.Node{{Name: "ra"}, {Name: "rb"}, {Name: "rc"}, {Name: "rd"}}, ring.Jedis{KeyTags: true})
	if err != nil {
		t.Fatal(err)
	}
	tag := ""
	for i := 0; plan.Locate(tag+"a") != 3; i++ {
		tag = "{t" + strconv.Itoa(i) + "}"
	}
	a, b := tag+"a", tag+"b"
	c.Set(ctx, a, "1", 0)
	c.Set(ctx, b, "2", 0)
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = c.Watch(cctx, func(tx *goredis.Tx) error {
		if v, err := tx.Get(cctx, b).Result(); err != nil || v != "2" {
			return fmt.Errorf("unwatched GET in the Tx = %q, %v", v, err)
		}
		if v, err := c.Get(cctx, a).Result(); err != nil || v != "1" {
			return fmt.Errorf("client GET inside fn = %q, %v", v, err)
		}
		_, err := tx.TxPipelined(cctx, func(p goredis.Pipeliner) error {
			p.Del(cctx, b)
			return nil
		})
		return err
	}, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, b).Err(); err != goredis.Nil {
		t.Fatalf("key deleted in the transaction: %v", err)
	}
}

// A moved key keeps its absolute expiry (RESTORE ... ABSTTL), to the
// millisecond, however long the move takes: one about to expire still
// expires then (real servers: miniredis keeps relative TTLs).
func TestReshardKeyAboutToExpireStillExpires(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	a, b := fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")
	shards := []shardedredis.ShardOptions{{Name: "a", Addr: a.Addr}, {Name: "b", Addr: b.Addr}}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:1]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	k := ""
	for i := 0; k == ""; i++ {
		if key := fmt.Sprint("exp:", i); next.GetShardInfo(key).Index == 1 {
			k = key
		}
	}
	soon := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
	if err := c.SetArgs(ctx, k, "v", goredis.SetArgs{ExpireAt: soon}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, k).Err(); err != nil {
		t.Fatal(err)
	}
	d := goredis.NewClient(&goredis.Options{Addr: b.Addr})
	defer d.Close()
	if got, err := d.Do(ctx, "pexpiretime", k).Int64(); err != nil || got != soon.UnixMilli() {
		t.Fatalf("moved key expires at %d (%v), want %d", got, err, soon.UnixMilli())
	}
	time.Sleep(time.Until(soon) + 10*time.Millisecond)
	if err := c.Get(ctx, k).Err(); err != goredis.Nil {
		t.Fatalf("GET after its expiry: %v, want redis.Nil", err)
	}
}

// A shard ejected during the window, or before it, does not fail the keys
// the others serve; the migration moves the other sources' keys and names
// the ejected source as not migrated, keeping the window open. The keys on
// the other sources that the ejected shard owns before or after the move
// (written on a stand-in while it was out, or bound for it) are left where
// they are, each named with ErrEjected.
func TestReshardWithEjectedShard(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}
	servers, c, shards := fourNamed(t, h, nil)
	for i := range 300 {
		c.Set(ctx, "k"+strconv.Itoa(i), "v", 0)
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	servers[0].Close()
	for i := range 300 { // the first failure ejects shard 0
		c.Set(ctx, "z"+strconv.Itoa(i), "v", 0)
	}
	if !c.Stats()[0].Ejected {
		t.Fatal("shard 0 not ejected")
	}
	for i := range 300 {
		if err := c.Set(ctx, "y"+strconv.Itoa(i), "v", 0).Err(); err != nil {
			t.Fatalf("SET with shard 0 ejected in the window: %v", err)
		}
	}
	// The keys the migration must leave: on rb or rc, owned by ra before
	// or after the move.
	before, after := fixtures.PlacementOf(t, shards[:3]), fixtures.PlacementOf(t, shards)
	left := map[string]bool{}
	leftOn := map[string]int{}
	for _, i := range []int{1, 2} {
		for _, k := range servers[i].Keys() {
			if before.GetShardInfo(k).Index == 0 || after.GetShardInfo(k).Index == 0 {
				left[k] = true
				leftOn["addr:"+shards[i].Addr]++
			}
		}
	}
	if len(leftOn) != 2 {
		t.Fatalf("keys left per source %v: the test wants some on both", leftOn)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(ctx)
	var merr *shardedredis.MigrationError
	var shardErr *shardedclient.ShardError
	if !errors.As(err, &merr) || len(merr.Shards) != 1 || !errors.As(merr.Shards[0], &shardErr) || shardErr.Name != "ra" {
		t.Fatalf("migration with an ejected source: %v, want a *MigrationError naming shard ra", err)
	}
	for _, e := range merr.Keys {
		if !left[e.Key] || !errors.Is(e, shardedredis.ErrEjected) {
			t.Errorf("failure %v: want only the keys ra places, with ErrEjected", e)
		}
	}
	for _, p := range m.Progress() {
		if p.Failed != int64(leftOn[p.ID]) || p.Done != (p.ID != "addr:"+shards[0].Addr && leftOn[p.ID] == 0) {
			t.Errorf("progress of %s: %d failed, done %v; want %d failed", p.Shard, p.Failed, p.Done, leftOn[p.ID])
		}
	}
	for k := range left {
		if !servers[1].Exists(k) && !servers[2].Exists(k) {
			t.Errorf("key %q left for ra is gone", k)
		}
	}
	if err := c.EndResharding(); !errors.Is(err, shardedredis.ErrMigrationIncomplete) {
		t.Fatalf("EndResharding: %v", err)
	}
}

// Watch's fn may use the client itself while a resharding begins: moves do
// not wait for fn.
func TestReshardWatchFnUsesClientDuringBegin(t *testing.T) {
	_, c, shards := fourNamed(t, shardedredis.Health{}, nil)
	k, _ := movingKey(t, c, shards, "n")
	c.Set(ctx, k, "v", 0)
	began := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, func(tx *goredis.Tx) error {
			<-began
			if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
				return fmt.Errorf("GET inside fn = %q, %v", v, err)
			}
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error { p.Set(ctx, k, "w", 0); return nil })
			return err
		}, "w:"+k)
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	close(began)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch deadlocked on a command of its fn")
	}
	if v, _ := c.Get(ctx, k).Result(); v != "w" {
		t.Fatalf("GET = %q, want w", v)
	}
}

// A migration moves only the keys its move takes from a shard: a stray
// stale copy left on a shard that no longer owns the key stays unreachable.
func TestReshardMigrationIgnoresStrayCopies(t *testing.T) {
	servers, c, shards := fourNamed(t, shardedredis.Health{}, nil)
	two, _ := ring.New([]ring.Node{{Name: shards[0].Name}, {Name: shards[1].Name}}, nil)
	three, _ := ring.New([]ring.Node{{Name: shards[0].Name}, {Name: shards[1].Name}, {Name: shards[2].Name}}, nil)
	k := "stray"
	for i := 0; two.Locate(k) != 1 || three.Locate(k) != 1; i++ {
		k = "stray" + strconv.Itoa(i) // on shard 1 with two shards and with three
	}
	if err := c.SetShards(shards[:1]); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, k, "stale", 0) // on shard 0, the only one
	if err := c.SetShards(shards[:2]); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, k, "fresh", 0)
	c.Del(ctx, k)
	if err := c.BeginResharding(shards[:3]); err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, k).Err(); err != goredis.Nil {
		t.Fatalf("GET of a deleted key after the migration: %v (stray copy on %v)", err, fixtures.Holders(servers, k))
	}
}

// Close returns although a command that never ends (BLPOP 0) holds a view
// that SetShards replaced.
func TestCloseWithBlockingCommandOnRetiredView(t *testing.T) {
	_, c, shards := fourNamed(t, shardedredis.Health{}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.BLPop(ctx, 0, "queue").Err()
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.SetShards(shards[:2]); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
	<-done
}

// A shard that the resharding removes and that dies meanwhile is ejected
// (EjectMode): the keys it held fail no more.
func TestReshardDepartingShardEjected(t *testing.T) {
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}
	servers, c, shards := fourNamed(t, h, nil)
	var onC []string
	for i := range 300 {
		k := "dep" + strconv.Itoa(i)
		c.Set(ctx, k, "v", 0)
		if c.GetShardInfo(k).Index == 2 {
			onC = append(onC, k)
		}
	}
	if err := c.BeginResharding(shards[:2]); err != nil { // drop shard 2
		t.Fatal(err)
	}
	servers[2].Close()
	_ = c.Get(ctx, onC[0]).Err() // the first failure ejects it
	if !c.Stats()[2].Ejected {
		t.Fatalf("the departing shard was not ejected: %+v", c.Stats()[2])
	}
	for _, k := range onC[1:] {
		if err := c.Get(ctx, k).Err(); err != goredis.Nil {
			t.Fatalf("GET %s after the departing shard's ejection: %v, want a miss", k, err)
		}
	}
}
