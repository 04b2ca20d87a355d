package reshard_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestMigrationServerSide runs a ServerSide migration (MIGRATE between the
// servers) from one real redis-server to two, in which some keys were
// written on their new owner in the window (BUSYKEY), some are deleted
// between the SCAN and their batch's transaction, and the first
// transaction with a busy key fails unsent (its reply lost, for the client): that batch is
// settled as for BUSYKEY, its keys that the new owner holds leaving the
// old owner, the others failing there. The progress counts each key once,
// exactly where it belongs, every server holds exactly what a plain map
// says (moved keys with their TTL), and a second run moves the failed keys.
func TestMigrationServerSide(t *testing.T) {
	f := fixtures.NewCountsFixture(t, "ms:", true)
	direct, c, want, busy, gone := f.Direct, f.C, f.Want, f.Busy, f.Gone
	const n = fixtures.CountsKeys
	moving := map[string]bool{}
	for _, k := range f.Moving {
		moving[k] = true
	}
	// On the old owner: the first transaction with a busy key fails unsent
	// (its keys are failed); the others first lose the keys of gone, as to
	// a concurrent DEL.
	var mu sync.Mutex
	failed := map[string]bool{}
	failing := true
	c.Shards()[0].Client.AddHook(fixtures.BeforeSend(func(ctx context.Context, cmds []goredis.Cmder) error {
		if cmds[0].Name() != "multi" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		var keys []string
		fail := false
		for _, cmd := range cmds {
			if cmd.Name() == "exists" {
				k := fmt.Sprint(cmd.Args()[1])
				keys = append(keys, k)
				fail = fail || failing && busy[k]
			}
		}
		if fail {
			failing = false
			for _, k := range keys {
				failed[k] = true
			}
			return errors.New("injected transaction failure")
		}
		for _, k := range keys {
			if gone[k] {
				if err := direct[0].Del(ctx, k).Err(); err != nil {
					return err
				}
			}
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
	busyIn, goneIn := count(busy, true), count(gone, true) // of the failed transaction
	if nFailed := int64(len(failed)) - busyIn; !errors.As(err, &merr) || int64(len(merr.Keys)) != nFailed || nFailed == 0 {
		t.Fatalf("run 1: %v, want a *MigrationError naming the %d keys of the failed transaction not busy", err, nFailed)
	}
	for _, ke := range merr.Keys {
		if !failed[ke.Key] || busy[ke.Key] || !strings.Contains(ke.Err.Error(), "injected transaction failure") {
			t.Errorf("run 1 failed %s (%v), not in the failed transaction or busy", ke.Key, ke.Err)
		}
	}
	if count(busy, false) == 0 || count(gone, false) == 0 || busyIn+goneIn == int64(len(failed)) {
		t.Fatalf("the failed batch took every busy or gone key, or only such keys: %d busy, %d gone of its %d", busyIn, goneIn, len(failed))
	}
	check(1, m.Progress()[0], shardedredis.ShardProgress{
		Scanned:    n,
		Owned:      int64(n - len(moving)),
		Moved:      count(moving, false) - count(busy, false) - count(gone, false),
		OnNewOwner: int64(len(busy)),
		Gone:       count(gone, false),
		Failed:     int64(len(failed)) - busyIn,
	})
	// Each key on its owner alone with its value; the failed keys on the
	// old owner still.
	content := func(run int) {
		t.Helper()
		for i := range n {
			k := "ms:" + strconv.Itoa(i)
			onA, onB := fixtures.HoldsValue(t, direct[0], k), fixtures.HoldsValue(t, direct[1], k)
			v, ok := want[k]
			wantA, wantB := v, ""
			switch {
			case !ok && run == 1 && failed[k]:
				wantA, wantB = "v"+strconv.Itoa(i), ""
			case !ok:
				wantA = ""
			case run == 1 && failed[k] && !busy[k]:
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
		Scanned: int64(n-len(moving)) + int64(len(failed)) - busyIn,
		Owned:   int64(n - len(moving)),
		Moved:   int64(len(failed)) - busyIn - goneIn,
		Gone:    goneIn,
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
	shards, direct, _ := fixtures.SafetyFixture(t, 2, 2, shardedredis.Health{})
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
	if moved != int64(onB) || fixtures.UserDBSize(direct[1]).Val() != 0 || fixtures.UserDBSize(direct[0]).Val() != n {
		t.Fatalf("moved %d of b's %d keys; a holds %d, b %d; want all %d on a", moved, onB, fixtures.UserDBSize(direct[0]).Val(), fixtures.UserDBSize(direct[1]).Val(), n)
	}
}

// serverSideShard is a shard on DB db of the real redis-server at addr,
// with a direct client to that DB.
type serverSideShard struct {
	so     shardedredis.ShardOptions
	direct *goredis.Client
}

func newServerSideShard(t *testing.T, name, addr string, db int, o goredis.Options) serverSideShard {
	t.Helper()
	o.Addr, o.DB, o.MaxRetries = addr, db, -1
	d := goredis.NewClient(&o)
	t.Cleanup(func() { d.Close() })
	so := o
	return serverSideShard{so: shardedredis.ShardOptions{Name: name, Addr: addr, Options: &so}, direct: d}
}

func serverSideOptions(l []serverSideShard) []shardedredis.ShardOptions {
	var out []shardedredis.ShardOptions
	for _, s := range l {
		out = append(out, s.so)
	}
	return out
}

// runServerSide writes n keys (random values of the given size, which
// DUMP cannot compress; one-hour TTL) through a client over old (with
// health h), reshards it to new with a ServerSide
// migration, and checks that it succeeds with every moving key counted
// moved, nothing else, and that each key is then on its new owner alone
// with its value.
func runServerSide(t *testing.T, old, new []serverSideShard, n, size int, h shardedredis.Health, opt shardedredis.MigrateOptions) {
	t.Helper()
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: serverSideOptions(old), Health: h})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := fixtures.PlacementOf(t, serverSideOptions(new))
	ownerOf := func(l []serverSideShard, i int) string { return l[i].so.Addr + "/" + strconv.Itoa(l[i].so.Options.DB) }
	value := func(i int) string {
		b := make([]byte, size)
		for j := 0; j < size; j += 8 {
			binary.LittleEndian.PutUint64(b[j:], rand.Uint64())
		}
		return string(b)
	}
	values := make([]string, n)
	var moving int64
	for i := range n {
		k := "ss:" + strconv.Itoa(i)
		values[i] = value(i)
		if err := c.Set(ctx, k, values[i], time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if ownerOf(old, c.GetShardInfo(k).Index) != ownerOf(new, next.GetShardInfo(k).Index) {
			moving++
		}
	}
	if err := c.BeginResharding(serverSideOptions(new)); err != nil {
		t.Fatal(err)
	}
	opt.ServerSide = true
	m, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var sum shardedredis.ShardProgress
	for _, p := range m.Progress() {
		sum.Moved, sum.OnNewOwner, sum.Gone, sum.Failed = sum.Moved+p.Moved, sum.OnNewOwner+p.OnNewOwner, sum.Gone+p.Gone, sum.Failed+p.Failed
	}
	if sum.Moved != moving || sum.OnNewOwner != 0 || sum.Gone != 0 || sum.Failed != 0 {
		t.Errorf("moved %d, onNewOwner %d, gone %d, failed %d; want %d moved, no other", sum.Moved, sum.OnNewOwner, sum.Gone, sum.Failed, moving)
	}
	all := append(slices.Clone(old), new...)
	for i := range n {
		k := "ss:" + strconv.Itoa(i)
		owner := ownerOf(new, next.GetShardInfo(k).Index)
		for j, sh := range all {
			v, err := sh.direct.Get(ctx, k).Result()
			switch mine := ownerOf(all, j) == owner; {
			case mine && (err != nil || v != values[i]):
				t.Fatalf("%s on its owner %s: %d bytes, %v", k, owner, len(v), err)
			case !mine && err != goredis.Nil:
				t.Fatalf("%s left on %s: %d bytes, %v", k, ownerOf(all, j), len(v), err)
			}
		}
	}
	if c.Window() != nil {
		t.Fatal("the window is still open after the migration")
	}
}

// TestMigrationServerSideSharedServers: shards that are DBs of the same
// servers. MIGRATE from a server to itself (two DBs of one server) would
// wait on itself, and two or three servers migrating to each other at once
// (shards keeping their names while moving to another server's DB) would
// wait on each other until MIGRATE's timeout, leaving keys on both servers
// (counted on the new owner) or failed. Every moving key is counted moved,
// in one run.
func TestMigrationServerSideSharedServers(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	procs := []*fixtures.RedisProc{fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")}
	on := func(name string, p, db int) serverSideShard {
		return newServerSideShard(t, name, procs[p].Addr, db, goredis.Options{})
	}
	for _, tc := range []struct {
		name     string
		old, new []serverSideShard
		opt      shardedredis.MigrateOptions
	}{
		{"two DBs of one server", []serverSideShard{on("a", 0, 0)}, []serverSideShard{on("a", 0, 0), on("b", 0, 1)},
			shardedredis.MigrateOptions{BatchSize: 100}},
		{"two servers both ways", []serverSideShard{on("a", 0, 2), on("b", 1, 2)}, []serverSideShard{on("a", 1, 3), on("b", 0, 3)},
			shardedredis.MigrateOptions{BatchSize: 200, Parallelism: 2, InFlight: 2}},
		{"three servers round", []serverSideShard{on("a", 0, 4), on("b", 1, 4), on("c", 2, 4)},
			[]serverSideShard{on("a", 1, 5), on("b", 2, 5), on("c", 0, 5)}, shardedredis.MigrateOptions{BatchSize: 200, Parallelism: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runServerSide(t, tc.old, tc.new, 3000, 8, shardedredis.Health{}, tc.opt)
		})
	}
}

// TestMigrationServerSideLostReply: 1 MB values and shard clients that
// give up reading after 200 ms: a transaction's reply is lost while the
// servers still move the keys. The batch is settled once the old owner
// answers again: every moving key counts moved, none failed.
func TestMigrationServerSideLostReply(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	p0, p1 := fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")
	o := goredis.Options{ReadTimeout: 200 * time.Millisecond}
	a, b := newServerSideShard(t, "a", p0.Addr, 0, o), newServerSideShard(t, "b", p1.Addr, 0, o)
	runServerSide(t, []serverSideShard{a}, []serverSideShard{a, b}, 200, 1<<20, shardedredis.Health{}, shardedredis.MigrateOptions{BatchSize: 100, InFlight: 2})
}

// TestMigrationServerSideSlowLink: the new owner is reached over a link of
// 2.5 MB/s (a proxy), so that one batch's MIGRATE of 1 MB values lasts
// about 5 s, 25 times the shard clients' ReadTimeout and longer than
// MIGRATE's timeout (which bounds each read and write, not the whole). Run
// waits for the old owner to answer, and then every moving key counts
// moved in the first run, none failed; the old owner, busy rather than
// failing, is not ejected (EjectMode, FailureLimit 2).
func TestMigrationServerSideSlowLink(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	p0, p1 := fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")
	o := goredis.Options{ReadTimeout: 200 * time.Millisecond}
	a, b := newServerSideShard(t, "a", p0.Addr, 0, o), newServerSideShard(t, "b", throttled(t, p1.Addr, 5<<19), 0, o)
	var mu sync.Mutex
	var ejected []string
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: time.Minute,
		OnEvent: func(e shardedclient.Event) {
			if e.Kind == shardedclient.EventEjected {
				mu.Lock()
				ejected = append(ejected, e.Addr)
				mu.Unlock()
			}
		}}
	runServerSide(t, []serverSideShard{a}, []serverSideShard{a, b}, 30, 1<<20, h, shardedredis.MigrateOptions{BatchSize: 100, InFlight: 1})
	mu.Lock()
	defer mu.Unlock()
	if len(ejected) != 0 {
		t.Errorf("ejected %v; want none", ejected)
	}
}

// throttled returns the address of a proxy to backend that forwards the
// bytes sent to backend at rate bytes/s (replies at full speed); it stops
// when t ends.
func throttled(t *testing.T, backend string, rate int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			context.AfterFunc(t.Context(), func() { in.Close(); out.Close() })
			wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
			wg.Go(func() {
				buf := make([]byte, 16<<10)
				for {
					n, err := in.Read(buf)
					if n > 0 {
						if _, err := out.Write(buf[:n]); err != nil {
							break
						}
						time.Sleep(time.Duration(n) * time.Second / time.Duration(rate))
					}
					if err != nil {
						break
					}
				}
				out.Close()
			})
		}
	})
	return ln.Addr().String()
}
