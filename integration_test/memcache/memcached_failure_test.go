package memcache_test

import (
	"errors"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Real memcached processes: a hung shard (SIGSTOP) fails its keys within
// the socket timeout while the others answer, and serves again after
// SIGCONT; a killed shard's keys fail at once, and 500 GetMulti calls over
// it deliver the live shards' hits without leaking goroutines.
func TestMemcacheRealHungAndKilledShard(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	const timeout = 300 * time.Millisecond
	shards := make([]shardedmc.ShardOptions, len(servers))
	for i, s := range servers {
		shards[i] = shardedmc.ShardOptions{Name: "mc-" + strconv.Itoa(i), Addr: s.Addr, Timeout: timeout, MaxIdleConns: 8}
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	keys := fixtures.MCKeys("hk:", 300)
	fixtures.SetAll(t, c, keys)
	owner := func(k string) int { return c.GetShardInfo(k).Index }
	keyOn := func(i int) string {
		for _, k := range keys {
			if owner(k) == i {
				return k
			}
		}
		t.Fatalf("no key on shard %d", i)
		return ""
	}

	// Hung: SIGSTOP shard 1.
	const hung = 1
	if err := servers[hung].Proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	fixtures.WaitState(t, servers[hung].Proc.Pid, 'T')
	start := time.Now()
	_, err = c.Get(keyOn(hung))
	var se *shardedclient.ShardError
	var ne net.Error
	if !errors.As(err, &se) || se.Index != hung || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("GET on the hung shard: %v, want its ShardError wrapping a timeout", err)
	}
	if d := time.Since(start); d > 3*timeout {
		t.Fatalf("GET on the hung shard took %v, timeout %v", d, timeout)
	}
	if it, err := c.Get(keyOn(0)); err != nil || string(it.Value) != "v-"+keyOn(0) {
		t.Fatalf("GET on a live shard while another hangs: %v", err)
	}
	items, err := c.GetMulti(keys)
	var me *shardedmc.MultiShardError
	if !errors.As(err, &me) || len(me.Shards) != 1 || me.Shards[0].Index != hung {
		t.Fatalf("GetMulti with a hung shard: %v", err)
	}
	for _, k := range keys {
		if (items[k] != nil) == (owner(k) == hung) {
			t.Fatalf("GetMulti: %s (shard %d) present = %v", k, owner(k), items[k] != nil)
		}
	}
	if err := servers[hung].Proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(keyOn(hung)); err != nil || string(it.Value) != "v-"+keyOn(hung) {
		t.Fatalf("GET after SIGCONT: %v", err)
	}

	// Killed: SIGKILL shard 2, then 500 GetMulti calls.
	const dead = 2
	servers[dead].Stop()
	before := runtime.NumGoroutine()
	for range 500 {
		start := time.Now()
		items, err := c.GetMulti(keys)
		if !errors.As(err, &me) || len(me.Shards) != 1 || me.Shards[0].Index != dead {
			t.Fatalf("GetMulti with a killed shard: %v", err)
		}
		if len(items) != len(keys)-len(byOwnerMC(keys, owner)[dead]) {
			t.Fatalf("GetMulti delivered %d hits", len(items))
		}
		if d := time.Since(start); d > 3*timeout {
			t.Fatalf("GetMulti took %v", d)
		}
	}
	if _, err := c.Get(keyOn(dead)); !errors.As(err, &se) || se.Index != dead {
		t.Fatalf("GET on the killed shard: %v", err)
	}
	if err := c.Set(&gomemcache.Item{Key: keyOn(0), Value: []byte("x")}); err != nil {
		t.Fatalf("SET on a live shard: %v", err)
	}
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Fatalf("goroutines grew from %d to %d over 500 calls", before, after)
	}
}

func byOwnerMC(keys []string, owner func(string) int) map[int][]string {
	out := map[int][]string{}
	for _, k := range keys {
		out[owner(k)] = append(out[owner(k)], k)
	}
	return out
}
