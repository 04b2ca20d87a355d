package reshard_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestReshardHungDestination: the new shard's server hangs (SIGSTOP) in
// the middle of a migration, with 300 ms timeouts, while a writer updates
// and deletes keys. The run fails, naming the new shard, without sending it
// batch after batch; once the server resumes, a resumed run finishes; no
// deleted key is back, every value is the last acknowledged one, and every
// TTL is the key's absolute expiry (a RESTORE the client gave up on, run
// when the server woke up, would restore values and TTLs read before the
// hang). The same with ServerSide: a MIGRATE whose new owner hangs fails
// with MIGRATE's own timeout, and the RESTORE it sent runs when the server
// wakes up.
func TestReshardHungDestination(t *testing.T) {
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("ServerSide=%v", serverSide), func(t *testing.T) { hungShard(t, serverSide, 3, nil, hangFor(2*time.Second)) })
	}
}

// hangFor hangs a server (SIGSTOP) for d.
func hangFor(d time.Duration) func(*fixtures.RedisProc) {
	return func(p *fixtures.RedisProc) {
		_ = p.Cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(d)
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	}
}

// hungShard is TestReshardHungDestination with shard victim (0-2: an old
// owner, 3: the new one), started with the extra arguments, disrupted by
// disrupt 150 ms into the migration.
func hungShard(t *testing.T, serverSide bool, victim int, extra []string, disrupt func(*fixtures.RedisProc)) {
	bin := fixtures.RealRedisBin(t)
	procs := make([]*fixtures.RedisProc, 4)
	opts := make([]shardedredis.ShardOptions, 4)
	for i := range procs {
		var args []string
		if i == victim {
			args = extra
		}
		procs[i] = fixtures.StartRedisProc(t, bin, "", args...)
		opts[i] = shardedredis.ShardOptions{Name: fmt.Sprintf("s%d", i), Addr: procs[i].Addr}
	}
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts[:3], Options: &goredis.Options{
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	const n = 3000
	key := func(i int) string { return fmt.Sprintf("hung:%d", i) }
	expireAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for i := range n {
		if i%3 == 0 {
			err = rdb.Set(ctx, key(i), "v0", 0).Err()
		} else {
			err = rdb.SetArgs(ctx, key(i), "v0", goredis.SetArgs{ExpireAt: expireAt}).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.BeginResharding(opts); err != nil {
		t.Fatal(err)
	}
	m, err := rdb.NewMigration(shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 3000, ServerSide: serverSide})
	if err != nil {
		t.Fatal(err)
	}
	// The writer: each op on a key it owns alone; a failed op makes the
	// key's value unknown (it may have run).
	var mu sync.Mutex
	model := map[string]string{} // key -> last acknowledged value; "" deleted
	noTTL := map[string]bool{}   // keys set (KEEPTTL) after a delete: no TTL since
	unknown := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			k := key(rng.IntN(n))
			var err error
			val := ""
			if rng.IntN(3) == 0 {
				err = rdb.Del(ctx, k).Err()
			} else {
				val = fmt.Sprint("v", v)
				err = rdb.SetArgs(ctx, k, val, goredis.SetArgs{KeepTTL: true}).Err()
			}
			mu.Lock()
			if err != nil {
				unknown[k] = true
			} else {
				if prev, written := model[k]; written && prev == "" && val != "" {
					noTTL[k] = true // set on a deleted key: KEEPTTL keeps none
				}
				model[k] = val
			}
			mu.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	})
	hung := make(chan struct{})
	go func() {
		time.Sleep(150 * time.Millisecond)
		disrupt(procs[victim])
		close(hung)
	}()
	err = m.Run(ctx)
	var merr *shardedredis.MigrationError
	stopped := 0
	switch {
	case serverSide: // the old owners wait in MIGRATE: the run may ride out the hang
		if err != nil && !errors.As(err, &merr) {
			t.Fatalf("Run with the new shard hung: %v; want nil or a *MigrationError", err)
		}
	case !errors.As(err, &merr) || !strings.Contains(err.Error(), `"s3"`):
		t.Fatalf("Run with the new shard hung: %v; want a *MigrationError naming s3", err)
	default:
		for _, k := range merr.Keys {
			if strings.Contains(k.Error(), "no more keys are sent to it") {
				stopped++
			}
		}
		if stopped == 0 {
			t.Errorf("no key failed without being sent: the run kept sending batches to the hung shard (%d failed)", len(merr.Keys))
		}
	}
	<-hung
	for attempt := 0; err != nil; attempt++ {
		m, err = rdb.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Resume: m.Checkpoint(), ServerSide: serverSide})
		if err != nil {
			t.Fatal(err)
		}
		if err = m.Run(ctx); err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("resumed run: %v", err)
		}
	}
	close(stop)
	wg.Wait()

	// Every key as the model says, read from the servers themselves.
	clients := make([]*goredis.Client, len(procs))
	for i, p := range procs {
		clients[i] = goredis.NewClient(&goredis.Options{Addr: p.Addr})
		defer clients[i].Close()
	}
	wrong, back, ttls := 0, 0, 0
	for i := range n {
		k := key(i)
		if unknown[k] {
			continue
		}
		c := clients[rdb.GetShardInfo(k).Index]
		want, written := model[k]
		if !written {
			want = "v0"
		}
		got, err := c.Get(ctx, k).Result()
		switch {
		case want == "" && err != goredis.Nil:
			back++
			t.Errorf("%s: deleted, and back as %q", k, got)
		case want != "" && got != want:
			wrong++
			t.Errorf("%s = %q (%v), want %q", k, got, err, want)
		case want != "":
			wantAt := expireAt.UnixMilli()
			if i%3 == 0 || noTTL[k] {
				wantAt = -1 // none
			}
			at, err := c.Do(ctx, "pexpiretime", k).Int64()
			if err != nil || at != wantAt {
				ttls++
				t.Errorf("%s expires at %d (%v), want %d", k, at, err, wantAt)
			}
		}
	}
	t.Logf("%d keys, %d updated or deleted, %d unknown; %d failed without being sent; %d resurrected, %d wrong, %d wrong TTLs",
		n, len(model), len(unknown), stopped, back, wrong, ttls)
}
