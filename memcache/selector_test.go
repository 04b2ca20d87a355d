package memcache_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/daangn/minimemcached"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

// testKeys returns n keys "key:0" ... "key:<n-1>".
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	return keys
}

// servers returns n servers 10.0.0.1:11211, 10.0.0.2:11211, ..., named
// with the given prefix ("" for unnamed).
func servers(n int, namePrefix string) []memcache.Server {
	out := make([]memcache.Server, n)
	for i := range out {
		out[i].Addr = fmt.Sprintf("10.0.0.%d:11211", i+1)
		if namePrefix != "" {
			out[i].Name = namePrefix + strconv.Itoa(i)
		}
	}
	return out
}

func nodesOf(servers []memcache.Server) []ring.Node {
	nodes := make([]ring.Node, len(servers))
	for i, s := range servers {
		nodes[i] = ring.Node{Name: s.Name, Weight: s.Weight, Addr: s.Addr}
	}
	return nodes
}

func mustSelector(t testing.TB, srvs []memcache.Server, p ring.Preset) *memcache.Selector {
	t.Helper()
	sel, err := memcache.NewSelector(srvs, p)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// pick returns the address of the server that owns key. For a key that is
// not safe on the wire (empty, over 250 bytes, ...) it checks that
// PickServer refuses it with memcache.ErrMalformedKey, and returns the
// server the ring places it on, which the peers' vectors still name.
func pick(t testing.TB, sel *memcache.Selector, key string) string {
	t.Helper()
	a, err := sel.PickServer(key)
	if !wireSafe(key) {
		if a != nil || err != gomemcache.ErrMalformedKey {
			t.Fatalf("PickServer(%q) = %v, %v; want nil, memcache.ErrMalformedKey", key, a, err)
		}
		var addrs []string
		_ = sel.Each(func(a net.Addr) error { addrs = append(addrs, a.String()); return nil })
		return addrs[sel.Ring().Locate(key)]
	}
	if err != nil {
		t.Fatalf("PickServer(%q): %v", key, err)
	}
	return a.String()
}

// wireSafe is the key rule the package documents, written out for the tests.
func wireSafe(key string) bool {
	return key != "" && len(key) <= 250 && !strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// TestMemcacheSelectorPlacementMatchesRing: for 10,000 keys, PickServer returns the
// address of the server that ring.Locate names, for each layout.
func TestMemcacheSelectorPlacementMatchesRing(t *testing.T) {
	weighted := servers(4, "")
	weighted[1].Weight, weighted[3].Weight = 2, 3
	for _, tc := range []struct {
		name    string
		servers []memcache.Server
		p       ring.Preset
	}{
		{"jedis/unnamed", servers(3, ""), nil},
		{"jedis/named-weighted", func() []memcache.Server { s := servers(4, "mc-"); s[2].Weight = 3; return s }(), nil},
		{"jedis/keytags", servers(5, "mc-"), ring.Jedis{KeyTags: true}},
		{"ketama/unnamed-weighted", weighted, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"ketama/named", servers(3, "cache"), ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"spymemcached/unnamed", servers(4, ""), ring.Spymemcached{Locator: ring.SpymemcachedKetama}},
		{"gomemcache", servers(4, ""), ring.Gomemcache{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := mustSelector(t, tc.servers, tc.p)
			r, err := ring.New(nodesOf(tc.servers), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, len(tc.servers))
			for _, k := range testKeys(10_000) {
				want := r.Locate(k)
				if got := pick(t, sel, k); got != tc.servers[want].Addr {
					t.Fatalf("PickServer(%q) = %s, want server %d %s", k, got, want, tc.servers[want].Addr)
				}
				counts[want]++
			}
			for i, n := range counts {
				if n == 0 {
					t.Errorf("server %d got no key of 10,000: %v", i, counts)
				}
			}
		})
	}
}

// TestMemcacheSelectorEach: Each visits every server once, in list order, and stops
// at the first error.
func TestMemcacheSelectorEach(t *testing.T) {
	srvs := servers(5, "")
	srvs[2].Addr = "/var/run/memcached/mc2.sock"
	sel := mustSelector(t, srvs, nil)
	var got []string
	if err := sel.Each(func(a net.Addr) error { got = append(got, a.Network()+" "+a.String()); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{"tcp 10.0.0.1:11211", "tcp 10.0.0.2:11211", "unix /var/run/memcached/mc2.sock", "tcp 10.0.0.4:11211", "tcp 10.0.0.5:11211"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Each visited %q, want %q", got, want)
	}

	stop := errors.New("stop")
	calls := 0
	err := sel.Each(func(a net.Addr) error {
		calls++
		if a.String() == "10.0.0.2:11211" {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Fatalf("Each with an error at server 1: err %v after %d calls, want %v after 2", err, calls, stop)
	}
}

// TestMemcacheSelectorSetServersAddMovesOnlyToNewServer: appending a 4th server
// moves keys only to it, and exactly the keys the new ring gives it.
func TestMemcacheSelectorSetServersAddMovesOnlyToNewServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    ring.Preset
	}{
		{"jedis", nil},
		{"ketama", ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			four := servers(4, "")
			sel := mustSelector(t, four[:3], tc.p)
			keys := testKeys(10_000)
			before := make([]string, len(keys))
			for i, k := range keys {
				before[i] = pick(t, sel, k)
			}
			if err := sel.SetServers(four); err != nil {
				t.Fatal(err)
			}
			r4, err := ring.New(nodesOf(four), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			moved, onNew := 0, 0
			for i, k := range keys {
				after := pick(t, sel, k)
				if r4.Locate(k) == 3 {
					onNew++
				}
				if after == before[i] {
					continue
				}
				moved++
				if after != four[3].Addr {
					t.Fatalf("key %q moved from %s to %s, not to the new server %s", k, before[i], after, four[3].Addr)
				}
			}
			if moved != onNew {
				t.Fatalf("%d keys moved, want the %d keys the new ring gives to server 3", moved, onNew)
			}
			if moved < 1500 || moved > 3500 {
				t.Fatalf("%d of 10,000 keys moved to the 4th server, want about a quarter", moved)
			}
			t.Logf("%s: %d of 10,000 keys moved, all to the new server", tc.name, moved)
		})
	}
}

// TestMemcacheSelectorSetServersRemoveMovesOnlyItsKeys: removing a server from the
// middle of the list moves only its keys when the others keep their
// identity: named servers, or ketama's address labels.
func TestMemcacheSelectorSetServersRemoveMovesOnlyItsKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []memcache.Server
		p       ring.Preset
	}{
		{"jedis/named", servers(4, "mc-"), nil},
		{"ketama/unnamed", servers(4, ""), ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"spymemcached/unnamed", servers(4, ""), ring.Spymemcached{Locator: ring.SpymemcachedKetama}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := mustSelector(t, tc.servers, tc.p)
			removed := tc.servers[1].Addr
			keys := testKeys(10_000)
			before := make([]string, len(keys))
			for i, k := range keys {
				before[i] = pick(t, sel, k)
			}
			rest := append(append([]memcache.Server(nil), tc.servers[:1]...), tc.servers[2:]...)
			if err := sel.SetServers(rest); err != nil {
				t.Fatal(err)
			}
			moved := 0
			for i, k := range keys {
				after := pick(t, sel, k)
				if before[i] == removed {
					moved++
					if after == removed {
						t.Fatalf("key %q still on the removed server", k)
					}
				} else if after != before[i] {
					t.Fatalf("key %q of a remaining server moved from %s to %s", k, before[i], after)
				}
			}
			if moved == 0 {
				t.Fatal("the removed server owned no key")
			}
		})
	}
}

// TestMemcacheSelectorPickServerAllocs: PickServer allocates nothing.
func TestMemcacheSelectorPickServerAllocs(t *testing.T) {
	for _, p := range []ring.Preset{nil, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}, ring.Jedis{KeyTags: true}, ring.Gomemcache{}} {
		sel := mustSelector(t, servers(3, ""), p)
		keys := testKeys(64)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := sel.PickServer(keys[i%len(keys)]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Fatalf("PickServer allocates %v times per call, want 0", allocs)
		}
	}
}

// TestMemcacheSelectorErrors: the constructor's and SetServers's errors, and the
// zero Selector.
func TestMemcacheSelectorErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []memcache.Server
		p       ring.Preset
		want    string // substring of the error
	}{
		{"nil list", nil, nil, "shardedcache: memcache: no servers configured or available"},
		{"empty list", []memcache.Server{}, nil, "no servers"},
		{"no address", []memcache.Server{{Addr: "10.0.0.1:11211"}, {Name: "b"}}, nil, `shardedcache: server 1 ("b"): no address`},
		{"no port", []memcache.Server{{Addr: "10.0.0.1"}}, nil, `shardedcache: server 0 (""): address "10.0.0.1": `},
		{"bad port", []memcache.Server{{Addr: "10.0.0.1:11211"}, {Name: "c", Addr: "10.0.0.2:99999"}}, nil, `server 1 ("c"): address "10.0.0.2:99999": `},
		{"duplicate name", []memcache.Server{{Name: "a", Addr: "10.0.0.1:11211"}, {Name: "a", Addr: "10.0.0.2:11211"}}, nil, `ring: nodes 0 and 1 have the same name "a"`},
		{"negative weight", []memcache.Server{{Addr: "10.0.0.1:11211"}, {Name: "w", Weight: -1, Addr: "10.0.0.2:11211"}}, nil, `ring: node 1 ("w"): weight -1 is negative`},
		{"duplicate address", []memcache.Server{{Addr: "10.0.0.1:11211"}, {Addr: "10.0.0.2:11211"}, {Name: "x", Addr: "10.0.0.1:11211"}}, nil, "shardedcache: servers 0 and 2 have the same address 10.0.0.1:11211"},
		{"duplicate ketama label", []memcache.Server{{Addr: "10.0.0.1:11211"}, {Name: "10.0.0.1", Addr: "10.0.0.2:11211"}}, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}, `same ketama label "10.0.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := memcache.NewSelector(tc.servers, tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSelector: %v, want an error containing %q", err, tc.want)
			}
			if sel != nil {
				t.Fatal("NewSelector returned a Selector with its error")
			}
			if len(tc.servers) == 0 && !errors.Is(err, gomemcache.ErrNoServers) {
				t.Fatalf("NewSelector with no server: %v, want errors.Is memcache.ErrNoServers", err)
			}
			// SetServers fails alike and keeps the old list.
			sel = mustSelector(t, servers(2, ""), tc.p)
			if err := sel.SetServers(tc.servers); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetServers: %v, want an error containing %q", err, tc.want)
			}
			if got := len(sel.Servers()); got != 2 {
				t.Fatalf("after a failed SetServers the Selector has %d servers, want the old 2", got)
			}
		})
	}

	var zero memcache.Selector
	if a, err := zero.PickServer("k"); err != gomemcache.ErrNoServers || a != nil {
		t.Fatalf("zero Selector: PickServer = %v, %v; want nil, memcache.ErrNoServers", a, err)
	}
	if err := zero.Each(func(net.Addr) error { t.Fatal("Each called f on a zero Selector"); return nil }); err != nil {
		t.Fatal(err)
	}
	if zero.Ring() != nil || zero.Servers() != nil {
		t.Fatal("zero Selector has a ring or servers")
	}
	if err := zero.SetServers(servers(2, "")); err != nil {
		t.Fatal(err)
	}
	if got := pick(t, &zero, "key:1"); got != "10.0.0.1:11211" && got != "10.0.0.2:11211" {
		t.Fatalf("zero Selector after SetServers: PickServer = %s", got)
	}
}

// TestMemcacheSelectorAddresses: unix socket paths, host names resolved once, and
// PickServer accepts any key (gomemcache's ServerList does; the client
// refuses malformed keys itself).
func TestMemcacheSelectorAddresses(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "memcached.sock")
	sel := mustSelector(t, []memcache.Server{{Addr: sock}, {Addr: "localhost:11212"}, {Addr: "[::1]:11213"}}, nil)
	var got []string
	_ = sel.Each(func(a net.Addr) error { got = append(got, a.Network()+" "+a.String()); return nil })
	if got[0] != "unix "+sock {
		t.Errorf("socket path resolved to %q, want %q", got[0], "unix "+sock)
	}
	if got[1] != "tcp 127.0.0.1:11212" && got[1] != "tcp [::1]:11212" {
		t.Errorf("localhost:11212 resolved to %q", got[1])
	}
	if got[2] != "tcp [::1]:11213" {
		t.Errorf("[::1]:11213 resolved to %q", got[2])
	}
	// The servers keep the addresses as given (ketama labels use them).
	if s := sel.Servers(); s[1].Addr != "localhost:11212" || s[1].Weight != 1 {
		t.Errorf("Servers()[1] = %+v, want the address as given and weight 1", s[1])
	}
	for _, key := range []string{"", "has space", "ctl\x01", strings.Repeat("x", 1000)} {
		pick(t, sel, key)
	}
}

// TestMemcacheSelectorConcurrentSetServers runs PickServer and Each against
// SetServers (for the race detector): every answer is an address of the old
// list or of the new one.
func TestMemcacheSelectorConcurrentSetServers(t *testing.T) {
	a, b := servers(3, ""), servers(5, "")
	valid := map[string]bool{}
	for _, s := range b {
		valid[s.Addr] = true
	}
	sel := mustSelector(t, a, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i, k := range testKeys(2000) {
				if got := pick(t, sel, k); !valid[got] {
					t.Errorf("PickServer(%q) = %s", k, got)
					return
				}
				if i%100 == g {
					n := 0
					_ = sel.Each(func(net.Addr) error { n++; return nil })
					if n != 3 && n != 5 {
						t.Errorf("Each visited %d servers, want 3 or 5", n)
						return
					}
				}
			}
		})
	}
	for i := range 200 {
		next := a
		if i%2 == 0 {
			next = b
		}
		if err := sel.SetServers(next); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// startMini starts n minimemcached servers on random ports.
func startMini(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		m, err := minimemcached.Run(&minimemcached.Config{Port: 0})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", m.Port())
	}
	return addrs
}

// TestMemcacheNewFromSelector: a plain gomemcache client over a Selector stores
// each key on exactly the server the Selector picks.
func TestMemcacheNewFromSelector(t *testing.T) {
	addrs := startMini(t, 3)
	srvs := make([]memcache.Server, len(addrs))
	direct := make([]*gomemcache.Client, len(addrs))
	for i, a := range addrs {
		srvs[i] = memcache.Server{Name: "mc-" + strconv.Itoa(i), Addr: a}
		direct[i] = gomemcache.New(a)
	}
	sel := mustSelector(t, srvs, nil)
	client := gomemcache.NewFromSelector(sel)
	t.Cleanup(func() {
		for _, c := range append(direct, client) {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	if err := client.Ping(); err != nil {
		t.Fatal(err)
	}
	keys := testKeys(300)
	for _, k := range keys {
		if err := client.Set(&gomemcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
			t.Fatal(err)
		}
	}
	perServer := make([]int, len(addrs))
	for _, k := range keys {
		want := pick(t, sel, k)
		for i, d := range direct {
			it, err := d.Get(k)
			switch {
			case err == gomemcache.ErrCacheMiss:
				if addrs[i] == want {
					t.Fatalf("key %q is not on %s, the server PickServer names", k, want)
				}
			case err != nil:
				t.Fatal(err)
			case addrs[i] != want:
				t.Fatalf("key %q is on %s, PickServer names %s", k, addrs[i], want)
			case string(it.Value) != "v-"+k:
				t.Fatalf("key %q: value %q", k, it.Value)
			default:
				perServer[i]++
			}
		}
	}
	for i, n := range perServer {
		if n == 0 {
			t.Fatalf("server %d holds none of 300 keys: %v", i, perServer)
		}
	}
	got, err := client.GetMulti(keys)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("GetMulti: %d of %d keys, %v", len(got), len(keys), err)
	}
}

// TestMemcacheSelectorRefusesUnsafeKeys: a gomemcache client over a Selector,
// and a shard client handed out by GetShard, send nothing for a key that is
// unsafe on the wire, the empty key included (gomemcache's own check lets it
// through): every keyed call returns memcache.ErrMalformedKey with no
// connection made. gomemcache's DeleteAll, which picks the empty key's
// server, is refused the same way; FlushAll reaches every server.
func TestMemcacheSelectorRefusesUnsafeKeys(t *testing.T) {
	l1, l2 := countingListener(t), countingListener(t)
	sel := mustSelector(t, []memcache.Server{{Addr: l1.addr}, {Addr: l2.addr}}, nil)
	plain := gomemcache.NewFromSelector(sel)
	sharded := mustClient(t, &memcache.ShardedOptions{Shards: []memcache.ShardOptions{{Addr: l1.addr}, {Addr: l2.addr}}})
	for _, key := range []string{"", " ", "a b", "a\r\nflush_all", "nul\x00", "del\x7f", strings.Repeat("k", 251)} {
		if a, err := sel.PickServer(key); a != nil || err != gomemcache.ErrMalformedKey {
			t.Errorf("PickServer(%q) = %v, %v; want nil, ErrMalformedKey", key, a, err)
		}
		for name, c := range map[string]*gomemcache.Client{"NewFromSelector": plain, "GetShard": sharded.GetShard("k")} {
			item := &gomemcache.Item{Key: key, Value: []byte("flush_all")}
			for op, err := range map[string]error{
				"Set":      c.Set(item),
				"Add":      c.Add(item),
				"Get":      second(c.Get(key)),
				"GetMulti": second(c.GetMulti([]string{key})),
				"Delete":   c.Delete(key),
			} {
				if err != gomemcache.ErrMalformedKey {
					t.Errorf("%s: %s(%q) = %v, want ErrMalformedKey", name, op, key, err)
				}
			}
		}
	}
	if err := plain.DeleteAll(); err != gomemcache.ErrMalformedKey {
		t.Errorf("gomemcache DeleteAll over a Selector = %v, want ErrMalformedKey", err)
	}
	if n := l1.conns.Load() + l2.conns.Load(); n != 0 {
		t.Fatalf("%d connections made for unsafe keys, want 0", n)
	}
}

func second[T any](_ T, err error) error { return err }

// A Selector's servers can be ejected and rejoined: the ejected server owns
// nothing, the others keep their keys on a consistent ring, PickServer
// follows ring.Ring.Eject of the same ring, and Rejoin restores every key.
func TestSelectorEjectRejoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    ring.Preset
	}{
		{"jedis", nil},
		{"ketama", ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"gomemcache", ring.Gomemcache{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvs := servers(4, "")
			sel := mustSelector(t, srvs, tc.p)
			want, err := ring.New(nodesOf(srvs), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if err := sel.Eject(2); err != nil {
				t.Fatal(err)
			}
			if !sel.Ejected(2) || sel.Ejected(1) || sel.Ejected(9) || sel.Ejected(-1) {
				t.Fatal("Ejected reports the wrong servers")
			}
			ejected, err := want.Eject(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range testKeys(2000) {
				got, err := sel.PickServer(k)
				if err != nil {
					t.Fatal(err)
				}
				if wantAddr := srvs[ejected.Locate(k)].Addr; got.String() != wantAddr {
					t.Fatalf("%s: PickServer(%q) = %s, want %s", tc.name, k, got, wantAddr)
				}
				if got.String() == srvs[2].Addr {
					t.Fatalf("%q still goes to the ejected server", k)
				}
			}
			if err := sel.Rejoin(2); err != nil {
				t.Fatal(err)
			}
			for _, k := range testKeys(2000) {
				got, _ := sel.PickServer(k)
				if got.String() != srvs[want.Locate(k)].Addr {
					t.Fatalf("after Rejoin %q goes to %s, want %s", k, got, srvs[want.Locate(k)].Addr)
				}
			}
			if err := sel.Eject(0, 1, 2, 3); err == nil || sel.Ejected(0) {
				t.Fatalf("ejecting every server: %v; server 0 ejected: %v", err, sel.Ejected(0))
			}
			if err := sel.Eject(4); err == nil || !strings.Contains(err.Error(), "node 4: index out of range [0, 4)") {
				t.Fatalf("Eject(4): %v", err)
			}
		})
	}
	var zero memcache.Selector
	if err := zero.Eject(0); !errors.Is(err, gomemcache.ErrNoServers) {
		t.Fatalf("Eject on a zero Selector: %v", err)
	}
}
