package reshard_test

// Attack of the paged migration (read-ahead, InFlight pages per source,
// exact key locks): live writers each owning a set of keys write, append,
// increment, delete and recreate them (plain commands, pipelines,
// TxPipelined, Watch) while Migration.Run moves the keys, is killed and
// resumed from its checkpoint; then every server's content must equal a
// plain map of what each key holds, on the key's new owner only.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

func TestReshardAttackLiveWriters(t *testing.T) {
	for _, seed := range attackSeeds(1, 2, 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { attackRun(t, seed) })
	}
}

// attackSeeds returns $ATTACK_SEED if set, else seeds.
func attackSeeds(seeds ...uint64) []uint64 {
	if s := os.Getenv("ATTACK_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		return []uint64{n}
	}
	return seeds
}

func attackRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	shards, direct, c := fixtures.SafetyFixture(t, 5, 3, shardedredis.Health{})
	const n = 4000
	const writers = 6
	want := make([]map[string]string, writers) // key -> value ("" absent)
	for w := range writers {
		want[w] = map[string]string{}
	}
	key := func(i int) string { return "a:" + strconv.Itoa(i) }
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			v := "v" + strconv.Itoa(i)
			p.Set(ctx, key(i), v, time.Hour)
			want[i%writers][key(i)] = v
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Big keys too.
	big := string(make([]byte, 300_000))
	for i := n; i < n+20; i++ {
		c.Set(ctx, key(i), big, 0)
		want[i%writers][key(i)] = big
	}
	next := []shardedredis.ShardOptions{shards[0], shards[2], shards[3], shards[4]}
	next[2].Name, next[3].Name = "b", "d"
	if err := c.BeginResharding(next); err != nil {
		t.Fatal(err)
	}
	stopWriters := liveWriters(t, seed, writers, n, func(w int, wrng *rand.Rand, step, i int) error {
		m := want[w]
		k := key(i)
		old := m[k]
		var err error
		switch op := wrng.IntN(8); op {
		case 0:
			v := fmt.Sprintf("s%d.%d", w, step)
			err = c.Set(ctx, k, v, time.Hour).Err()
			m[k] = v
		case 1:
			var got int64
			got, err = c.Del(ctx, k).Result()
			if err == nil && got != int64(fixtures.B2I(old != "")) {
				err = fmt.Errorf("DEL %s = %d, had %q", k, got, old)
			}
			delete(m, k)
		case 2:
			s := "+" + strconv.Itoa(step)
			var got int64
			got, err = c.Append(ctx, k, s).Result()
			if err == nil && got != int64(len(old+s)) {
				err = fmt.Errorf("APPEND %s = %d, had %q", k, got, old)
			}
			m[k] = old + s
		case 3:
			var got string
			got, err = c.Get(ctx, k).Result()
			if err == goredis.Nil {
				err = nil
			}
			if err == nil && got != old {
				err = fmt.Errorf("GET %s = %q, want %q", k, got, old)
			}
		case 4: // pipeline of two keys of this writer
			k2 := key(wrng.IntN(n/writers)*writers + w)
			if k2 == k {
				break
			}
			v := fmt.Sprintf("p%d.%d", w, step)
			_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				p.Set(ctx, k, v, 0)
				p.Append(ctx, k2, "!")
				return nil
			})
			m[k] = v
			m[k2] += "!"
		case 5: // TxPipelined: DEL then SET (recreate)
			v := fmt.Sprintf("t%d.%d", w, step)
			_, err = c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Del(ctx, k)
				p.Set(ctx, k, v, 0)
				return nil
			})
			m[k] = v
		case 6: // Watch
			v := fmt.Sprintf("w%d.%d", w, step)
			err = c.Watch(ctx, func(tx *goredis.Tx) error {
				got, err := tx.Get(ctx, k).Result()
				if err == goredis.Nil {
					err = nil
				}
				if err != nil {
					return err
				}
				if got != old {
					return fmt.Errorf("Watch GET %s = %q, want %q", k, got, old)
				}
				_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
					p.Set(ctx, k, got+v, 0)
					return nil
				})
				return err
			}, k)
			m[k] = old + v
		case 7:
			k2 := key(wrng.IntN(n/writers)*writers + w)
			err = c.MSet(ctx, k, "m1", k2, "m2").Err()
			m[k] = "m1"
			m[k2] = "m2"
			if k2 == k {
				m[k] = "m2"
			}
		}
		return err
	})
	opt := shardedredis.MigrateOptions{BatchSize: 1 + rng.IntN(300), InFlight: 1 + rng.IntN(6), Parallelism: 1 + rng.IntN(4)}
	if rng.IntN(3) == 0 {
		opt.KeysPerSecond = float64(5000 + rng.IntN(20000))
	}
	t.Logf("options %+v", opt)
	runKilled(t, c, rng, opt, 4, seed%2 == 0)
	time.Sleep(50 * time.Millisecond)
	stopWriters()
	// Every server's content against the map.
	all := map[string]string{}
	for _, m := range want {
		for k, v := range m {
			all[k] = v
		}
	}
	owner := func(k string) int { return fixtures.ServerOf(t, c, shards, k) }
	for si, d := range direct {
		keys, err := fixtures.UserKeys(d).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := d.Get(ctx, k).Result()
			if err != nil {
				t.Errorf("server %d: GET %s: %v", si, k, err)
				continue
			}
			w, ok := all[k]
			switch {
			case !ok:
				t.Errorf("server %d holds %s = %.20q, which the map does not have", si, k, v)
			case owner(k) != si:
				t.Errorf("server %d holds %s, owned by %d", si, k, owner(k))
			case v != w:
				t.Errorf("server %d: %s = %.30q, want %.30q", si, k, v, w)
			}
		}
	}
	for k := range all {
		if n, _ := direct[owner(k)].Exists(ctx, k).Result(); n != 1 {
			t.Errorf("%s lost (owner %d)", k, owner(k))
		}
	}
}

// failRestore fails the RESTOREs sent through a shard client as told: each
// pipeline (or command) holding a RESTORE asks decide, which may block; an
// error fails the whole pipeline, unsent.
func failRestore(decide func(key string) error) fixtures.SendHook {
	return fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			if step, keys := fixtures.MoveStep(cmd); step == "restore" {
				for _, k := range keys {
					if err := decide(k); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// A checkpoint taken while Run retries the keys that failed before (a
// crash then) still names them: resumed from it, the migration moves them
// and loses none.
func TestReshardCheckpointDuringRetryKeepsKeys(t *testing.T) {
	shards, direct, c := fixtures.SafetyFixture(t, 2, 1, shardedredis.Health{})
	for i := range 300 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failed string // the key whose first RESTORE failed
	restores := 0
	entered, release := make(chan struct{}), make(chan struct{})
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	stage := 1
	c.Shards()[1].Client.AddHook(failRestore(func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stage == 1 && failed == "":
			failed = key
			return errors.New("injected RESTORE failure")
		case stage == 1:
			if restores++; restores == 10 {
				cancel1() // run 1 stops past the failed key's page
			}
		case stage == 2 && key == failed:
			stage = 3
			mu.Unlock()
			close(entered)
			<-release // the process dies here: nothing is sent
			mu.Lock()
			return errors.New("crashed")
		}
		return nil
	}))
	opt := shardedredis.MigrateOptions{BatchSize: 1, InFlight: 1, Parallelism: 1}
	m1, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Run(ctx1); !errors.Is(err, context.Canceled) {
		t.Fatalf("run 1: %v, want context.Canceled", err)
	}
	cp1 := m1.Checkpoint()
	id := "addr:" + shards[0].Addr
	src := cp1.Shards[id]
	if src.Cursor == 0 || !slices.Contains(src.Retry, failed) {
		t.Fatalf("run 1 checkpoint %+v; want a cursor past %s, which is to retry", src, failed)
	}
	mu.Lock()
	stage = 2
	mu.Unlock()
	opt.Resume = cp1
	m2, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m2.Run(ctx2) }()
	<-entered
	cp2 := m2.Checkpoint() // saved just before the crash
	cancel2()
	close(release)
	<-done
	got := cp2.Shards[id]
	if got.Cursor != src.Cursor || !slices.Contains(got.Retry, failed) {
		t.Errorf("checkpoint taken while %s was retried: %+v; it names %s nowhere", failed, got, failed)
	}
	opt.Resume = cp2
	m3, err := c.NewMigration(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m3.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, failed).Result(); v != "v"+failed[1:] {
		n, _ := direct[0].Exists(ctx, failed).Result()
		t.Errorf("after resuming from that checkpoint: GET %s = %q, %v (left on the old server: %d)", failed, v, err, n)
	}
}

// Counters, hashes and lists written by live INCR, HINCRBY and RPUSH, and
// keys given a short TTL before or during the migration: once it is over,
// every counter, hash and list holds what the map says, on its new owner
// only, and every key given a short TTL has expired everywhere (none was
// restored without its TTL).
func TestReshardAttackTypesAndTTLs(t *testing.T) {
	for _, seed := range attackSeeds(1, 2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { attackTypes(t, seed) })
	}
}

func attackTypes(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	shards, direct, c := fixtures.SafetyFixture(t, 5, 3, shardedredis.Health{})
	const n, writers = 3000, 4
	kinds := []string{"counter", "hash", "list", "short"}
	key := func(i int) string { return kinds[i%4] + ":" + strconv.Itoa(i) }
	counts := make([]map[string]int, writers) // counter: value; hash: field f; list: length
	doomed := make([]map[string]bool, writers)
	for w := range writers {
		counts[w], doomed[w] = map[string]int{}, map[string]bool{}
	}
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			k, w := key(i), i%writers
			switch i % 4 {
			case 0:
				p.Set(ctx, k, i, 0)
				counts[w][k] = i
			case 1:
				p.HSet(ctx, k, "f", i)
				p.Expire(ctx, k, time.Hour)
				counts[w][k] = i
			case 2:
				p.RPush(ctx, k, "x")
				counts[w][k] = 1
			case 3:
				p.Set(ctx, k, "s", time.Duration(50+rng.IntN(400))*time.Millisecond)
				doomed[w][k] = true
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	next := []shardedredis.ShardOptions{shards[1], shards[3], shards[4]}
	next[1].Name, next[2].Name = "a", "d"
	if err := c.BeginResharding(next); err != nil {
		t.Fatal(err)
	}
	stopWriters := liveWriters(t, seed, writers, n, func(w int, wrng *rand.Rand, _, i int) error {
		k := key(i)
		if doomed[w][k] {
			return nil
		}
		var err error
		var got int64
		switch i % 4 {
		case 0:
			got, err = c.Incr(ctx, k).Result()
			counts[w][k]++
		case 1:
			got, err = c.HIncrBy(ctx, k, "f", 1).Result()
			counts[w][k]++
		case 2:
			got, err = c.RPush(ctx, k, "x").Result()
			counts[w][k]++
		}
		if err == nil && got != int64(counts[w][k]) {
			err = fmt.Errorf("%s: %d, want %d", k, got, counts[w][k])
		}
		if err == nil && wrng.IntN(20) == 0 {
			err = c.PExpire(ctx, k, time.Duration(20+wrng.IntN(300))*time.Millisecond).Err()
			doomed[w][k] = true
		}
		return err
	})
	opt := shardedredis.MigrateOptions{BatchSize: 1 + rng.IntN(200), InFlight: 1 + rng.IntN(4), Parallelism: 1 + rng.IntN(3)}
	t.Logf("options %+v", opt)
	runKilled(t, c, rng, opt, 3, seed%2 == 1)
	stopWriters()
	time.Sleep(400 * time.Millisecond) // past every short TTL
	for si, d := range direct {
		keys, err := fixtures.UserKeys(d).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			i, _ := strconv.Atoi(k[strings.IndexByte(k, ':')+1:])
			w := i % writers
			if doomed[w][k] {
				ttl, _ := d.PTTL(ctx, k).Result()
				t.Errorf("server %d holds %s, which was to expire (PTTL %v)", si, k, ttl)
				continue
			}
			if o := fixtures.ServerOf(t, c, shards, k); o != si {
				t.Errorf("server %d holds %s, owned by %d", si, k, o)
				continue
			}
			var got int
			switch i % 4 {
			case 0:
				got, err = d.Get(ctx, k).Int()
			case 1:
				got, err = d.HGet(ctx, k, "f").Int()
				if ttl, _ := d.TTL(ctx, k).Result(); err == nil && (ttl <= 0 || ttl > time.Hour) {
					err = fmt.Errorf("TTL %v, want at most an hour", ttl)
				}
			case 2:
				var l int64
				l, err = d.LLen(ctx, k).Result()
				got = int(l)
			}
			if err != nil || got != counts[w][k] {
				t.Errorf("server %d: %s = %d, %v; want %d", si, k, got, err, counts[w][k])
			}
			delete(counts[w], k)
		}
	}
	for w := range writers {
		for k := range counts[w] {
			if !doomed[w][k] {
				t.Errorf("%s lost", k)
			}
		}
	}
}

// runKilled runs the migration of c's window with opt to its end, killed
// (its context canceled) kills times at random moments and resumed each
// time: from the checkpoint of the run that ended, or, with crash, from
// the last checkpoint sampled (every 200 us) while it ran, as a process
// that saves its checkpoint now and then and dies resumes. A
// *MigrationError (a key timed out under the race detector) is resumed too.
func runKilled(t *testing.T, c *shardedredis.ShardedClient, rng *rand.Rand, opt shardedredis.MigrateOptions, kills int, crash bool) {
	t.Helper()
	for run := 0; ; run++ {
		m, err := c.NewMigration(opt)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		if run < kills {
			time.AfterFunc(time.Duration(5+rng.IntN(80))*time.Millisecond, cancel)
		}
		saved := opt.Resume
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for rctx.Err() == nil {
				saved = m.Checkpoint()
				time.Sleep(200 * time.Microsecond)
			}
		}()
		err = m.Run(rctx)
		cancel()
		<-sampled
		if err == nil {
			return
		}
		if me := (*shardedredis.MigrationError)(nil); !errors.Is(err, context.Canceled) && !errors.As(err, &me) || run > 30 {
			t.Fatalf("run %d: %v", run, err)
		}
		opt.Resume = m.Checkpoint()
		if crash {
			opt.Resume = saved
		}
	}
}

// liveWriters starts writers goroutines, writer w calling op with its own
// random source, its step count and one of its keys' indices i (i mod
// writers = w, i < n), until op fails or stopWriters is called;
// stopWriters waits for them and fails t with each writer's error.
func liveWriters(t *testing.T, seed uint64, writers, n int, op func(w int, rng *rand.Rand, step, i int) error) (stopWriters func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+100))
		wg.Go(func() {
			for step := 0; ; step++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := op(w, rng, step, rng.IntN(n/writers)*writers+w); err != nil {
					errs <- fmt.Errorf("writer %d step %d: %w", w, step, err)
					return
				}
			}
		})
	}
	return func() {
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
