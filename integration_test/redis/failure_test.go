package redis_test

// Shard failure on miniredis shards: a closed (dead) shard in failure mode
// and in eject mode, pipelines and MGET with a dead shard, an address that
// does not resolve, and SetShards on a running client.

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// startFailShards starts n miniredis servers and a ShardedClient over them
// (unnamed shards, Jedis placement) with the health policy h.
func startFailShards(t *testing.T, n int, h shardedredis.Health) ([]*miniredis.Miniredis, []shardedredis.ShardOptions, *shardedredis.ShardedClient) {
	t.Helper()
	servers := make([]*miniredis.Miniredis, n)
	opts := make([]shardedredis.ShardOptions, n)
	for i := range servers {
		servers[i] = miniredis.RunT(t)
		opts[i] = fixtures.FailShard(servers[i].Addr())
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts, Health: h})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	return servers, opts, c
}

// poolConns returns the connections of shard i's main and pipeline pools.
func poolConns(c *shardedredis.ShardedClient, i int) (main, pipe uint32) {
	st := c.Shards()[i].Client.PoolStats()
	if st.PipelineStats != nil {
		pipe = st.PipelineStats.TotalConns
	}
	return st.TotalConns, pipe
}

// In failure mode a dead shard's keys fail with its ShardError, fast; 1,000
// concurrent commands on the live shards all succeed without growing their
// pools; Stats counts exactly; the restarted shard serves again through the
// same client.
func TestFailureModeDeadShardOthersServe(t *testing.T) {
	servers, _, c := startFailShards(t, 3, shardedredis.Health{})
	ks := fixtures.Keys(3000)
	kv := map[string]int{}
	for i, k := range ks {
		kv[k] = i
	}
	if err := fixtures.PipelineSet(c, kv); err != nil {
		t.Fatal(err)
	}
	owners := fixtures.ByOwner(c, ks)
	const dead = 1
	addrs := []string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()}
	deadAddr := addrs[dead]
	before := c.Stats()
	servers[dead].Close()

	var live []string
	for i, k := range ks {
		if c.GetShardInfo(k).Index != dead {
			live = append(live, ks[i])
		}
	}
	var sent [3]atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 8 {
		wg.Go(func() {
			for n := g; n < 1000; n += 8 {
				k := live[n*7%len(live)]
				sent[c.GetShardInfo(k).Index].Add(1)
				var err error
				if n%2 == 0 {
					err = c.Set(ctx, k, n, 0).Err()
				} else {
					err = c.Get(ctx, k).Err()
				}
				if err != nil {
					errs <- fmt.Errorf("command %d on %s: %w", n, k, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("live shard: %v", err)
	}
	for _, i := range []int{0, 2} {
		if m, p := poolConns(c, i); m > fixtures.FailPoolSize || p > fixtures.FailPipePoolSize {
			t.Fatalf("live shard %d has %d connections (pipeline pool %d); pool size %d", i, m, p, fixtures.FailPoolSize)
		}
	}

	deadKeys := owners[dead][:50]
	for _, k := range deadKeys {
		start := time.Now()
		err := c.Get(ctx, k).Err()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("GET %s on the dead shard took %v", k, d)
		}
		fixtures.WantShardError(t, "GET "+k, err, dead, deadAddr)
		if errors.Is(err, goredis.Nil) {
			t.Fatalf("GET %s: a miss instead of a failure", k)
		}
	}
	// The last ones are refused dials (the first may have hit a pooled
	// connection that the server closed).
	if err := c.Get(ctx, deadKeys[0]).Err(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("GET on the dead shard: %v, want a refused connection", err)
	}
	after := c.Stats()
	for i := range 3 {
		req, errN := after[i].Requests-before[i].Requests, after[i].Errors-before[i].Errors
		want := sent[i].Load()
		wantErr := uint64(0)
		if i == dead {
			want, wantErr = 51, 51
		}
		if req != want || errN != wantErr || after[i].Ejected || after[i].Ejections != 0 || after[i].Addr != addrs[i] {
			t.Fatalf("shard %d: %d requests, %d errors (%+v); want %d and %d, never ejected", i, req, errN, after[i], want, wantErr)
		}
	}

	if err := servers[dead].Restart(); err != nil {
		t.Fatal(err)
	}
	// go-redis's pool probes a refused address once a second before it
	// dials again.
	fixtures.Poll(t, 10*time.Second, "the restarted shard", func() error { return c.Get(ctx, deadKeys[0]).Err() })
	for _, k := range owners[dead] {
		if got, err := c.Get(ctx, k).Int(); err != nil || got != kv[k] {
			t.Fatalf("GET %s after the restart = %d, %v; want %d", k, got, err, kv[k])
		}
	}
}

// In eject mode the dead shard is ejected after exactly FailureLimit (2)
// failures; its keys are then served by the next shard clockwise, no other
// key moves; after the restart and the retry timeout the PING probe lets
// it rejoin, and every key is placed as at first (the shard serves its old
// values again: writes made meanwhile stay on the other shard).
func TestEjectDeadShardKeysMoveToNextShardAndBack(t *testing.T) {
	servers, _, c := startFailShards(t, 3, shardedredis.Health{
		Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: 300 * time.Millisecond,
	})
	ks := fixtures.Keys(10000)
	orig := c.Ring()
	const dead = 1
	deadAddr := servers[dead].Addr()
	deadKeys := fixtures.ByOwner(c, ks)[dead][:50]
	for _, k := range deadKeys {
		if err := c.Set(ctx, k, "old", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	servers[dead].Close()

	err := c.Get(ctx, deadKeys[0]).Err()
	fixtures.WantShardError(t, "first failure", err, dead, deadAddr)
	if st := c.Stats()[dead]; st.Ejected || st.Errors != 1 {
		t.Fatalf("after 1 failure: %+v", st)
	}
	err = c.Get(ctx, deadKeys[0]).Err()
	fixtures.WantShardError(t, "second failure", err, dead, deadAddr)
	st := c.Stats()[dead]
	if !st.Ejected || st.Ejections != 1 || st.Errors != 2 || st.Requests != 52 {
		t.Fatalf("after 2 failures: %+v; want ejected once, 52 requests, 2 errors", st)
	}

	want, err := orig.Eject(dead)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, k := range ks {
		got := c.GetShardInfo(k).Index
		if got != want.Locate(k) || c.Ring().Locate(k) != got {
			t.Fatalf("%s on %d, ring.Eject(%d) says %d", k, got, dead, want.Locate(k))
		}
		if was := orig.Locate(k); was != dead && got != was {
			t.Fatalf("%s moved from live shard %d to %d", k, was, got)
		}
		if got == dead {
			t.Fatalf("%s on the ejected shard", k)
		}
		if orig.Locate(k) == dead {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key was on the dead shard")
	}
	for _, k := range deadKeys {
		if err := c.Set(ctx, k, "new", 0).Err(); err != nil {
			t.Fatalf("SET %s while ejected: %v", k, err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "new" {
			t.Fatalf("GET %s while ejected = %q, %v", k, v, err)
		}
		// The new value is on the next shard; the dead server keeps the old.
		next := want.Locate(k)
		wantHolders := []int{min(dead, next), max(dead, next)}
		v, _ := servers[next].Get(k)
		stale, _ := servers[dead].Get(k)
		if v != "new" || stale != "old" || !slices.Equal(fixtures.Holders(servers, k), wantHolders) {
			t.Fatalf("%s: server %d holds %q, the dead one %q; holders %v, want %v", k, next, v, stale, fixtures.Holders(servers, k), wantHolders)
		}
	}

	if err := servers[dead].Restart(); err != nil {
		t.Fatal(err)
	}
	fixtures.Poll(t, 15*time.Second, "the restarted shard rejoins", func() error {
		if c.Stats()[dead].Ejected {
			return errors.New("still ejected")
		}
		return nil
	})
	for _, k := range ks {
		if got := c.Ring().Locate(k); got != orig.Locate(k) || c.GetShardInfo(k).Index != got {
			t.Fatalf("%s on %d after the rejoin, originally %d", k, got, orig.Locate(k))
		}
	}
	if st := c.Stats()[dead]; st.Ejected || st.Ejections != 1 {
		t.Fatalf("after the rejoin: %+v", st)
	}
	for _, k := range deadKeys {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "old" {
			t.Fatalf("GET %s after the rejoin = %q, %v; want the shard's own (stale) value", k, v, err)
		}
	}
}

// With no traffic at all, ProbeInterval finds the dead shard and ejects it
// (the default probe is PING); a health policy error is reported by
// NewShardedClient.
func TestEjectByProbeWithoutTraffic(t *testing.T) {
	_, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{fixtures.FailShard("127.0.0.1:1")},
		Health: shardedredis.Health{FailureLimit: -1},
	})
	if err == nil || err.Error() != "shardedclient: failure limit -1 is negative" {
		t.Fatalf("negative failure limit: %v", err)
	}
	servers, _, c := startFailShards(t, 3, shardedredis.Health{
		Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour, ProbeInterval: 20 * time.Millisecond,
	})
	fixtures.Poll(t, 5*time.Second, "probes", func() error {
		if c.Stats()[0].Requests < 2 {
			return errors.New("no probe yet")
		}
		return nil
	})
	servers[2].Close()
	fixtures.Poll(t, 5*time.Second, "the dead shard is ejected", func() error {
		if !c.Stats()[2].Ejected {
			return errors.New("not ejected")
		}
		return nil
	})
	if st := c.Stats(); st[2].Errors != 2 || st[2].Ejections != 1 || st[0].Errors != 0 || st[1].Errors != 0 {
		t.Fatalf("stats %+v; want exactly 2 failed probes of shard 2", st)
	}
	for _, k := range fixtures.Keys(1000) {
		if c.GetShardInfo(k).Index == 2 {
			t.Fatalf("%s on the ejected shard", k)
		}
	}
}

// Pipelines and MGET with a dead shard: the live shards' replies are
// delivered, the dead shard's commands carry its ShardError, every call
// returns within a second; 500 rounds leave no goroutine behind and do not
// grow the live shards' pools.
func TestDeadShardPipelineAndMGet(t *testing.T) {
	servers, _, c := startFailShards(t, 3, shardedredis.Health{})
	ks := fixtures.Keys(30)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	owners := fixtures.ByOwner(c, ks)
	for i := range 3 {
		if len(owners[i]) < 2 {
			t.Fatalf("shard %d owns %d of the keys; want a pipeline on each", i, len(owners[i]))
		}
	}
	const dead = 1
	deadAddr := servers[dead].Addr()
	servers[dead].Close()
	var slowest time.Duration
	round := func() {
		start := time.Now()
		cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range ks {
				p.Get(ctx, k)
			}
			return nil
		})
		slowest = max(slowest, time.Since(start))
		fixtures.WantShardError(t, "pipeline", err, dead, deadAddr)
		for j, cmd := range cmds {
			k := ks[j]
			v, err := cmd.(*goredis.StringCmd).Result()
			if c.GetShardInfo(k).Index == dead {
				fixtures.WantShardError(t, "pipelined GET "+k, err, dead, deadAddr)
			} else if err != nil || v != "v:"+k {
				t.Fatalf("pipelined GET %s = %q, %v", k, v, err)
			}
		}
		start = time.Now()
		_, err = c.MGet(ctx, ks...).Result()
		slowest = max(slowest, time.Since(start))
		fixtures.WantShardError(t, "MGET", err, dead, deadAddr)
		// MGET of the live shards' keys alone succeeds.
		liveKeys := append(slices.Clone(owners[0]), owners[2]...)
		vals, err := c.MGet(ctx, liveKeys...).Result()
		if err != nil || len(vals) != len(liveKeys) {
			t.Fatalf("MGET of live keys: %v, %v", vals, err)
		}
		for j, k := range liveKeys {
			if vals[j] != "v:"+k {
				t.Fatalf("MGET[%d] (%s) = %v", j, k, vals[j])
			}
		}
	}
	before := c.Stats()
	for range 10 { // warm up: pools filled, go-redis's dial probe started
		round()
	}
	goroutines := runtime.NumGoroutine()
	var conns [3][2]uint32
	for _, i := range []int{0, 2} {
		conns[i][0], conns[i][1] = poolConns(c, i)
	}
	for range 490 {
		round()
	}
	if slowest > time.Second {
		t.Fatalf("the slowest call took %v", slowest)
	}
	for _, i := range []int{0, 2} {
		m, p := poolConns(c, i)
		if m != conns[i][0] || p != conns[i][1] || m > fixtures.FailPoolSize || p > fixtures.FailPipePoolSize {
			t.Fatalf("live shard %d: %d+%d connections after 500 rounds, %d+%d after 10; pool sizes %d+%d",
				i, m, p, conns[i][0], conns[i][1], fixtures.FailPoolSize, fixtures.FailPipePoolSize)
		}
	}
	fixtures.Poll(t, 5*time.Second, "goroutines", func() error {
		if n := runtime.NumGoroutine(); n > goroutines {
			return fmt.Errorf("%d goroutines, %d after the warm-up", n, goroutines)
		}
		return nil
	})
	// Each round trip is one request: per round one pipeline and two MGETs
	// (one on the dead shard).
	after := c.Stats()
	for i, want := range []uint64{1500, 1000, 1500} {
		req := after[i].Requests - before[i].Requests
		errs := after[i].Errors - before[i].Errors
		wantErr := uint64(0)
		if i == dead {
			wantErr = want
		}
		if req != want || errs != wantErr {
			t.Fatalf("shard %d: %d requests, %d errors; want %d and %d", i, req, errs, want, wantErr)
		}
	}
}

// A shard whose address does not resolve: NewShardedClient succeeds (it
// connects lazily), and commands for its keys fail within the dial timeout
// with its ShardError; the other shards serve.
func TestResolveFailureShardFailsFast(t *testing.T) {
	const bad = "nonexistent.invalid:6379"
	servers := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t)}
	opts := []shardedredis.ShardOptions{fixtures.FailShard(servers[0].Addr()), fixtures.FailShard(servers[1].Addr()), fixtures.FailShard(bad)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatalf("NewShardedClient with an unresolvable address: %v; want it to connect lazily", err)
	}
	fixtures.CloseAndSettle(t, c)
	owners := fixtures.ByOwner(c, fixtures.Keys(300))
	if len(owners[2]) < 20 {
		t.Fatalf("%d keys on the unresolvable shard", len(owners[2]))
	}
	for _, k := range owners[2][:20] {
		start := time.Now()
		err := c.Set(ctx, k, "v", 0).Err()
		if d := time.Since(start); d > fixtures.FailTimeout+500*time.Millisecond {
			t.Fatalf("SET %s took %v; dial timeout %v", k, d, fixtures.FailTimeout)
		}
		fixtures.WantShardError(t, "SET "+k, err, 2, bad)
		var dnsErr *net.DNSError
		var netErr net.Error
		if !errors.As(err, &dnsErr) && !(errors.As(err, &netErr) && netErr.Timeout()) {
			t.Fatalf("SET %s: %v; want a DNS error or a dial timeout", k, err)
		}
	}
	for _, i := range []int{0, 1} {
		for _, k := range owners[i][:20] {
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatalf("SET %s on shard %d: %v", k, i, err)
			}
		}
	}
	if st := c.Stats()[2]; st.Requests != 20 || st.Errors != 20 || st.Addr != bad {
		t.Fatalf("unresolvable shard stats %+v", st)
	}
}

// SetShards on the redis client: a fourth server takes exactly the keys
// that the new ring gives it (new writes land there; old values stay where
// they were), the unchanged shards keep their *redis.Client; removing it
// again closes its client; an invalid list changes nothing.
func TestSetShardsAddFourthMiniredis(t *testing.T) {
	servers, opts, c := startFailShards(t, 3, shardedredis.Health{})
	ks := fixtures.Keys(2000)
	orig := c.Ring()
	first := map[string]int{}
	for i, k := range ks[:1000] {
		first[k] = i
	}
	if err := fixtures.PipelineSet(c, first); err != nil {
		t.Fatal(err)
	}
	old := c.Shards()
	servers = append(servers, miniredis.RunT(t))
	opts4 := append(slices.Clone(opts), fixtures.FailShard(servers[3].Addr()))
	if err := c.SetShards(opts4); err != nil {
		t.Fatal(err)
	}
	now := c.Shards()
	if len(now) != 4 {
		t.Fatalf("%d shards after SetShards", len(now))
	}
	for i := range 3 {
		if now[i].Client != old[i].Client {
			t.Fatalf("shard %d has a new *redis.Client", i)
		}
		if err := now[i].Client.Ping(ctx).Err(); err != nil {
			t.Fatalf("kept client %d: %v", i, err)
		}
	}
	ref, err := ring.New(make([]ring.Node, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]bool{}
	for _, k := range ks {
		got := c.GetShardInfo(k).Index
		if got != ref.Locate(k) {
			t.Fatalf("%s on %d, the 4-shard ring says %d", k, got, ref.Locate(k))
		}
		if was := orig.Locate(k); got != was {
			if got != 3 {
				t.Fatalf("%s moved from %d to %d", k, was, got)
			}
			moved[k] = true
		}
	}
	if len(moved) < 200 {
		t.Fatalf("%d of %d keys moved to the new shard", len(moved), len(ks))
	}
	// Keys written before: those that moved now miss (nothing is migrated).
	for k, v := range first {
		n, err := c.Get(ctx, k).Int()
		switch {
		case moved[k] && err != goredis.Nil:
			t.Fatalf("GET %s (moved to the new shard) = %d, %v; want a miss", k, n, err)
		case !moved[k] && (err != nil || n != v):
			t.Fatalf("GET %s = %d, %v; want %d", k, n, err, v)
		}
	}
	all := map[string]int{}
	for i, k := range ks {
		all[k] = i
	}
	if err := fixtures.PipelineSet(c, all); err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		want := []int{ref.Locate(k)}
		if _, wrote := first[k]; wrote && moved[k] {
			want = []int{orig.Locate(k), 3} // the stale copy stays behind
			slices.Sort(want)
		}
		if got := fixtures.Holders(servers, k); !slices.Equal(got, want) {
			t.Fatalf("%s on servers %v, want %v", k, got, want)
		}
	}

	// An invalid list changes nothing.
	bad := append(slices.Clone(opts4), shardedredis.ShardOptions{Addr: "no-port"})
	if err := c.SetShards(bad); err == nil || !strings.Contains(err.Error(), `shard 4 ("")`) || !strings.Contains(err.Error(), "no-port") {
		t.Fatalf("SetShards with a bad address: %v", err)
	}
	if err := c.SetShards(nil); err == nil {
		t.Fatal("SetShards(nil) succeeded")
	}
	for i, sh := range c.Shards() {
		if sh.Client != now[i].Client || sh.Client.Ping(ctx).Err() != nil {
			t.Fatalf("shard %d changed or closed by a failed SetShards", i)
		}
	}

	// Removing the fourth shard closes its client and moves its keys back.
	removed := now[3].Client
	if err := c.SetShards(opts); err != nil {
		t.Fatal(err)
	}
	fixtures.Poll(t, 5*time.Second, "the removed shard's client is closed", func() error {
		if err := removed.Ping(ctx).Err(); !errors.Is(err, goredis.ErrClosed) {
			return fmt.Errorf("PING on the removed client: %v", err)
		}
		return nil
	})
	for i, sh := range c.Shards() {
		if sh.Client != old[i].Client {
			t.Fatalf("shard %d has a new client after the removal", i)
		}
	}
	for _, k := range ks {
		if got := c.Ring().Locate(k); got != orig.Locate(k) {
			t.Fatalf("%s on %d after the removal, originally %d", k, got, orig.Locate(k))
		}
	}
}

// While a shard is ejected, the keyspace-wide commands run on the live
// shards, which serve its keys: DBSIZE, KEYS, SCAN and RANDOMKEY work.
func TestEjectedShardLeftOutOfKeyspaceCommands(t *testing.T) {
	servers, _, c := startFailShards(t, 3, shardedredis.Health{
		Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour,
	})
	ks := fixtures.Keys(300)
	const dead = 2
	deadKey := fixtures.ByOwner(c, ks)[dead][0]
	servers[dead].Close()
	if err := c.Get(ctx, deadKey).Err(); err == nil {
		t.Fatal("GET on the dead shard succeeded")
	}
	if !c.Stats()[dead].Ejected {
		t.Fatal("the dead shard was not ejected")
	}
	for _, k := range ks {
		if err := c.Set(ctx, k, 1, 0).Err(); err != nil {
			t.Fatalf("SET %s with shard %d ejected: %v", k, dead, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 300 {
		t.Fatalf("DBSIZE = %d, %v; want 300", n, err)
	}
	if got, err := c.Keys(ctx, "key:*").Result(); err != nil || len(got) != 300 {
		t.Fatalf("KEYS = %d keys, %v", len(got), err)
	}
	var all []string
	it := c.Scan(ctx, 0, "", 50).Iterator()
	for it.Next(ctx) {
		all = append(all, it.Val())
	}
	if err := it.Err(); err != nil || len(all) != 300 {
		t.Fatalf("SCAN saw %d keys, %v", len(all), err)
	}
	if err := c.RandomKey(ctx).Err(); err != nil {
		t.Fatalf("RANDOMKEY: %v", err)
	}
}
