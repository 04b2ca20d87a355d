package memcache_test

import (
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

// casFixture is three memcached servers a, d and e, and a client c over
// shards "a" and "d" (EjectMode, FailureLimit 1, Timeout and RetryTimeout
// 200 ms), closed at the end of the test, when a is resumed too.
type casFixture struct {
	a, d, e *fixtures.MCServer
	c       *shardedmc.ShardedClient
	three   []shardedmc.ShardOptions // a, d and e
}

func newCASFixture(t *testing.T) *casFixture {
	f := &casFixture{a: fixtures.StartRealMemcached(t), d: fixtures.StartRealMemcached(t), e: fixtures.StartRealMemcached(t)}
	t.Cleanup(func() { _ = f.a.Proc.Signal(syscall.SIGCONT) })
	f.three = []shardedmc.ShardOptions{{Name: "a", Addr: f.a.Addr}, {Name: "d", Addr: f.d.Addr}, {Name: "e", Addr: f.e.Addr}}
	var err error
	f.c, err = shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: f.three[:2], Timeout: 200 * time.Millisecond,
		Health: shardedmc.Health{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	return f
}

// keysOfA returns n keys that shard a owns over a and d and over all three.
func (f *casFixture) keysOfA(t *testing.T, n int) []string {
	placer, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: f.three})
	if err != nil {
		t.Fatal(err)
	}
	defer placer.Close()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("cas:%d", i); f.c.GetShardInfo(k).Name == "a" && placer.GetShardInfo(k).Name == "a" {
			keys = append(keys, k)
		}
	}
	return keys
}

// advance writes 300 other keys on each server of addrs, so that their CAS
// counters are ahead of the others'.
func advance(t *testing.T, addrs ...string) {
	for _, addr := range addrs {
		mc := gomemcache.New(addr)
		for i := range 300 {
			if err := mc.Set(&gomemcache.Item{Key: fmt.Sprintf("dummy:%d", i), Value: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		mc.Close()
	}
}

// ejectA stops a and gets key, which fails and ejects it.
func (f *casFixture) ejectA(t *testing.T, key string) {
	if err := f.a.Proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = f.c.Get(key)
	if !f.c.Stats()[0].Ejected {
		t.Fatalf("a not ejected: %+v", f.c.Stats())
	}
}

// rejoinA resumes a and waits until it has rejoined.
func (f *casFixture) rejoinA(t *testing.T) {
	if err := f.a.Proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); f.c.Stats()[0].Ejected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a did not rejoin")
		}
	}
}

// setGet sets key to value through the client and returns the item Get
// then hands out, with its token.
func (f *casFixture) setGet(t *testing.T, key, value string) *gomemcache.Item {
	if err := f.c.Set(&gomemcache.Item{Key: key, Value: []byte(value)}); err != nil {
		t.Fatal(err)
	}
	it, err := f.c.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// wantRefused writes "v2" to key through the client, which lands on
// server, until server's token for it equals old's (so that only the
// client can tell them apart), then expects a CompareAndSwap with old to
// fail with ErrCASConflict and "v2" to stay.
func (f *casFixture) wantRefused(t *testing.T, what string, old *gomemcache.Item, server string) {
	t.Helper()
	direct := gomemcache.New(server)
	defer direct.Close()
	want := old.CasID & (1<<54 - 1) // the server's token, without the client's mark
	for {
		if err := f.c.Set(&gomemcache.Item{Key: old.Key, Value: []byte("v2")}); err != nil {
			t.Fatal(err)
		}
		it, err := direct.Get(old.Key)
		if err != nil {
			t.Fatal(err)
		}
		if it.CasID == want {
			break
		}
		if it.CasID > want {
			t.Fatalf("setup: %s's token on %s is %d, past %d", old.Key, server, it.CasID, want)
		}
	}
	old.Value = []byte("stale")
	if err := f.c.CompareAndSwap(old); !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Errorf("%s: CompareAndSwap of %s with token %#x = %v, want ErrCASConflict", what, old.Key, old.CasID, err)
	}
	if it, err := f.c.Get(old.Key); err != nil || string(it.Value) != "v2" {
		t.Errorf("%s: Get %s after it = %v, %v; want v2", what, old.Key, it, err)
	}
}

// A CAS token is its server's. Across an ejection, a token of the key's
// shard a must not meet the stand-in d's counter (fresh servers count
// alike: a's token matched d's item, and a CompareAndSwap with a token read
// before a newer write overwrote it); the stand-in's token is good while it
// stands in, and not once a is back.
func TestMemcacheCASTokenAcrossEjection(t *testing.T) {
	f := newCASFixture(t)
	k := f.keysOfA(t, 1)[0]
	ofA := f.setGet(t, k, "v1")
	f.ejectA(t, k)
	f.wantRefused(t, "on the stand-in, a's token", ofA, f.d.Addr)
	ofD, err := f.c.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	ofD.Value = []byte("v3")
	if err := f.c.CompareAndSwap(ofD); err != nil {
		t.Errorf("CompareAndSwap on the stand-in with its own token: %v", err)
	}
	ofD = f.setGet(t, k, "v4")
	f.rejoinA(t)
	f.wantRefused(t, "on a, back, the stand-in's token", ofD, f.a.Addr)
}

// A stand-in's token names its stand-in: a list change that makes another
// server the key's stand-in (a still ejected, the key still a's) refuses
// it, through SetShards (a new live epoch) and BeginResharding alike.
func TestMemcacheCASStandInTokenAcrossListChange(t *testing.T) {
	for name, change := range map[string]func(c *shardedmc.ShardedClient, shards []shardedmc.ShardOptions) error{
		"SetShards": (*shardedmc.ShardedClient).SetShards,
		"BeginResharding": func(c *shardedmc.ShardedClient, s []shardedmc.ShardOptions) error {
			return c.BeginResharding(s, shardedmc.ReshardOptions{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCASFixture(t)
			keys := f.keysOfA(t, 100)
			advance(t, f.d.Addr) // d's counter ahead of e's
			f.ejectA(t, keys[0])
			ofD := map[string]*gomemcache.Item{}
			for _, k := range keys {
				ofD[k] = f.setGet(t, k, "v1") // on d
			}
			if err := change(f.c, f.three); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if f.c.GetShardInfo(k).Name == "e" {
					f.wantRefused(t, "on e, d's token", ofD[k], f.e.Addr)
					return
				}
			}
			t.Fatal("no key of a that e stands in for")
		})
	}
}

// In a resharding window, a key of a (a's in both lists) that a stand-in
// serves while a is ejected gets a stand-in's token, not the window's mark
// (which is sent on as a server's once the key no longer moves): once a
// rejoins, the stand-in's token is refused on a.
func TestMemcacheCASStandInTokenInWindowAfterRejoin(t *testing.T) {
	f := newCASFixture(t)
	k := f.keysOfA(t, 1)[0]
	advance(t, f.d.Addr, f.e.Addr) // the stand-ins' counters ahead of a's
	if err := f.c.BeginResharding(f.three, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ejectA(t, k)
	old := f.setGet(t, k, "v1") // on the stand-in
	f.rejoinA(t)
	f.wantRefused(t, "on a, back, the stand-in's token", old, f.a.Addr)
}
