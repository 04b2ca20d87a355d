package deadline_test

// What counts against a memcached shard, on real memcached: a context that
// is already done sends nothing and counts nothing; a context that ends
// while a hung shard has the request returns at once, naming the shard, and
// the request's own outcome (the shard's socket timeout) counts; a killed
// shard counts, fails within its timeout, and is ejected.

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// mcKeyOn returns the first of keys that c places on shard i.
func mcKeyOn(t *testing.T, c *shardedmc.ShardedClient, keys []string, i int) string {
	t.Helper()
	for _, k := range keys {
		if c.GetShardInfo(k).Index == i {
			return k
		}
	}
	t.Fatalf("no key on shard %d", i)
	return ""
}

// Eject mode, FailureLimit 2, on real memcached. A done context: nothing is
// sent, nothing counts, the error is the context's. A deadline that ends
// while a hung shard (SIGSTOP) has the request: the call returns at the
// deadline with the shard's ShardError wrapping context.DeadlineExceeded,
// and the request's own socket timeout counts once it comes. A killed shard:
// refused at once, counted, ejected after two.
func TestMemcacheRealCallerContextVersusShardFailure(t *testing.T) {
	ejectAfterTwo := shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: time.Hour}
	servers, c := fixtures.StartDeadlineMemcached(t, 3, ejectAfterTwo)
	ks := fixtures.MCKeys("dl:", 300)
	fixtures.SetAll(t, c, ks)
	base := c.Stats()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	hung := mcKeyOn(t, c, ks, 1)
	for range 2 {
		if _, err := c.GetContext(expired, hung); err != context.DeadlineExceeded {
			t.Fatalf("GetContext, expired: %v", err)
		}
		if _, err := c.GetContext(canceled, hung); err != context.Canceled {
			t.Fatalf("GetContext, canceled: %v", err)
		}
		if items, err := c.GetMultiContext(expired, ks); items != nil || err != context.DeadlineExceeded {
			t.Fatalf("GetMultiContext, expired: %d items, %v", len(items), err)
		}
	}
	if got := c.Stats(); fmt.Sprint(got) != fmt.Sprint(base) {
		t.Fatalf("stats after done contexts %+v, want %+v", got, base)
	}

	// A hung shard: the caller's deadline first, then the shard's timeout.
	if err := servers[1].Proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	fixtures.WaitState(t, servers[1].Proc.Pid, 'T')
	tight, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err := c.GetContext(tight, hung)
	d := time.Since(start)
	cancel3()
	fixtures.WantCallerEnded(t, "GetContext on a hung shard past its deadline", err, 1, servers[1].Addr, context.DeadlineExceeded)
	if d >= fixtures.DeadlineTimeout {
		t.Fatalf("GetContext returned after %v, its deadline was 50ms", d)
	}
	fixtures.Poll(t, 5*time.Second, "the abandoned request ends", func() error {
		if c.Stats()[1].Requests == base[1].Requests {
			return errors.New("not yet")
		}
		return nil
	})
	fixtures.WantStats(t, "after the request's socket timeout", c.Stats(), 1, shardedclient.ShardStats{Requests: base[1].Requests + 1, Errors: 1})
	if err := servers[1].Proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(hung); err != nil || string(it.Value) != "v-"+hung {
		t.Fatalf("Get after SIGCONT: %v, %v", it, err)
	}

	// A killed shard.
	dead := mcKeyOn(t, c, ks, 2)
	servers[2].Stop()
	for n := range 2 {
		start := time.Now()
		_, err := c.Get(dead)
		if fixtures.WantShardError(t, "Get on the killed shard", err, 2, servers[2].Addr); !fixtures.DeadConn(err) {
			t.Fatalf("Get on the killed shard: %v, want a refused or broken connection", err)
		}
		if d := time.Since(start); d > 3*fixtures.DeadlineTimeout {
			t.Fatalf("Get on the killed shard took %v, Timeout %v", d, fixtures.DeadlineTimeout)
		}
		want := shardedclient.ShardStats{Requests: base[2].Requests + uint64(1+n), Errors: uint64(1 + n)}
		if n == 1 {
			want.Ejections, want.Ejected = 1, true
		}
		fixtures.WantStats(t, "after Gets on the killed shard", c.Stats(), 2, want)
	}
	if _, err := c.Get(dead); err != gomemcache.ErrCacheMiss {
		t.Fatalf("Get of an ejected shard's key on its new owner: %v, want a miss", err)
	}
}
