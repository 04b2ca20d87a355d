package redis_test

// Autopipelining (issue 28): what the sharded client promises holds with
// every command through go-redis's engine. The differential tests and the
// resharding reference model have autopipelined variants; with
// SHARDEDCACHE_TEST_AUTOPIPELINE=1 every test whose client comes from
// StartShards, SafetyFixture or the differential tests runs autopipelined
// (see WithAPEnv). Here: a shard hung or killed while batches are in
// flight.

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// startAPShards starts n redis-servers and an autopipelined ShardedClient
// over them, with the failure tests' timeouts (RealShard).
func startAPShards(t *testing.T, n int) ([]*fixtures.RedisProc, *shardedredis.ShardedClient) {
	t.Helper()
	bin := fixtures.RealRedisBin(t)
	procs := make([]*fixtures.RedisProc, n)
	opts := make([]shardedredis.ShardOptions, n)
	for i := range procs {
		procs[i] = fixtures.StartRedisProc(t, bin, "")
		opts[i] = fixtures.RealShard(procs[i].Addr)
	}
	c, err := shardedredis.NewShardedClient(fixtures.WithAP(&shardedredis.ShardedOptions{Shards: opts}))
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	for _, k := range fixtures.Keys(300) {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return procs, c
}

// A hung shard (SIGSTOP) under batches of many goroutines and a pipeline:
// each of its commands fails with its ShardError (a timeout) once its
// batch times out, each counted as the shard's failure; the other shards'
// engines answer at once; a caller whose deadline passed while its batch
// waited gets its deadline, not counted.
func TestAutoPipelineHungShard(t *testing.T) {
	procs, c := startAPShards(t, 3)
	const hung = 1
	owners := fixtures.ByOwner(c, fixtures.Keys(300))
	procs[hung].Signal(t, syscall.SIGSTOP)

	const n = 12
	var wg sync.WaitGroup
	hungErrs := make([]error, n)
	hungTimes := make([]time.Duration, n)
	for g := range n {
		wg.Go(func() {
			start := time.Now()
			hungErrs[g] = c.Get(ctx, owners[hung][g]).Err()
			hungTimes[g] = time.Since(start)
		})
		wg.Go(func() {
			k := owners[2*(g%2)][g]
			start := time.Now()
			v, err := c.Get(ctx, k).Result()
			if d := time.Since(start); err != nil || v != "v:"+k || d >= fixtures.RealTimeout {
				t.Errorf("GET %s on a live shard = %q, %v after %v", k, v, err, d)
			}
		})
	}
	var cmds []goredis.Cmder
	var pipeErr error
	wg.Go(func() {
		cmds, pipeErr = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range 5 {
				for _, s := range []int{0, hung, 2} {
					p.Get(ctx, owners[s][n+i])
				}
			}
			return nil
		})
	})
	wg.Wait()
	timeout := func(what string, err error) {
		t.Helper()
		fixtures.WantShardError(t, what, err, hung, procs[hung].Addr)
		if netErr := net.Error(nil); !errors.As(err, &netErr) || !netErr.Timeout() {
			t.Fatalf("%s: %v, want a timeout", what, err)
		}
	}
	for g, err := range hungErrs {
		timeout("GET on the hung shard", err)
		// The engine runs one batch at a time: a command waits for the
		// batch before its own, at most.
		if hungTimes[g] < fixtures.RealTimeout-10*time.Millisecond || hungTimes[g] > 3*fixtures.RealTimeout+700*time.Millisecond {
			t.Fatalf("GET on the hung shard returned after %v; ReadTimeout %v", hungTimes[g], fixtures.RealTimeout)
		}
	}
	timeout("pipeline", pipeErr)
	for j, cmd := range cmds {
		k := cmd.Args()[1].(string)
		if v, err := cmd.(*goredis.StringCmd).Result(); j%3 == 1 {
			timeout("pipelined GET "+k, err)
		} else if err != nil || v != "v:"+k {
			t.Fatalf("pipelined GET %s = %q, %v", k, v, err)
		}
	}
	// Each GET's batch failure, and the pipeline's part, once.
	if st := c.Stats()[hung]; st.Errors != n+1 {
		t.Fatalf("hung shard stats %+v, want %d errors", st, n+1)
	}

	short, cancel := context.WithTimeout(ctx, fixtures.RealTimeout/4)
	defer cancel()
	err := c.Get(short, owners[hung][0]).Err()
	fixtures.WantShardError(t, "GET past its deadline", err, hung, procs[hung].Addr)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET past its deadline: %v", err)
	}
	if st := c.Stats()[hung]; st.Errors != n+1 {
		t.Fatalf("a caller's deadline counted as the shard's failure: %+v", st)
	}

	procs[hung].Signal(t, syscall.SIGCONT)
	fixtures.Poll(t, 10*time.Second, "the continued shard", func() error { return c.Get(ctx, owners[hung][0]).Err() })
}

// A shard killed while goroutines' batches are in flight: every command
// for it ends with its ShardError (a broken connection, then a refused
// dial), none is left waiting, and the other shards answer.
func TestAutoPipelineKilledShard(t *testing.T) {
	procs, c := startAPShards(t, 3)
	const dead = 2
	owners := fixtures.ByOwner(c, fixtures.Keys(300))
	const n = 16
	var started, wg sync.WaitGroup
	started.Add(n)
	errs := make([]error, n)
	for g := range n {
		wg.Go(func() {
			first := true
			for i := 0; ; i++ {
				k := owners[dead][(g*7+i)%len(owners[dead])]
				v, err := c.Get(ctx, k).Result()
				if first {
					started.Done()
					first = false
				}
				if err != nil {
					errs[g] = err
					return
				}
				if v != "v:"+k {
					errs[g] = errors.New("GET " + k + " = " + v)
					return
				}
			}
		})
	}
	started.Wait()
	procs[dead].Kill()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("commands on the killed shard still wait")
	}
	for _, err := range errs {
		fixtures.WantShardError(t, "GET on the killed shard", err, dead, procs[dead].Addr)
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("GET on the killed shard: %v; want a refused dial or a broken connection", err)
		}
	}
	for _, k := range owners[0][:20] {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s on a live shard = %q, %v", k, v, err)
		}
	}
}
