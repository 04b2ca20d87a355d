package redis_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardedcache/shardedcache/otelmetrics"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestRedisotelTracingPerShard: redisotel's tracing, given to every shard
// client by OnNewShardNode with the shard's name, traces the commands of
// every shard: those in use, one added by SetShards and one added by
// BeginResharding; a MGET split over three shards is three spans, one per
// shard, each with that shard's keys, under the caller's span.
func TestRedisotelTracingPerShard(t *testing.T) {
	var shards []shardedredis.ShardOptions
	for _, name := range []string{"a", "b", "c", "d"} {
		shards = append(shards, shardedredis.ShardOptions{Name: name, Addr: miniredis.RunT(t).Addr()})
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rdb.OnNewShardNode(func(sh shardedredis.Shard, node *goredis.Client) {
		if err := redisotel.InstrumentTracing(node, redisotel.WithTracerProvider(tp),
			redisotel.WithAttributes(otelmetrics.ShardNameKey.String(sh.Name))); err != nil {
			t.Error(err)
		}
	})

	// spans returns the spans ended since its last call as "shard: span
	// name: statement", sorted, leaving out go-redis's connection setup;
	// each span's parent must be parent (none: the zero span ID).
	spans := func(parent trace.SpanID) []string {
		t.Helper()
		var out []string
		got := exp.GetSpans()
		exp.Reset()
		for _, s := range got {
			if s.InstrumentationScope.Name != "github.com/redis/go-redis/extra/redisotel" {
				continue // the caller's span
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			name, ok := attrs[string(otelmetrics.ShardNameKey)]
			if !ok || attrs["db.system"] != "redis" || attrs["server.address"] != "127.0.0.1" {
				t.Errorf("span %s %v: no shard name, db.system or server.address", s.Name, s.Attributes)
			}
			if connSetup[s.Name] {
				continue
			}
			if s.Parent.SpanID() != parent || s.SpanKind != trace.SpanKindClient {
				t.Errorf("span %s on %s: parent %s, kind %s; want parent %s, a client span", s.Name, name, s.Parent.SpanID(), s.SpanKind, parent)
			}
			out = append(out, fmt.Sprintf("%s: %s: %s", name, s.Name, moveStatement(attrs["db.statement"])))
		}
		slices.Sort(out)
		return out
	}
	check := func(step string, parent trace.SpanID, want ...string) {
		t.Helper()
		if got := spans(parent); !slices.Equal(got, want) {
			t.Errorf("%s: spans\n%q\nwant\n%q", step, got, want)
		}
	}
	ctx := context.Background()
	set := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := rdb.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	ka, kb := keyOn(t, rdb, "a"), keyOn(t, rdb, "b")
	set(ka, kb)
	check("SET on a and b", trace.SpanID{}, "a: set: set "+ka+" v", "b: set: set "+kb+" v")

	if err := rdb.SetShards(shards[:3]); err != nil {
		t.Fatal(err)
	}
	kc := keyOn(t, rdb, "c")
	set(kc)
	check("SET on c, added by SetShards", trace.SpanID{}, "c: set: set "+kc+" v")

	ka, kb = keyOn(t, rdb, "a"), keyOn(t, rdb, "b") // kb moved to c
	set(ka, kb)
	spans(trace.SpanID{})
	pctx, parent := tp.Tracer("test").Start(ctx, "request")
	if err := rdb.MGet(pctx, ka, kb, kc).Err(); err != nil {
		t.Fatal(err)
	}
	check("MGET over three shards", parent.SpanContext().SpanID(),
		"a: mget: mget "+ka, "b: mget: mget "+kb, "c: mget: mget "+kc)
	parent.End()
	exp.Reset()

	owner := map[string]string{} // key -> its shard before the window
	for i := range 50 {
		k := fmt.Sprint("key:", i)
		set(k)
		owner[k] = rdb.GetShardInfo(k).Name
	}
	spans(trace.SpanID{})
	if err := rdb.BeginResharding(shards); err != nil {
		t.Fatal(err)
	}
	// BeginResharding looks for d's stale copies and every shard's.
	check("BeginResharding", trace.SpanID{}, "a: scan: scan 0 count 1000", "b: scan: scan 0 count 1000",
		"c: scan: scan 0 count 1000", "d: scan: scan 0 count 1000")
	kd := keyOn(t, rdb, "d")
	if owner[kd] == "" {
		t.Fatalf("%s was not set before the window", kd)
	}
	set(kd)
	// The key moves first (marked and read on its old owner, restored on
	// d with d's token records, deleted from the old owner: package
	// fleet's move), then the SET runs on d.
	old := owner[kd]
	want := []string{old + ": eval: eval finish " + kd, old + ": eval: eval mark " + kd, "d: eval: eval restore __shardedcache:restored __shardedcache:revoked " + kd, "d: set: set " + kd + " v"}
	slices.Sort(want)
	check("SET on d, added by BeginResharding", trace.SpanID{}, want...)
}

// moveStatement shortens the statements of a move's scripts to "eval
// <script> <keys>": their tokens are random.
func moveStatement(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) < 3 || f[0] != "eval" {
		return stmt
	}
	for script, name := range shardedredis.MoveScripts {
		if f[1] == hex.EncodeToString([]byte(script)) {
			n, _ := strconv.Atoi(f[2])
			return strings.Join(append([]string{"eval", name}, f[3:3+n]...), " ")
		}
	}
	return stmt
}

// connSetup names the spans of go-redis's connection setup: the dial,
// then HELLO, CLIENT MAINT_NOTIFICATIONS and a pipeline of CLIENT SETINFO,
// children of the command that needed the connection.
var connSetup = map[string]bool{"redis.dial": true, "hello": true, "client": true, "redis.pipeline client": true}

// keyOn returns a key that the shard named name owns.
func keyOn(t *testing.T, rdb *shardedredis.ShardedClient, name string) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprint("key:", i); rdb.GetShardInfo(k).Name == name {
			return k
		}
	}
	t.Fatalf("no key on %s", name)
	return ""
}
