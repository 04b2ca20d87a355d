package integration_test

// Attacks on the migration's counts (commit e7a9c08): cut a run by its
// context at many points, resume it from its checkpoint, and check each
// run's counts, the moves summed over runs, and where every key ends up.

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// cutVal is what a key of the attack fixture holds.
type cutVal struct {
	kind string // string, hash, list
	str  string
	hash map[string]string
	list []string
	ttl  time.Duration
}

// cutWorld is the fixture of an attack: the servers, a client over the old
// list, the new list, what every key holds and where it goes.
type cutWorld struct {
	shards  []shardedredis.ShardOptions
	direct  []*goredis.Client
	c       *shardedredis.ShardedClient
	next    []shardedredis.ShardOptions
	keys    []string
	want    map[string]*cutVal
	from    map[string]int
	to      map[string]int
	written time.Time
	moving  int // keys that change owner
	stale   int // stale copies on old shards that own them neither before nor after
}

// cutTopology returns, for variant v, how many servers, how many the old
// list uses, and the new list.
func cutTopology(v int, shards []shardedredis.ShardOptions) (old int, next []shardedredis.ShardOptions) {
	switch v % 3 {
	case 0: // add two shards
		return 2, slices.Clone(shards[:4])
	case 1: // remove a shard
		return 3, []shardedredis.ShardOptions{shards[0], shards[2]}
	default: // b at a new address, d added
		n := []shardedredis.ShardOptions{shards[0], shards[2], shards[3], shards[4]}
		n[2].Name, n[3].Name = "b", "d"
		return 3, n
	}
}

func cutFixture(t *testing.T, seed int64, variant, n int) *cutWorld {
	t.Helper()
	shards, direct, _ := safetyFixture(t, 5, 0+1, shardedredis.Health{}) // servers only
	old, next := cutTopology(variant, shards)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:old]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &cutWorld{shards: shards, direct: direct, c: c, next: next, want: map[string]*cutVal{}, from: map[string]int{}, to: map[string]int{}}
	rng := rand.New(rand.NewSource(seed))
	w.written = time.Now()
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			k := fmt.Sprintf("ce:%d:%d", seed, i)
			w.keys = append(w.keys, k)
			var ttl time.Duration
			if rng.Intn(3) == 0 {
				ttl = time.Duration(1000+rng.Intn(1000)) * time.Second
			}
			var v *cutVal
			switch rng.Intn(3) {
			case 0:
				v = &cutVal{kind: "string", str: "s" + strconv.Itoa(rng.Int())}
				p.Set(ctx, k, v.str, 0)
			case 1:
				v = &cutVal{kind: "hash", hash: map[string]string{"f": strconv.Itoa(i), "g": strconv.Itoa(rng.Int())}}
				p.HSet(ctx, k, "f", v.hash["f"], "g", v.hash["g"])
			default:
				v = &cutVal{kind: "list", list: []string{strconv.Itoa(i), strconv.Itoa(rng.Int())}}
				p.RPush(ctx, k, v.list[0], v.list[1])
			}
			if ttl > 0 {
				v.ttl = ttl
				p.PExpire(ctx, k, ttl)
			}
			w.want[k] = v
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	target := placementOf(t, next)
	for _, k := range w.keys {
		w.from[k] = serverOf(t, c, shards, k)
		w.to[k] = serverOf(t, target, shards, k)
		w.moving += b2i(w.from[k] != w.to[k])
	}
	// Stale copies on some new owners: BeginResharding removes them.
	for i, k := range w.keys {
		if w.from[k] != w.to[k] && i%7 == 0 {
			if err := direct[w.to[k]].Set(ctx, k, "stale", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Stale copies on old shards that own the key neither before nor
	// after: the migration UNLINKs them.
	for i := 0; w.stale < 25 && i < 1000; i++ {
		k := fmt.Sprintf("cestale:%d:%d", seed, i)
		from, to := serverOf(t, c, shards, k), serverOf(t, target, shards, k)
		for s := range old {
			if s != from && s != to && shards[s].Addr != "" {
				if err := direct[s].Set(ctx, k, "stale", 0).Err(); err != nil {
					t.Fatal(err)
				}
				w.stale++
				break
			}
		}
	}
	if err := c.BeginResharding(next); err != nil {
		t.Fatal(err)
	}
	return w
}

// runCounts are one run's counts, summed over its source shards.
type runCounts struct{ moved, failed, stale int64 }

// checkRunCounts checks every shard's counts of one run (Scanned is the
// sum of the others; every failure listed while there are fewer than 100)
// and returns their sums, Moved and OnNewOwner as moved.
func checkRunCounts(t *testing.T, label string, progress []shardedredis.ShardProgress) runCounts {
	t.Helper()
	var c runCounts
	for _, p := range progress {
		if sum := p.Owned + p.Moved + p.OnNewOwner + p.Gone + p.Stale + p.Failed; p.Scanned != sum {
			t.Errorf("%s, %s: scanned %d, counted %d (owned %d moved %d onNewOwner %d gone %d stale %d failed %d)",
				label, p.Shard, p.Scanned, sum, p.Owned, p.Moved, p.OnNewOwner, p.Gone, p.Stale, p.Failed)
		}
		if p.Failed != int64(len(p.Failures)) && len(p.Failures) < 100 {
			t.Errorf("%s, %s: failed %d, %d failures listed", label, p.Shard, p.Failed, len(p.Failures))
		}
		c.moved += p.Moved + p.OnNewOwner
		c.failed += p.Failed
		c.stale += p.Stale
	}
	return c
}

// checkFinal checks that the window has ended and that every key is on
// its new owner alone, with its value and TTL, and that no server holds
// anything else.
func (w *cutWorld) checkFinal(t *testing.T) {
	t.Helper()
	if w.c.Window() != nil {
		t.Errorf("the window is still open")
	}
	on := keyHolders(t, w.direct, w.keys)
	bad := 0
	for _, k := range w.keys {
		v, ok := w.want[k]
		if !ok {
			if len(on[k]) != 0 {
				t.Errorf("%s was deleted, yet is on %v", k, on[k])
			}
			continue
		}
		if !slices.Equal(on[k], []int{w.to[k]}) {
			bad++
			if bad <= 5 {
				t.Errorf("%s on servers %v, want only its new owner %d (old owner %d)", k, on[k], w.to[k], w.from[k])
			}
			continue
		}
		d := w.direct[w.to[k]]
		var err error
		switch v.kind {
		case "string":
			got, e := d.Get(ctx, k).Result()
			if err = e; err == nil && got != v.str {
				err = fmt.Errorf("value %q, want %q", got, v.str)
			}
		case "hash":
			got, e := d.HGetAll(ctx, k).Result()
			if err = e; err == nil && !maps.Equal(got, v.hash) {
				err = fmt.Errorf("fields %v, want %v", got, v.hash)
			}
		default:
			got, e := d.LRange(ctx, k, 0, -1).Result()
			if err = e; err == nil && !slices.Equal(got, v.list) {
				err = fmt.Errorf("elements %v, want %v", got, v.list)
			}
		}
		if err != nil {
			t.Errorf("%s on server %d: %v", k, w.to[k], err)
			continue
		}
		pttl, err := d.PTTL(ctx, k).Result()
		switch {
		case err != nil:
			t.Errorf("%s: %v", k, err)
		case v.ttl == 0 && pttl != -1:
			t.Errorf("%s has TTL %v, want none", k, pttl)
		case v.ttl != 0 && (pttl > v.ttl || pttl < v.ttl-time.Since(w.written)-time.Second):
			t.Errorf("%s has TTL %v, want about %v", k, pttl, v.ttl)
		}
	}
	if bad > 0 {
		t.Errorf("%d keys misplaced", bad)
	}
	for i, d := range w.direct {
		owned := 0
		for _, k := range w.keys {
			_, ok := w.want[k]
			owned += b2i(ok && w.to[k] == i)
		}
		if size, err := userDBSize(d).Result(); err != nil || size != int64(owned) {
			t.Errorf("server %d holds %d keys (%v), want the %d it owns", i, size, err, owned)
		}
	}
}

// cutAt cancels a run's context at the nth command named name (alone or in
// a pipeline), before it is sent (it is then not sent) or after its reply.
type cutAt struct {
	name   string
	nth    int32
	after  bool
	mu     sync.Mutex
	cancel context.CancelFunc
	hits   int32
	fired  bool
	firing goredis.Cmder // the first command of the nth, cut once it is answered
}

func (h *cutAt) arm(cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancel = cancel
}

// match reports whether cmds is the nth of its kind, and cancels then when
// cutting before.
func (h *cutAt) match(cmds []goredis.Cmder) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel == nil || !slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return isStep(c, h.name) }) {
		return false
	}
	h.hits++
	if h.hits != h.nth {
		return false
	}
	h.fired = true
	if !h.after {
		h.cancel()
	}
	return true
}

// hook is h as a shard client's hook.
func (h *cutAt) hook() sendHook {
	return sendHook{
		before: func(_ context.Context, cmds []goredis.Cmder) error {
			if h.match(cmds) && h.after {
				h.mu.Lock()
				h.firing = cmds[0]
				h.mu.Unlock()
			}
			return nil
		},
		after: func(_ context.Context, cmds []goredis.Cmder) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.firing != nil && h.firing == cmds[0] {
				h.firing = nil
				h.cancel()
			}
		},
	}
}

// resumeToEnd runs migrations from cp until one returns nil (at most 5),
// checking each run's counts; it returns the moves and stale copies they
// counted.
func (w *cutWorld) resumeToEnd(t *testing.T, opt shardedredis.MigrateOptions, cp *shardedredis.Checkpoint) (moved, stale int64) {
	t.Helper()
	for r := 2; r < 7; r++ {
		opt.Resume = cp
		m, err := w.c.NewMigration(opt)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Run(ctx)
		c := checkRunCounts(t, "run "+strconv.Itoa(r), m.Progress())
		moved, stale = moved+c.moved, stale+c.stale
		if err == nil {
			return moved, stale
		}
		t.Logf("run %d: %v", r, err)
		cp = m.Checkpoint()
	}
	t.Fatal("no run finished")
	return moved, stale
}

// TestReshardCutEverywhere cuts the first run at the nth SCAN, DUMP,
// RESTORE, DEL or UNLINK, before it is sent or after its reply, for many n
// and seeds (1 and 2; 1 to 3 under SHARDEDCACHE_LONG=1), and resumes it to
// the end.
func TestReshardCutEverywhere(t *testing.T) {
	names := []string{"scan", "dump", "restore", "del", "unlink"}
	cases := 0
	for seed := int64(1); seed <= int64(scaled(2, 3)); seed++ {
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
	w := cutFixture(t, seed, variant, 300)
	opt := shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 1, InFlight: 1}
	if conc {
		opt = shardedredis.MigrateOptions{BatchSize: 9, Parallelism: 3, InFlight: 3}
	}
	h := &cutAt{name: name, nth: nth, after: after}
	w.c.AddHook(h.hook())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.arm(cancel)
	m, err := w.c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(runCtx)
	h.arm(nil)
	h.mu.Lock()
	fired := h.fired
	h.mu.Unlock()
	if !fired {
		t.Skipf("the cut never fired (%d %s)", h.hits, name)
	}
	first := checkRunCounts(t, "run 1", m.Progress())
	moved, stale := first.moved, first.stale
	for _, p := range m.Progress() {
		if p.Failed != 0 {
			t.Errorf("run 1, %s: failed %d after a cancel: %v", p.Shard, p.Failed, p.Failures)
		}
	}
	switch {
	case err == nil:
		// Only a cut after the last reply may let the run finish.
		if w.c.Window() == nil {
			t.Logf("run 1 finished despite the cut")
		}
	case err != context.Canceled:
		t.Fatalf("run 1: %v (%T), want context.Canceled", err, err)
	default:
		if w.c.Window() == nil {
			t.Fatal("the window ended after a cut run")
		}
		mv, st := w.resumeToEnd(t, shardedredis.MigrateOptions{BatchSize: 7}, m.Checkpoint())
		moved, stale = moved+mv, stale+st
	}
	if err == nil && !after {
		t.Errorf("run 1 was cut before a %s was sent, yet returned nil", name)
	}
	if moved != int64(w.moving) {
		t.Errorf("the runs moved %d keys, want the %d that change owner", moved, w.moving)
	}
	if stale != int64(w.stale) {
		t.Errorf("the runs count %d stale copies, want the %d there were", stale, w.stale)
	}
	w.checkFinal(t)
}

// TestReshardCutLast cuts the first run at the last few SCANs, DUMPs,
// RESTOREs and DELs it sends (counted on a full run of the same fixture
// first), one source after the other: a cut in the last batch of the last
// page of the last source. Seeds 1 and 2 (1 to 3 under SHARDEDCACHE_LONG=1).
func TestReshardCutLast(t *testing.T) {
	cases := 0
	for seed := int64(1); seed <= int64(scaled(2, 3)); seed++ {
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
		w := cutFixture(t, seed, variant, 300)
		h := &cutAt{name: name, nth: -1}
		w.c.AddHook(h.hook())
		h.arm(func() {})
		m, err := w.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 7, Parallelism: 1, InFlight: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx); err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		total = h.hits
		h.mu.Unlock()
	})
	return total
}
