package deadline_test

// What counts against a Redis shard, on real redis-servers: the caller's
// cancel or deadline never does (an expired context, a deadline that ends a
// wait for a busy pool or a read from a hung server), nor does a pool full
// of the caller's own commands; a killed or hung shard does, within one
// attempt of its own timeouts. Errors name the shard either way.

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// ejectAfterTwo is EjectMode with FailureLimit 2 and no rejoin in a test's
// time.
var ejectAfterTwo = shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour}

// Eject mode, FailureLimit 2: Gets with an expired or canceled context, and
// an MGET over every shard with an expired one, fail naming the shard and
// the caller's cause; they count as requests, never as failures, and eject
// nothing. The shard then serves the key.
func TestRealRedisExpiredContextDoesNotEject(t *testing.T) {
	procs, c := fixtures.StartDeadlineShards(t, 3, ejectAfterTwo)
	ks := fixtures.Keys(100)
	key := ks[fixtures.FirstOn(c, ks, 1)]
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(ctx)
	cancel2()
	for range 2 {
		fixtures.WantCallerEnded(t, "GET, expired", c.Get(expired, key).Err(), 1, procs[1].Addr, context.DeadlineExceeded)
		fixtures.WantCallerEnded(t, "GET, canceled", c.Get(canceled, key).Err(), 1, procs[1].Addr, context.Canceled)
	}
	err := c.MGet(expired, ks...).Err()
	fixtures.WantCallerEnded(t, "MGET, expired", err, 0, procs[0].Addr, context.DeadlineExceeded)
	st := c.Stats()
	fixtures.WantStats(t, "after SET, GETs and MGET", st, 1, shardedclient.ShardStats{Requests: 6})
	for _, i := range []int{0, 2} {
		fixtures.WantStats(t, "after MGET", st, i, shardedclient.ShardStats{Requests: 1})
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET after the expired contexts = %q, %v", v, err)
	}
	fixtures.WantStats(t, "after a live GET", c.Stats(), 1, shardedclient.ShardStats{Requests: 7})
}

// holdPool runs BLPOP for d on the shard of key, through c, so that a shard
// with a pool of one has no connection to spare, and returns once the
// connection is taken; wait waits for the BLPOP to end (redis.Nil), as the
// test's cleanup does.
func holdPool(t *testing.T, c *shardedredis.ShardedClient, key string, d time.Duration) (wait func()) {
	t.Helper()
	pool := c.GetShard(key)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.BLPop(ctx, d, key).Err(); err != goredis.Nil {
			t.Errorf("BLPOP holding the pool: %v, want redis.Nil", err)
		}
	})
	t.Cleanup(wg.Wait)
	fixtures.Poll(t, 5*time.Second, "BLPOP takes the pool's connection", func() error {
		if st := pool.PoolStats(); st.TotalConns != 1 || st.IdleConns != 0 {
			return errors.New("the connection is free")
		}
		return nil
	})
	return wg.Wait
}

// A shard whose one connection the caller's own BLPOP holds: GETs whose
// deadline ends while they wait for the pool, and GETs that wait out the
// pool's PoolTimeout (redis.ErrPoolTimeout), fail naming the shard and do
// not count against it: eject mode, FailureLimit 2, nothing ejected.
func TestRealRedisBusyPoolIsNotShardFailure(t *testing.T) {
	procs, c := fixtures.StartDeadlineShards(t, 2, ejectAfterTwo, 1, 1)
	on1 := fixtures.ByOwner(c, fixtures.Keys(100))[1]
	key := on1[0]
	wait := holdPool(t, c, on1[1], 4*time.Second) // outlasts the GETs below
	for range 2 {
		tight, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start := time.Now()
		err := c.Get(tight, key).Err()
		cancel()
		fixtures.WantCallerEnded(t, "GET waiting for the pool past its deadline", err, 1, procs[1].Addr, context.DeadlineExceeded)
		if d := time.Since(start); d > 3*fixtures.DeadlineTimeout {
			t.Fatalf("GET waited %v for the pool, its deadline was 50ms", d)
		}
	}
	poolTimeout := fixtures.DeadlineTimeout + time.Second // go-redis's default: ReadTimeout + 1s
	for range 2 {
		start := time.Now()
		err := c.Get(ctx, key).Err()
		fixtures.WantCallerEnded(t, "GET waiting out PoolTimeout", err, 1, procs[1].Addr, goredis.ErrPoolTimeout)
		if d := time.Since(start); d < poolTimeout || d > 3*poolTimeout {
			t.Fatalf("GET waited %v for the pool, PoolTimeout %v", d, poolTimeout)
		}
	}
	fixtures.WantStats(t, "while BLPOP holds the pool", c.Stats(), 1, shardedclient.ShardStats{Requests: 4})
	wait()
	fixtures.WantStats(t, "after BLPOP", c.Stats(), 1, shardedclient.ShardStats{Requests: 5})
}

// A hung shard (SIGSTOP) with a caller's deadline shorter than its read
// timeout: the deadline ends the read (go-redis makes an i/o timeout of it),
// the error names the shard and wraps context.DeadlineExceeded, and nothing
// counts. Without a deadline the shard's own read timeout counts, and two
// eject it.
func TestRealRedisHungShardCallerDeadlineVersusReadTimeout(t *testing.T) {
	procs, c := fixtures.StartDeadlineShards(t, 3, ejectAfterTwo)
	ks := fixtures.Keys(100)
	key := ks[fixtures.FirstOn(c, ks, 1)]
	procs[1].Signal(t, syscall.SIGSTOP)
	defer procs[1].Signal(t, syscall.SIGCONT)
	for range 3 {
		tight, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := c.Get(tight, key).Err()
		cancel()
		fixtures.WantCallerEnded(t, "GET on a hung shard past the caller's deadline", err, 1, procs[1].Addr, context.DeadlineExceeded)
	}
	fixtures.WantStats(t, "after the caller's deadlines", c.Stats(), 1, shardedclient.ShardStats{Requests: 3})
	for n := range 2 {
		start := time.Now()
		err := c.Get(ctx, key).Err()
		var ne interface{ Timeout() bool }
		if fixtures.WantShardError(t, "GET on a hung shard", err, 1, procs[1].Addr); !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GET on a hung shard: %v, want the shard's read timeout", err)
		}
		if d := time.Since(start); d < fixtures.DeadlineTimeout || d > 3*fixtures.DeadlineTimeout {
			t.Fatalf("GET on a hung shard took %v, ReadTimeout %v", d, fixtures.DeadlineTimeout)
		}
		want := shardedclient.ShardStats{Requests: uint64(4 + n), Errors: uint64(1 + n)}
		if n == 1 {
			want.Ejections, want.Ejected = 1, true
		}
		fixtures.WantStats(t, "after the shard's read timeouts", c.Stats(), 1, want)
	}
}

// dialCount counts the dials of the clients it is added to.
type dialCount struct{ n atomic.Int64 }

func (d *dialCount) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (d *dialCount) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (d *dialCount) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// A killed shard with the package's retry defaults: each GET makes at most
// one dial (go-redis's own defaults make up to 4 attempts of 5 dials each)
// and fails well within 3 dial timeouts (it took 1.7 s with go-redis's
// defaults); the failures count, and the second ejects the shard, whose
// keys then go to another shard.
func TestRealRedisKilledShardFailsWithinOneAttempt(t *testing.T) {
	procs, c := fixtures.StartDeadlineShards(t, 3, ejectAfterTwo)
	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dials := &dialCount{}
	c.Shards()[1].Client.AddHook(dials)
	// go-redis normalizes MaxRetries -1 (none) to 0; its own default would
	// have made 3 of 0, and 5 of DialerRetries 0.
	if o := c.ShardOptions()[1]; o.MaxRetries != 0 || o.DialerRetries != 1 {
		t.Fatalf("shard options MaxRetries %d, DialerRetries %d; want 0 and 1", o.MaxRetries, o.DialerRetries)
	}
	onDead := fixtures.ByOwner(c, ks)[1]
	sets := uint64(len(onDead)) // the SETs above, its requests so far
	procs[1].Kill()
	for n, k := range onDead[:2] {
		before := dials.n.Load()
		start := time.Now()
		err := c.Get(ctx, k).Err()
		d := time.Since(start)
		fixtures.WantShardError(t, "GET on the killed shard", err, 1, procs[1].Addr)
		dialed := dials.n.Load() - before
		switch refused := errors.Is(err, syscall.ECONNREFUSED); {
		case refused && dialed == 1:
		case !refused && fixtures.DeadConn(err) && dialed == 0: // a pooled connection
		default:
			t.Fatalf("GET on the killed shard: %v after %d dials; want one refused dial, or a broken pooled connection", err, dialed)
		}
		if d > 3*fixtures.DeadlineTimeout {
			t.Fatalf("GET on the killed shard took %v, 3 dial timeouts are %v", d, 3*fixtures.DeadlineTimeout)
		}
		want := shardedclient.ShardStats{Requests: sets + uint64(1+n), Errors: uint64(1 + n)}
		if n == 1 {
			want.Ejections, want.Ejected = 1, true
		}
		fixtures.WantStats(t, "after GETs on the killed shard", c.Stats(), 1, want)
	}
	if i := c.GetShardInfo(onDead[2]).Index; i == 1 {
		t.Fatalf("%s still goes to the ejected shard", onDead[2])
	}
	if err := c.Get(ctx, onDead[2]).Err(); err != goredis.Nil {
		t.Fatalf("GET of an ejected shard's key on its new owner: %v, want redis.Nil", err)
	}
}

// ProbeInterval finds a killed shard with one probe: the first probe after
// the kill fails at once, within 3 probe intervals of the kill, and a probe
// that dials fails with "connection refused" (not after waiting out
// ProbeTimeout with go-redis retrying the dial, as "context deadline
// exceeded").
func TestRealRedisProbeFindsKilledShardInOneProbe(t *testing.T) {
	const interval = 200 * time.Millisecond
	type probe struct {
		took time.Duration
		err  error
	}
	var mu sync.Mutex
	var failed []probe                  // the failed probes, in order
	failures := make(chan time.Time, 2) // when the first two failed
	h := shardedredis.Health{
		ProbeInterval: interval,
		Probe: func(ctx context.Context, c *goredis.Client) error {
			start := time.Now()
			err := c.Ping(ctx).Err()
			if err != nil {
				mu.Lock()
				failed = append(failed, probe{time.Since(start), err})
				mu.Unlock()
			}
			return err
		},
		OnEvent: func(e shardedclient.Event) {
			if e.Kind == shardedclient.EventFailure {
				select {
				case failures <- e.Time:
				default:
				}
			}
		},
	}
	procs, c := fixtures.StartDeadlineShards(t, 2, h)
	time.Sleep(2 * interval) // probes of the live shards
	mu.Lock()
	n := len(failed)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d probes of live shards failed", n)
	}
	killed := time.Now()
	procs[1].Kill()
	var at [2]time.Time
	for j := range at {
		select {
		case at[j] = <-failures:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d probes failed within 5s of the kill, want 2", j)
		}
	}
	mu.Lock()
	first, second := failed[0], failed[1]
	mu.Unlock()
	// The first probe may find a pooled connection broken by the kill; the
	// next dials, and is refused.
	if !fixtures.DeadConn(first.err) || !errors.Is(second.err, syscall.ECONNREFUSED) {
		t.Fatalf("failed probes: %v, then %v; want a refused or broken connection, then connection refused", first.err, second.err)
	}
	for _, p := range []probe{first, second} {
		if p.took > shardedclient.DefaultProbeTimeout/3 {
			t.Fatalf("a failed probe took %v, ProbeTimeout %v", p.took, shardedclient.DefaultProbeTimeout)
		}
	}
	if d := at[0].Sub(killed); d > 3*interval {
		t.Fatalf("the probe found the killed shard %v after the kill, ProbeInterval %v", d, interval)
	}
	if st := c.Stats()[1]; st.Errors == 0 || st.Ejected {
		t.Fatalf("killed shard stats %+v", st)
	}
}

// pauseServer makes the redis-server at addr serve no client for d
// (CLIENT PAUSE d ALL).
func pauseServer(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	direct := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer direct.Close()
	if err := direct.Do(ctx, "client", "pause", d.Milliseconds(), "all").Err(); err != nil {
		t.Fatal(err)
	}
}

// Close closes the shards' connections under the calls in flight: such a
// call fails with an error matching redis.ErrClosed, naming its shard, and
// the failure is the caller's (it closed the client), not the shard's:
// with FailureLimit 1 nothing is counted, ejected or reported as a failure.
func TestRealRedisCloseDuringCommandIsNotShardFailure(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	procs := []*fixtures.RedisProc{fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")}
	var failures atomic.Int64
	h := shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour,
		OnEvent: func(e shardedclient.Event) {
			if e.Kind == shardedclient.EventFailure || e.Kind == shardedclient.EventEjected {
				failures.Add(1)
			}
		}}
	opts := make([]shardedredis.ShardOptions, len(procs))
	for i, p := range procs {
		opts[i] = shardedredis.ShardOptions{Addr: p.Addr, Options: &goredis.Options{ReadTimeout: 3 * time.Second}}
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts, Health: h})
	if err != nil {
		t.Fatal(err)
	}
	key := fixtures.ByOwner(c, fixtures.Keys(100))[1][0]
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pauseServer(t, procs[1].Addr, time.Second)
	done := make(chan error, 1)
	go func() { done <- c.Get(ctx, key).Err() }()
	time.Sleep(200 * time.Millisecond) // the GET waits on the paused shard
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	fixtures.WantShardError(t, "GET cut short by Close", err, 1, procs[1].Addr)
	if !errors.Is(err, goredis.ErrClosed) {
		t.Errorf("GET cut short by Close: %v, want errors.Is(err, redis.ErrClosed)", err)
	}
	fixtures.WantStats(t, "after Close", c.Stats(), 1, shardedclient.ShardStats{Requests: 2}) // the SET and the GET
	if n := failures.Load(); n != 0 {
		t.Errorf("%d failure or ejection events after Close, want 0", n)
	}
}

// Inside Watch, a command of fn's *redis.Tx is a command of the watched
// shard like any other: one that the caller's deadline ends fails with a
// *ShardError matching context.DeadlineExceeded (and so does Watch, which
// returns fn's error), and counts as a request, not a failure.
func TestRealRedisWatchTxCommandCallerDeadline(t *testing.T) {
	procs, c := fixtures.StartDeadlineShards(t, 2, ejectAfterTwo)
	key := fixtures.ByOwner(c, fixtures.Keys(100))[1][0]
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	tight, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	var getErr error
	err := c.Watch(tight, func(tx *goredis.Tx) error {
		pauseServer(t, procs[1].Addr, time.Second)
		getErr = tx.Get(tight, key).Err()
		return getErr
	}, key)
	fixtures.WantCallerEnded(t, "the GET of Watch's Tx past the caller's deadline", getErr, 1, procs[1].Addr, context.DeadlineExceeded)
	if err != getErr {
		t.Errorf("Watch returned %v, want fn's error %v", err, getErr)
	}
	// The SET, the GET and the UNWATCH that ends the Tx: requests, no
	// failure. (Watch reports its WATCH with its own outcome, unless fn's
	// error ends it, as here.)
	fixtures.WantStats(t, "after Watch", c.Stats(), 1, shardedclient.ShardStats{Requests: 3})
}

// In a resharding window, the first command on a moving key moves it under
// the key's lock. A second caller on that key waits for the lock no longer
// than its own deadline: with the old owner paused for a second, under the
// first caller's move, the second's 100 ms GET ends with its deadline
// before the pause does, and nothing counts against any shard.
func TestRealRedisKeyLockWaitEndsWithCallerDeadline(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	procs := make([]*fixtures.RedisProc, 3)
	opts := make([]shardedredis.ShardOptions, 3)
	for i := range procs {
		procs[i] = fixtures.StartRedisProc(t, bin, "")
		opts[i] = shardedredis.ShardOptions{Name: string(rune('a' + i)), Addr: procs[i].Addr,
			Options: &goredis.Options{ReadTimeout: 3 * time.Second}}
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts[:2], Health: ejectAfterTwo})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	ks := fixtures.Keys(200)
	before := map[string]int{}
	for _, k := range ks {
		before[k] = c.GetShardInfo(k).Index
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	key := fixtures.ByOwner(c, ks)[2][0]
	const pause = time.Second
	pauseServer(t, procs[before[key]].Addr, pause)
	paused := time.Now()
	first := make(chan error, 1)
	go func() { first <- c.Get(ctx, key).Err() }() // moves key; its DUMP waits on the paused old owner
	time.Sleep(100 * time.Millisecond)
	tight, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = c.Get(tight, key).Err()
	waited := time.Since(paused)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second GET: %v, want errors.Is(err, context.DeadlineExceeded)", err)
	}
	if waited >= pause {
		t.Errorf("second GET (100 ms deadline) returned %v after the pause began: it waited for the first caller's move", waited)
	}
	if err := <-first; err != nil {
		t.Errorf("first GET, which moved the key: %v", err)
	}
	for i, st := range c.Stats() {
		if st.Errors != 0 || st.Ejected {
			t.Errorf("shard %d: %+v after callers' deadlines only", i, st)
		}
	}
}
