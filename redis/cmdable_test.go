package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// recorder is a go-redis client that sends nothing: its hook keeps every
// command that a method builds and fails it, as the router's hook takes
// them instead of its own connection (newRouter).
type recorder struct {
	*goredis.Client
	cmds []goredis.Cmder
}

var errRecorded = errors.New("recorded, not sent")

func newRecorder(t *testing.T) *recorder {
	r := &recorder{Client: newRouter(nil)}
	r.AddHook(r)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func (r *recorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *recorder) ProcessHook(goredis.ProcessHook) goredis.ProcessHook {
	return func(_ context.Context, cmd goredis.Cmder) error {
		r.cmds = append(r.cmds, cmd)
		return errRecorded
	}
}

func (r *recorder) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(_ context.Context, cmds []goredis.Cmder) error {
		r.cmds = append(r.cmds, cmds...)
		return errRecorded
	}
}

// sent is one command that a method of redis.Cmdable sent.
type sent struct {
	method string
	cmd    goredis.Cmder
}

// Methods of redis.Cmdable that send no command of their own: pipelines,
// whose commands are each classified, and the two that go-redis v9.23 has
// not implemented (they panic).
var sendsNothing = map[string]string{
	"Pipeline": "pipeline", "Pipelined": "pipeline", "TxPipeline": "pipeline", "TxPipelined": "pipeline",
	"Quit": "not implemented by go-redis", "JSONDebugMemory": "not implemented by go-redis",
}

// argsFor are the arguments of methods whose generated ones build no valid
// command: even counts, a STORE, a schema, keys in a struct, ...
var argsFor = map[string][]any{
	"ARGrep":                 {"k", "0", "9", &goredis.ARGrepArgs{Predicates: []goredis.ARGrepPredicate{{Type: goredis.ARGrepExact, Value: "v"}}}},
	"ARGrepWithValues":       {"k", "0", "9", &goredis.ARGrepArgs{Predicates: []goredis.ARGrepPredicate{{Type: goredis.ARGrepExact, Value: "v"}}}},
	"BitFieldRO":             {"k", "u8", 0},
	"CMSIncrBy":              {"k", "item", 1},
	"DelExArgs":              {"k", goredis.DelExArgs{Mode: "IFEQ", MatchValue: "v"}},
	"HMSet":                  {"k", "f", "v"},
	"HSet":                   {"k", "f", "v"},
	"HSetEX":                 {"k", "f", "v"},
	"HSetEXWithArgs":         {"k", &goredis.HSetEXOptions{}, "f", "v"},
	"MSet":                   {"k", "v"},
	"MSetNX":                 {"k", "v"},
	"MSetEX":                 {goredis.MSetEXArgs{}, "k", "v"},
	"TopKIncrBy":             {"k", "item", 1},
	"TSMAdd":                 {[][]any{{"k", 1, 2.5}}},
	"XAdd":                   {&goredis.XAddArgs{Stream: "k", Values: []string{"f", "v"}}},
	"XClaim":                 {&goredis.XClaimArgs{Stream: "k", Group: "g", Consumer: "c", Messages: []string{"1-0"}}},
	"XNack":                  {&goredis.XNackArgs{Stream: "k", Group: "g", Mode: goredis.XNackModeSilent, IDs: []string{"1-0"}}},
	"XRead":                  {&goredis.XReadArgs{Streams: []string{"k", "0"}}},
	"XReadGroup":             {&goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"k", ">"}}},
	"XReadStreams":           {"k", "0"},
	"ZAddArgs":               {"k", goredis.ZAddArgs{Members: []goredis.Z{{Score: 1, Member: "m"}}}},
	"ZAddArgsIncr":           {"k", goredis.ZAddArgs{Members: []goredis.Z{{Score: 1, Member: "m"}}}},
	"ZInter":                 {&goredis.ZStore{Keys: []string{"k"}}},
	"ZInterWithScores":       {&goredis.ZStore{Keys: []string{"k"}}},
	"ZInterStore":            {"k", &goredis.ZStore{Keys: []string{"k"}}},
	"ZRangeStore":            {"k", goredis.ZRangeArgs{Key: "k", Start: 0, Stop: 1}},
	"ZUnion":                 {goredis.ZStore{Keys: []string{"k"}}},
	"ZUnionWithScores":       {goredis.ZStore{Keys: []string{"k"}}},
	"ZUnionStore":            {"k", &goredis.ZStore{Keys: []string{"k"}}},
	"GeoRadiusStore":         {"k", 1.0, 2.0, &goredis.GeoRadiusQuery{Radius: 1, Unit: "km", Store: "k"}},
	"GeoRadiusByMemberStore": {"k", "m", &goredis.GeoRadiusQuery{Radius: 1, Unit: "km", Store: "k"}},
	"FTCreate":               {"idx", &goredis.FTCreateOptions{}, &goredis.FieldSchema{FieldName: "f", FieldType: goredis.SearchFieldTypeText}},
	"FTHybrid":               {"idx", "*", "v", &goredis.VectorFP32{Val: []byte{0, 0, 128, 63}}},
	"JSONSetMode":            {"k", "$", "1", "NX"},
	"JSONMSet":               {"k", "$", "1"},
}

// cmdableCommands calls every method of redis.Cmdable on a recorder, with
// arguments made from its signature (one key, "k", for every string), and
// returns the commands they built.
func cmdableCommands(t *testing.T) (methods int, out []sent) {
	t.Helper()
	rec := newRecorder(t)
	ctx := context.Background()
	it := reflect.TypeFor[goredis.Cmdable]()
	for i := range it.NumMethod() {
		m := it.Method(i)
		if _, ok := sendsNothing[m.Name]; ok {
			continue
		}
		in := []reflect.Value{reflect.ValueOf(ctx)}
		if args, ok := argsFor[m.Name]; ok {
			for _, a := range args {
				in = append(in, reflect.ValueOf(a))
			}
		} else {
			for j := 1; j < m.Type.NumIn(); j++ {
				pt := m.Type.In(j)
				if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
					pt = pt.Elem()
				}
				in = append(in, sampleArg(pt))
			}
		}
		rec.cmds = nil
		reflect.ValueOf(goredis.Cmdable(rec.Client)).MethodByName(m.Name).Call(in)
		if len(rec.cmds) == 0 {
			t.Errorf("%s sent no command", m.Name)
		}
		for _, cmd := range rec.cmds {
			out = append(out, sent{m.Name, cmd})
		}
	}
	return it.NumMethod(), out
}

// sampleArg returns a value of type t for a method argument.
func sampleArg(t reflect.Type) reflect.Value {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return reflect.ValueOf(time.Second)
	case reflect.TypeFor[time.Time]():
		return reflect.ValueOf(time.Unix(1700000000, 0))
	case reflect.TypeFor[goredis.Vector]():
		return reflect.ValueOf(goredis.Vector(&goredis.VectorValues{Val: []float64{1}}))
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("k")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Interface:
		v.Set(reflect.ValueOf("v"))
	case reflect.Slice:
		v = reflect.Append(v, sampleArg(t.Elem()))
	case reflect.Map:
		v = reflect.MakeMap(t)
		v.SetMapIndex(sampleArg(t.Key()), sampleArg(t.Elem()))
	case reflect.Pointer:
		v = reflect.New(t.Elem())
	}
	return v
}

// class is where the sharded client runs a command.
func class(v *view, cmd goredis.Cmder) string {
	var r keyShards
	err := route(v, cmd, &r)
	switch {
	case r.info != nil && r.info.Refused != "" && strings.HasSuffix(r.info.Name, "."):
		return "refused by family"
	case r.info != nil && r.info.Refused != "":
		return "refused"
	case err != nil:
		return "error: " + err.Error()
	case r.info.Request == commands.MultiShard:
		return "its keys' shards, split and merged"
	case r.shard >= 0:
		return "its keys' shard"
	case r.shard == noKeys:
		return "any one shard"
	case r.shard == walk:
		return "the shards in turn (SCAN, RANDOMKEY)"
	}
	return "every shard, merged"
}

// Every method of redis.Cmdable (go-redis v9.23) sends a command that the
// table knows, and the sharded client routes it or refuses it by the
// table: no method's command is unknown, and none fails to route.
func TestCmdableClassified(t *testing.T) {
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	methods, all := cmdableCommands(t)
	counts := map[string]int{}
	byClass := map[string][]string{}
	for _, s := range all {
		if _, err := commands.Lookup(s.cmd.Args()); errors.Is(err, commands.ErrUnknown) {
			t.Errorf("%s: %v unknown to the table: %v", s.method, s.cmd.Args(), err)
			continue
		}
		cl := class(v, s.cmd)
		if strings.HasPrefix(cl, "error: ") {
			t.Errorf("%s: %v: %s", s.method, s.cmd.Args(), cl)
			continue
		}
		counts[cl]++
		byClass[cl] = append(byClass[cl], s.method)
	}
	if methods != 617 || len(all) != 611 {
		t.Errorf("%d methods sent %d commands, want 617 methods, 611 commands (go-redis v9.23.0)", methods, len(all))
	}
	want := map[string]int{
		"its keys' shard":                      456,
		"its keys' shards, split and merged":   6,
		"any one shard":                        24,
		"every shard, merged":                  29,
		"the shards in turn (SCAN, RANDOMKEY)": 3,
		"refused":                              62,
		"refused by family":                    31,
	}
	if !maps.Equal(counts, want) {
		t.Errorf("commands by class %v, want %v", counts, want)
	}
	for cl, ms := range byClass {
		if cl != "its keys' shard" {
			t.Logf("%s (%d): %s", cl, len(ms), strings.Join(ms, " "))
		}
	}
}

// unreachableShards is a ShardedClient over n shards that nothing listens
// on, for routing without I/O.
func unreachableShards(t *testing.T, n int) *ShardedClient {
	t.Helper()
	var opts []ShardOptions
	for i := range n {
		opts = append(opts, ShardOptions{Addr: fmt.Sprintf("127.0.0.1:%d", i+1)})
	}
	c, err := NewShardedClient(&ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Do and the typed method agree on every command: the same shard, the same
// fan-out, or the same refusal, decided by the table and not by the result
// type.
func TestDoAgreesWithTypedMethods(t *testing.T) {
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	_, all := cmdableCommands(t)
	for _, s := range all {
		raw := goredis.NewCmd(context.Background(), s.cmd.Args()...)
		var typed, do keyShards
		terr, derr := route(v, s.cmd, &typed), route(v, raw, &do)
		if (terr == nil) != (derr == nil) || terr != nil && terr.Error() != derr.Error() || typed.shard != do.shard {
			t.Errorf("%s %v: typed %T routes to %d (%v), Do to %d (%v)", s.method, s.cmd.Args(), s.cmd, typed.shard, terr, do.shard, derr)
		}
	}
}

// A command that runs on several shards has a merge that fits the go-redis
// result type of each method that sends it, and of Do (*redis.Cmd): the
// check is static, so no command runs on several shards and then fails to
// merge.
func TestFanOutMergeFitsType(t *testing.T) {
	_, all := cmdableCommands(t)
	types := map[*commands.Info][]goredis.Cmder{}
	for _, s := range all {
		if info, err := commands.Lookup(s.cmd.Args()); err == nil {
			types[info] = append(types[info], s.cmd)
		}
	}
	var fanOuts []string
	for info := range commands.All() {
		if info.Refused != "" || info.Request != commands.AllShards && info.Request != commands.MultiShard {
			continue
		}
		fanOuts = append(fanOuts, info.Name)
		for _, cmd := range append(types[info], goredis.NewCmd(context.Background(), info.Name)) {
			if err := fanOutOf(info, cmd); err != nil {
				t.Errorf("%s: %v", info.Name, err)
			}
		}
	}
	want := []string{
		"acl|deluser", "acl|save", "acl|setuser", "config|resetstat", "config|rewrite", "config|set", "dbsize", "del", "exists", "flushall", "flushdb", "function|delete", "function|flush",
		"function|kill", "function|load", "function|restore", "keys", "latency|reset", "memory|purge", "mget",
		"mset", "ping", "pubsub|channels", "pubsub|shardchannels", "script|exists", "script|flush", "script|kill",
		"script|load", "slowlog|len", "slowlog|reset", "touch", "ts.queryindex", "unlink", "wait",
	}
	slices.Sort(fanOuts)
	if !slices.Equal(fanOuts, want) {
		t.Errorf("commands on several shards %q, want %q", fanOuts, want)
	}
}
