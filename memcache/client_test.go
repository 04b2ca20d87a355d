package memcache_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// TestMain fails the package when a test leaves a goroutine behind (a
// connection, a call abandoned by its context).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemcacheShardedClientMethodSet: every exported method of *memcache.Client
// exists on *ShardedClient with the same signature, and each has a Context
// variant taking a context.Context first (Close excepted).
func TestMemcacheShardedClientMethodSet(t *testing.T) {
	plain := reflect.TypeFor[*gomemcache.Client]()
	sharded := reflect.TypeFor[*memcache.ShardedClient]()
	ctxType := reflect.TypeFor[interface{ Done() <-chan struct{} }]()
	n := 0
	for m := range plain.Methods() {
		n++
		got, ok := sharded.MethodByName(m.Name)
		if !ok {
			t.Errorf("ShardedClient has no method %s %v", m.Name, m.Type)
			continue
		}
		// Compare without the receiver.
		if want, have := strings.TrimPrefix(m.Type.String(), "func(*memcache.Client"), strings.TrimPrefix(got.Type.String(), "func(*memcache.ShardedClient"); want != have {
			t.Errorf("%s: ShardedClient has %s, memcache.Client %s", m.Name, got.Type, m.Type)
		}
		if m.Name == "Close" {
			continue
		}
		cm, ok := sharded.MethodByName(m.Name + "Context")
		if !ok {
			t.Errorf("ShardedClient has no method %sContext", m.Name)
			continue
		}
		if cm.Type.NumIn() != m.Type.NumIn()+1 || !cm.Type.In(1).Implements(ctxType) || cm.Type.NumOut() != m.Type.NumOut() {
			t.Errorf("%sContext has type %v for %s %v", m.Name, cm.Type, m.Name, m.Type)
		}
	}
	if n != 17 {
		t.Errorf("*memcache.Client has %d exported methods, this test was written for 17: check the new ones", n)
	}
}

// listener is a TCP listener that counts and closes the connections it gets.
type listener struct {
	addr  string
	conns atomic.Int32
}

func countingListener(t *testing.T) *listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &listener{addr: l.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			cl.conns.Add(1)
			c.Close()
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return cl
}

// refusedAddr returns a loopback address on which nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func mustClient(t *testing.T, opt *memcache.ShardedOptions) *memcache.ShardedClient {
	t.Helper()
	c, err := memcache.NewShardedClient(opt)
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

// TestMemcacheShardedClientMalformedKeys: every call with a key memcached refuses
// returns memcache.ErrMalformedKey, unwrapped, without connecting anywhere.
func TestMemcacheShardedClientMalformedKeys(t *testing.T) {
	l1, l2 := countingListener(t), countingListener(t)
	c := mustClient(t, &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: l1.addr}, {Addr: l2.addr}}})
	for _, key := range []string{"", "has space", "tab\there", "new\nline", "ctl\x01", "del\x7f", strings.Repeat("k", 251)} {
		item := &gomemcache.Item{Key: key, Value: []byte("v")}
		calls := map[string]func() error{
			"Get":            func() error { _, err := c.Get(key); return err },
			"GetAndTouch":    func() error { _, err := c.GetAndTouch(key, 10); return err },
			"GetMulti":       func() error { _, err := c.GetMulti([]string{"fine", key}); return err },
			"Set":            func() error { return c.Set(item) },
			"Add":            func() error { return c.Add(item) },
			"Replace":        func() error { return c.Replace(item) },
			"Append":         func() error { return c.Append(item) },
			"Prepend":        func() error { return c.Prepend(item) },
			"CompareAndSwap": func() error { return c.CompareAndSwap(item) },
			"Delete":         func() error { return c.Delete(key) },
			"Touch":          func() error { return c.Touch(key, 10) },
			"Increment":      func() error { _, err := c.Increment(key, 1); return err },
			"Decrement":      func() error { _, err := c.Decrement(key, 1); return err },
		}
		for name, call := range calls {
			if err := call(); err != gomemcache.ErrMalformedKey {
				t.Errorf("%s(%q) = %v, want memcache.ErrMalformedKey", name, key, err)
			}
		}
	}
	if m, err := c.GetMulti([]string{"ok", "not ok"}); m != nil || err != gomemcache.ErrMalformedKey {
		t.Errorf("GetMulti with a bad key = %v, %v; want nil, ErrMalformedKey", m, err)
	}
	if n := l1.conns.Load() + l2.conns.Load(); n != 0 {
		t.Fatalf("%d connections made for malformed keys, want 0", n)
	}
	// 250 bytes is legal: it reaches a server (which closes the connection).
	if _, err := c.Get(strings.Repeat("k", 250)); err == gomemcache.ErrMalformedKey || err == nil {
		t.Fatalf("Get of a 250-byte key: %v, want a connection error", err)
	}
	if n := l1.conns.Load() + l2.conns.Load(); n != 1 {
		t.Fatalf("%d connections for one Get, want 1", n)
	}
}

// TestMemcacheShardedClientTransportErrors: a shard that refuses connections gives
// a *shardedclient.ShardError naming it, for single-key calls; fan-outs
// give a *MultiShardError listing it.
func TestMemcacheShardedClientTransportErrors(t *testing.T) {
	down := refusedAddr(t)
	up := countingListener(t) // accepts, then closes: every call fails too
	c := mustClient(t, &memcache.ShardedOptions{Shards: []memcache.ShardOptions{
		{Name: "up", Addr: up.addr, Timeout: time.Second},
		{Name: "down", Addr: down, Timeout: time.Second},
	}})
	var downKey string
	for _, k := range testKeys(100) {
		if c.GetShardInfo(k).Index == 1 {
			downKey = k
			break
		}
	}
	_, err := c.Get(downKey)
	var se *shardedclient.ShardError
	if !errors.As(err, &se) || se.Index != 1 || se.Name != "down" || se.Addr != down {
		t.Fatalf("Get on the refused shard: %#v, want a *ShardError for shard 1 %q (%s)", err, "down", down)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		t.Fatalf("Get on the refused shard: %v, want it to wrap the dial error", err)
	}
	want := `shardedcache: shard 1 "down" (` + down + `): dial tcp ` + down + `: connect: connection refused`
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}

	err = c.Ping()
	var me *memcache.MultiShardError
	if !errors.As(err, &me) || me.Op != "Ping" || me.Reached != 2 || len(me.Shards) != 2 ||
		me.Shards[0].Index != 0 || me.Shards[1].Index != 1 || me.Shards[1].Addr != down {
		t.Fatalf("Ping: %v, want a *MultiShardError for shards 0 and 1", err)
	}
	if !strings.HasPrefix(err.Error(), `shardedcache: Ping: 2 of 2 shards failed: shard 0 "up" (`) ||
		!strings.Contains(err.Error(), `; shard 1 "down" (`+down+`): dial tcp`) {
		t.Fatalf("Ping error text: %q", err)
	}
	if !errors.As(err, &se) || se.Index != 0 {
		t.Fatalf("errors.As(Ping error, *ShardError) = %v, want the first failed shard", se)
	}
}

// TestMemcacheNewShardedClientErrors: constructor validation, each error naming
// its shard.
func TestMemcacheNewShardedClientErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  *memcache.ShardedOptions
		want string
	}{
		{"nil options", nil, "shardedcache: memcache: no servers configured or available"},
		{"no shards", &memcache.ShardedOptions{}, "no servers"},
		{"no address", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211"}, {Name: "b"}}}, `shardedcache: shard 1 ("b"): no address`},
		{"bad address", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Name: "a", Addr: "10.0.0.1"}}}, `shardedcache: shard 0 ("a"): address "10.0.0.1": `},
		{"negative timeout", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211", Timeout: -time.Second}}}, `shardedcache: shard 0 (""): timeout -1s is negative`},
		{"duplicate address", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211"}, {Addr: "10.0.0.1:11211"}}}, "shardedcache: shards 0 and 1 have the same address 10.0.0.1:11211"},
		{"duplicate name", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Name: "a", Addr: "10.0.0.1:11211"}, {Name: "a", Addr: "10.0.0.2:11211"}}}, `ring: nodes 0 and 1 have the same name "a"`},
		{"negative weight", &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211", Weight: -2}}}, `ring: node 0 (""): weight -2 is negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := memcache.NewShardedClient(tc.opt)
			if c != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewShardedClient: %v, %v; want an error containing %q", c, err, tc.want)
			}
			if (tc.opt == nil || len(tc.opt.Shards) == 0) && !errors.Is(err, gomemcache.ErrNoServers) {
				t.Fatalf("%v: want errors.Is memcache.ErrNoServers", err)
			}
		})
	}

	if _, err := memcache.NewShardedClientFromClients(nil, nil); !errors.Is(err, gomemcache.ErrNoServers) {
		t.Fatalf("NewShardedClientFromClients(nil): %v, want ErrNoServers", err)
	}
	_, err := memcache.NewShardedClientFromClients([]memcache.Shard{{Addr: "a:1", Client: gomemcache.New("10.0.0.1:11211")}, {Name: "nil", Addr: "b:1"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `shard 1 ("nil"): nil client`) {
		t.Fatalf("NewShardedClientFromClients with a nil client: %v", err)
	}
}

// TestMemcacheShardedClientAccessors: shards as configured, ring, GetShard.
func TestMemcacheShardedClientAccessors(t *testing.T) {
	c := mustClient(t, &memcache.ShardedOptions{Shards: []memcache.ShardOptions{
		{Name: "a", Addr: "10.0.0.1:11211", Timeout: 2 * time.Second, MaxIdleConns: 7},
		{Name: "b", Addr: "10.0.0.2:11211", Weight: 3},
	}})
	shards := c.Shards()
	if len(shards) != 2 || shards[0].Name != "a" || shards[0].Weight != 1 || shards[0].Addr != "10.0.0.1:11211" ||
		shards[1].Weight != 3 || shards[0].Client.Timeout != 2*time.Second || shards[0].Client.MaxIdleConns != 7 ||
		shards[1].Client.Timeout != 0 || shards[1].Client.MaxIdleConns != 0 {
		t.Fatalf("Shards() = %+v", shards)
	}
	if c.Ring().Len() != 2 {
		t.Fatalf("Ring has %d nodes", c.Ring().Len())
	}
	for _, k := range testKeys(200) {
		info := c.GetShardInfo(k)
		if c.GetShard(k) != shards[info.Index].Client || info.Name != shards[info.Index].Name || info.Index != c.Ring().Locate(k) {
			t.Fatalf("key %q: GetShardInfo %+v disagrees with GetShard or the ring", k, info)
		}
	}
}

// TestMemcacheShardedClientPlacementMatchesSelector: a ShardedClient and a Selector
// over the same servers and options place every key alike.
func TestMemcacheShardedClientPlacementMatchesSelector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []memcache.Server
		p       ring.Preset
	}{
		{"jedis/unnamed", servers(3, ""), nil},
		{"jedis/named", servers(4, "mc-"), nil},
		{"ketama/named", servers(3, "cache"), ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"ketama/unnamed", servers(3, ""), ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"spymemcached/unnamed", servers(3, ""), ring.Spymemcached{Locator: ring.SpymemcachedKetama}},
		{"gomemcache", servers(3, ""), ring.Gomemcache{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := mustSelector(t, tc.servers, tc.p)
			shards := make([]memcache.ShardOptions, len(tc.servers))
			for i, s := range tc.servers {
				shards[i] = memcache.ShardOptions{Name: s.Name, Weight: s.Weight, Addr: s.Addr}
			}
			c, err := memcache.NewShardedClient(&memcache.ShardedOptions{Shards: shards, Placement: tc.p})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, k := range testKeys(10_000) {
				if got, want := tc.servers[c.GetShardInfo(k).Index].Addr, pick(t, sel, k); got != want {
					t.Fatalf("key %q: ShardedClient shard %s, Selector %s", k, got, want)
				}
			}
		})
	}
}

// TestMemcacheShardedClientSetShards: SetShards keeps the client of a shard
// whose name, address and settings stay, builds one for anything else, and
// changes nothing on error.
func TestMemcacheShardedClientSetShards(t *testing.T) {
	dial := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no dialing here") }
	c := mustClient(t, &memcache.ShardedOptions{Shards: []memcache.ShardOptions{
		{Name: "a", Addr: "10.0.0.1:11211"},
		{Name: "b", Addr: "10.0.0.2:11211", Timeout: time.Second},
	}})
	before := c.Shards()
	err := c.SetShards([]memcache.ShardOptions{
		{Name: "a", Addr: "10.0.0.1:11211"},
		{Name: "b", Addr: "10.0.0.2:11211", Timeout: 2 * time.Second},
		{Name: "c", Addr: "10.0.0.3:11211", DialContext: dial},
	})
	if err != nil {
		t.Fatal(err)
	}
	after := c.Shards()
	if len(after) != 3 || after[0].Client != before[0].Client || after[1].Client == before[1].Client ||
		after[1].Client.Timeout != 2*time.Second || after[2].Client.DialContext == nil {
		t.Fatalf("after SetShards: %+v", after)
	}
	for _, tc := range []struct {
		shards []memcache.ShardOptions
		want   string
	}{
		{nil, "no servers"},
		{[]memcache.ShardOptions{{Addr: "10.0.0.1:11211"}, {Addr: "10.0.0.1:11211"}}, "shards 0 and 1 have the same address"},
		{[]memcache.ShardOptions{{Name: "x", Addr: "10.0.0.1:11211", Timeout: -1}}, `shard 0 ("x"): timeout -1ns is negative`},
		{[]memcache.ShardOptions{{Name: "x", Addr: "10.0.0.1:11211"}, {Name: "x", Addr: "10.0.0.2:11211"}}, `same name "x"`},
	} {
		if err := c.SetShards(tc.shards); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("SetShards(%+v): %v, want an error containing %q", tc.shards, err, tc.want)
		}
	}
	if got := c.Shards(); len(got) != 3 || got[2].Client != after[2].Client {
		t.Fatal("a failed SetShards changed the shards")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetShards([]memcache.ShardOptions{{Addr: "10.0.0.1:11211"}}); !errors.Is(err, shardedclient.ErrClosed) {
		t.Fatalf("SetShards after Close: %v, want shardedclient.ErrClosed", err)
	}
}

// TestMemcacheShardedClientHealthOptions: the health policy is checked, and
// probing works without a Probe of one's own (Ping is the default).
func TestMemcacheShardedClientHealthOptions(t *testing.T) {
	_, err := memcache.NewShardedClient(&memcache.ShardedOptions{
		Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211"}},
		Health: memcache.Health{FailureLimit: -1},
	})
	if err == nil || !strings.Contains(err.Error(), "failure limit -1 is negative") {
		t.Fatalf("negative failure limit: %v", err)
	}
	down := refusedAddr(t)
	probed := make(chan shardedclient.Event, 1)
	c := mustClient(t, &memcache.ShardedOptions{
		Shards: []memcache.ShardOptions{{Name: "down", Addr: down}},
		Health: memcache.Health{Mode: shardedclient.EjectMode, ProbeInterval: time.Millisecond, OnEvent: func(e shardedclient.Event) {
			select {
			case probed <- e:
			default:
			}
		}},
	})
	e := <-probed // the default probe dialled the dead shard
	if e.Kind != shardedclient.EventFailure || e.Name != "down" || !errors.Is(e.Err, syscall.ECONNREFUSED) {
		t.Fatalf("first health event %+v, want a refused probe of shard %q", e, "down")
	}
	if st := c.Stats()[0]; st.Ejected || st.Errors == 0 {
		t.Fatalf("the only shard: %+v; it is never ejected", st)
	}
}

// ShardedOptions.Timeout and MaxIdleConns reach every shard whose own are
// 0, shards that SetShards adds later included; a shard's own win.
func TestMemcacheSharedTimeoutAndMaxIdleConns(t *testing.T) {
	c, err := memcache.NewShardedClient(&memcache.ShardedOptions{
		Shards: []memcache.ShardOptions{
			{Name: "a", Addr: "10.0.0.1:11211"},
			{Name: "b", Addr: "10.0.0.2:11211", Timeout: time.Second, MaxIdleConns: 9},
		},
		Timeout:      250 * time.Millisecond,
		MaxIdleConns: 40,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type settings struct {
		timeout time.Duration
		idle    int
	}
	check := func(when string, want ...settings) {
		t.Helper()
		var got []settings
		for _, sh := range c.Shards() {
			got = append(got, settings{sh.Client.Timeout, sh.Client.MaxIdleConns})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: shard settings %v, want %v", when, got, want)
		}
	}
	check("new", settings{250 * time.Millisecond, 40}, settings{time.Second, 9})
	if err := c.SetShards([]memcache.ShardOptions{
		{Name: "a", Addr: "10.0.0.1:11211"},
		{Name: "b", Addr: "10.0.0.2:11211", Timeout: time.Second, MaxIdleConns: 9},
		{Name: "c", Addr: "10.0.0.3:11211", MaxIdleConns: 5},
	}); err != nil {
		t.Fatal(err)
	}
	check("after SetShards", settings{250 * time.Millisecond, 40}, settings{time.Second, 9}, settings{250 * time.Millisecond, 5})
	_, err = memcache.NewShardedClient(&memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211"}}, Timeout: -time.Second})
	if want := "shardedcache: ShardedOptions.Timeout -1s is negative"; err == nil || err.Error() != want {
		t.Errorf("negative shared Timeout: %v, want %s", err, want)
	}
}
