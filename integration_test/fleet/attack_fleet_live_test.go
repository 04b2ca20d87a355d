package fleet_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetLiveCounters: two members of one fleet (A, B) on real
// servers; B drives 3 -> 4 -> 3 (add s3, then remove s1) while writers in
// both members SET their own keys to increasing counters (with a TTL) and
// readers in the other member check that a read never returns less than
// the last acknowledged value. A's clients have a 15 ms ReadTimeout (lost
// replies). At the end every key holds its last acknowledged value or a
// later attempt, with a TTL, and no shard holds a stray copy.
func TestAttackFleetLiveCounters(t *testing.T) {
	shards, list := fixtures.FleetServers(t, 4)
	newClient := func(o *goredis.Options) *shardedredis.ShardedClient {
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3], Options: o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	store := &fleet.MemStore{}
	b := newClient(nil)
	mb, err := b.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:3]})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	a := newClient(&goredis.Options{ReadTimeout: 15 * time.Millisecond, MaxRetries: -1})
	ma, err := a.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()

	const keysPer = 300
	type keyState struct {
		acked     atomic.Int64 // last acknowledged value
		attempted atomic.Int64 // last value sent
	}
	states := map[string]*keyState{}
	var names [2][]string
	for w := range 2 {
		for i := range keysPer {
			k := fmt.Sprintf("lc:%d:%d", w, i)
			states[k] = &keyState{}
			names[w] = append(names[w], k)
		}
	}
	members := [2]*shardedredis.ShardedClient{a, b}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var violations []string
	report := func(s string) {
		mu.Lock()
		if len(violations) < 20 {
			violations = append(violations, s)
		}
		mu.Unlock()
	}
	for w := range 2 {
		wg.Go(func() { // writer in member w
			c := members[w]
			for n := int64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				for _, k := range names[w] {
					ks := states[k]
					ks.attempted.Store(n)
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					err := c.Set(cctx, k, n, time.Hour).Err()
					cancel()
					if err == nil {
						ks.acked.Store(n)
					}
				}
			}
		})
		wg.Go(func() { // reader in the other member
			c := members[1-w]
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, k := range names[w] {
					want := states[k].acked.Load()
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					v, err := c.Get(cctx, k).Result()
					cancel()
					if err != nil {
						if err == goredis.Nil && want > 0 {
							report(fmt.Sprintf("%s: nil after ack of %d", k, want))
						}
						continue
					}
					if got, _ := strconv.ParseInt(v, 10, 64); got < want {
						report(fmt.Sprintf("%s: read %d after ack of %d", k, got, want))
					}
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	backend := b.FleetBackend(shardedredis.MigrateOptions{BatchSize: 16})
	if _, err := fleet.Reshard(ctx, store, backend, list, fleet.DriverOptions{}); err != nil {
		t.Error(err)
	}
	time.Sleep(300 * time.Millisecond)
	down := []fleet.Shard{list[0], list[2], list[3]}
	if _, err := fleet.Reshard(ctx, store, backend, down, fleet.DriverOptions{}); err != nil {
		t.Error(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	acked := 0
	for _, ks := range states {
		if ks.acked.Load() > 0 {
			acked++
		}
	}
	t.Logf("%d of %d keys acknowledged at least once", acked, len(states))
	final := newClient(nil)
	if err := final.SetShards([]shardedredis.ShardOptions{shards[0], shards[2], shards[3]}); err != nil {
		t.Fatal(err)
	}
	for k, ks := range states {
		v, err := final.Get(ctx, k).Result()
		got, _ := strconv.ParseInt(v, 10, 64)
		if (err != nil && !(err == goredis.Nil && ks.acked.Load() == 0)) || got < ks.acked.Load() || got > ks.attempted.Load() {
			report(fmt.Sprintf("final %s = %q (%v), acked %d attempted %d", k, v, err, ks.acked.Load(), ks.attempted.Load()))
		}
		if ttl := final.PTTL(ctx, k).Val(); ttl <= 0 && ks.acked.Load() > 0 {
			report(fmt.Sprintf("final %s: TTL %v", k, ttl))
		}
	}
	// Strays: a user key on a server that does not own it.
	for i, sh := range list {
		raw := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
		keys, _ := raw.Keys(ctx, "*").Result()
		raw.Close()
		for _, k := range keys {
			if _, ok := states[k]; ok && (i == 1 || final.GetShardInfo(k).Name != sh.Name) {
				report(fmt.Sprintf("stray copy of %s on %s", k, sh.Name))
			} else if !ok {
				t.Logf("%s holds %s", sh.Name, k)
			}
		}
	}
	if len(violations) > 0 {
		t.Fatalf("%d+ violations:\n%v", len(violations), violations)
	}
}
