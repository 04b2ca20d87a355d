package otelmetrics_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/daangn/minimemcached"
	goredis "github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/otelmetrics"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// units are the unit of every metric of the package.
var units = map[string]string{
	"shardedcache.shard.requests":  "{request}",
	"shardedcache.shard.errors":    "{error}",
	"shardedcache.shard.ejections": "{ejection}",
	"shardedcache.shard.ejected":   "{shard}",
	"shardedcache.shard.events":    "{event}",
	"shardedcache.reshard.keys":    "{key}",
	"shardedcache.reshard.scanned": "{key}",
	"shardedcache.reshard.done":    "{shard}",
}

// collect reads every data point of the metrics whose name starts with
// prefix, as "name attr=value,..." (attributes sorted, db.system.name left
// out after checking it is system) -> value. It checks each metric's unit,
// and that counters are monotonic and up-down counters not.
func collect(t *testing.T, r *sdkmetric.ManualReader, system, prefix string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, prefix) {
				continue
			}
			if m.Unit != units[m.Name] {
				t.Errorf("%s: unit %q, want %q", m.Name, m.Unit, units[m.Name])
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || sum.IsMonotonic != (units[m.Name] != "{shard}") || sum.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: data %T, monotonic %v, temporality %v", m.Name, m.Data, sum.IsMonotonic, sum.Temporality)
			}
			for _, dp := range sum.DataPoints {
				var attrs []string
				for _, kv := range dp.Attributes.ToSlice() {
					if kv.Key == "db.system.name" {
						if kv.Value.AsString() != system {
							t.Errorf("%s: db.system.name %q, want %q", m.Name, kv.Value.AsString(), system)
						}
						continue
					}
					attrs = append(attrs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
				}
				if len(attrs) == dp.Attributes.Len() {
					t.Errorf("%s %v: no db.system.name", m.Name, attrs)
				}
				out[m.Name+" "+strings.Join(attrs, ",")] = dp.Value
			}
		}
	}
	return out
}

// diff fails t with every point of got and want that differs.
func diff(t *testing.T, got, want map[string]int64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if w, ok := want[k]; !ok || w != got[k] {
			t.Errorf("%s = %d, want %d (present: %v)", k, got[k], w, ok)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing, want %d", k, want[k])
		}
	}
}

// shardAttrs renders the attributes of a shard as collect does.
func shardAttrs(name, addr string) string {
	return fmt.Sprintf("shardedcache.shard.address=%s,shardedcache.shard.name=%s", addr, name)
}

// keyOn returns a key that shard name owns.
func keyOn(t *testing.T, info func(string) shardedclient.Info, name string) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprint("key:", i); info(k).Name == name {
			return k
		}
	}
	t.Fatalf("no key on %s", name)
	return ""
}

// ejection is the health policy of the ejection tests: the first failure
// ejects, for longer than a test.
func ejection[C comparable]() shardedclient.Health[C] {
	return shardedclient.Health[C]{Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: time.Hour}
}

// TestRedisEjection: a shard that fails once is ejected; its requests,
// error, ejection, ejected state and the two events (failure, ejected) are
// the metrics, with the other shard's one request, and the options'
// OnEvent still called.
func TestRedisEjection(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	sa, sb := shardAttrs("a", a.Addr()), shardAttrs("b", b.Addr())
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.NewRedis(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var chained []string
	health := ejection[*goredis.Client]()
	health.OnEvent = m.OnEvent(func(e shardedclient.Event) { chained = append(chained, e.Kind.String()+" "+e.Name) })
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Health: health,
		Shards: []shardedredis.ShardOptions{{Name: "a", Addr: a.Addr()}, {Name: "b", Addr: b.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	m.Observe(rdb)

	ctx := context.Background()
	ka, kb := keyOn(t, rdb.GetShardInfo, "a"), keyOn(t, rdb.GetShardInfo, "b")
	for _, k := range []string{ka, kb} {
		if err := rdb.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if err := rdb.Get(ctx, kb).Err(); err == nil {
		t.Fatal("GET on a closed shard succeeded")
	}
	if want := []string{"failure b", "ejected b"}; !slices.Equal(chained, want) {
		t.Errorf("chained OnEvent saw %v, want %v", chained, want)
	}
	diff(t, collect(t, reader, "redis", "shardedcache.shard."), map[string]int64{
		"shardedcache.shard.requests " + sa:                               1,
		"shardedcache.shard.requests " + sb:                               2,
		"shardedcache.shard.errors " + sa:                                 0,
		"shardedcache.shard.errors " + sb:                                 1,
		"shardedcache.shard.ejections " + sa:                              0,
		"shardedcache.shard.ejections " + sb:                              1,
		"shardedcache.shard.ejected " + sa:                                0,
		"shardedcache.shard.ejected " + sb:                                1,
		"shardedcache.shard.events shardedcache.event.kind=failure," + sb: 1,
		"shardedcache.shard.events shardedcache.event.kind=ejected," + sb: 1,
	})
}

// TestRedisMigration: a migration from two shards to three; per source
// shard, the keys it keeps (owned), the keys it moved, the keys scanned and
// its scan done, as the rings say before and after.
func TestRedisMigration(t *testing.T) {
	servers := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t), miniredis.RunT(t)}
	shards := make([]shardedredis.ShardOptions, len(servers))
	for i, s := range servers {
		shards[i] = shardedredis.ShardOptions{Name: string(rune('a' + i)), Addr: s.Addr()}
	}
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.NewRedis(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	m.Observe(rdb)

	ctx := context.Background()
	before := map[string]string{} // key -> old owner
	for i := range 50 {
		k := fmt.Sprint("key:", i)
		if err := rdb.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before[k] = rdb.GetShardInfo(k).Name
	}
	if err := rdb.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	mig, err := rdb.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveMigration(mig)
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}

	want := map[string]int64{}
	for _, sh := range shards[:2] {
		attrs := shardAttrs(sh.Name, sh.Addr)
		for _, o := range []string{"owned", "moved", "on_new_owner", "gone", "stale", "failed"} {
			want["shardedcache.reshard.keys shardedcache.reshard.outcome="+o+","+attrs] = 0
		}
		want["shardedcache.reshard.done "+attrs] = 1
		want["shardedcache.reshard.scanned "+attrs] = 0
	}
	moved := 0
	for k, old := range before {
		attrs := shardAttrs(old, shards[old[0]-'a'].Addr)
		outcome := "moved"
		if rdb.GetShardInfo(k).Name == old {
			outcome = "owned"
		} else {
			moved++
		}
		want["shardedcache.reshard.keys shardedcache.reshard.outcome="+outcome+","+attrs]++
		want["shardedcache.reshard.scanned "+attrs]++
	}
	if moved == 0 {
		t.Fatal("no key moved to the new shard")
	}
	diff(t, collect(t, reader, "redis", "shardedcache.reshard."), want)
}

// TestMemcacheReshardingAndEjection: the memcache backend's window moves
// (ReshardStats) once every key was read through the window, then its shard
// metrics for an ejection of a shard that joined at a refused address.
func TestMemcacheReshardingAndEjection(t *testing.T) {
	var shards []shardedmc.ShardOptions
	for _, name := range []string{"a", "b", "c"} {
		srv, err := minimemcached.Run(&minimemcached.Config{Port: 0})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		shards = append(shards, shardedmc.ShardOptions{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port())})
	}
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.NewMemcache(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	health := ejection[*gomemcache.Client]()
	health.OnEvent = m.OnEvent(nil)
	mc, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: shards[:2], Health: health})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	m.Observe(mc)

	// The window: every key read once through it, so that each key whose
	// owner is now c moves.
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprint("key:", i)
		if err := mc.Set(&gomemcache.Item{Key: keys[i], Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.BeginResharding(shards, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	moving := 0
	for _, k := range keys {
		if mc.GetShardInfo(k).Name == "c" {
			moving++
		}
		if _, err := mc.Get(k); err != nil {
			t.Fatalf("Get(%s) in the window: %v", k, err)
		}
	}
	// minimemcached has no meta commands: the values move with
	// CopyExpiration.
	if moving == 0 {
		t.Fatal("no key moves to c")
	}
	diff(t, collect(t, reader, "memcached", "shardedcache.reshard."), map[string]int64{
		"shardedcache.reshard.keys shardedcache.reshard.outcome=moved_with_ttl":             0,
		"shardedcache.reshard.keys shardedcache.reshard.outcome=moved_with_copy_expiration": int64(moving),
		"shardedcache.reshard.keys shardedcache.reshard.outcome=absent":                     0,
		"shardedcache.reshard.keys shardedcache.reshard.outcome=stale_deleted":              0,
		"shardedcache.reshard.keys shardedcache.reshard.outcome=too_large":                  0,
	})
	if err := mc.EndResharding(); err != nil {
		t.Fatal(err)
	}

	// The ejection: d joins at an address that refuses connections; the
	// first Get of one of its keys fails and ejects it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	shards = append(shards, shardedmc.ShardOptions{Name: "d", Addr: ln.Addr().String()})
	if err := mc.SetShards(shards); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, s := range mc.Stats() {
		attrs := shardAttrs(s.Name, s.Addr)
		want["shardedcache.shard.requests "+attrs] = int64(s.Requests)
		want["shardedcache.shard.errors "+attrs] = 0
		want["shardedcache.shard.ejections "+attrs] = 0
		want["shardedcache.shard.ejected "+attrs] = 0
	}
	if _, err := mc.Get(keyOn(t, mc.GetShardInfo, "d")); err == nil {
		t.Fatal("Get on a refused shard succeeded")
	}
	d := shardAttrs("d", ln.Addr().String())
	want["shardedcache.shard.requests "+d] = 1
	want["shardedcache.shard.errors "+d] = 1
	want["shardedcache.shard.ejections "+d] = 1
	want["shardedcache.shard.ejected "+d] = 1
	want["shardedcache.shard.events shardedcache.event.kind=failure,"+d] = 1
	want["shardedcache.shard.events shardedcache.event.kind=ejected,"+d] = 1
	diff(t, collect(t, reader, "memcached", "shardedcache.shard."), want)
}
