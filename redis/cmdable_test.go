package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/redis/internal/methods"
)

// cmdableCommands is methods.Commands, failing t on its error.
func cmdableCommands(t *testing.T) (int, []methods.Sent) {
	t.Helper()
	n, all, err := methods.Commands()
	if err != nil {
		t.Error(err)
	}
	return n, all
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
		if _, err := commands.Lookup(s.Cmd.Args()); errors.Is(err, commands.ErrUnknown) {
			t.Errorf("%s: %v unknown to the table: %v", s.Method, s.Cmd.Args(), err)
			continue
		}
		cl := class(v, s.Cmd)
		if strings.HasPrefix(cl, "error: ") {
			t.Errorf("%s: %v: %s", s.Method, s.Cmd.Args(), cl)
			continue
		}
		counts[cl]++
		byClass[cl] = append(byClass[cl], s.Method)
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
func unreachableShards(t testing.TB, n int) *ShardedClient {
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
		raw := goredis.NewCmd(context.Background(), s.Cmd.Args()...)
		var typed, do keyShards
		terr, derr := route(v, s.Cmd, &typed), route(v, raw, &do)
		if (terr == nil) != (derr == nil) || terr != nil && terr.Error() != derr.Error() || typed.shard != do.shard {
			t.Errorf("%s %v: typed %T routes to %d (%v), Do to %d (%v)", s.Method, s.Cmd.Args(), s.Cmd, typed.shard, terr, do.shard, derr)
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
		if info, err := commands.Lookup(s.Cmd.Args()); err == nil {
			types[info] = append(types[info], s.Cmd)
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

// cmdable_gen.go is what go generate writes, and every method of
// redis.Cmdable is declared on *ShardedClient (by hand or generated), so
// that go doc shows it: none comes only through the embedded router.
func TestCmdableMethodsGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmdable_gen.go")
	if b, err := exec.Command("go", "run", "./internal/methods/gen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/methods/gen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("cmdable_gen.go"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("cmdable_gen.go is not what go generate writes (%v): run go generate ./redis", err)
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && types.ExprString(fd.Recv.List[0].Type) == "*ShardedClient" {
				declared[fd.Name.Name] = true
			}
		}
	}
	it := reflect.TypeFor[goredis.Cmdable]()
	for i := range it.NumMethod() {
		if m := it.Method(i); !declared[m.Name] {
			t.Errorf("%s of redis.Cmdable is not declared on *ShardedClient", m.Name)
		}
	}
	if it.NumMethod() != 617 {
		t.Errorf("redis.Cmdable has %d methods, want 617 (go-redis v9.23.0)", it.NumMethod())
	}
	// A generated doc says where the command runs, from the table.
	src, _ := os.ReadFile("cmdable_gen.go")
	for _, line := range []string{
		"// Get runs GET on the shard of its keys (keys on several shards: a *CrossShardError, sent nowhere).",
		"// MGet runs MGET split by shard, the parts in parallel, replies merged: values in key order (arrays concatenated for a keyless command).",
		"// DBSize runs DBSIZE on every shard (once per server for a server-wide command), replies merged: the sum.",
		"// Echo runs ECHO on any one shard (the first live one).",
		"// Info is refused over several shards (*UnsupportedError, sent nowhere): each server reports on itself, and the reports of several do not merge into one server's reply; use ForEachShard or GetShard to run it on chosen shards. Over one shard it runs there as sent.",
		"// ClientTrackingOff is refused (*UnsupportedError, sent nowhere): client-side caching is set per connection; set ClientSideCache in the shards' Options.",
		"// Eval runs EVAL on the shard of its keys (keys on several shards: a *CrossShardError, sent nowhere; no key: any one shard).",
		"// Scan runs SCAN on the shards in turn: the cursor holds the shard in its low 16 bits; ejected shards are skipped.",
	} {
		if !strings.Contains(string(src), line+"\n") {
			t.Errorf("cmdable_gen.go lacks %q", line)
		}
	}
}
