package integration_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// standInCase is one backend's side of TestStandInCopiesGoAfterRejoin: a
// client over shards a and d (EjectMode, FailureLimit 1, RetryTimeout
// 200 ms) and its calls on key k.
type standInCase struct {
	pause, resume func()
	ejected       func() bool
	set           func(v string) error
	del           func() error
	get           func() (string, error) // "" and no error for a miss
	onD           func() bool            // d's server holds k
}

// While a is ejected, a write of its key lands on the stand-in d. Once a
// has rejoined, d's copy is stale; the client deletes it, so that when a is
// ejected again the key does not come back with that old value over a write
// and a delete made on a meanwhile (it did: GET gave "v2").
func TestStandInCopiesGoAfterRejoin(t *testing.T) {
	for name, start := range map[string]func(t *testing.T) standInCase{"redis": redisStandIn, "memcache": memcacheStandIn} {
		t.Run(name, func(t *testing.T) {
			c := start(t)
			eject := func() {
				t.Helper()
				c.pause()
				_, _ = c.get() // fails: ejects a
				if !c.ejected() {
					t.Fatal("a not ejected")
				}
			}
			if err := c.set("v1"); err != nil {
				t.Fatal(err)
			}
			eject()
			if err := c.set("v2"); err != nil { // on d, standing in
				t.Fatal(err)
			}
			c.resume()
			for deadline := time.Now().Add(5 * time.Second); c.ejected() || c.onD(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("after 5 s: a ejected %v, d holds the key %v; want a back and d's copy deleted", c.ejected(), c.onD())
				}
			}
			if err := c.set("v3"); err != nil { // on a
				t.Fatal(err)
			}
			if err := c.del(); err != nil {
				t.Fatal(err)
			}
			eject()
			if got, err := c.get(); got != "" || err != nil {
				t.Errorf("GET after the DEL on a and a's second ejection = %q, %v; want a miss", got, err)
			}
		})
	}
}

func redisStandIn(t *testing.T) standInCase {
	bin := realRedisBin(t)
	a, d := startRedisProc(t, bin, ""), startRedisProc(t, bin, "")
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{
		Shards: []shardedredis.ShardOptions{topoShard("a", a.addr, 0), topoShard("d", d.addr, 0)},
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	direct := goredis.NewClient(&goredis.Options{Addr: d.addr})
	t.Cleanup(func() { direct.Close() })
	k := keyOwnedBy(func(k string) string { return c.GetShardInfo(k).Name }, "a")
	return standInCase{
		pause:   func() { a.signal(t, syscall.SIGSTOP) },
		resume:  func() { a.signal(t, syscall.SIGCONT) },
		ejected: func() bool { return c.Stats()[0].Ejected },
		set:     func(v string) error { return c.Set(ctx, k, v, 0).Err() },
		del:     func() error { return c.Del(ctx, k).Err() },
		get: func() (string, error) {
			v, err := c.Get(ctx, k).Result()
			if errors.Is(err, goredis.Nil) {
				return "", nil
			}
			return v, err
		},
		onD: func() bool { return direct.Exists(ctx, k).Val() == 1 },
	}
}

// memcachePair starts memcached servers a and d and a client over them
// (shards "a" and "d"; EjectMode, FailureLimit 1, Timeout and RetryTimeout
// 200 ms), closed at the end of the test, when a is resumed too (SIGCONT).
func memcachePair(t *testing.T) (a, d *mcServer, c *shardedmc.ShardedClient) {
	a, d = startRealMemcached(t), startRealMemcached(t)
	t.Cleanup(func() { _ = a.proc.Signal(syscall.SIGCONT) })
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{
		Shards:  []shardedmc.ShardOptions{{Name: "a", Addr: a.addr}, {Name: "d", Addr: d.addr}},
		Timeout: 200 * time.Millisecond,
		Health:  shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return a, d, c
}

func memcacheStandIn(t *testing.T) standInCase {
	a, d, c := memcachePair(t)
	direct := gomemcache.New(d.addr)
	t.Cleanup(func() { direct.Close() })
	k := keyOwnedBy(func(k string) string { return c.GetShardInfo(k).Name }, "a")
	signal := func(sig syscall.Signal) {
		if err := a.proc.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	return standInCase{
		pause:   func() { signal(syscall.SIGSTOP); time.Sleep(50 * time.Millisecond) },
		resume:  func() { signal(syscall.SIGCONT) },
		ejected: func() bool { return c.Stats()[0].Ejected },
		set:     func(v string) error { return c.Set(&gomemcache.Item{Key: k, Value: []byte(v)}) },
		del:     func() error { return c.Delete(k) },
		get: func() (string, error) {
			it, err := c.Get(k)
			if errors.Is(err, gomemcache.ErrCacheMiss) {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			return string(it.Value), nil
		},
		onD: func() bool { _, err := direct.Get(k); return err == nil },
	}
}

// keyOwnedBy returns the first of "k:0", "k:1", ... that owner places on
// the shard named name.
func keyOwnedBy(owner func(string) string, name string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("k:%d", i); owner(k) == name {
			return k
		}
	}
}

// A CAS token is its server's: across an ejection, a token from the key's
// shard a must not meet the stand-in d's counter (fresh servers count
// alike: a's token 1 matched d's item, and a CompareAndSwap with a token
// read before a newer write overwrote it). A stand-in's token is good while
// it stands in, and not once a is back.
func TestMemcacheCASTokenAcrossEjection(t *testing.T) {
	a, _, c := memcachePair(t)
	k := keyOwnedBy(func(k string) string { return c.GetShardInfo(k).Name }, "a")
	if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	ofA, err := c.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = c.Get(k) // a times out: ejected
	if !c.Stats()[0].Ejected {
		t.Fatalf("a not ejected: %+v", c.Stats())
	}
	if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v2")}); err != nil { // on d
		t.Fatal(err)
	}
	ofA.Value = []byte("stale")
	if err := c.CompareAndSwap(ofA); !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CompareAndSwap on the stand-in with a's token: %v, want ErrCASConflict", err)
	}
	ofD, err := c.Get(k)
	if err != nil || string(ofD.Value) != "v2" {
		t.Fatalf("Get on the stand-in = %v, %v; want v2", ofD, err)
	}
	ofD.Value = []byte("v3")
	if err := c.CompareAndSwap(ofD); err != nil {
		t.Errorf("CompareAndSwap on the stand-in with its own token: %v", err)
	}
	if err := a.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); c.Stats()[0].Ejected; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a did not rejoin")
		}
	}
	if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v4")}); err != nil { // on a (flushed when it rejoined)
		t.Fatal(err)
	}
	ofD.Value = []byte("stale")
	if err := c.CompareAndSwap(ofD); !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CompareAndSwap on a with the stand-in's token: %v, want ErrCASConflict", err)
	}
	if it, err := c.Get(k); err != nil || string(it.Value) != "v4" {
		t.Errorf("Get = %v, %v; want v4", it, err)
	}
}
