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

const casServerBits = 1<<54 - 1

// bumpTo sets key through set until server's item for key has CAS id
// want; it fails the test if it passes it.
func bumpTo(t *testing.T, server *gomemcache.Client, key string, want uint64, set func() error) {
	t.Helper()
	for range 10000 {
		if err := set(); err != nil {
			t.Fatal(err)
		}
		it, err := server.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if it.CasID == want {
			return
		}
		if it.CasID > want {
			t.Fatalf("setup: CAS id of %s is %d, past %d", key, it.CasID, want)
		}
	}
	t.Fatal("setup: CAS id not reached")
}

// While a is ejected, d stands in for a's key k and hands out a token
// marked with the live epoch. BeginResharding (a stays ejected, k stays
// a's) makes e k's stand-in: d's token is refused there, even when e's
// counter has reached it, and e's newer value stays.
func TestMemcacheCASStandInTokenAcrossBeginResharding(t *testing.T) {
	a, d, e := startRealMemcached(t), startRealMemcached(t), startRealMemcached(t)
	t.Cleanup(func() { _ = a.proc.Signal(syscall.SIGCONT) })
	health := shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond}
	two := []shardedmc.ShardOptions{{Name: "a", Addr: a.addr}, {Name: "d", Addr: d.addr}}
	three := append(append([]shardedmc.ShardOptions(nil), two...), shardedmc.ShardOptions{Name: "e", Addr: e.addr})
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: two, Timeout: 200 * time.Millisecond, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	placer, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: three})
	if err != nil {
		t.Fatal(err)
	}
	defer placer.Close()
	owner := func(k string) string { return c.GetShardInfo(k).Name }
	var cands []string
	for i := 0; len(cands) < 100; i++ {
		if k := fmt.Sprintf("cas:%d", i); owner(k) == "a" && placer.GetShardInfo(k).Name == "a" {
			cands = append(cands, k)
		}
	}
	onD, onE := gomemcache.New(d.addr), gomemcache.New(e.addr)
	defer onD.Close()
	defer onE.Close()
	for i := range 300 { // d's counter ahead of e's
		if err := onD.Set(&gomemcache.Item{Key: fmt.Sprintf("dummy:%d", i), Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = c.Get(cands[0])
	if !c.Stats()[0].Ejected {
		t.Fatal("a not ejected")
	}
	tokens := map[string]*gomemcache.Item{}
	for _, k := range cands {
		if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v1")}); err != nil { // on d
			t.Fatal(err)
		}
		it, err := c.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		tokens[k] = it
	}
	if err := c.BeginResharding(three, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	k := ""
	for _, s := range cands {
		if owner(s) == "e" {
			k = s
			break
		}
	}
	if k == "" {
		t.Fatal("no key of a that e stands in for")
	}
	old := tokens[k]
	bumpTo(t, onE, k, old.CasID&casServerBits, func() error {
		return c.Set(&gomemcache.Item{Key: k, Value: []byte("v2")}) // on e, standing in now
	})
	old.Value = []byte("stale")
	err = c.CompareAndSwap(old)
	got, gerr := c.Get(k)
	if !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CompareAndSwap of %s with d's token %#x (a ejected, e its stand-in since BeginResharding) = %v; want ErrCASConflict", k, old.CasID, err)
	}
	if gerr != nil || string(got.Value) != "v2" {
		t.Errorf("Get %s = %v, %v; want \"v2\"", k, got, gerr)
	} else {
		t.Logf("Get %s = %q", k, got.Value)
	}
}

// The same across SetShards adding e: the list change is a new live epoch,
// so d's token is refused on e (it was taken for e's, with the epoch
// unchanged, and overwrote e's newer value).
func TestMemcacheCASStandInTokenAcrossSetShards(t *testing.T) {
	a, d, e := startRealMemcached(t), startRealMemcached(t), startRealMemcached(t)
	t.Cleanup(func() { _ = a.proc.Signal(syscall.SIGCONT) })
	health := shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond}
	two := []shardedmc.ShardOptions{{Name: "a", Addr: a.addr}, {Name: "d", Addr: d.addr}}
	three := append(append([]shardedmc.ShardOptions(nil), two...), shardedmc.ShardOptions{Name: "e", Addr: e.addr})
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: two, Timeout: 200 * time.Millisecond, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	placer, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: three})
	if err != nil {
		t.Fatal(err)
	}
	defer placer.Close()
	owner := func(k string) string { return c.GetShardInfo(k).Name }
	var cands []string
	for i := 0; len(cands) < 100; i++ {
		if k := fmt.Sprintf("cas:%d", i); owner(k) == "a" && placer.GetShardInfo(k).Name == "a" {
			cands = append(cands, k)
		}
	}
	onD, onE := gomemcache.New(d.addr), gomemcache.New(e.addr)
	defer onD.Close()
	defer onE.Close()
	for i := range 300 { // d's counter ahead of e's
		if err := onD.Set(&gomemcache.Item{Key: fmt.Sprintf("dummy:%d", i), Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = c.Get(cands[0])
	if !c.Stats()[0].Ejected {
		t.Fatal("a not ejected")
	}
	tokens := map[string]*gomemcache.Item{}
	for _, k := range cands {
		if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v1")}); err != nil { // on d
			t.Fatal(err)
		}
		it, err := c.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		tokens[k] = it
	}
	if err := c.SetShards(three); err != nil {
		t.Fatal(err)
	}
	k := ""
	for _, s := range cands {
		if owner(s) == "e" {
			k = s
			break
		}
	}
	if k == "" {
		t.Fatal("no key of a that e stands in for")
	}
	old := tokens[k]
	bumpTo(t, onE, k, old.CasID&casServerBits, func() error {
		return c.Set(&gomemcache.Item{Key: k, Value: []byte("v2")}) // on e, standing in now
	})
	old.Value = []byte("stale")
	err = c.CompareAndSwap(old)
	got, gerr := c.Get(k)
	if !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CompareAndSwap of %s with d's token %#x (a ejected, e its stand-in since SetShards) = %v; want ErrCASConflict", k, old.CasID, err)
	}
	if gerr != nil || string(got.Value) != "v2" {
		t.Errorf("Get %s = %v, %v; want \"v2\"", k, got, gerr)
	} else {
		t.Logf("Get %s = %q", k, got.Value)
	}
}

// In a resharding window, a key of a (a's in both lists) that a stand-in
// serves while a is ejected gets a stand-in's token, not the window's mark
// (which serverToken sends on as a server's once the key no longer moves):
// once a rejoins, the stand-in's token is refused on a, even when a's
// counter has reached it.
func TestMemcacheCASStandInTokenInWindowAfterRejoin(t *testing.T) {
	a, d, e := startRealMemcached(t), startRealMemcached(t), startRealMemcached(t)
	t.Cleanup(func() { _ = a.proc.Signal(syscall.SIGCONT) })
	health := shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond}
	two := []shardedmc.ShardOptions{{Name: "a", Addr: a.addr}, {Name: "d", Addr: d.addr}}
	three := append(append([]shardedmc.ShardOptions(nil), two...), shardedmc.ShardOptions{Name: "e", Addr: e.addr})
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: two, Timeout: 200 * time.Millisecond, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	placer, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: three})
	if err != nil {
		t.Fatal(err)
	}
	defer placer.Close()
	owner := func(k string) string { return c.GetShardInfo(k).Name }
	k := ""
	for i := 0; k == ""; i++ {
		if s := fmt.Sprintf("cas:%d", i); owner(s) == "a" && placer.GetShardInfo(s).Name == "a" {
			k = s
		}
	}
	for _, addr := range []string{d.addr, e.addr} { // the stand-ins' counters ahead of a's
		mc := gomemcache.New(addr)
		for i := range 300 {
			if err := mc.Set(&gomemcache.Item{Key: fmt.Sprintf("dummy:%d", i), Value: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		mc.Close()
	}
	if err := c.BeginResharding(three, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = c.Get(k)
	if !c.Stats()[0].Ejected {
		t.Fatal("a not ejected")
	}
	if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v1")}); err != nil { // on the stand-in
		t.Fatal(err)
	}
	old, err := c.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: stand-in %s, token %#x", k, owner(k), old.CasID)
	if err := a.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); c.Stats()[0].Ejected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a still ejected")
		}
	}
	onA := gomemcache.New(a.addr)
	defer onA.Close()
	bumpTo(t, onA, k, old.CasID&casServerBits, func() error {
		return c.Set(&gomemcache.Item{Key: k, Value: []byte("v2")}) // on a, back
	})
	old.Value = []byte("stale")
	err = c.CompareAndSwap(old)
	if !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("CompareAndSwap of %s on a (rejoined) with the stand-in's token %#x = %v; want ErrCASConflict", k, old.CasID, err)
	}
	if got, gerr := c.Get(k); gerr != nil || string(got.Value) != "v2" {
		t.Errorf("Get %s after it = %q, %v; want \"v2\" (a's newer value)", k, itemValue(got), gerr)
	}
}

func itemValue(it *gomemcache.Item) string {
	if it == nil {
		return ""
	}
	return string(it.Value)
}
