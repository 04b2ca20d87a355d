package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	shardedfleet "github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	"github.com/shardedcache/shardedcache/internal/etcdtest"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

var prefixes atomic.Int64

// testStore returns the store of a new fleet in the package's etcd (a
// prefix no other test uses), its etcd client (closed when t ends), its
// endpoint and prefix. It skips t without etcd (fails it under CI=true).
func testStore(t *testing.T) (store *etcdstore.Store, c *clientv3.Client, endpoint, prefix string) {
	t.Helper()
	endpoint = etcdtest.StartShared(t)
	prefix = fmt.Sprintf("/shardedcache-cli-test/%d", prefixes.Add(1))
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if store, err = etcdstore.New(c, prefix); err != nil {
		t.Fatal(err)
	}
	return store, c, endpoint, prefix
}

// kvClient is what a member's writer uses of its backend's client.
type kvClient interface {
	set(ctx context.Context, key, value string) error
	// get returns the key's value; found is false when there is none.
	get(ctx context.Context, key string) (value string, found bool, err error)
}

// writer is an application's process in the test: through a member's
// client, it sets keys 0..n-1 ("k:<i>") once, then sets a random one and
// reads another, over and over, until stopped. It is the keys' only
// writer, so a read must return the last value acknowledged for the key
// (the model, last); a set that failed is sent again until acknowledged,
// so that the key's last value is known.
type writer struct {
	c        kvClient
	n        int
	stop     chan struct{}
	stopOnce sync.Once
	done     chan error
	ready    chan struct{} // closed once every key was set once

	last                           map[string]string // the model; read once done
	sets, reads, readErrs, retried int
	stale                          []string // reads that did not return the model's value
}

func startWriter(c kvClient, n int, seed uint64) *writer {
	w := &writer{c: c, n: n, stop: make(chan struct{}), done: make(chan error, 1), ready: make(chan struct{}), last: map[string]string{}}
	go func() { w.done <- w.run(rand.New(rand.NewPCG(seed, 1))) }()
	return w
}

func (w *writer) run(rng *rand.Rand) error {
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return nil
		default:
		}
		if i == w.n {
			close(w.ready)
		}
		k := "k:" + itoa(i%w.n)
		if i >= w.n {
			k = "k:" + itoa(rng.IntN(w.n))
		}
		v := "v" + itoa(i)
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := w.c.set(ctx, k, v)
			cancel()
			if err == nil {
				break
			}
			if attempt == 100 {
				return fmt.Errorf("set %s: %w (100 attempts)", k, err)
			}
			w.retried++
			time.Sleep(10 * time.Millisecond)
		}
		w.last[k], w.sets = v, w.sets+1
		if i < w.n {
			continue
		}
		r := "k:" + itoa(rng.IntN(w.n))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, found, err := w.c.get(ctx, r)
		cancel()
		switch {
		case err != nil:
			w.readErrs++
		case !found || got != w.last[r]:
			w.stale = append(w.stale, fmt.Sprintf("%s = %q (found %v), want %q", r, got, found, w.last[r]))
		default:
			w.reads++
		}
	}
}

// halt stops the writer (once) and returns its error.
func (w *writer) halt() error {
	w.stopOnce.Do(func() { close(w.stop) })
	err := <-w.done
	w.done <- err // for another call
	return err
}

// end stops the writer and fails t on an error or a stale read; it
// returns the last acknowledged value of every key.
func (w *writer) end(t *testing.T) map[string]string {
	t.Helper()
	if err := w.halt(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the member's writer: %d sets acknowledged (%d sent again), %d reads checked, %d failed reads", w.sets, w.retried, w.reads, w.readErrs)
	if len(w.stale) > 0 {
		t.Errorf("%d reads did not return the last acknowledged value, the first: %s", len(w.stale), w.stale[0])
	}
	if w.sets <= w.n || w.reads == 0 {
		t.Errorf("the writer made %d sets and %d good reads: no load during the change", w.sets, w.reads)
	}
	return w.last
}

type redisKV struct{ c *shardedredis.ShardedClient }

func (r redisKV) set(ctx context.Context, k, v string) error { return r.c.Set(ctx, k, v, 0).Err() }
func (r redisKV) get(ctx context.Context, k string) (string, bool, error) {
	v, err := r.c.Get(ctx, k).Result()
	if errors.Is(err, goredis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

// fleetRun is a fleet under test: a member in this process over the OLD
// list, writing and reading keys, and the store.
type fleetRun struct {
	store            *etcdstore.Store
	etcd             *clientv3.Client
	endpoint, prefix string
	member           *shardedfleet.Member
	writer           *writer
}

// joinFleet makes a member in a new store with join (the backend's
// JoinFleet, which stores its client's list as the fleet's) and starts
// its writer of n keys through kv; it returns once every key was set.
func joinFleet(t *testing.T, kv kvClient, n int, join func(ctx context.Context, store shardedfleet.Store) (*shardedfleet.Member, error)) *fleetRun {
	t.Helper()
	store, etcd, endpoint, prefix := testStore(t)
	member, err := join(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Close() })
	r := &fleetRun{store: store, etcd: etcd, endpoint: endpoint, prefix: prefix, member: member, writer: startWriter(kv, n, 1)}
	t.Cleanup(func() { _ = r.writer.halt() }) // before the member's Close
	select {
	case <-r.writer.ready:
	case err := <-r.writer.done:
		r.writer.done <- err // for halt
		t.Fatalf("the writer stopped before it set every key: %v", err)
	}
	return r
}

// args are the tool's arguments for the fleet mode on r's store: reshard
// OLD NEW, the store's flags, then more.
func (r *fleetRun) args(old, next string, more ...string) []string {
	return append([]string{"reshard", old, next, "--etcd", r.endpoint, "--prefix", r.prefix}, more...)
}

// finish waits until the member applied the store's state, which must be
// Stable on the list of want's shards, stops the writer and returns the
// last acknowledged values.
func (r *fleetRun) finish(t *testing.T, want []shardedfleet.Shard) map[string]string {
	t.Helper()
	st, _, err := r.store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != shardedfleet.Stable || !sameList(st.Shards, want) {
		t.Fatalf("the store holds %+v, want Stable on %s", st, names(want))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.member.WaitEpoch(wctx, st.Epoch); err != nil {
		t.Fatalf("the member did not apply epoch %d: %v", st.Epoch, err)
	}
	if got := r.member.State(); got.Epoch != st.Epoch || got.Step != shardedfleet.Stable || !sameList(got.Shards, want) {
		t.Fatalf("the member ended on %+v, want Stable epoch %d on %s", got, st.Epoch, names(want))
	}
	return r.writer.end(t)
}

// redisFleetSetup: 4 redis-servers emptied, OLD on the first three and
// NEW on all four, a member over OLD writing n keys.
func redisFleetSetup(t *testing.T, n int) (r *fleetRun, old, next string, db []*goredis.Client) {
	t.Helper()
	needServers(t)
	flushRedis(t)
	old = redisList(t, "old.yaml", redisAddrs[:3]...)
	next = redisList(t, "new.yaml", redisAddrs...)
	member := openTestFleet(t, old)
	r = joinFleet(t, redisKV{member.rdb}, n, func(ctx context.Context, store shardedfleet.Store) (*shardedfleet.Member, error) {
		return member.rdb.JoinFleet(ctx, store, shardedfleet.MemberOptions{})
	})
	for _, a := range redisAddrs {
		db = append(db, redisClient(t, a, 0))
	}
	return r, old, next, db
}

// checkRedisKeys checks that every server holds exactly the keys that NEW
// places there, each with its last acknowledged value.
func checkRedisKeys(t *testing.T, next string, db []*goredis.Client, last map[string]string) {
	t.Helper()
	f := openTestFleet(t, next)
	want := make([]map[string]string, len(db))
	for i := range want {
		want[i] = map[string]string{}
	}
	for k, v := range last {
		want[f.ring.Locate(k)][k] = v
	}
	for i := range db {
		if got := userKeysOf(t, db[i]); !maps.Equal(got, want[i]) {
			t.Errorf("shard %d holds %d keys, want %d (its own, with their last acknowledged values)", i, len(got), len(want[i]))
		}
	}
}

// reshard --etcd drives a live fleet from 3 redis-servers to 4 while a
// member writes and reads: every read returns the last acknowledged
// value, the member ends on the new list, and every key is on its new
// owner alone with its last acknowledged value. A second run has nothing
// to do; a run whose OLD is not the store's list, or on an empty prefix,
// is refused (exit 2).
func TestReshardFleet(t *testing.T) {
	const n = 3000
	r, old, next, db := redisFleetSetup(t, n)
	res := cli(t, r.args(old, next, "--rate", "3000")...).wantCode(t, exitOK)
	if !regexp.MustCompile(`(?m)^migration: \d+ keys scanned, \d+ moved, 3 of 3 sources done$`).MatchString(res.stdout) ||
		!strings.Contains(res.stdout, "the fleet is on NEW's list: 4 shards, epoch ") {
		t.Errorf("reshard --etcd:\n%s", res.stdout)
	}
	checkRedisKeys(t, next, db, r.finish(t, fleetShardsOf(t, next)))

	res = cli(t, r.args(old, next)...).wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "the fleet is on NEW's list already (epoch ") {
		t.Errorf("a second run:\n%s", res.stdout)
	}
	other := redisList(t, "other.yaml", redisAddrs[1:]...)
	res = cli(t, r.args(old, other)...).wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "OLD ("+old+"): the fleet's list in the store is [a="+redisAddrs[0]+" ") {
		t.Errorf("OLD not the store's list:\n%s", res.stderr)
	}
	res = cli(t, "reshard", old, next, "--etcd", r.endpoint, "--prefix", r.prefix+"-none").wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "--prefix "+r.prefix+"-none: the store holds no fleet state") {
		t.Errorf("an empty prefix:\n%s", res.stderr)
	}
}

// fleetShardsOf is the fleet's list of the shard list at path.
func fleetShardsOf(t *testing.T, path string) []shardedfleet.Shard {
	t.Helper()
	list, err := fleetShards(openTestFleet(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// reshard --etcd interrupted (SIGINT, a Ctrl-C) in the migration stops
// with exit code 3 and the fleet paused at its Moving step; run again, it
// resumes (fleet.Resume) and is killed with SIGKILL, the fleet still at
// that step; run a third time, once the killed driver's lock ran out, it
// ends the change as an uninterrupted run does.
func TestReshardFleetKilledAndResumed(t *testing.T) {
	const n = 6000
	r, old, next, db := redisFleetSetup(t, n)
	args := r.args(old, next, "--rate", "1000", "--batch", "50", "--lock-ttl", "1s")

	cmd, out := startMidway(t, r, db[3], args)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != exitFailed {
		t.Fatalf("interrupted: %v, want exit code %d:\n%s", err, exitFailed, out)
	}
	st := movingState(t, r)
	if want := "shardedcache: interrupted\nthe fleet's change " + st.Change + " stopped at step moving (epoch " + fmt.Sprint(st.Epoch) + "), where the fleet is safe: run the same command again to resume it"; !strings.Contains(out.String(), want) {
		t.Errorf("interrupted, the tool says:\n%s\nwant %q", out, want)
	}

	cmd, out = startMidway(t, r, db[3], args)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("reshard ended before it was killed (%v):\n%s", err, out)
	}
	if !strings.Contains(out.String(), "resuming the fleet's change "+st.Change+" at step moving") {
		t.Errorf("the second run did not resume the change:\n%s", out)
	}
	if again := movingState(t, r); again.Epoch != st.Epoch {
		t.Errorf("killed at epoch %d, want %d (Moving)", again.Epoch, st.Epoch)
	}

	res := cli(t, r.args(old, next)...).wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "resuming the fleet's change "+st.Change+" at step moving (epoch "+fmt.Sprint(st.Epoch)+")") ||
		!strings.Contains(res.stdout, "the fleet is on NEW's list: 4 shards, epoch "+fmt.Sprint(st.Epoch+1)) {
		t.Errorf("the resumed run:\n%s", res.stdout)
	}
	checkRedisKeys(t, next, db, r.finish(t, fleetShardsOf(t, next)))
}

// startMidway starts the tool with args and returns once it holds the
// store's driver lock (a key under PREFIX/driver/, see etcdstore), the
// store holds the Moving step and the new shard (dest) at least 300 keys.
func startMidway(t *testing.T, r *fleetRun, dest *goredis.Client, args []string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _, err := r.store.Load(ctx)
		lock, lockErr := r.etcd.Get(ctx, r.prefix+"/driver/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && lockErr == nil && lock.Count > 0 && st.Step == shardedfleet.Moving && dest.DBSize(ctx).Val() >= 300 {
			return cmd, out
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no migration under way in 30 s (store: %+v, %v):\n%s", st, err, out)
		}
	}
}

// movingState is the store's state, which must be the Moving step.
func movingState(t *testing.T, r *fleetRun) shardedfleet.State {
	t.Helper()
	st, _, err := r.store.Load(ctx)
	if err != nil || st.Step != shardedfleet.Moving {
		t.Fatalf("the store: %+v, %v; want the Moving step", st, err)
	}
	return st
}

type memcacheKV struct{ c *shardedmc.ShardedClient }

func (m memcacheKV) set(ctx context.Context, k, v string) error {
	return m.c.SetContext(ctx, &gomemcache.Item{Key: k, Value: []byte(v)})
}
func (m memcacheKV) get(ctx context.Context, k string) (string, bool, error) {
	it, err := m.c.GetContext(ctx, k)
	switch {
	case errors.Is(err, gomemcache.ErrCacheMiss):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return string(it.Value), true, nil
}

// reshard --etcd of a memcache fleet, 2 memcached to 3, with a member
// under a lease (fleet.Unfenced) writing and reading: the same outcome as
// on redis, every key on its new owner alone.
func TestReshardFleetMemcache(t *testing.T) {
	needServers(t)
	const n = 2000
	old, next := memcacheList(t, mcAddrs[:2]...), memcacheList(t, mcAddrs...)
	mc := make([]*gomemcache.Client, len(mcAddrs))
	for i, a := range mcAddrs {
		mc[i] = gomemcache.New(a)
		if err := mc[i].FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	member := openTestFleet(t, old)
	r := joinFleet(t, memcacheKV{member.mc}, n, func(ctx context.Context, store shardedfleet.Store) (*shardedfleet.Member, error) {
		return member.mc.JoinFleet(ctx, store, shardedfleet.MemberOptions{LeaseTTL: 2 * time.Second})
	})
	res := cli(t, r.args(old, next)...).wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "the fleet is on NEW's list: 3 shards, epoch ") {
		t.Errorf("reshard --etcd:\n%s", res.stdout)
	}
	last := r.finish(t, fleetShardsOf(t, next))
	f := openTestFleet(t, next)
	misplaced := 0
	for k, v := range last {
		owner := f.ring.Locate(k)
		for j, c := range mc {
			it, err := c.Get(k)
			if j == owner && (err != nil || string(it.Value) != v) {
				t.Fatalf("%s on its owner %d: %+v, %v; want %q", k, j, it, err, v)
			}
			if j != owner && err == nil {
				misplaced++
			}
		}
	}
	if misplaced > 0 {
		t.Errorf("%d copies left on shards that do not own their key", misplaced)
	}
}

// Bad input of the fleet mode: exit 2, the flag or field named. None of
// these reaches etcd or a server.
func TestReshardFleetBadInput(t *testing.T) {
	list := writeFile(t, "list.yaml", "shards:\n  - {name: a, addr: 10.0.0.1:6379}\n")
	unnamed := writeFile(t, "unnamed.yaml", "shards:\n  - {addr: 10.0.0.1:6379}\n")
	perShard := writeFile(t, "secret.yaml", "shards:\n  - {name: a, addr: 10.0.0.1:6379, password_env: SHARDEDCACHE_TEST_PASSWORD}\n")
	mcList := writeFile(t, "mc.yaml", "backend: memcache\nshards:\n  - {name: a, addr: 10.0.0.1:11211}\n")
	const etcd = "127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no prefix", []string{"reshard", list, list, "--etcd", etcd}, "--prefix: required with --etcd"},
		{"no etcd", []string{"reshard", list, list, "--prefix", "/p"}, "--prefix: needs --etcd"},
		{"lock without etcd", []string{"reshard", list, list, "--lock-ttl", "5s"}, "--lock-ttl: needs --etcd"},
		{"empty endpoint", []string{"reshard", list, list, "--etcd", etcd + ",", "--prefix", "/p"}, `--etcd: an empty endpoint in "127.0.0.1:1,"`},
		{"prefix", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p/"}, `--prefix: etcdstore: prefix "/p/" ends with "/"`},
		{"checkpoint", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p", "--checkpoint", "cp.json"}, "--checkpoint: a fleet's change keeps its state in the store"},
		{"server-side", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p", "--server-side"}, "--server-side: a fleet's migration moves keys with the fleet's own moves"},
		{"negative lock", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p", "--lock-ttl", "-1s"}, "--lock-ttl: -1s is negative"},
		{"short lock", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p", "--lock-ttl", "100ms"}, "--lock-ttl: 100ms is under etcd's smallest lease, 1s"},
		{"bad lock", []string{"reshard", list, list, "--etcd", etcd, "--prefix", "/p", "--lock-ttl", "ten"}, `invalid argument "ten" for "--lock-ttl"`},
		{"unnamed shard", []string{"reshard", unnamed, list, "--etcd", etcd, "--prefix", "/p"}, unnamed + ": shards[0].name: missing; a fleet places keys by shard name"},
		{"shard password", []string{"reshard", list, perShard, "--etcd", etcd, "--prefix", "/p"}, perShard + ": shards[0]: a fleet's shards share the list's options"},
		{"memcache rate", []string{"reshard", mcList, mcList, "--etcd", etcd, "--prefix", "/p", "--rate", "10"}, "--rate and --batch: a memcache fleet's migration has no such settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.args...).wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
		})
	}
}
