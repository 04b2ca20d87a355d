package commands

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func keysOf(t *testing.T, args ...any) ([]string, error) {
	t.Helper()
	info, err := Lookup(args)
	if err != nil {
		return nil, err
	}
	var keys []string
	err = info.KeyPositions(args, func(p int) {
		s, _ := Arg(args[p])
		keys = append(keys, s)
	})
	return keys, err
}

func TestCommandKeyPositions(t *testing.T) {
	cases := []struct {
		args []any
		want []string
	}{
		{[]any{"get", "k"}, []string{"k"}},
		{[]any{"GET", "k"}, []string{"k"}},
		{[]any{"set", "k", "v", "ex", 10}, []string{"k"}},
		{[]any{"mget", "a", "b", "c"}, []string{"a", "b", "c"}},
		{[]any{"mset", "a", 1, "b", 2}, []string{"a", "b"}},
		{[]any{"del", "a"}, []string{"a"}},
		{[]any{"blpop", "a", "b", 0}, []string{"a", "b"}},
		{[]any{"eval", "return 1", 2, "x", "y", "arg"}, []string{"x", "y"}},
		{[]any{"eval", "return 1", 0}, nil},
		{[]any{"zunionstore", "dst", 2, "s1", "s2", "weights", 1, 2}, []string{"dst", "s1", "s2"}},
		{[]any{"xread", "count", 1, "streams", "s1", "s2", "0", "0"}, []string{"s1", "s2"}},
		{[]any{"object", "encoding", "k"}, []string{"k"}},
		{[]any{"xgroup", "create", "s", "g", "$"}, []string{"s"}},
		{[]any{"georadius", "g", 1, 2, 3, "km", "store", "dst"}, []string{"g", "dst"}},
		{[]any{"sort", "k", "limit", 0, 10, "store", "dst"}, []string{"k", "dst"}},
		{[]any{"sort", "k", "by", "nosort", "get", "#"}, []string{"k"}},
		{[]any{"lmove", "a", "b", "left", "right"}, []string{"a", "b"}},
		{[]any{"rename", "a", "b"}, []string{"a", "b"}},
		{[]any{"ping"}, nil},
		{[]any{"dbsize"}, nil},
		{[]any{[]byte("hget"), []byte("h"), "f"}, []string{"h"}},
		{[]any{"spublish", "chan", "msg"}, []string{"chan"}},
		{[]any{"lmpop", 2, "a", "b", "left"}, []string{"a", "b"}},
		{[]any{"migrate", "h", 6379, "", 0, 5000, "keys", "a", "b"}, []string{"", "a", "b"}},
		// Commands after Redis 7.0, from src/commands/*.json of redis/redis.
		{[]any{"HEXPIRE", "h", 10, "NX", "FIELDS", 2, "f1", "f2"}, []string{"h"}},
		{[]any{"HTTL", "h", "FIELDS", 1, "f"}, []string{"h"}},
		{[]any{"HPERSIST", "h", "FIELDS", 1, "f"}, []string{"h"}},
		{[]any{"HGETDEL", "h", "FIELDS", 1, "f"}, []string{"h"}},
		{[]any{"HGETEX", "h", "PX", 50, "FIELDS", 2, "f1", "f2"}, []string{"h"}},
		{[]any{"HSETEX", "h", "FNX", "EX", 10, "FIELDS", 1, "f", "v"}, []string{"h"}},
		{[]any{"msetex", 2, "a", "1", "b", "2", "nx", "ex", 10}, []string{"a", "b"}},
		{[]any{"delex", "k", "ifeq", "v"}, []string{"k"}},
		{[]any{"digest", "k"}, []string{"k"}},
		{[]any{"increx", "k", "byint", 2, "ex", 10}, []string{"k"}},
		{[]any{"lmovem", "src", "dst", "left", "right", "count", 2}, []string{"src", "dst"}},
		{[]any{"blmovem", "src", "dst", "left", "right", 0}, []string{"src", "dst"}},
		{[]any{"sdiffcard", 2, "s1", "s2", "limit", 5}, []string{"s1", "s2"}},
		{[]any{"sunioncard", 1, "s1"}, []string{"s1"}},
		{[]any{"xackdel", "s", "g", "keepref", "ids", 1, "1-0"}, []string{"s"}},
		{[]any{"xdelex", "s", "ids", 2, "1-0", "2-0"}, []string{"s"}},
		{[]any{"xnack", "s", "g", "silent", "ids", 1, "1-0"}, []string{"s"}},
		{[]any{"arset", "a", 0, "x", "y"}, []string{"a"}},
		{[]any{"arop", "a", 0, 9, "SUM"}, []string{"a"}},
		{[]any{"CMS.MERGE", "dst", 2, "c1", "c2", "WEIGHTS", 1, 2}, []string{"dst", "c1", "c2"}},
		{[]any{"TDIGEST.MERGE", "dst", 1, "t1", "COMPRESSION", 100}, []string{"dst", "t1"}},
		{[]any{"BF.ADD", "bf", "item"}, []string{"bf"}},
		{[]any{"TOPK.INCRBY", "tk", "a", 1, "b", 2}, []string{"tk"}},
		// Modules, from their registrations, and our decisions.
		{[]any{"JSON.SET", "doc", "$", "{}"}, []string{"doc"}},
		{[]any{"JSON.MSET", "a", "$", "1", "b", "$.x", "2"}, []string{"a", "b"}},
		{[]any{"JSON.MGET", "a", "b", "c", "$.x"}, []string{"a", "b", "c"}},
		{[]any{"TS.MADD", "s1", 1, 1.5, "s2", 2, 2.5}, []string{"s1", "s2"}},
		{[]any{"TS.CREATERULE", "src", "dst", "AGGREGATION", "avg", 60}, []string{"src", "dst"}},
		{[]any{"TS.NRANGE", 2, "s1", "s2", "-", "+"}, []string{"s1", "s2"}},
		{[]any{"TS.READ", "s", "-"}, []string{"s"}},
		{[]any{"TS.MGET", "FILTER", "a=b"}, nil},
		{[]any{"vadd", "vs", "VALUES", 2, 1, 0, "e"}, []string{"vs"}},
		{[]any{"vrange", "vs", "-", "+", 10}, []string{"vs"}},
		{[]any{"pubsub", "numsub", "c1", "c2"}, []string{"c1", "c2"}},
		{[]any{"pubsub", "numsub"}, nil},
		{[]any{"zrank", "z", "m", "withscore"}, []string{"z"}},
	}
	for _, c := range cases {
		got, err := keysOf(t, c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: keys %q, want %q", c.args, got, c.want)
		}
	}
}

func TestCommandKeyPositionsErrors(t *testing.T) {
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"nosuchcmd", "k"}, `unknown command "nosuchcmd"`},
		{[]any{"object", "nosuch", "k"}, `unknown subcommand "nosuch" of "object"`},
		{[]any{"object"}, `needs a subcommand`},
		{[]any{"get"}, `wrong number of arguments for "get"`},
		{[]any{"eval", "s", "x"}, `numkeys x is not a count`},
		{[]any{"eval", "s", 5, "a"}, `numkeys 5 exceeds the arguments`},
		{[]any{"sort_ro", "k", "store", "d"}, `does not take STORE`},
		{[]any{}, `empty command`},
		{[]any{3.5}, `unknown command "3.5"`},
		{[]any{struct{}{}}, `is not a string`},
	}
	for _, c := range cases {
		_, err := keysOf(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
	for _, args := range [][]any{{"object"}, {"get"}, {"get", "k", "x"}, {"mset"}, {"mset", "a", "1", "b"}, {"ts.madd", "a", 1, 2, "b", 1}} {
		if _, err := keysOf(t, args...); !errors.Is(err, ErrArity) {
			t.Errorf("%v: %v, want ErrArity", args, err)
		}
	}
	for _, args := range [][]any{{"mset", "a", "1", "b", "2"}, {"eval", "s", 5, "a"}, {"nosuchcmd"}} {
		if _, err := keysOf(t, args...); errors.Is(err, ErrArity) {
			t.Errorf("%v: %v, not ErrArity", args, err)
		}
	}
	_, err := keysOf(t, "sort", "k", "by", "w_*")
	if !errors.Is(err, ErrPatternKeys) {
		t.Errorf("SORT BY pattern: %v, want ErrPatternKeys", err)
	}
}

func TestCommandPolicies(t *testing.T) {
	cases := []struct {
		name string
		req  RequestPolicy
		resp ResponsePolicy
	}{
		{"mget", MultiShard, Default},
		{"mset", MultiShard, AllSucceeded},
		{"del", MultiShard, AggSum},
		{"msetnx", ByKeys, Default}, // Redis's since 7.2 (7.0: multi_shard)
		{"dbsize", AllShards, AggSum},
		{"ping", AllShards, AllSucceeded},
		{"flushdb", AllShards, AllSucceeded},
		{"keys", AllShards, Default},
		{"scan", Special, SpecialResponse},
		{"get", ByKeys, Default},
	}
	for _, c := range cases {
		info, err := Lookup([]any{c.name, "x"})
		if err != nil {
			t.Fatal(err)
		}
		if info.Request != c.req || info.Response != c.resp {
			t.Errorf("%s: policies %d/%d, want %d/%d", c.name, info.Request, info.Response, c.req, c.resp)
		}
	}
}

// TestMultiShardKeysEvenlySpaced checks what the redis package's split
// relies on: a command whose keys may be split by shard has one key
// specification, a range (no numkeys argument for a part to keep in step),
// so that its keys are evenly spaced, each followed by the same number of
// arguments of its own (MSET's value).
func TestMultiShardKeysEvenlySpaced(t *testing.T) {
	var names []string
	for info := range All() {
		if info.Request != MultiShard {
			continue
		}
		names = append(names, info.Name)
		if len(info.specs) != 1 || info.sortLike || info.specs[0].keynum || info.specs[0].keyword != "" {
			t.Errorf("%s: %d key specifications %+v, want one range", info.Name, len(info.specs), info.specs)
		}
	}
	slices.Sort(names)
	if want := []string{"del", "exists", "mget", "mset", "touch", "unlink"}; !slices.Equal(names, want) {
		t.Errorf("multi_shard commands %v, want %v", names, want)
	}
}

// The table's entries by source: Redis 7.0.15's COMMAND, redis/redis's
// src/commands files since, module registrations, and our decisions.
func TestCommandSources(t *testing.T) {
	counts := map[string]int{}
	for i := range table {
		src := table[i].Source
		switch {
		case strings.HasPrefix(src, "redis-7.0.15-command.json"):
			counts["7.0.15"]++
		case strings.HasPrefix(src, "redis/redis@") && strings.Contains(src, ":src/commands/"):
			counts["src/commands"]++
		case strings.HasPrefix(src, "redis/redis@"), strings.HasPrefix(src, "RedisJSON/RedisJSON@"), strings.HasPrefix(src, "RedisTimeSeries/RedisTimeSeries@"):
			counts["modules"]++
		case strings.HasPrefix(src, "decisions.go: no published spec"):
			counts["ours"]++
		default:
			t.Errorf("%s: source %q", table[i].Name, src)
		}
	}
	want := map[string]int{"7.0.15": 240, "src/commands": 91, "modules": 54, "ours": 6}
	if !maps.Equal(counts, want) {
		t.Errorf("entries by source %v, want %v", counts, want)
	}
	info, _ := Lookup([]any{"hgetex", "h"})
	if info.Source != "redis/redis@769babcbaa60df4ff5869f8978a0841998ef609a:src/commands/hgetex.json" {
		t.Errorf("HGETEX source %q", info.Source)
	}
	info, _ = Lookup([]any{"zrank", "z", "m", "withscore"})
	if info.Source != "redis-7.0.15-command.json; updated by redis/redis@4f8cdc2a1ea53e42955af758aabffee67cb455dd:src/commands/zrank.json" || info.Arity != -3 {
		t.Errorf("ZRANK source %q, arity %d", info.Source, info.Arity)
	}
	info, _ = Lookup([]any{"msetex", 1, "a", "1"})
	if info.Source != "redis/redis@06b30e20389c7e9ad19fd448cbbaf1984d165804:src/commands/msetex.json; decisions.go: all keys on one shard, as it sets all or none" {
		t.Errorf("MSETEX source %q", info.Source)
	}
}

// Lookup's binary search needs the table and every container's
// subcommands sorted by name.
func TestCommandTableSorted(t *testing.T) {
	sorted := func(list []Info) bool {
		return slices.IsSortedFunc(list, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	}
	if !sorted(table[:]) {
		t.Error("table not sorted")
	}
	for i := range table {
		if !sorted(table[i].subs) {
			t.Errorf("subcommands of %s not sorted", table[i].Name)
		}
	}
}

// go generate leaves table.go as it is: it is the generator's output for
// the inputs in this directory.
func TestCommandTableUpToDate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "table.go")
	cmd := exec.Command("go", "run", "./gen", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("table.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("table.go is not what go generate writes: run go generate ./redis/internal/commands")
	}
}

// Names are found in any case, without allocating; unknown ones wrap
// ErrUnknown; a refused command or family is found with its reason.
func TestCommandLookup(t *testing.T) {
	for _, args := range [][]any{{"GET", "k"}, {"BF.ADD", "k", "i"}, {"HGetEx", "h"}, {"Client", "LIST"}} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Lookup(args) }); n != 0 {
			t.Errorf("Lookup(%v): %v allocations", args, n)
		}
	}
	for _, c := range []struct {
		args          []any
		name, refused string
		instead       string
	}{
		{[]any{"bf.add", "k", "i"}, "bf.add", "", ""},
		{[]any{"CLIENT", "SETNAME", "x"}, "client|setname", "a connection's name is set per connection", "set ClientName in the shards' Options"},
		{[]any{"select", 1}, "select", "the database is a setting of each connection", "set DB in the shards' Options"},
		{[]any{"FT.SEARCH", "idx", "*"}, "ft.", "a search index covers only the keys of its own shard, so its queries have no sharded meaning", "run FT commands on each shard with ForEachShard"},
		{[]any{"ft._list"}, "ft.", "a search index covers only the keys of its own shard, so its queries have no sharded meaning", "run FT commands on each shard with ForEachShard"},
		{[]any{"cluster", "nosuch"}, "cluster", "the shards are independent servers, not a Redis Cluster", "use a redis.ClusterClient for a Redis Cluster"},
		{[]any{"slowlog", "get", 1}, "slowlog|get", "each server's slow log has its own entry ids and count, so the logs of several do not merge into one", ""},
	} {
		info, err := Lookup(c.args)
		if err != nil || info.Name != c.name || info.Refused != c.refused || info.Instead != c.instead {
			t.Errorf("Lookup(%v) = %+v, %v; want %s refused %q instead %q", c.args, info, err, c.name, c.refused, c.instead)
		}
	}
	for _, args := range [][]any{{"ftsearch"}, {"f"}, {"nosuch"}, {"client", "nosuch"}} {
		if _, err := Lookup(args); !errors.Is(err, ErrUnknown) {
			t.Errorf("Lookup(%v): %v, want ErrUnknown", args, err)
		}
	}
}

// The policies of commands after Redis 7.0 and of our decisions.
func TestCommandNewPolicies(t *testing.T) {
	cases := []struct {
		args []any
		req  RequestPolicy
		resp ResponsePolicy
	}{
		{[]any{"msetex", 1, "a", "1"}, ByKeys, Default}, // Redis: multi_shard, all_succeeded
		{[]any{"pubsub", "channels"}, AllShards, Default},
		{[]any{"ts.queryindex", "a=b"}, AllShards, Default},
		{[]any{"randomkey"}, Special, SpecialResponse},
		{[]any{"latency", "reset"}, AllShards, AggSum},
		{[]any{"acl", "setuser", "u"}, AllShards, AllSucceeded},
		{[]any{"config", "rewrite"}, AllShards, AllSucceeded},
		{[]any{"echo", "x"}, ByKeys, Default},
	}
	for _, c := range cases {
		info, err := Lookup(c.args)
		if err != nil || info.Request != c.req || info.Response != c.resp {
			t.Errorf("%v: %+v, %v; want policies %d/%d", c.args, info, err, c.req, c.resp)
		}
	}
}

func TestCommandArgMatchesGoRedisWriter(t *testing.T) {
	s := "ptr"
	cases := []struct {
		in   any
		want string
	}{
		{float32(0.1), "0.10000000149011612"},
		{1e21, "1000000000000000000000"},
		{true, "1"}, {false, "0"}, {nil, ""}, {&s, "ptr"}, {(*string)(nil), ""},
		{uint8(7), "7"}, {int8(-7), "-7"}, {[]byte("b"), "b"},
	}
	for _, c := range cases {
		if got, ok := Arg(c.in); !ok || got != c.want {
			t.Errorf("Arg(%#v) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	if _, ok := Arg(struct{}{}); ok {
		t.Error("Arg accepted a struct")
	}
	if _, err := keysOf(t, "eval", "s", int64(1<<62), "a"); err == nil || !strings.Contains(err.Error(), "exceeds the arguments") {
		t.Errorf("huge numkeys: %v", err)
	}
}

// TestSingleKeyMatchesKeyPositions checks singleKey against the walk of
// the key specifications that KeyPositions makes without it, for every
// command and subcommand of the table, with every argument count from none
// to 8 past the name: where singleKey takes a call, the walk finds exactly
// that one key and no error, and so does KeyPositions; WrittenKeys finds it
// when the specification writes; and singleKey takes the calls of the
// common one-key commands.
func TestSingleKeyMatchesKeyPositions(t *testing.T) {
	taken := map[string]bool{}
	for info := range All() {
		for n := range 10 {
			args := make([]any, n)
			for i := range args {
				args[i] = "a" + string(rune('0'+i))
			}
			if !info.arityHolds(args) {
				continue
			}
			pos, ok := info.singleKey(args)
			if !ok {
				continue
			}
			taken[info.Name] = true
			var walked, got, written []int
			if err := info.walk(args, false, func(p int) { walked = append(walked, p) }); err != nil || !slices.Equal(walked, []int{pos}) {
				t.Errorf("%s with %d arguments: singleKey %d, the specifications %v, %v", info.Name, n, pos, walked, err)
			}
			if err := info.KeyPositions(args, func(p int) { got = append(got, p) }); err != nil || !slices.Equal(got, []int{pos}) {
				t.Errorf("%s with %d arguments: singleKey %d, KeyPositions %v, %v", info.Name, n, pos, got, err)
			}
			var want []int
			_ = info.walk(args, true, func(p int) { want = append(want, p) })
			if err := info.WrittenKeys(args, func(p int) { written = append(written, p) }); err != nil || !slices.Equal(written, want) {
				t.Errorf("%s with %d arguments: WrittenKeys %v, %v; the specifications %v", info.Name, n, written, err, want)
			}
		}
	}
	for _, name := range []string{"get", "set", "hget", "incr", "expire", "getex", "object|encoding", "xgroup|create"} {
		if !taken[name] {
			t.Errorf("singleKey does not take %s", name)
		}
	}
	for _, name := range []string{"mget", "mset", "del", "eval", "sort", "xread", "publish", "spublish", "rename", "lmove", "georadius", "migrate", "ping"} {
		if taken[name] {
			t.Errorf("singleKey takes %s, which may have more keys or none", name)
		}
	}
}
