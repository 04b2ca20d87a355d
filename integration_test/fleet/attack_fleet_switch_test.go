package fleet_test

// Attacks on the step switches of a fleet of redis processes (the fix of
// 4b8ba83: a member applying Moving opens its window and renames its
// sources' connections in one switch). A victim process is driven by hand
// (its backend's Apply with the states the driver stored), so that it can
// jump steps, fail half-way and retry, while writers on every process
// check each acknowledged write with a read through another process.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// steppedDriver is a driver's backend that reports each state it works on
// (on states) and waits for release before its migration (the fleet stays
// in Moving, no key moved but by the members' commands) and again after it
// (before it stores Stable), reporting the Moving state again in between.
type steppedDriver struct {
	fleet.Backend
	states  chan fleet.State
	release chan struct{}
}

func (d steppedDriver) Fence(ctx context.Context, st fleet.State) error {
	d.states <- st
	return d.Backend.Fence(ctx, st)
}

func (d steppedDriver) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	d.states <- st
	<-d.release
	err := d.Backend.Migrate(ctx, st, progress)
	d.states <- st
	<-d.release
	return err
}

// heldChange is a resharding under way, driven by driver to target: its
// Preparing and Moving states, and the end of Reshard.
type heldChange struct {
	preparing, moving fleet.State
	states            chan fleet.State
	release           chan struct{}
	migrated          bool
	done              chan error
	final             fleet.State
}

// holdChange starts a resharding of store's fleet to target, driven by
// driver, and returns once the fleet is in Moving with the migration held.
func holdChange(t *testing.T, store fleet.Store, driver *shardedredis.ShardedClient, target []fleet.Shard) *heldChange {
	t.Helper()
	d := steppedDriver{driver.FleetBackend(shardedredis.MigrateOptions{}), make(chan fleet.State, 2), make(chan struct{})}
	h := &heldChange{states: d.states, release: d.release, done: make(chan error, 1)}
	go func() {
		st, err := fleet.Reshard(ctx, store, d, target, fleet.DriverOptions{})
		h.final = st
		h.done <- err
	}()
	for _, st := range []*fleet.State{&h.preparing, &h.moving} {
		select {
		case *st = <-h.states:
		case err := <-h.done:
			t.Fatalf("the driver ended before Moving: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("the driver did not reach Moving")
		}
	}
	return h
}

// migrate lets the migration run and returns once it has ended, before
// the driver stores Stable.
func (h *heldChange) migrate(t *testing.T) {
	t.Helper()
	h.release <- struct{}{}
	select {
	case <-h.states:
		h.migrated = true
	case err := <-h.done:
		t.Fatalf("the driver ended in its migration: %v", err)
	}
}

// finish lets the driver run to its end (migrating first unless migrate
// did) and returns the final state.
func (h *heldChange) finish(t *testing.T) fleet.State {
	t.Helper()
	if !h.migrated {
		h.migrate(t)
	}
	h.release <- struct{}{}
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	return h.final
}

// switchOps is the model of the writers' keys: each key has one writer,
// which sends one operation at a time, so the key must end with its last
// acknowledged value or with one of the operations sent after it that
// failed (they may have run). "" is a deleted key.
type switchOps struct {
	mu         sync.Mutex
	acked      map[string]string
	maybe      map[string][]string
	violations []string
	ops, fails atomic.Int64
}

func (o *switchOps) violate(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

// runSwitchWriters starts writers goroutines, each owning keysPer keys
// "sw:<g>:<i>" (written once through clients[0] first): each SETs (and
// every fifth operation DELs) its keys in turn through the clients in
// turn, and after each acknowledged operation reads the key through the
// next client, which must see it (a stale read otherwise). The returned
// function stops them and returns the model.
func runSwitchWriters(t *testing.T, clients []*shardedredis.ShardedClient, writers, keysPer int) func() *switchOps {
	t.Helper()
	o := &switchOps{acked: map[string]string{}, maybe: map[string][]string{}}
	for g := range writers {
		for i := range keysPer {
			k := fmt.Sprintf("sw:%d:%d", g, i)
			if err := clients[0].Set(ctx, k, "init", 0).Err(); err != nil {
				t.Fatal(err)
			}
			o.acked[k] = "init"
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("sw:%d:%d", g, n%keysPer)
				w, r := clients[(g+n)%len(clients)], clients[(g+n+1)%len(clients)]
				val := fmt.Sprintf("v%d", n)
				// A short wait: a command refused by a fence waits for its
				// process to apply the next state, and the writers must go
				// on sending while a switch is under way.
				cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				var err error
				if n%5 == 4 {
					val, err = "", w.Del(cctx, k).Err()
				} else {
					err = w.Set(cctx, k, val, 0).Err()
				}
				cancel()
				o.ops.Add(1)
				o.mu.Lock()
				if err != nil {
					o.maybe[k] = append(o.maybe[k], val)
				} else {
					o.acked[k], o.maybe[k] = val, nil
				}
				o.mu.Unlock()
				if err != nil {
					o.fails.Add(1)
					continue
				}
				cctx, cancel = context.WithTimeout(ctx, 2*time.Second)
				got, err := r.Get(cctx, k).Result()
				cancel()
				if errors.Is(err, goredis.Nil) {
					got, err = "", nil
				}
				if err == nil && got != val {
					o.violate("stale read: %s = %q through client %d after %q was acknowledged through client %d", k, got, (g+n+1)%len(clients), val, (g+n)%len(clients))
				}
			}
		})
	}
	return func() *switchOps {
		close(stop)
		wg.Wait()
		return o
	}
}

// checkSwitchEnd checks, once the fleet is Stable on target (shards: the
// options of every server the test started, list their fleet shards),
// that every key holds what the model allows, and that no server but its
// owner under target holds a copy of a key (the protocol's own keys,
// "__shardedcache:...", aside).
func checkSwitchEnd(t *testing.T, o *switchOps, shards []shardedredis.ShardOptions, list, target []fleet.Shard) {
	t.Helper()
	final := listClient(t, target)
	for k, want := range o.acked {
		got, err := final.Get(ctx, k).Result()
		if errors.Is(err, goredis.Nil) {
			got, err = "", nil
		}
		if err != nil || (got != want && !slices.Contains(o.maybe[k], got)) {
			o.violate("%s = %q (%v) at the end; acknowledged last %q, failed since %q", k, got, err, want, o.maybe[k])
		}
	}
	for i, sh := range list {
		raw := goredis.NewClient(&goredis.Options{Addr: shards[i].Addr})
		keys, err := raw.Keys(ctx, "*").Result()
		_ = raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		stray := 0
		for _, k := range keys {
			if !strings.HasPrefix(k, "__shardedcache:") && final.GetShard(k).Options().Addr != sh.Addr {
				stray++
			}
		}
		if stray > 0 {
			o.violate("%d keys left on %s (%s), which does not own them under the target", stray, sh.Name, sh.Addr)
		}
	}
	t.Logf("%d operations, %d failed", o.ops.Load(), o.fails.Load())
	if len(o.violations) > 0 {
		t.Fatalf("%d violations, e.g. %q", len(o.violations), o.violations[:min(5, len(o.violations))])
	}
}

// checkSources adds to o a violation for each SET of the victim of a key
// that moves from list from to list to that reached the key's source on a
// connection of epoch moving or later (the source's fence lets those
// through, and the key may have moved already).
func (f *switchFleet) checkSources(t *testing.T, o *switchOps, from, to []fleet.Shard, moving uint64) {
	t.Helper()
	owner := func(list []fleet.Shard) func(string) string {
		c := listClient(t, list)
		return func(k string) string { return c.GetShard(k).Options().Addr }
	}
	src, dst := owner(from), owner(to)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sent {
		if src(s.key) != dst(s.key) && s.addr == src(s.key) && s.epoch >= moving {
			o.violate("the victim sent SET %s to its source %s on a connection of epoch %d (Moving: %d)", s.key, s.addr, s.epoch, moving)
		}
	}
	t.Logf("the victim sent %d SETs", len(f.sent))
}

// listClient returns a plain sharded client of list's shards (closed when
// the test ends): GetShard(k) names k's owner under list.
func listClient(t *testing.T, list []fleet.Shard) *shardedredis.ShardedClient {
	t.Helper()
	var opts []shardedredis.ShardOptions
	for _, sh := range list {
		opts = append(opts, shardedredis.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight})
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// failingConfig is a go-redis hook that fails every CONFIG command while
// on is set: a joining server that cannot be reached when the CONFIG SET
// parameters are copied to it.
type failingConfig struct{ on *atomic.Bool }

func (h failingConfig) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h failingConfig) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "config" && h.on.Load() {
			cmd.SetErr(errors.New("attack: the joining server is unreachable"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h failingConfig) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// switchFleet is a fleet of real servers: a member that follows every
// step, the driver's client, and a victim client whose steps the test
// applies by hand; CONFIG commands of the victim to joining fails while
// failConfig is set.
type switchFleet struct {
	shards     []shardedredis.ShardOptions
	list       []fleet.Shard
	store      *fleet.MemStore
	member     *shardedredis.ShardedClient
	members    []*fleet.Member // the member's and the driver's
	driver     *shardedredis.ShardedClient
	victim     *shardedredis.ShardedClient
	victimB    fleet.Backend
	failConfig atomic.Bool
	mu         sync.Mutex
	sent       []sentSet // the victim's SETs
	joiners    int       // servers the victim's list gains in the change
}

// newSwitchFleet starts servers redis-servers; the fleet's list is the
// first initial of them. The victim's options are victim (its Shards set
// here), or the defaults when nil.
func newSwitchFleet(t *testing.T, servers, initial int, victim *shardedredis.ShardedOptions) *switchFleet {
	t.Helper()
	f := &switchFleet{store: &fleet.MemStore{}}
	f.shards, f.list = fixtures.FleetServers(t, servers)
	clients, members := fixtures.FleetMembers(t, f.shards[:initial], f.list[:initial], f.store, 2)
	f.members = members
	f.member, f.driver = clients[0], clients[1]
	if victim == nil {
		victim = &shardedredis.ShardedOptions{}
	}
	victim.Shards = f.shards[:initial]
	v, err := shardedredis.NewShardedClient(victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	v.OnNewNode(func(c *goredis.Client) {
		o := c.Options()
		c.AddHook(setRecorder{addr: o.Addr, name: o.ClientName, sent: func(s sentSet) {
			f.mu.Lock()
			f.sent = append(f.sent, s)
			f.mu.Unlock()
		}, config: func(string) {}})
	})
	f.victim, f.victimB = v, v.FleetBackend(shardedredis.MigrateOptions{})
	st, _, err := f.store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.apply(t, st)
	// A parameter that every joining shard gets copied in the switch.
	if err := v.ConfigSet(ctx, "lazyfree-lazy-user-del", "no").Err(); err != nil {
		t.Fatal(err)
	}
	return f
}

// apply applies st to the victim.
func (f *switchFleet) apply(t *testing.T, st fleet.State) {
	t.Helper()
	if err := f.victimB.Apply(ctx, st); err != nil {
		t.Fatalf("the victim's Apply of epoch %d (%s): %v", st.Epoch, st.Step, err)
	}
}

// applyFailingOnce applies st to the victim with the joining servers'
// CONFIG failing (Apply must fail), lets the writers run on, then applies
// it again.
func (f *switchFleet) applyFailingOnce(t *testing.T, st fleet.State) {
	t.Helper()
	if f.joiners == 0 { // no CONFIG to copy
		f.apply(t, st)
		return
	}
	f.failConfig.Store(true)
	if err := f.victimB.Apply(ctx, st); err == nil {
		t.Fatalf("the victim's Apply of epoch %d (%s) with a joining server's CONFIG failing succeeded", st.Epoch, st.Step)
	}
	time.Sleep(500 * time.Millisecond)
	f.failConfig.Store(false)
	f.apply(t, st)
}

// The victim's jumps: when it applies the Moving step, if at all.
const (
	movingBefore = "Moving before the migration" // while it is held
	movingAfter  = "Moving after the migration"  // before Stable is stored
	movingLate   = "Moving late"                 // after the others applied Stable
	stepByStep   = "Preparing, Moving after"     // Preparing, then Moving after the migration
	stableOnly   = "Stable only"                 // never: Stable(L) to Stable(T) (run's default)
)

// TestAttackFleetSwitchVictim: a fleet of real redis-servers reshards
// while writers on a member, the driver and a victim process write (SET,
// DEL) and read back through another process. The victim jumps from
// Stable(L) straight to Moving (with its first Apply failing half-way: a
// joining server's CONFIG copy fails, then it retries) after the
// migration, or after every other process applied Stable(T) (a watch that
// delivers late); or it applies Preparing, then Moving after the migration
// (failing once).
// Targets: 2 -> 3 (the sources stay) and replacing a server (same name,
// new address).
// No acknowledged write may be lost, no delete resurrected, no read stale
// after an acknowledged write, and no copy left on a server that does not
// own the key.
func TestAttackFleetSwitchVictim(t *testing.T) {
	grow := func(l []fleet.Shard) []fleet.Shard { return l[:3] }
	replace := func(l []fleet.Shard) []fleet.Shard {
		return []fleet.Shard{l[0], {Name: l[1].Name, Addr: l[2].Addr}}
	}
	// The cases that caught a switch that routes by L through the sources'
	// fence, with the fix undone: a victim that first switches to L with
	// connections of the Moving epoch (grow/movingAfter, replace/
	// movingLate), or a switch to L with its sources renamed before the
	// window opens (grow/stepByStep). The other jumps (movingBefore,
	// stableOnly) and targets (re-weighting; the sources leaving, in
	// TestAttackFleetSwitchAutopipelined) found nothing more, at 1 to 2 s
	// each.
	for _, tc := range []struct {
		name   string
		target func([]fleet.Shard) []fleet.Shard
		jump   string
	}{
		{"grow", grow, movingAfter},
		{"grow", grow, stepByStep},
		{"replace", replace, movingLate},
	} {
		t.Run(tc.name+"/"+tc.jump, func(t *testing.T) {
			f := newSwitchFleet(t, 3, 2, nil)
			f.run(t, tc.target(f.list), tc.jump)
		})
	}
}

// TestAttackFleetSwitchAutopipelined is two cases of
// TestAttackFleetSwitchVictim (growth, the victim jumping to Moving after
// the migration; the sources leaving, the victim jumping late) with a victim whose every command rides go-redis's
// autopipelining engines (AutoPipelineOptions, AutoPipelineFrom 1): they
// must use the connections that the switch renames, as the plain path does.
func TestAttackFleetSwitchAutopipelined(t *testing.T) {
	for _, tc := range []struct {
		name, jump string
		target     func([]fleet.Shard) []fleet.Shard
	}{
		{"grow", movingAfter, func(l []fleet.Shard) []fleet.Shard { return l[:3] }},
		{"sources leave", movingLate, func(l []fleet.Shard) []fleet.Shard { return l[2:3] }},
	} {
		t.Run(tc.name+"/"+tc.jump, func(t *testing.T) {
			f := newSwitchFleet(t, 3, 2, &shardedredis.ShardedOptions{
				Options:          &goredis.Options{AutoPipelineOptions: &goredis.AutoPipelineOptions{}},
				AutoPipelineFrom: 1,
			})
			f.run(t, tc.target(f.list), tc.jump)
		})
	}
}

// run reshards f to target with the writers on, the victim jumping as
// jump says: one of the constants above (stableOnly, or any other string:
// it applies the final state only).
func (f *switchFleet) run(t *testing.T, target []fleet.Shard, jump string) {
	t.Helper()
	f.joining(target)
	stop := runSwitchWriters(t, []*shardedredis.ShardedClient{f.member, f.victim, f.driver}, 4, 30)
	time.Sleep(100 * time.Millisecond)
	h := holdChange(t, f.store, f.driver, target)
	time.Sleep(200 * time.Millisecond) // the victim is behind: its moving keys wait
	if jump == stepByStep {
		f.apply(t, h.preparing)
	}
	if jump == movingAfter || jump == stepByStep {
		h.migrate(t)
	}
	if jump == movingBefore || jump == movingAfter || jump == stepByStep {
		f.applyFailingOnce(t, h.moving)
		time.Sleep(200 * time.Millisecond)
	}
	final := h.finish(t)
	if jump == movingLate {
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := f.members[0].WaitEpoch(mctx, final.Epoch); err != nil {
			t.Fatal(err)
		}
		f.applyFailingOnce(t, h.moving)
	}
	time.Sleep(100 * time.Millisecond)
	f.apply(t, final)
	time.Sleep(100 * time.Millisecond)
	o := stop()
	f.checkSources(t, o, f.list[:2], target, h.moving.Epoch)
	checkSwitchEnd(t, o, f.shards, f.list, target)
}

// joining makes the CONFIG of the victim's clients of target's shards that
// are not in its list fail while failConfig is set.
func (f *switchFleet) joining(target []fleet.Shard) {
	cur := f.victim.Shards()
	var addrs []string
	for _, sh := range target {
		if !slices.ContainsFunc(cur, func(c shardedredis.Shard) bool { return c.Addr == sh.Addr }) {
			addrs = append(addrs, sh.Addr)
		}
	}
	f.joiners = len(addrs)
	f.victim.OnNewNode(func(c *goredis.Client) {
		if slices.Contains(addrs, c.Options().Addr) {
			c.AddHook(failingConfig{&f.failConfig})
		}
	})
}

// TestAttackFleetSwitchTwoChangesBehind: the victim follows a change
// (2 -> 3 servers) to its Moving step and is cut off there, its window
// open, while the fleet finishes it and runs a second change (the first
// server leaves); the victim comes back in the second change's Moving once
// its migration has run (its first Apply failing half-way: the joining
// server's CONFIG copy), then applies the end. Writers on a member, the driver and the victim
// check every acknowledged write, as in TestAttackFleetSwitchVictim.
func TestAttackFleetSwitchTwoChangesBehind(t *testing.T) {
	f := newSwitchFleet(t, 4, 2, nil)
	first, second := f.list[:3], f.list[1:4]
	f.joining(first)
	stop := runSwitchWriters(t, []*shardedredis.ShardedClient{f.member, f.victim, f.driver}, 4, 30)
	h := holdChange(t, f.store, f.driver, first)
	f.apply(t, h.preparing)
	f.apply(t, h.moving)
	time.Sleep(100 * time.Millisecond)
	h.finish(t)
	time.Sleep(100 * time.Millisecond)
	f.joining(second)
	h = holdChange(t, f.store, f.driver, second)
	time.Sleep(200 * time.Millisecond)
	h.migrate(t)
	f.applyFailingOnce(t, h.moving)
	time.Sleep(200 * time.Millisecond)
	final := h.finish(t)
	time.Sleep(100 * time.Millisecond)
	f.apply(t, final)
	time.Sleep(100 * time.Millisecond)
	o := stop()
	f.checkSources(t, o, first, second, h.moving.Epoch)
	checkSwitchEnd(t, o, f.shards, f.list, second)
}

// TestAttackFleetSwitchRawClients: GetShard's raw clients across the
// switches of a 2 -> 3 change, in a victim that follows every step. For
// each moving key k<i> (on a source), the victim takes its raw client in
// Stable(L) (for k0) and in Preparing (for k1), and, once in Moving, the
// raw client of k2 (GetShard moves the key first). After the migration,
// SETs through the first two must fail (they would land on the source
// after the key moved), the one through the third must land. At the end
// every key holds its last acknowledged value and no server but its owner
// holds a copy (the protocol's own keys aside).
func TestAttackFleetSwitchRawClients(t *testing.T) {
	f := newSwitchFleet(t, 3, 2, nil)
	target := f.list[:3]
	keys := movingKeys(t, f.list[:2], target, 3)
	o := &switchOps{acked: map[string]string{}, maybe: map[string][]string{}}
	for _, k := range keys {
		if err := f.victim.Set(ctx, k, "init", 0).Err(); err != nil {
			t.Fatal(err)
		}
		o.acked[k] = "init"
	}
	raw := []*goredis.Client{f.victim.GetShard(keys[0])}
	h := holdChange(t, f.store, f.driver, target)
	f.apply(t, h.preparing)
	raw = append(raw, f.victim.GetShard(keys[1]))
	f.apply(t, h.moving)
	raw = append(raw, f.victim.GetShard(keys[2]))
	h.migrate(t)
	for i, c := range raw {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Set(cctx, keys[i], "raw", 0).Err()
		cancel()
		t.Logf("raw client %d: SET %s: %v", i, keys[i], err)
		switch {
		case err == nil:
			o.acked[keys[i]], o.maybe[keys[i]] = "raw", nil
			if i < 2 {
				o.violate("a SET of %s through the raw client taken before Moving was acknowledged after the migration", keys[i])
			}
		case i == 2:
			o.violate("a SET of %s through the raw client taken in Moving: %v", keys[i], err)
		default:
			o.maybe[keys[i]] = append(o.maybe[keys[i]], "raw")
		}
	}
	f.apply(t, h.finish(t))
	checkSwitchEnd(t, o, f.shards, f.list, target)
}

// movingKeys returns n keys "raw:<i>" whose owner under from is not their
// owner under to.
func movingKeys(t *testing.T, from, to []fleet.Shard, n int) []string {
	t.Helper()
	a, b := listClient(t, from), listClient(t, to)
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprint("raw:", i)
		if a.GetShard(k).Options().Addr != b.GetShard(k).Options().Addr {
			out = append(out, k)
		}
	}
	return out
}

// TestAttackFleetSwitchPubSub: a subscription of the victim to channels
// (placed like keys) across a change 2 -> the third server alone (every
// channel moves, the sources leave), the victim following every step, or
// jumping from Stable(L) to Stable(T). Once it has applied the end and its
// Ping is answered, a message published through the member on each
// channel reaches the subscription: none is left on a server that left,
// behind a connection its fence refuses.
func TestAttackFleetSwitchPubSub(t *testing.T) {
	for _, every := range []bool{true, false} {
		t.Run(fmt.Sprint("every step ", every), func(t *testing.T) {
			f := newSwitchFleet(t, 3, 2, nil)
			target := f.list[2:3]
			var channels []string
			for i := range 20 {
				channels = append(channels, fmt.Sprint("ch:", i))
			}
			sub := f.victim.Subscribe(ctx, channels...)
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			h := holdChange(t, f.store, f.driver, target)
			if every {
				f.apply(t, h.preparing)
				f.apply(t, h.moving)
			}
			f.apply(t, h.finish(t))
			if err := sub.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			pong := false
			for len(got) < len(channels) {
				msg, err := sub.Receive(rctx)
				if err != nil {
					// A shard's failure (the fence closed the connection
					// to a source): go-redis resubscribes there.
					if rctx.Err() != nil {
						t.Fatalf("%d of %d messages received (pong %v): %v", len(got), len(channels), pong, err)
					}
					t.Logf("Receive: %v", err)
					continue
				}
				switch m := msg.(type) {
				case *goredis.Pong:
					pong = true
					for _, ch := range channels {
						if err := f.member.Publish(ctx, ch, "after").Err(); err != nil {
							t.Fatal(err)
						}
					}
				case *goredis.Message:
					got[m.Channel] = true
				}
			}
		})
	}
}
