package redis_test

// Shard failure on real redis-server processes: a shard killed with SIGKILL,
// a hung shard (SIGSTOP, then SIGCONT), and a Sentinel-managed shard whose
// master is killed and replaced by promotion.
//
// Locally the tests are skipped when redis-server is missing; in CI
// (CI=true) that fails them.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// A SIGKILLed shard: commands for its keys fail within the timeouts with
// its ShardError (a broken pooled connection, then refused dials); the
// other shards are untouched.
func TestRealRedisKilledShard(t *testing.T) {
	procs, c := fixtures.StartRealShards(t, 3)
	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const dead = 1
	procs[dead].Kill()
	var last error
	for _, k := range ks {
		start := time.Now()
		v, err := c.Get(ctx, k).Result()
		d := time.Since(start)
		if c.GetShardInfo(k).Index != dead {
			if err != nil || v != "v:"+k {
				t.Fatalf("GET %s on a live shard = %q, %v", k, v, err)
			}
			continue
		}
		if d > 2*fixtures.RealTimeout+200*time.Millisecond {
			t.Fatalf("GET %s on the killed shard took %v", k, d)
		}
		fixtures.WantShardError(t, "GET "+k, err, dead, procs[dead].Addr)
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("GET %s: %v; want a refused dial or a broken connection", k, err)
		}
		last = err
	}
	if !errors.Is(last, syscall.ECONNREFUSED) {
		t.Fatalf("last failure %v, want a refused dial", last)
	}
	if st := c.Stats()[dead]; st.Errors == 0 || st.Ejected {
		t.Fatalf("killed shard stats %+v", st)
	}
}

// A hung shard (SIGSTOP): its commands return after ReadTimeout with a
// timeout wrapped in its ShardError, while the other shards answer at once,
// also in the same pipeline; after SIGCONT it serves again.
func TestRealRedisHungShard(t *testing.T) {
	procs, c := fixtures.StartRealShards(t, 3)
	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const hung = 1
	owners := fixtures.ByOwner(c, ks)
	procs[hung].Signal(t, syscall.SIGSTOP)

	// Commands on the hung shard, in the background.
	type result struct {
		key string
		d   time.Duration
		err error
	}
	results := make(chan result, 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for _, k := range owners[hung][g*5 : g*5+5] {
				start := time.Now()
				err := c.Get(ctx, k).Err()
				results <- result{k, time.Since(start), err}
			}
		})
	}
	// Meanwhile the live shards answer at once.
	for _, i := range []int{0, 2} {
		for _, k := range owners[i][:50] {
			start := time.Now()
			v, err := c.Get(ctx, k).Result()
			if d := time.Since(start); err != nil || v != "v:"+k || d >= fixtures.RealTimeout {
				t.Fatalf("GET %s on live shard %d = %q, %v after %v", k, i, v, err, d)
			}
		}
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.d < fixtures.RealTimeout-10*time.Millisecond || r.d > fixtures.RealTimeout+700*time.Millisecond {
			t.Fatalf("GET %s on the hung shard returned after %v; ReadTimeout %v", r.key, r.d, fixtures.RealTimeout)
		}
		fixtures.WantShardError(t, "GET "+r.key+" on the hung shard", r.err, hung, procs[hung].Addr)
		if netErr := net.Error(nil); !errors.As(r.err, &netErr) || !netErr.Timeout() {
			t.Fatalf("GET %s on the hung shard: %v, want a timeout", r.key, r.err)
		}
	}
	if n != 20 {
		t.Fatalf("%d results from the hung shard, want 20", n)
	}

	// One pipeline over all shards: the live replies arrive, the hung
	// shard's commands time out, within about ReadTimeout.
	start := time.Now()
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range ks[:60] {
			p.Get(ctx, k)
		}
		return nil
	})
	if d := time.Since(start); d > fixtures.RealTimeout+700*time.Millisecond {
		t.Fatalf("pipeline took %v", d)
	}
	fixtures.WantShardError(t, "pipeline", err, hung, procs[hung].Addr)
	for j, cmd := range cmds {
		k := ks[j]
		v, err := cmd.(*goredis.StringCmd).Result()
		if c.GetShardInfo(k).Index == hung {
			var netErr net.Error
			fixtures.WantShardError(t, "pipelined GET "+k, err, hung, procs[hung].Addr)
			if !errors.As(err, &netErr) || !netErr.Timeout() {
				t.Fatalf("pipelined GET %s: %v, want a timeout", k, err)
			}
		} else if err != nil || v != "v:"+k {
			t.Fatalf("pipelined GET %s = %q, %v", k, v, err)
		}
	}

	procs[hung].Signal(t, syscall.SIGCONT)
	k := owners[hung][0]
	fixtures.Poll(t, 10*time.Second, "the continued shard", func() error { return c.Get(ctx, k).Err() })
	for _, k := range owners[hung] {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s after SIGCONT = %q, %v", k, v, err)
		}
	}
}

// waitReplicaSynced waits until the replica at addr reports its link to
// the master up.
func waitReplicaSynced(t *testing.T, addr string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	fixtures.Poll(t, 20*time.Second, "replica sync", func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("master link not up")
		}
		return nil
	})
}

// A Sentinel-managed shard whose master is SIGKILLed: the replica is
// promoted and the same ShardedClient writes again through the shard; no
// key ever moves to the other shard.
func TestRealRedisSentinelFailoverShard(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	master := fixtures.StartRedisProc(t, bin, "")
	replica := fixtures.StartRedisProc(t, bin, "", "--replicaof", "127.0.0.1", strings.TrimPrefix(master.Addr, "127.0.0.1:"))
	plain := fixtures.StartRedisProc(t, bin, "")
	waitReplicaSynced(t, replica.Addr)
	const name = "shardfo"
	mport := strings.TrimPrefix(master.Addr, "127.0.0.1:")
	sentinel := fixtures.StartRedisProc(t, bin, "port {port}\n"+
		"sentinel monitor "+name+" 127.0.0.1 "+mport+" 1\n"+
		"sentinel down-after-milliseconds "+name+" 500\n"+
		"sentinel failover-timeout "+name+" 2000\n", "--sentinel")
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.Addr, MaxRetries: -1})
	defer sc.Close()
	fixtures.Poll(t, 30*time.Second, "sentinel discovers the replica", func() error {
		reps, err := sc.Replicas(ctx, name).Result()
		if err != nil {
			return err
		}
		if len(reps) != 1 || strings.Contains(reps[0]["flags"], "disconnected") || strings.Contains(reps[0]["flags"], "s_down") {
			return fmt.Errorf("replicas %v", reps)
		}
		return nil
	})

	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "fo", Failover: &goredis.FailoverOptions{
			MasterName: name, SentinelAddrs: []string{sentinel.Addr},
			DialTimeout: fixtures.RealTimeout, ReadTimeout: fixtures.RealTimeout, WriteTimeout: fixtures.RealTimeout,
			DialerRetries: 1, MaxRetries: -1, PoolSize: 4,
		}},
		{Name: "plain", Addr: plain.Addr, Options: &goredis.Options{MaxRetries: -1, DialTimeout: fixtures.RealTimeout, ReadTimeout: fixtures.RealTimeout}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	if addr := c.Shards()[0].Addr; addr != "sentinel:"+name {
		t.Fatalf("failover shard address %q", addr)
	}
	ks := fixtures.Keys(400)
	placed := make([]int, len(ks))
	var foKeys []string
	for j, k := range ks {
		placed[j] = c.GetShardInfo(k).Index
		if placed[j] == 0 {
			foKeys = append(foKeys, k)
		}
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(foKeys) == 0 || len(foKeys) == len(ks) {
		t.Fatalf("%d of %d keys on the failover shard", len(foKeys), len(ks))
	}
	direct := func(addr string) *goredis.Client {
		d := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	mc, rc, pc := direct(master.Addr), direct(replica.Addr), direct(plain.Addr)
	// Every write reaches the replica before the master dies.
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	checkPlacement := func(when string) {
		t.Helper()
		for j, k := range ks {
			if got := c.GetShardInfo(k).Index; got != placed[j] {
				t.Fatalf("%s: %s on shard %d, first on %d", when, k, got, placed[j])
			}
		}
		for _, k := range foKeys {
			if n, err := pc.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Fatalf("%s: the plain shard holds the failover shard's key %s (%d, %v)", when, k, n, err)
			}
		}
	}
	checkPlacement("before the failover")

	master.Kill()
	k := foKeys[0]
	failures := 0
	fixtures.Poll(t, 30*time.Second, "a write after the failover", func() error {
		err := c.Set(ctx, k, "after", 0).Err()
		if err != nil {
			failures++
			fixtures.WantShardError(t, "SET during the failover", err, 0, "sentinel:"+name)
		}
		return err
	})
	t.Logf("%d failed writes during the failover", failures)
	if role, err := rc.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("ROLE of the replica = %v, %v; want master", role, err)
	}
	if v, err := rc.Get(ctx, k).Result(); err != nil || v != "after" {
		t.Fatalf("the promoted replica holds %q, %v", v, err)
	}
	checkPlacement("after the failover")
	for _, k := range foKeys[1:] {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s after the failover = %q, %v", k, v, err)
		}
		if err := c.Set(ctx, k, "after", 0).Err(); err != nil {
			t.Fatalf("SET %s after the failover: %v", k, err)
		}
	}
	checkPlacement("after writing every key")
	if st := c.Stats(); st[0].Ejected || st[1].Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}
