package integration_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/shardedclient"
)

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
