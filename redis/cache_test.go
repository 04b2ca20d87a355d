package redis

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// ClientSideCacheConfig in the shared options gives each shard a go-redis
// cache of its own, which the sharded client holds (the shard's
// ClientSideCache); the caller's options are not modified.
func TestCachePerShard(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	shared := &goredis.Options{Protocol: 3, ClientSideCacheConfig: &goredis.ClientSideCacheConfig{MaxEntries: 100}}
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: a.Addr()}, {Addr: b.Addr()}}, Options: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := c.ShardOptions()
	c0, ok0 := opts[0].ClientSideCache.(*goredis.LocalCache)
	c1, ok1 := opts[1].ClientSideCache.(*goredis.LocalCache)
	if !ok0 || !ok1 || c0 == c1 {
		t.Errorf("shard caches %T %p and %T %p, want two distinct *redis.LocalCache", opts[0].ClientSideCache, c0, opts[1].ClientSideCache, c1)
	}
	if shared.ClientSideCache != nil {
		t.Error("the shared options were given a cache")
	}
}

// One Cache for several shards is refused, naming both; for one shard it
// is the shard's own.
func TestCacheSharedRefused(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	one := goredis.NewLocalCache(goredis.CacheConfig{MaxEntries: 100})
	shared := &goredis.Options{Protocol: 3, ClientSideCache: one}
	_, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: a.Addr()}, {Name: "b", Addr: b.Addr()}}, Options: shared})
	want := `shardedcache: shards 0 ("a", ` + a.Addr() + `) and 1 ("b", ` + b.Addr() + `) share one ClientSideCache`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("NewShardedClient = %v, want an error starting %q", err, want)
	}
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: a.Addr()}}, Options: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ShardOptions()[0].ClientSideCache != one {
		t.Error("the one shard does not have the cache given")
	}
}

// A client given with ClientSideCacheConfig only is refused: its cache
// cannot be reached to drop the keys the client writes.
func TestCacheUnreachableRefused(t *testing.T) {
	a := miniredis.RunT(t)
	cl := goredis.NewClient(&goredis.Options{Addr: a.Addr(), Protocol: 3, ClientSideCacheConfig: &goredis.ClientSideCacheConfig{MaxEntries: 100}})
	defer cl.Close()
	_, err := NewShardedClientFromClients([]Shard{{Name: "a", Client: cl}}, nil)
	if !errors.Is(err, errUnreachableCache) || !strings.HasPrefix(err.Error(), `shardedcache: shard 0 ("a"): `) {
		t.Errorf("NewShardedClientFromClients = %v, want errUnreachableCache naming shard 0", err)
	}
}

// TestServerCachesCountsClients: a server's caches are counted per client
// that holds them (one cache may serve a shard's old and new clients); every
// DB and user of a server shares them (a user's write replaces what another
// user's cache holds), and another server has its own.
func TestServerCachesCountsClients(t *testing.T) {
	o := &goredis.Options{Addr: "127.0.0.1:7", Protocol: 3}
	s := cachesOf(o)
	for _, same := range []*goredis.Options{{Addr: "127.0.0.1:7", ClientName: "epoch-2"}, {Addr: "127.0.0.1:7", DB: 1}, {Addr: "127.0.0.1:7", Username: "u"}} {
		if cachesOf(same) != s {
			t.Fatalf("DB %d, user %q, name %q of 127.0.0.1:7 has caches of its own", same.DB, same.Username, same.ClientName)
		}
	}
	if cachesOf(&goredis.Options{Addr: "127.0.0.1:8"}) == s {
		t.Fatal("127.0.0.1:8 shares the caches of 127.0.0.1:7")
	}
	for _, anyOne := range []*goredis.Options{{Network: "unix", Addr: "/tmp/redis.sock"}, {Addr: "FailoverClient"}} {
		if cachesOf(anyOne) != anyServer {
			t.Fatalf("%s %s: a client that may reach any server is counted as one (%p, anyServer %p)", anyOne.Network, anyOne.Addr, cachesOf(anyOne), anyServer)
		}
	}
	a := serverCache{goredis.NewLocalCache(goredis.CacheConfig{}), cacheKeyPrefix(o)}
	b := serverCache{goredis.NewLocalCache(goredis.CacheConfig{}), cacheKeyPrefix(&goredis.Options{Username: "u"})}
	for _, step := range []struct {
		op   func(serverCache)
		c    serverCache
		want []serverCache
	}{
		{s.add, a, []serverCache{a}},
		{s.add, a, []serverCache{a}},
		{s.add, b, []serverCache{a, b}},
		{s.remove, a, []serverCache{a, b}}, // a's other client still holds it
		{s.remove, a, []serverCache{b}},
		{s.remove, b, nil},
	} {
		step.op(step.c)
		got := s.caches()
		if len(got) != len(step.want) || slices.ContainsFunc(step.want, func(w serverCache) bool { return !slices.Contains(got, w) }) {
			t.Fatalf("caches %v; want %v", got, step.want)
		}
	}
}

// A server's serverCaches are kept while a shard client of it is open and
// forgotten once the last has closed (or was handed back by a refused
// NewShardedClientFromClients): a process that changes its shards for
// ever does not keep one for every server it ever used.
func TestServerCachesForgottenWhenNoClientHoldsThem(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	cached := func(o goredis.Options) *goredis.Options {
		o.Protocol, o.ClientSideCache = 3, goredis.NewLocalCache(goredis.CacheConfig{MaxEntries: 10})
		return &o
	}
	c1, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: a.Addr()}, {Addr: b.Addr(), Options: cached(goredis.Options{})}}})
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := knownCaches(a.Addr()), knownCaches(b.Addr())
	if sa == nil || sb == nil || len(sb.caches()) != 1 {
		t.Fatalf("open client: serverCaches %p and %p (b's caches %d); want both, b with its one cache", sa, sb, len(sb.caches()))
	}
	c2, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: a.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if knownCaches(a.Addr()) != sa || knownCaches(b.Addr()) != nil {
		t.Fatalf("after the first client closed: a's serverCaches %p (want %p: the second client holds them), b's %p (want none)", knownCaches(a.Addr()), sa, knownCaches(b.Addr()))
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if knownCaches(a.Addr()) != nil {
		t.Fatal("after both clients closed, a's serverCaches are still known")
	}
	// Clients handed back by a refusal are counted out too: one cache for
	// two shards is refused.
	cache := goredis.NewLocalCache(goredis.CacheConfig{MaxEntries: 10})
	ca := goredis.NewClient(&goredis.Options{Addr: a.Addr(), Protocol: 3, ClientSideCache: cache})
	cb := goredis.NewClient(&goredis.Options{Addr: b.Addr(), Protocol: 3, ClientSideCache: cache})
	defer ca.Close()
	defer cb.Close()
	if _, err := NewShardedClientFromClients([]Shard{{Client: ca}, {Client: cb}}, nil); err == nil {
		t.Fatal("one cache for two shards was accepted")
	}
	if knownCaches(a.Addr()) != nil || knownCaches(b.Addr()) != nil {
		t.Fatal("after a refused NewShardedClientFromClients, its servers' serverCaches are still known")
	}
}

// cachesOf returns the serverCaches of the server of o, as joinServer finds
// them.
func cachesOf(o *goredis.Options) *serverCaches { return cachesAt(serverAddr(o)) }

// knownCaches returns the serverCaches the process keeps for addr, nil for
// none.
func knownCaches(addr string) *serverCaches {
	s, _ := cachesByServer.Load(addr)
	p, _ := s.(*serverCaches)
	return p
}

// A client joins its server's serverCaches as often as it is given (twice
// in one list, or again while a live sharded client holds it) and leaves
// as often: a refused NewShardedClientFromClients neither takes it out
// from under the live sharded client (whose writes and moves must still
// reach its cache) nor leaves it counted once all have closed; its cache,
// unused then, may serve a client of another server.
func TestServerCachesJoinedAsOftenAsGiven(t *testing.T) {
	for _, tc := range []string{"twice in one list", "again while held"} {
		t.Run(tc, func(t *testing.T) {
			a, b := miniredis.RunT(t), miniredis.RunT(t)
			cache := goredis.NewLocalCache(goredis.CacheConfig{MaxEntries: 10})
			ca := goredis.NewClient(&goredis.Options{Addr: a.Addr(), Protocol: 3, ClientSideCache: cache})
			other := goredis.NewClient(&goredis.Options{Addr: b.Addr(), Protocol: 3, ClientSideCache: cache})
			defer other.Close()
			refused := []Shard{{Name: "x", Client: ca}, {Name: "y", Client: ca}}
			var held *ShardedClient
			if tc == "again while held" {
				var err error
				if held, err = NewShardedClientFromClients([]Shard{{Client: ca}}, nil); err != nil {
					t.Fatal(err)
				}
				refused = []Shard{{Name: "x", Client: ca}, {Name: "y", Client: other}}
			}
			if _, err := NewShardedClientFromClients(refused, nil); err == nil {
				t.Fatal("one cache for two shards was accepted")
			}
			if held != nil {
				if got := joinedCaches(ca).caches(); len(got) != 1 || got[0].cache != cache {
					t.Fatalf("after the refusal, the live client's serverCaches hold %v; want its cache alone", got)
				}
				if err := held.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				ca.Close()
			}
			if s := knownCaches(a.Addr()); s != nil {
				t.Fatalf("every client of a closed or handed back: its serverCaches are still known (%d clients, %d caches)", s.clients, len(s.caches()))
			}
			cb := goredis.NewClient(&goredis.Options{Addr: b.Addr(), Protocol: 3, ClientSideCache: cache})
			defer cb.Close()
			c, err := NewShardedClientFromClients([]Shard{{Client: cb}}, nil)
			if err != nil {
				t.Fatalf("the cache that no open client holds, given to a client of another server: %v", err)
			}
			c.Close()
		})
	}
}

// Sharded clients of one server, with and without caches, created and
// closed by 8 goroutines at once: each joins the server's serverCaches that
// the process keeps while it is open (none is orphaned by a last client
// leaving at the same moment), and once all have closed the process keeps
// none, or, with a long-lived client open throughout, the long-lived
// client's, as they were.
func TestServerCachesConcurrentJoinLeave(t *testing.T) {
	for _, withLong := range []bool{false, true} {
		a := miniredis.RunT(t)
		var long *serverCaches
		if withLong {
			c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: a.Addr()}}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			long = knownCaches(a.Addr())
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for range 100 {
					o := &ShardedOptions{Shards: []ShardOptions{{Addr: a.Addr()}}}
					if g%2 == 0 {
						o.Options = &goredis.Options{Protocol: 3, ClientSideCacheConfig: &goredis.ClientSideCacheConfig{MaxEntries: 10}}
					}
					c, err := NewShardedClient(o)
					if err != nil {
						t.Error(err)
						return
					}
					if got, kept := joinedCaches(c.Shards()[0].Client), knownCaches(a.Addr()); got != kept {
						t.Errorf("an open client's serverCaches %p are not the process's %p", got, kept)
					}
					c.Close()
				}
			})
		}
		wg.Wait()
		if got := knownCaches(a.Addr()); got != long || got != nil && (got.clients != 1 || len(got.caches()) != 0) {
			t.Fatalf("with a long-lived client %v: serverCaches %p kept; want %p, with the long-lived client alone and no cache", withLong, got, long)
		}
	}
}
