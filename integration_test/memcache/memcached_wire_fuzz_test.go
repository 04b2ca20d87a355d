package memcache_test

// FuzzMemcacheWire drives fuzzed keys and values through every keyed method
// of both memcache paths (the ShardedClient, with and without a context, and
// gomemcache's own client over our Selector) against three real memcached
// processes, and after each call compares every server's command counters
// (stats) with what that one call must do, given a model of the cache. A
// key or value that made a server run a command of its own (the empty key:
// "set  0 0 N" then the value read as a command line) moves a counter the
// call does not, or changes curr_items, or loses the sentinel item.
//
// Under `go test` the seed corpus runs (CI); `go test -fuzz FuzzMemcacheWire
// -run '^$' ./integration_test/memcache/` explores further.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// mcAPI is the keyed method set that *memcache.Client and the sharded
// client share.
type mcAPI interface {
	Get(key string) (*gomemcache.Item, error)
	GetMulti(keys []string) (map[string]*gomemcache.Item, error)
	GetAndTouch(key string, expiration int32) (*gomemcache.Item, error)
	Set(item *gomemcache.Item) error
	Add(item *gomemcache.Item) error
	Replace(item *gomemcache.Item) error
	Append(item *gomemcache.Item) error
	Prepend(item *gomemcache.Item) error
	CompareAndSwap(item *gomemcache.Item) error
	Delete(key string) error
	Touch(key string, seconds int32) error
	Increment(key string, delta uint64) (uint64, error)
	Decrement(key string, delta uint64) (uint64, error)
}

// ctxClient is the sharded client's Context variants behind mcAPI.
type ctxClient struct {
	c   *shardedmc.ShardedClient
	ctx context.Context
}

func (x ctxClient) Get(k string) (*gomemcache.Item, error) { return x.c.GetContext(x.ctx, k) }
func (x ctxClient) GetMulti(k []string) (map[string]*gomemcache.Item, error) {
	return x.c.GetMultiContext(x.ctx, k)
}
func (x ctxClient) GetAndTouch(k string, e int32) (*gomemcache.Item, error) {
	return x.c.GetAndTouchContext(x.ctx, k, e)
}
func (x ctxClient) Set(it *gomemcache.Item) error     { return x.c.SetContext(x.ctx, it) }
func (x ctxClient) Add(it *gomemcache.Item) error     { return x.c.AddContext(x.ctx, it) }
func (x ctxClient) Replace(it *gomemcache.Item) error { return x.c.ReplaceContext(x.ctx, it) }
func (x ctxClient) Append(it *gomemcache.Item) error  { return x.c.AppendContext(x.ctx, it) }
func (x ctxClient) Prepend(it *gomemcache.Item) error { return x.c.PrependContext(x.ctx, it) }
func (x ctxClient) CompareAndSwap(it *gomemcache.Item) error {
	return x.c.CompareAndSwapContext(x.ctx, it)
}
func (x ctxClient) Delete(k string) error         { return x.c.DeleteContext(x.ctx, k) }
func (x ctxClient) Touch(k string, s int32) error { return x.c.TouchContext(x.ctx, k, s) }
func (x ctxClient) Increment(k string, d uint64) (uint64, error) {
	return x.c.IncrementContext(x.ctx, k, d)
}
func (x ctxClient) Decrement(k string, d uint64) (uint64, error) {
	return x.c.DecrementContext(x.ctx, k, d)
}

// mcCounters are the stats fields a keyed call may move.
var mcCounters = []string{
	"cmd_get", "cmd_set", "cmd_flush", "cmd_touch", "cmd_meta",
	"get_hits", "get_misses", "delete_hits", "delete_misses",
	"incr_hits", "incr_misses", "decr_hits", "decr_misses",
	"cas_hits", "cas_misses", "cas_badval", "touch_hits", "touch_misses",
	"auth_cmds", "curr_items",
}

// mcStats reads the counters of mcCounters from the server at addr.
func mcStats(t testing.TB, addr string) map[string]int64 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		t.Fatal(err)
	}
	all := map[string]int64{}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stats from %s: %v", addr, err)
		}
		f := strings.Fields(line)
		if len(f) == 1 && f[0] == "END" {
			break
		}
		if len(f) == 3 && f[0] == "STAT" {
			if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				all[f[1]] = n
			}
		}
	}
	out := make(map[string]int64, len(mcCounters))
	for _, name := range mcCounters {
		v, ok := all[name]
		if !ok {
			t.Fatalf("memcached at %s has no stat %q", addr, name)
		}
		out[name] = v
	}
	return out
}

// mcWire is the fixture of FuzzMemcacheWire: three real servers, a direct
// client to each, and the two paths under test.
type mcWire struct {
	addrs   []string
	direct  []*gomemcache.Client
	sharded *shardedmc.ShardedClient
	plain   *gomemcache.Client // gomemcache's client over our Selector
	sel     *shardedmc.Selector
}

const mcSentinel = "__sentinel__"

// mcCall is one keyed call of the fuzz test. do makes the call; check tells,
// from its outcome and the model (the value the key holds, nil when the
// model does not track it byte for byte, after incr/decr, and whether it
// holds one), the counters the call must have moved on the key's owner and
// the model's new state, or an error if the outcome is wrong.
type mcCall struct {
	name  string
	do    func(api mcAPI, key string, value []byte) (any, error)
	check func(res any, err error, value, have []byte, present bool) (moved map[string]int64, now []byte, stored bool, bad error)
}

// hitMiss returns {hit: 1} if present, else {miss: 1}, plus extra.
func hitMiss(present bool, hit, miss string, extra ...string) map[string]int64 {
	m := map[string]int64{}
	if present {
		m[hit] = 1
	} else {
		m[miss] = 1
	}
	for _, e := range extra {
		m[e]++
	}
	return m
}

// expectErr checks err against the outcome the model predicts.
func expectErr(err error, present bool, whenAbsent error) error {
	switch {
	case present && err != nil:
		return fmt.Errorf("key present: got %v, want nil", err)
	case !present && err != whenAbsent:
		return fmt.Errorf("key absent: got %v, want %v", err, whenAbsent)
	}
	return nil
}

// mcOutcome is what check returns.
type mcOutcome = func(res any, err error, value, have []byte, present bool) (map[string]int64, []byte, bool, error)

// hitOrMiss is the check of a call that reads or touches the key: nil or
// missErr, and the hit or miss counter plus extra.
func hitOrMiss(missErr error, hit, miss string, extra ...string) mcOutcome {
	return func(res any, err error, _, have []byte, present bool) (map[string]int64, []byte, bool, error) {
		if e := expectErr(err, present, missErr); e != nil {
			return nil, nil, false, e
		}
		if it, ok := res.(*gomemcache.Item); ok && present && have != nil && string(it.Value) != string(have) {
			return nil, nil, false, fmt.Errorf("value %q, want %q", it.Value, have)
		}
		return hitMiss(present, hit, miss, extra...), have, present, nil
	}
}

// stored is the check of a storage call that needs the key to hold a value
// (needs) or to hold none (!needs), storing next(value, have) if so.
func stored(needs bool, next func(v, have []byte) []byte) mcOutcome {
	return func(_ any, err error, v, have []byte, present bool) (map[string]int64, []byte, bool, error) {
		if present != needs {
			if err != gomemcache.ErrNotStored {
				return nil, nil, false, fmt.Errorf("got %v, want ErrNotStored (key present: %v)", err, present)
			}
			return map[string]int64{"cmd_set": 1}, have, present, nil
		}
		if err != nil {
			return nil, nil, false, err
		}
		return map[string]int64{"cmd_set": 1}, next(v, have), true, nil
	}
}

func item(k string, v []byte) *gomemcache.Item { return &gomemcache.Item{Key: k, Value: v, Flags: 7} }

var mcCalls = []mcCall{
	{"Get", func(api mcAPI, k string, _ []byte) (any, error) { return api.Get(k) },
		hitOrMiss(gomemcache.ErrCacheMiss, "get_hits", "get_misses", "cmd_get")},
	{"GetAndTouch", func(api mcAPI, k string, _ []byte) (any, error) { return api.GetAndTouch(k, 1000) },
		hitOrMiss(gomemcache.ErrCacheMiss, "touch_hits", "touch_misses", "cmd_touch")},
	{"Touch", func(api mcAPI, k string, _ []byte) (any, error) { return nil, api.Touch(k, 1000) },
		hitOrMiss(gomemcache.ErrCacheMiss, "touch_hits", "touch_misses", "cmd_touch")},
	{"GetMulti", func(api mcAPI, k string, _ []byte) (any, error) { return api.GetMulti([]string{k}) },
		func(res any, err error, _, have []byte, present bool) (map[string]int64, []byte, bool, error) {
			m, _ := res.(map[string]*gomemcache.Item)
			if err != nil {
				return nil, nil, false, err
			}
			if it, hit := m[k0(m)]; hit != present || len(m) > 1 || (hit && have != nil && string(it.Value) != string(have)) {
				return nil, nil, false, fmt.Errorf("GetMulti = %v, key present: %v", m, present)
			}
			return hitMiss(present, "get_hits", "get_misses", "cmd_get"), have, present, nil
		}},
	{"Set", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.Set(item(k, v)) },
		func(_ any, err error, v, _ []byte, _ bool) (map[string]int64, []byte, bool, error) {
			return map[string]int64{"cmd_set": 1}, v, true, err
		}},
	{"Add", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.Add(item(k, v)) },
		stored(false, func(v, _ []byte) []byte { return v })},
	{"Replace", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.Replace(item(k, v)) },
		stored(true, func(v, _ []byte) []byte { return v })},
	{"Append", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.Append(item(k, v)) },
		stored(true, func(v, have []byte) []byte { return concat(have, v) })},
	{"Prepend", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.Prepend(item(k, v)) },
		stored(true, func(v, have []byte) []byte { return concat(v, have) })},
	{"CompareAndSwap", func(api mcAPI, k string, v []byte) (any, error) { return nil, api.CompareAndSwap(item(k, v)) },
		// CasID 0 never matches a stored item's CAS value.
		func(_ any, err error, _, have []byte, present bool) (map[string]int64, []byte, bool, error) {
			if present && err == gomemcache.ErrCASConflict {
				return map[string]int64{"cmd_set": 1, "cas_badval": 1}, have, true, nil
			}
			if !present && err == gomemcache.ErrCacheMiss {
				return map[string]int64{"cmd_set": 1, "cas_misses": 1}, nil, false, nil
			}
			return nil, nil, false, fmt.Errorf("CAS with id 0: %v (key present: %v)", err, present)
		}},
	{"Delete", func(api mcAPI, k string, _ []byte) (any, error) { return nil, api.Delete(k) },
		func(_ any, err error, _, _ []byte, present bool) (map[string]int64, []byte, bool, error) {
			if e := expectErr(err, present, gomemcache.ErrCacheMiss); e != nil {
				return nil, nil, false, e
			}
			return hitMiss(present, "delete_hits", "delete_misses"), nil, false, nil
		}},
	{"Increment", func(api mcAPI, k string, _ []byte) (any, error) { return api.Increment(k, 3) }, arith("incr")},
	{"Decrement", func(api mcAPI, k string, _ []byte) (any, error) { return api.Decrement(k, 3) }, arith("decr")},
}

// k0 returns the one key of m, or "".
func k0(m map[string]*gomemcache.Item) string {
	for k := range m {
		return k
	}
	return ""
}

// arith is the check of incr/decr: a hit, a miss, or (a value that is not a
// number) a CLIENT_ERROR that moves no counter.
func arith(verb string) mcOutcome {
	return func(_ any, err error, _, have []byte, present bool) (map[string]int64, []byte, bool, error) {
		return arithOutcome(err, verb, have, present)
	}
}

func arithOutcome(err error, verb string, have []byte, present bool) (map[string]int64, []byte, bool, error) {
	switch {
	case err == nil && present:
		return map[string]int64{verb + "_hits": 1}, nil, true, nil
	case err == gomemcache.ErrCacheMiss && !present:
		return map[string]int64{verb + "_misses": 1}, nil, false, nil
	case err != nil && present && strings.Contains(err.Error(), "non-numeric"):
		return map[string]int64{}, have, true, nil
	}
	return nil, nil, false, fmt.Errorf("%s: %v (key present: %v)", verb, err, present)
}

// concat is a then b, or nil (untracked) if either is.
func concat(a, b []byte) []byte {
	if a == nil || b == nil {
		return nil
	}
	return append(append([]byte{}, a...), b...)
}

func newMCWire(f *testing.F) *mcWire {
	w := &mcWire{}
	var shards []shardedmc.ShardOptions
	var srvs []shardedmc.Server
	for range 3 {
		s := fixtures.StartRealMemcached(f)
		w.addrs = append(w.addrs, s.Addr)
		w.direct = append(w.direct, gomemcache.New(s.Addr))
		shards = append(shards, shardedmc.ShardOptions{Addr: s.Addr, Timeout: 2 * time.Second})
		srvs = append(srvs, shardedmc.Server{Addr: s.Addr})
	}
	var err error
	if w.sharded, err = shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards}); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = w.sharded.Close() })
	if w.sel, err = shardedmc.NewSelector(srvs, nil); err != nil {
		f.Fatal(err)
	}
	w.plain = gomemcache.NewFromSelector(w.sel)
	w.plain.Timeout = 2 * time.Second
	f.Cleanup(func() { _ = w.plain.Close() })
	for _, d := range w.direct {
		f.Cleanup(func() { _ = d.Close() })
	}
	return w
}

// reset empties every server and stores the sentinel on each.
func (w *mcWire) reset(t *testing.T) {
	for _, d := range w.direct {
		if err := d.FlushAll(); err != nil {
			t.Fatal(err)
		}
		if err := d.Set(&gomemcache.Item{Key: mcSentinel, Value: []byte("intact")}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSentinels fails t unless every server still holds the sentinel.
func (w *mcWire) checkSentinels(t *testing.T, after string) {
	for i, d := range w.direct {
		it, err := d.Get(mcSentinel)
		if err != nil || string(it.Value) != "intact" {
			t.Fatalf("after %s: sentinel on server %d: %v %v", after, i, it, err)
		}
	}
}

func FuzzMemcacheWire(f *testing.F) {
	w := newMCWire(f)
	all := make([]byte, len(mcCalls)*3)
	for i := range all {
		all[i] = byte(i) // every method on every path
	}
	for _, seed := range []struct {
		key   string
		value string
	}{
		{"", "flush_all"},
		{"", "set admin 0 0 4\r\nroot"},
		{"", "flush_all\r\nset admin 0 0 4\r\nroot\r\n"},
		{"victim", "flush_all"},
		{"victim", "v\r\nflush_all\r\n"},
		{"k", "12"},
		{"k", "99999999999999999999"},
		{"a b", "flush_all"},
		{"a\r\nflush_all", "x"},
		{"a\nflush_all", "x"},
		{"nul\x00", "x"},
		{"del\x7f", "x"},
		{"tab\tkey", "x"},
		{strings.Repeat("k", 250), "END\r\n"},
		{strings.Repeat("k", 251), "x"},
		{"ключ", "\x00\r\n\x00"},
		{"stats", "stats\r\n"},
		{"gets", "VALUE x 0 1\r\nx\r\nEND\r\n"},
	} {
		f.Add(seed.key, []byte(seed.value), all)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte, ops []byte) {
		if key == mcSentinel {
			t.Skip("the sentinel's key")
		}
		if len(value) > 4096 {
			value = value[:4096]
		}
		if len(ops) > 3*len(mcCalls) {
			ops = ops[:3*len(mcCalls)]
		}
		w.reset(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		paths := []struct {
			name string
			api  mcAPI
		}{{"ShardedClient", w.sharded}, {"ShardedClient/ctx", ctxClient{w.sharded, ctx}}, {"gomemcache+Selector", w.plain}}
		safe := wireSafe(key)
		owner := -1
		if safe {
			a, err := w.sel.PickServer(key)
			if err != nil {
				t.Fatal(err)
			}
			owner = indexOf(w.addrs, a.String())
		}
		var have []byte
		present := false
		for _, op := range ops {
			call, path := mcCalls[int(op)%len(mcCalls)], paths[int(op)/len(mcCalls)%len(paths)]
			what := fmt.Sprintf("%s.%s(%q, %q)", path.name, call.name, key, value)
			before := make([]map[string]int64, len(w.addrs))
			for i, a := range w.addrs {
				before[i] = mcStats(t, a)
			}
			want := map[string]int64{}
			res, err := call.do(path.api, key, value)
			if safe {
				moved, now, stored, bad := call.check(res, err, value, have, present)
				if bad != nil {
					t.Fatalf("%s: %v", what, bad)
				}
				want = moved
				if stored != present {
					want["curr_items"] = map[bool]int64{true: 1, false: -1}[stored]
				}
				have, present = now, stored
			} else if err != gomemcache.ErrMalformedKey {
				t.Fatalf("%s: %v, want memcache.ErrMalformedKey", what, err)
			}
			for i, a := range w.addrs {
				after := mcStats(t, a)
				for _, name := range mcCounters {
					exp := int64(0)
					if i == owner {
						exp = want[name]
					}
					if d := after[name] - before[i][name]; d != exp {
						t.Fatalf("%s: server %d: %s moved by %d, want %d", what, i, name, d, exp)
					}
				}
			}
			w.checkSentinels(t, what)
		}
	})
}

func indexOf(addrs []string, a string) int {
	for i, x := range addrs {
		if x == a {
			return i
		}
	}
	return -1
}

// wireSafe is the key rule the memcache package documents, written out for
// the test: 1 to 250 bytes, no space, control character or DEL.
func wireSafe(key string) bool {
	return key != "" && len(key) <= 250 && !strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// Inside a resharding window GetShard moves a key before handing out its
// shard's client: for a key that is unsafe on the wire it moves nothing and
// sends nothing (the move's own protocol carries the key in its command
// line too), and the client it returns refuses the key.
func TestMemcacheGetShardInWindowSendsNothingForUnsafeKeys(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	opts, c := fixtures.NamedMemcache(t, servers, 3)
	for _, s := range servers {
		d := gomemcache.New(s.Addr)
		if err := d.Set(&gomemcache.Item{Key: mcSentinel, Value: []byte("intact")}); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	if err := c.BeginResharding(opts, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	before := make([]map[string]int64, len(servers))
	for i, s := range servers {
		before[i] = mcStats(t, s.Addr)
	}
	for i := range 50 {
		for _, key := range []string{"x\r\nflush_all\r\nmg y" + strconv.Itoa(i), "x\r\nms admin 4 T0\r\nroot\r\nmg y" + strconv.Itoa(i), "", "a b" + strconv.Itoa(i)} {
			if err := c.GetShard(key).Set(&gomemcache.Item{Key: key, Value: []byte("v")}); err != gomemcache.ErrMalformedKey {
				t.Fatalf("GetShard(%q).Set = %v, want ErrMalformedKey", key, err)
			}
		}
	}
	for i, s := range servers {
		after := mcStats(t, s.Addr)
		for _, name := range mcCounters {
			if after[name] != before[i][name] {
				t.Fatalf("server %d: %s moved from %d to %d", i, name, before[i][name], after[name])
			}
		}
		d := gomemcache.New(s.Addr)
		it, err := d.Get(mcSentinel)
		d.Close()
		if err != nil || string(it.Value) != "intact" {
			t.Fatalf("server %d: sentinel %v, %v", i, it, err)
		}
	}
	if err := c.EndResharding(); err != nil {
		t.Fatal(err)
	}
}
