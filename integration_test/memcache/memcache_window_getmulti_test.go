package memcache_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// GetMultiContext in a window honours its deadline: 3 -> 4 real memcached
// servers, 4,000 keys, the keys moving from shards 0 and 1 already moved,
// shard 2 hung (SIGSTOP). A GetMultiContext of every key with a 100 ms
// deadline returns within 300 ms with every hit it can have (the keys of
// shards 0, 1 and 3, those already moved among them) and a
// *MultiShardError naming shard 2 alone, with the deadline as cause; the
// caller's deadline does not count against shard 2. The keys that could not
// move from shard 2 stay there and move once it is back.
func TestMemcacheWindowGetMultiDeadline(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	c, opts := fixtures.MCWindowClient(t, servers)
	keys := fixtures.MCKeys("dl:", 4000)
	fixtures.SetAll(t, c, keys)
	from := map[string]int{}
	for _, k := range keys {
		from[k] = c.GetShardInfo(k).Index
	}
	if err := c.BeginResharding(opts, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	var early, want []string // moved before the call; hits of the call
	for _, k := range keys {
		to := c.GetShardInfo(k).Index
		if to == 3 && from[k] != 2 {
			early = append(early, k)
		}
		if to != 2 && from[k] != 2 {
			want = append(want, k)
		}
	}
	if items, err := c.GetMulti(early); err != nil || len(items) != len(early) {
		t.Fatalf("GetMulti of the keys moving from shards 0 and 1: %d of %d, %v", len(items), len(early), err)
	}
	if err := servers[2].Proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = servers[2].Proc.Signal(syscall.SIGCONT) })

	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	items, err := c.GetMultiContext(ctx, keys)
	if elapsed := time.Since(start); elapsed > 3*deadline {
		t.Fatalf("GetMultiContext with a %v deadline returned after %v", deadline, elapsed)
	}
	if len(items) != len(want) {
		t.Fatalf("%d hits, want %d: every key but those of shard 2", len(items), len(want))
	}
	for _, k := range want {
		if it := items[k]; it == nil || string(it.Value) != "v-"+k {
			t.Fatalf("%s: %v, want v-%s", k, it, k)
		}
	}
	var mse *shardedmc.MultiShardError
	if !errors.As(err, &mse) || len(mse.Shards) != 1 || mse.Shards[0].Index != 2 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want shard 2 alone failed by the deadline", err)
	}
	if st := c.Stats()[2]; st.Errors != 0 {
		t.Fatalf("shard 2 counted %d failures for the caller's deadline", st.Errors)
	}

	if err := servers[2].Proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	items, err = c.GetMulti(keys)
	if err != nil || len(items) != len(keys) {
		t.Fatalf("GetMulti once shard 2 is back: %d of %d, %v", len(items), len(keys), err)
	}
	moving := len(fixtures.ToNewShard(t, opts, keys))
	if st := c.ReshardStats(); st != (shardedmc.ReshardStats{MovedWithTTL: int64(moving)}) {
		t.Fatalf("ReshardStats = %+v, want %d moved with their TTL", st, moving)
	}
}
