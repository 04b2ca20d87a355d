package memcache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// newMemcacheClient builds a ShardedClient over servers, shard i named
// names[i] (unnamed when names is nil), closed at cleanup.
func newMemcacheClient(t *testing.T, servers []*fixtures.MCServer, names []string, p ring.Preset) *shardedmc.ShardedClient {
	t.Helper()
	shards := make([]shardedmc.ShardOptions, len(servers))
	for i, s := range servers {
		shards[i] = shardedmc.ShardOptions{Addr: s.Addr, Timeout: 5 * time.Second}
		if names != nil {
			shards[i].Name = names[i]
		}
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards, Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestMemcachePlacement: every key set through the ShardedClient is on
// exactly the server the ring names, and nowhere else, for several
// placements.
func TestMemcachePlacement(t *testing.T) {
	fixtures.ForEachMemcached(t, 3, func(t *testing.T, servers []*fixtures.MCServer) {
		for _, tc := range []struct {
			name  string
			names []string
			p     ring.Preset
		}{
			{"jedis/unnamed", nil, nil},
			{"jedis/named", []string{"mc-a", "mc-b", "mc-c"}, nil},
			{"ketama/unnamed", nil, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
			{"spymemcached/unnamed", nil, ring.Spymemcached{Locator: ring.SpymemcachedKetama}},
			{"gomemcache", nil, ring.Gomemcache{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := newMemcacheClient(t, servers, tc.names, tc.p)
				if err := c.FlushAll(); err != nil {
					t.Fatal(err)
				}
				keys := fixtures.MCKeys("place:", 1000)
				fixtures.SetAll(t, c, keys)
				held := fixtures.OnServers(t, servers, keys)
				for _, k := range keys {
					want := c.Ring().Locate(k)
					if info := c.GetShardInfo(k); info.Index != want {
						t.Fatalf("GetShardInfo(%q) = %+v, ring says %d", k, info, want)
					}
					for i := range servers {
						v, ok := held[i][k]
						if ok != (i == want) {
							t.Fatalf("key %q on server %d: %v; the ring names server %d", k, i, ok, want)
						}
						if ok && v != "v-"+k {
							t.Fatalf("key %q on server %d has %q", k, i, v)
						}
					}
				}
				total := 0
				for i, h := range held {
					if len(h) == 0 {
						t.Fatalf("server %d holds none of 1000 keys", i)
					}
					total += len(h)
				}
				if total != len(keys) {
					t.Fatalf("servers hold %d keys in all, want %d", total, len(keys))
				}
			})
		}
	})
}

// TestMemcacheGetMulti: one GetMulti over keys of all three shards returns
// every hit with its value, and no miss.
func TestMemcacheGetMulti(t *testing.T) {
	fixtures.ForEachMemcached(t, 3, func(t *testing.T, servers []*fixtures.MCServer) {
		c := newMemcacheClient(t, servers, nil, nil)
		keys := fixtures.MCKeys("multi:", 600)
		fixtures.SetAll(t, c, keys[:500])
		shardsHit := map[int]bool{}
		for _, k := range keys[:500] {
			shardsHit[c.GetShardInfo(k).Index] = true
		}
		if len(shardsHit) != 3 {
			t.Fatalf("the keys are on %d shards, want 3", len(shardsHit))
		}
		items, err := c.GetMulti(append(keys, keys[0], keys[1])) // duplicates too
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 500 {
			t.Fatalf("GetMulti returned %d items, want the 500 stored", len(items))
		}
		for _, k := range keys[:500] {
			if it := items[k]; it == nil || it.Key != k || string(it.Value) != "v-"+k {
				t.Fatalf("GetMulti: item for %q is %+v", k, it)
			}
		}
		if items, err := c.GetMulti(nil); err != nil || items == nil || len(items) != 0 {
			t.Fatalf("GetMulti(nil) = %v, %v; want an empty map", items, err)
		}
	})
}

// TestMemcacheShardDown: with one shard stopped, GetMulti returns the other
// shards' hits and a *MultiShardError naming the stopped one; single-key
// calls for its keys fail with a *ShardError, the others work.
func TestMemcacheShardDown(t *testing.T) {
	fixtures.ForEachMemcached(t, 3, func(t *testing.T, servers []*fixtures.MCServer) {
		names := []string{"mc-0", "mc-1", "mc-2"}
		c := newMemcacheClient(t, servers, names, nil)
		keys := fixtures.MCKeys("down:", 300)
		fixtures.SetAll(t, c, keys)
		const down = 1
		// Drop the idle connections first: the stopped server must be
		// dialled afresh (and refuse), not found half-dead in the pool.
		fixtures.DropIdle(t, c)
		servers[down].Stop()

		var onDown, onUp []string
		for _, k := range keys {
			if c.GetShardInfo(k).Index == down {
				onDown = append(onDown, k)
			} else {
				onUp = append(onUp, k)
			}
		}
		items, err := c.GetMulti(keys)
		if got := slices.Sorted(maps.Keys(items)); !slices.Equal(got, slices.Sorted(slices.Values(onUp))) {
			t.Fatalf("GetMulti with shard %d down returned %d items, want the %d keys of the other shards", down, len(got), len(onUp))
		}
		var me *shardedmc.MultiShardError
		if !errors.As(err, &me) || me.Op != "GetMulti" || me.Reached != 3 || len(me.Shards) != 1 {
			t.Fatalf("GetMulti error %v, want a *MultiShardError with one failed shard of 3", err)
		}
		if s := me.Shards[0]; s.Index != down || s.Name != "mc-1" || s.Addr != servers[down].Addr {
			t.Fatalf("failed shard %+v, want index %d %q (%s)", s, down, "mc-1", servers[down].Addr)
		}
		var se *shardedclient.ShardError
		if !errors.As(err, &se) || se.Index != down {
			t.Fatalf("errors.As(GetMulti error, *ShardError) = %v, want shard %d", se, down)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("GetMulti error %v does not wrap ECONNREFUSED", err)
		}
		wantMsg := fmt.Sprintf(`shardedcache: GetMulti: 1 of 3 shards failed: shard 1 "mc-1" (%s): dial tcp %s: connect: connection refused`, servers[down].Addr, servers[down].Addr)
		if err.Error() != wantMsg {
			t.Fatalf("GetMulti error text\n %s\nwant\n %s", err, wantMsg)
		}

		_, err = c.Get(onDown[0])
		if !errors.As(err, &se) || se.Index != down || se.Name != "mc-1" || se.Addr != servers[down].Addr {
			t.Fatalf("Get(%q) on the stopped shard: %v, want a *ShardError for shard %d", onDown[0], err, down)
		}
		if err := c.Set(&gomemcache.Item{Key: onDown[0], Value: []byte("x")}); !errors.As(err, &se) || se.Index != down {
			t.Fatalf("Set on the stopped shard: %v, want a *ShardError for shard %d", err, down)
		}
		if it, err := c.Get(onUp[0]); err != nil || string(it.Value) != "v-"+onUp[0] {
			t.Fatalf("Get(%q) on a live shard: %v, %v", onUp[0], it, err)
		}
		for name, call := range map[string]func() error{"Ping": c.Ping, "FlushAll": c.FlushAll, "DeleteAll": c.DeleteAll} {
			err := call()
			if !errors.As(err, &me) || me.Op != name || me.Reached != 3 || len(me.Shards) != 1 || me.Shards[0].Index != down {
				t.Fatalf("%s with shard %d down: %v, want a *MultiShardError naming only it", name, down, err)
			}
		}
		// FailureMode (the default): counted, nothing ejected, nothing moved.
		st := c.Stats()
		if st[down].Errors != 6 || st[down].Ejected || st[0].Errors != 0 || st[2].Errors != 0 {
			t.Fatalf("Stats after 6 failed calls on shard %d: %+v", down, st)
		}
		if c.GetShardInfo(onDown[0]).Index != down {
			t.Fatal("a key of the stopped shard moved in FailureMode")
		}
		// FlushAll and DeleteAll did flush the live shards.
		live := []*fixtures.MCServer{servers[0], servers[2]}
		for i, h := range fixtures.OnServers(t, live, keys) {
			if len(h) != 0 {
				t.Fatalf("live server %s still holds %d keys after FlushAll", live[i].Addr, len(h))
			}
		}
	})
}

// TestMemcacheDeleteAllFlushAll: both empty every shard.
func TestMemcacheDeleteAllFlushAll(t *testing.T) {
	fixtures.ForEachMemcached(t, 3, func(t *testing.T, servers []*fixtures.MCServer) {
		c := newMemcacheClient(t, servers, nil, nil)
		keys := fixtures.MCKeys("flush:", 300)
		for name, call := range map[string]func() error{"DeleteAll": c.DeleteAll, "FlushAll": c.FlushAll} {
			fixtures.SetAll(t, c, keys)
			held := fixtures.OnServers(t, servers, keys)
			for i, h := range held {
				if len(h) == 0 {
					t.Fatalf("before %s: server %d holds no key", name, i)
				}
			}
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i, h := range fixtures.OnServers(t, servers, keys) {
				if len(h) != 0 {
					t.Fatalf("after %s: server %d still holds %d keys", name, i, len(h))
				}
			}
		}
		if err := c.Ping(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMemcacheMalformedKeys: keys memcached refuses give
// memcache.ErrMalformedKey from every call, and no server is dialled.
func TestMemcacheMalformedKeys(t *testing.T) {
	var dials atomic.Int32
	var d net.Dialer
	shards := make([]shardedmc.Shard, 3)
	for i := range shards {
		s := fixtures.StartMiniMemcached(t)
		client := gomemcache.New(s.Addr)
		client.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}
		shards[i] = shardedmc.Shard{Addr: s.Addr, Client: client}
	}
	c, err := shardedmc.NewShardedClientFromClients(shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, key := range []string{"", "with space", "tab\t", "nl\n", "cr\r", "nul\x00", "del\x7f", strings.Repeat("x", 251)} {
		item := &gomemcache.Item{Key: key, Value: []byte("v")}
		for name, call := range map[string]func() error{
			"Get":             func() error { _, err := c.Get(key); return err },
			"GetContext":      func() error { _, err := c.GetContext(ctx, key); return err },
			"GetAndTouch":     func() error { _, err := c.GetAndTouch(key, 1); return err },
			"GetMulti":        func() error { _, err := c.GetMulti([]string{"good", key}); return err },
			"GetMultiContext": func() error { _, err := c.GetMultiContext(ctx, []string{key}); return err },
			"Set":             func() error { return c.Set(item) },
			"SetContext":      func() error { return c.SetContext(ctx, item) },
			"Add":             func() error { return c.Add(item) },
			"Replace":         func() error { return c.Replace(item) },
			"Append":          func() error { return c.Append(item) },
			"Prepend":         func() error { return c.Prepend(item) },
			"CompareAndSwap":  func() error { return c.CompareAndSwap(item) },
			"Delete":          func() error { return c.Delete(key) },
			"Touch":           func() error { return c.Touch(key, 1) },
			"Increment":       func() error { _, err := c.Increment(key, 1); return err },
			"Decrement":       func() error { _, err := c.Decrement(key, 1); return err },
		} {
			if err := call(); err != gomemcache.ErrMalformedKey {
				t.Errorf("%s(%q) = %v, want memcache.ErrMalformedKey", name, key, err)
			}
		}
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d dials for malformed keys, want 0", n)
	}
	if err := c.Set(&gomemcache.Item{Key: strings.Repeat("x", 250), Value: []byte("v")}); err != nil {
		t.Fatalf("Set of a 250-byte key: %v", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials for one Set, want 1", n)
	}
}

// TestMemcacheSameAsPlainClient runs one sequence of calls through the
// ShardedClient (3 shards) and through a plain gomemcache client (1 server)
// and requires the same values and errors: the sentinel answers identical
// (err == memcache.ErrCacheMiss ...), the other answers of the server
// (CLIENT_ERROR, a reply gomemcache does not expect) with the same text and
// not wrapped, since the shard is up.
func TestMemcacheSameAsPlainClient(t *testing.T) {
	fixtures.ForEachMemcached(t, 4, func(t *testing.T, servers []*fixtures.MCServer) {
		c := newMemcacheClient(t, servers[:3], nil, nil)
		plain := gomemcache.New(servers[3].Addr)
		t.Cleanup(func() { _ = plain.Close() })

		type api interface {
			Get(string) (*gomemcache.Item, error)
			GetAndTouch(string, int32) (*gomemcache.Item, error)
			Set(*gomemcache.Item) error
			Add(*gomemcache.Item) error
			Replace(*gomemcache.Item) error
			Append(*gomemcache.Item) error
			Prepend(*gomemcache.Item) error
			CompareAndSwap(*gomemcache.Item) error
			Delete(string) error
			Touch(string, int32) error
			Increment(string, uint64) (uint64, error)
			Decrement(string, uint64) (uint64, error)
		}
		item := func(k, v string) *gomemcache.Item { return &gomemcache.Item{Key: k, Value: []byte(v)} }
		value := func(it *gomemcache.Item, err error) (string, error) {
			if it == nil {
				return "", err
			}
			return string(it.Value), err
		}
		num := func(n uint64, err error) (string, error) { return strconv.FormatUint(n, 10), err }
		none := func(err error) (string, error) { return "", err }
		var casItem [2]*gomemcache.Item // per client: an item got for CompareAndSwap
		steps := []struct {
			name string
			run  func(a api, k string, who int) (string, error)
		}{
			{"get missing", func(a api, k string, _ int) (string, error) { return value(a.Get(k)) }},
			{"add", func(a api, k string, _ int) (string, error) { return none(a.Add(item(k, "1"))) }},
			{"add again", func(a api, k string, _ int) (string, error) { return none(a.Add(item(k, "2"))) }},
			{"get", func(a api, k string, _ int) (string, error) { return value(a.Get(k)) }},
			{"replace", func(a api, k string, _ int) (string, error) { return none(a.Replace(item(k, "10"))) }},
			{"append", func(a api, k string, _ int) (string, error) { return none(a.Append(item(k, "0"))) }},
			{"prepend", func(a api, k string, _ int) (string, error) { return none(a.Prepend(item(k, "2"))) }},
			{"get after append/prepend", func(a api, k string, _ int) (string, error) { return value(a.Get(k)) }},
			{"increment", func(a api, k string, _ int) (string, error) { return num(a.Increment(k, 5)) }},
			{"decrement below 0", func(a api, k string, _ int) (string, error) { return num(a.Decrement(k, 3000)) }},
			{"get for cas", func(a api, k string, who int) (string, error) {
				it, err := a.Get(k)
				casItem[who] = it
				return value(it, err)
			}},
			{"cas", func(a api, k string, who int) (string, error) {
				casItem[who].Value = []byte("swapped")
				return none(a.CompareAndSwap(casItem[who]))
			}},
			{"cas stale", func(a api, k string, who int) (string, error) { return none(a.CompareAndSwap(casItem[who])) }},
			{"touch", func(a api, k string, _ int) (string, error) { return none(a.Touch(k, 3600)) }},
			{"get and touch", func(a api, k string, _ int) (string, error) { return value(a.GetAndTouch(k, 3600)) }},
			{"set text", func(a api, k string, _ int) (string, error) { return none(a.Set(item(k, "text"))) }},
			{"increment text", func(a api, k string, _ int) (string, error) { return num(a.Increment(k, 1)) }},
			{"delete", func(a api, k string, _ int) (string, error) { return none(a.Delete(k)) }},
			{"delete missing", func(a api, k string, _ int) (string, error) { return none(a.Delete(k)) }},
			{"touch missing", func(a api, k string, _ int) (string, error) { return none(a.Touch(k, 10)) }},
			{"increment missing", func(a api, k string, _ int) (string, error) { return num(a.Increment(k, 1)) }},
			{"replace missing", func(a api, k string, _ int) (string, error) { return none(a.Replace(item(k, "r"))) }},
			{"append missing", func(a api, k string, _ int) (string, error) { return none(a.Append(item(k, "a"))) }},
			{"cas missing", func(a api, k string, who int) (string, error) { return none(a.CompareAndSwap(casItem[who])) }},
		}
		sentinels := []error{gomemcache.ErrCacheMiss, gomemcache.ErrNotStored, gomemcache.ErrCASConflict, gomemcache.ErrMalformedKey}
		shardsSeen := map[int]bool{}
		for _, k := range fixtures.MCKeys("same:", 12) {
			shardsSeen[c.GetShardInfo(k).Index] = true
			for _, step := range steps {
				wantV, wantErr := step.run(plain, k, 0)
				gotV, gotErr := step.run(c, k, 1)
				if gotV != wantV {
					t.Fatalf("key %q, %s: sharded value %q, plain %q", k, step.name, gotV, wantV)
				}
				switch {
				case wantErr == nil || slices.Contains(sentinels, wantErr):
					if gotErr != wantErr {
						t.Fatalf("key %q, %s: sharded error %v, plain %v", k, step.name, gotErr, wantErr)
					}
				default:
					var se *shardedclient.ShardError
					if gotErr == nil || errors.As(gotErr, &se) || gotErr.Error() != wantErr.Error() {
						t.Fatalf("key %q, %s: sharded error %v, want the plain error %q, unwrapped", k, step.name, gotErr, wantErr)
					}
				}
			}
		}
		if len(shardsSeen) != 3 {
			t.Fatalf("the keys reached %d shards, want 3", len(shardsSeen))
		}
		for i, st := range c.Stats() {
			if st.Errors != 0 || st.Requests == 0 {
				t.Fatalf("shard %d stats %+v: replies of a live server counted as failures", i, st)
			}
		}
	})
}

// TestMemcacheContext: the Context variants return ctx.Err() in a ShardError
// naming the shard when ctx ends before the shard answers, ctx.Err() and
// nothing sent when it is already done, and
// return the shard's answer otherwise; multi-shard calls keep the answers
// of the shards that did answer.
func TestMemcacheContext(t *testing.T) {
	hang := fixtures.StartHangServer(t) // registered first: its cleanup runs last
	live := []*fixtures.MCServer{fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t)}
	const hung = 1
	servers := []*fixtures.MCServer{live[0], {Addr: hang.Addr}, live[1]}
	c := newMemcacheClient(t, servers, []string{"live-0", "hung", "live-2"}, nil)

	var hungKey, liveKey string
	for _, k := range fixtures.MCKeys("ctx:", 100) {
		switch i := c.GetShardInfo(k).Index; {
		case i == hung && hungKey == "":
			hungKey = k
		case i != hung && liveKey == "":
			liveKey = k
		}
	}
	if err := c.Set(&gomemcache.Item{Key: liveKey, Value: []byte("live")}); err != nil {
		t.Fatal(err)
	}

	// Cancelled once the hung shard has the request.
	item := &gomemcache.Item{Key: hungKey, Value: []byte("v")}
	for name, call := range map[string]func(ctx context.Context) error{
		"GetContext":            func(ctx context.Context) error { _, err := c.GetContext(ctx, hungKey); return err },
		"GetAndTouchContext":    func(ctx context.Context) error { _, err := c.GetAndTouchContext(ctx, hungKey, 1); return err },
		"SetContext":            func(ctx context.Context) error { return c.SetContext(ctx, item) },
		"AddContext":            func(ctx context.Context) error { return c.AddContext(ctx, item) },
		"ReplaceContext":        func(ctx context.Context) error { return c.ReplaceContext(ctx, item) },
		"AppendContext":         func(ctx context.Context) error { return c.AppendContext(ctx, item) },
		"PrependContext":        func(ctx context.Context) error { return c.PrependContext(ctx, item) },
		"CompareAndSwapContext": func(ctx context.Context) error { return c.CompareAndSwapContext(ctx, item) },
		"DeleteContext":         func(ctx context.Context) error { return c.DeleteContext(ctx, hungKey) },
		"TouchContext":          func(ctx context.Context) error { return c.TouchContext(ctx, hungKey, 1) },
		"IncrementContext":      func(ctx context.Context) error { _, err := c.IncrementContext(ctx, hungKey, 1); return err },
		"DecrementContext":      func(ctx context.Context) error { _, err := c.DecrementContext(ctx, hungKey, 1); return err },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var reached atomic.Bool
		go func() {
			select {
			case <-hang.Requests:
				reached.Store(true)
			case <-time.After(10 * time.Second): // a safety net: the call never got there
			}
			cancel()
		}()
		if se := fixtures.WantShardError(t, name+" cancelled while the shard hangs", call(ctx), hung, hang.Addr); se.Err != context.Canceled {
			t.Errorf("%s cancelled while the shard hangs: %v, want context.Canceled", name, se.Err)
		}
		if !reached.Load() {
			t.Errorf("%s: the request never reached the hung shard", name)
		}
	}

	// A deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, err := c.GetContext(ctx, hungKey); fixtures.WantShardError(t, "GetContext past its deadline", err, hung, hang.Addr).Err != context.DeadlineExceeded {
		t.Errorf("GetContext past its deadline: %v, want context.DeadlineExceeded", err)
	}
	cancel()
	<-hang.Requests

	// Already done: nothing is sent.
	before := hang.Accepted.Load()
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := c.GetContext(done, hungKey); err != context.Canceled {
		t.Errorf("GetContext with a done context: %v, want context.Canceled", err)
	}
	if items, err := c.GetMultiContext(done, []string{hungKey, liveKey}); items != nil || err != context.Canceled {
		t.Errorf("GetMultiContext with a done context: %v, %v; want nil, context.Canceled", items, err)
	}
	if err := c.PingContext(done); err != context.Canceled {
		t.Errorf("PingContext with a done context: %v, want context.Canceled", err)
	}
	if n := hang.Accepted.Load(); n != before {
		t.Errorf("a done context dialled the hung shard %d times", n-before)
	}

	// A live shard answers through a context that can end.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if it, err := c.GetContext(ctx, liveKey); err != nil || string(it.Value) != "live" {
		t.Errorf("GetContext on a live shard: %v, %v", it, err)
	}
	if err := c.SetContext(ctx, &gomemcache.Item{Key: liveKey, Value: []byte("41")}); err != nil {
		t.Errorf("SetContext on a live shard: %v", err)
	}
	if n, err := c.IncrementContext(ctx, liveKey, 1); n != 42 || err != nil {
		t.Errorf("IncrementContext on a live shard: %d, %v; want 42", n, err)
	}
	if err := c.DeleteContext(ctx, liveKey); err != nil {
		t.Errorf("DeleteContext on a live shard: %v", err)
	}
	if _, err := c.GetContext(ctx, liveKey); err != gomemcache.ErrCacheMiss {
		t.Errorf("GetContext of a deleted key: %v, want memcache.ErrCacheMiss", err)
	}

	// Multi-shard calls: the hung shard fails with the context's error, the
	// live shards' answers are kept. The deadline is far above a local
	// round trip.
	keys := fixtures.MCKeys("ctxmulti:", 60)
	var liveKeys []string
	for _, k := range keys {
		if c.GetShardInfo(k).Index != hung {
			liveKeys = append(liveKeys, k)
			if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	hungOnly := func(name string, err error) {
		t.Helper()
		var me *shardedmc.MultiShardError
		if !errors.As(err, &me) || len(me.Shards) != 1 || me.Shards[0].Index != hung || me.Shards[0].Name != "hung" {
			t.Errorf("%s with a hung shard: %v, want a *MultiShardError naming only shard %d", name, err, hung)
		} else if !errors.Is(err, context.DeadlineExceeded) || me.Shards[0].Err != context.DeadlineExceeded {
			t.Errorf("%s: %v does not wrap context.DeadlineExceeded", name, err)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	items, err := c.GetMultiContext(ctx, keys)
	cancel()
	if got := slices.Sorted(maps.Keys(items)); !slices.Equal(got, slices.Sorted(slices.Values(liveKeys))) {
		t.Errorf("GetMultiContext returned %d items, want the %d keys of the live shards", len(got), len(liveKeys))
	}
	hungOnly("GetMultiContext", err)

	var wg sync.WaitGroup // these three run at once, each with its own deadline
	for name, call := range map[string]func(ctx context.Context) error{
		"PingContext":      c.PingContext,
		"FlushAllContext":  c.FlushAllContext,
		"DeleteAllContext": c.DeleteAllContext,
	} {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			hungOnly(name, call(ctx))
		})
	}
	wg.Wait()
	if held := fixtures.OnServers(t, live, liveKeys); len(held[0])+len(held[1]) != 0 {
		t.Errorf("the live shards still hold %d keys after FlushAllContext and DeleteAllContext", len(held[0])+len(held[1]))
	}
}

// TestMemcacheUnixSocket: a shard on a unix socket (real memcached with -s)
// next to TCP shards; each key is on the server the ring names.
func TestMemcacheUnixSocket(t *testing.T) {
	unix := fixtures.StartRealMemcachedUnix(t) // first: it skips without memcached
	servers := []*fixtures.MCServer{fixtures.StartMiniMemcached(t), unix, fixtures.StartMiniMemcached(t)}
	c := newMemcacheClient(t, servers, []string{"tcp-0", "unix-1", "tcp-2"}, nil)
	if got := c.Shards()[1].Addr; !strings.HasSuffix(got, "/memcached.sock") {
		t.Fatalf("shard 1 address %q, want the socket path", got)
	}
	keys := fixtures.MCKeys("unix:", 300)
	fixtures.SetAll(t, c, keys)
	held := fixtures.OnServers(t, servers, keys)
	for _, k := range keys {
		want := c.GetShardInfo(k).Index
		for i := range servers {
			if _, ok := held[i][k]; ok != (i == want) {
				t.Fatalf("key %q on server %d: %v; the ring names shard %d", k, i, ok, want)
			}
		}
	}
	if len(held[1]) == 0 {
		t.Fatal("the unix-socket shard holds no key")
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
}

// TestMemcacheEjectMode: in EjectMode a shard that fails FailureLimit
// times in a row leaves the ring, its keys are served by another shard,
// and once it answers again it is flushed and takes its keys back, without
// the stale values it kept.
func TestMemcacheEjectMode(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t)}
	const flaky = 1
	var down atomic.Bool
	var d net.Dialer
	var mu sync.Mutex
	var kinds []string
	rejoined := make(chan struct{})
	var once sync.Once
	shards := make([]shardedmc.ShardOptions, len(servers))
	for i, s := range servers {
		shards[i] = shardedmc.ShardOptions{Name: "mc-" + strconv.Itoa(i), Addr: s.Addr, Timeout: 5 * time.Second}
	}
	shards[flaky].DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return d.DialContext(ctx, network, addr)
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{
		Shards: shards,
		Health: shardedmc.Health{
			Mode: shardedclient.EjectMode, FailureLimit: 2, RetryTimeout: 50 * time.Millisecond,
			OnEvent: func(e shardedclient.Event) {
				mu.Lock()
				kinds = append(kinds, fmt.Sprintf("%s %d", e.Kind, e.Shard))
				mu.Unlock()
				if e.Kind == shardedclient.EventRejoined {
					once.Do(func() { close(rejoined) })
				}
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	var key string
	for _, k := range fixtures.MCKeys("eject:", 100) {
		if c.GetShardInfo(k).Index == flaky {
			key = k
			break
		}
	}
	if err := c.Set(&gomemcache.Item{Key: key, Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	fixtures.DropIdle(t, c)
	down.Store(true)

	var se *shardedclient.ShardError
	for n := 1; n <= 2; n++ {
		if _, err := c.Get(key); !errors.As(err, &se) || se.Index != flaky {
			t.Fatalf("Get %d with shard %d down: %v, want a *ShardError for it", n, flaky, err)
		}
	}
	// The second failure ejected it, before Get returned.
	moved := c.GetShardInfo(key).Index
	if moved == flaky {
		t.Fatalf("after 2 failures the key is still on shard %d", flaky)
	}
	if st := c.Stats()[flaky]; !st.Ejected || st.Ejections != 1 || st.Errors < 2 {
		t.Fatalf("Stats of the ejected shard: %+v", st)
	}
	if _, err := c.Get(key); err != gomemcache.ErrCacheMiss {
		t.Fatalf("Get on shard %d while %d is out: %v, want a miss", moved, flaky, err)
	}
	if err := c.Set(&gomemcache.Item{Key: key, Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if held := fixtures.OnServers(t, servers, []string{key}); held[moved][key] != "new" || held[flaky][key] != "old" {
		t.Fatalf("while shard %d is out: servers hold %v, want %q on %d and the stale %q on %d", flaky, held, "new", moved, "old", flaky)
	}

	down.Store(false)
	select {
	case <-rejoined:
	case <-time.After(20 * time.Second): // a safety net: the retry runs every 50ms
		t.Fatal("the shard did not rejoin")
	}
	if i := c.GetShardInfo(key).Index; i != flaky {
		t.Fatalf("after the rejoin the key is on shard %d, want %d", i, flaky)
	}
	if it, err := c.Get(key); err != gomemcache.ErrCacheMiss {
		t.Fatalf("Get after the rejoin: %v, %v; want a miss (the stale value flushed)", it, err)
	}
	if st := c.Stats()[flaky]; st.Ejected || st.Ejections != 1 {
		t.Fatalf("Stats after the rejoin: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) < 4 || kinds[0] != "failure 1" || kinds[1] != "failure 1" || kinds[2] != "ejected 1" || kinds[len(kinds)-1] != "rejoined 1" {
		t.Fatalf("events %q, want failure, failure, ejected, (failed probes), rejoined", kinds)
	}
}

// TestMemcacheSetShards: adding a shard at run time moves only the keys the
// new shard takes, removing a named one only its keys; unchanged shards
// keep their clients; calls running meanwhile see one list or the other.
func TestMemcacheSetShards(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t), fixtures.StartMiniMemcached(t)}
	opts, c := fixtures.NamedMemcache(t, servers, 3)
	keys := fixtures.MCKeys("reshard:", 1000)
	fixtures.SetAll(t, c, keys)
	before := c.Shards()

	// misses counts the keys c no longer finds, and checks that they are
	// exactly the keys the given shard now owns.
	misses := func(owner string) int {
		t.Helper()
		items, err := c.GetMulti(keys)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if items[k] == nil {
				n++
				if info := c.GetShardInfo(k); info.Name != owner {
					t.Fatalf("key %q missing on %s, want misses only for %s's keys", k, info.Name, owner)
				}
			} else if c.GetShardInfo(k).Name == owner {
				t.Fatalf("key %q found although %s owns it now", k, owner)
			}
		}
		return n
	}

	if err := c.SetShards(opts); err != nil {
		t.Fatal(err)
	}
	after := c.Shards()
	for i := range before {
		if after[i].Client != before[i].Client {
			t.Fatalf("shard %d got a new client although it did not change", i)
		}
	}
	if n := misses("mc-3"); n == 0 || n > 400 {
		t.Fatalf("%d of 1000 keys moved to the new shard, want about a quarter", n)
	}
	fixtures.SetAll(t, c, keys)

	// Remove mc-1 from the middle: named shards keep their places, so only
	// mc-1's keys miss.
	owner := map[string]string{}
	for _, k := range keys {
		owner[k] = c.GetShardInfo(k).Name
	}
	if err := c.SetShards([]shardedmc.ShardOptions{opts[0], opts[2], opts[3]}); err != nil {
		t.Fatal(err)
	}
	items, err := c.GetMulti(keys)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, k := range keys {
		if wasOnRemoved := owner[k] == "mc-1"; (items[k] == nil) != wasOnRemoved {
			t.Fatalf("key %q of %s: found %v; only the removed shard's keys should miss", k, owner[k], items[k] != nil)
		}
		if owner[k] == "mc-1" {
			lost++
		} else if now := c.GetShardInfo(k).Name; now != owner[k] {
			t.Fatalf("key %q moved from %s to %s, though its shard stayed", k, owner[k], now)
		}
	}
	if lost == 0 {
		t.Fatal("the removed shard owned no key")
	}

	// Errors change nothing.
	if err := c.SetShards(nil); !errors.Is(err, gomemcache.ErrNoServers) {
		t.Fatalf("SetShards(nil): %v, want ErrNoServers", err)
	}
	if err := c.SetShards([]shardedmc.ShardOptions{{Addr: "nowhere"}}); err == nil || !strings.Contains(err.Error(), `shard 0 (""): address "nowhere"`) {
		t.Fatalf("SetShards with a bad address: %v", err)
	}
	if n := len(c.Shards()); n != 3 {
		t.Fatalf("after failed SetShards calls the client has %d shards, want 3", n)
	}

	// Calls while the list changes: every Get hits or misses, none fails.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Get(keys[i%len(keys)]); err != nil && err != gomemcache.ErrCacheMiss {
					t.Errorf("Get during SetShards: %v", err)
					return
				}
			}
		})
	}
	for i := range 50 {
		next := opts
		if i%2 == 0 {
			next = opts[:3]
		}
		if err := c.SetShards(next); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
}
