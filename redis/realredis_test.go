package redis

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/serverproc"
	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// redisServer starts a redis-server on a free port of 127.0.0.1, stopped
// when the test ends, and returns its address. Without redis-server in
// PATH the test is skipped, or fails in CI (CI=true).
func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found")
		}
		t.Skip("redis-server not found")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := serverproc.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	for start := time.Now(); c.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("redis-server on %s does not answer", addr)
		}
	}
	return addr
}

// Every command of the table that a call can break the arity of goes, so
// broken, to any one shard (route's noKeys), and redis-server 7.0.15
// refuses it before running it: with "wrong number of arguments", or as an
// unknown command or subcommand (one it lacks); nothing is written. So the
// client may send such a call to an arbitrary shard and return the
// server's own error.
func TestCommandWrongArityRealRedis(t *testing.T) {
	rdb := goredis.NewClient(&goredis.Options{Addr: redisServer(t), MaxRetries: -1})
	defer rdb.Close()
	c := unreachableShards(t, 3)
	v := c.shards.Acquire()
	defer v.Release()
	ctx := context.Background()
	calls := [][]any{{"mset", "a", "1", "b"}, {"msetnx", "a", "1", "b"}}
	for info := range commands.All() {
		if info.Refused != "" || info.Arity == -1 {
			continue
		}
		n := info.Arity + 1 // one argument too many
		if info.Arity < 0 {
			n = -info.Arity - 1 // one too few
		}
		var args []any
		parts := strings.Split(info.Name, "|")
		for _, part := range parts {
			args = append(args, part)
		}
		if container, err := commands.Lookup(args[:1]); err == nil && container.Refused != "" {
			continue // CLUSTER ...: refused, whatever its arguments
		}
		if n < len(parts) {
			if _, err := commands.Lookup(args[:n]); !errors.Is(err, commands.ErrArity) {
				continue // COMMAND alone: another command, not COMMAND COUNT broken
			}
			args = args[:n]
		}
		for len(args) < n {
			args = append(args, "x"+strconv.Itoa(len(args)))
		}
		calls = append(calls, args)
	}
	if len(calls) < 300 {
		t.Fatalf("%d calls, want every command of the table", len(calls))
	}
	for _, args := range calls {
		var r keyShards
		if err := route(v, goredis.NewCmd(ctx, args...), &r); err != nil || r.shard != noKeys {
			t.Errorf("%q: routed to %d, %v; want any one shard", args, r.shard, err)
			continue
		}
		err := rdb.Do(ctx, args...).Err()
		var reply goredis.Error
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !errors.As(err, &reply) || !strings.HasPrefix(msg, "ERR wrong number of arguments") &&
			!strings.HasPrefix(msg, "ERR unknown command") && !strings.HasPrefix(msg, "ERR unknown subcommand") {
			t.Errorf("%q: redis-server replied %v, want a refusal before running it", args, err)
		}
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE = %d, %v after the refused calls; want 0", n, err)
	}
	t.Logf("%d calls refused by redis-server", len(calls))
}
