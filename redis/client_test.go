package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/ring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewShardedClientErrors(t *testing.T) {
	cases := []struct {
		name string
		opt  *ShardedOptions
		want string
	}{
		{"nil options", nil, "no shards"},
		{"no shards", &ShardedOptions{}, "no shards"},
		{"no address", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1"}, {Name: "b"}}}, `shard 1 ("b"): no address`},
		{"bad address", &ShardedOptions{Shards: []ShardOptions{{Addr: "localhost"}}}, `shard 0 (""): address "localhost"`},
		{"negative weight", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1", Weight: -2}}}, "weight -2 is negative"},
		{"duplicate name", &ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: "127.0.0.1:1"}, {Name: "a", Addr: "127.0.0.1:2"}}}, `nodes 0 and 1 have the same name "a"`},
		{"bad replicas", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1"}}, Placement: ring.Jedis{Replicas: -1}}, "replicas -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := NewShardedClient(c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if sc != nil {
				t.Fatal("a client came back with the error")
			}
		})
	}
	if _, err := NewShardedClientFromClients([]Shard{{Name: "x"}}, nil); err == nil || !strings.Contains(err.Error(), `shard 0 ("x"): nil client`) {
		t.Fatalf("nil client: %v", err)
	}
}

func TestOptionsAddrWins(t *testing.T) {
	m := miniredis.RunT(t)
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{
		{Addr: m.Addr(), Options: &goredis.Options{Addr: "127.0.0.1:1", DB: 0}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Shards()[0].Client.Options().Addr; got != m.Addr() {
		t.Fatalf("shard address %q, want %q", got, m.Addr())
	}
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil || !m.Exists("k") {
		t.Fatalf("SET through the Addr: %v", err)
	}
}

// A shard's maintenance notifications are off unless its options set them;
// a shard client then starts no goroutine of its own.
func TestMaintNotificationsDefault(t *testing.T) {
	auto := &maintnotifications.Config{Mode: maintnotifications.ModeAuto}
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{
		{Addr: "127.0.0.1:1"},
		{Addr: "127.0.0.1:2", Options: &goredis.Options{}},
		{Addr: "127.0.0.1:3", Options: &goredis.Options{MaintNotificationsConfig: auto}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, want := range []maintnotifications.Mode{maintnotifications.ModeDisabled, maintnotifications.ModeDisabled, maintnotifications.ModeAuto} {
		if got := c.Shards()[i].Client.Options().MaintNotificationsConfig.Mode; got != want {
			t.Errorf("shard %d: mode %q, want %q", i, got, want)
		}
	}
	if auto.Mode != maintnotifications.ModeAuto {
		t.Errorf("the caller's config changed to %q", auto.Mode)
	}
	// Only the shard with ModeAuto has the machinery (and its goroutines).
	for i, want := range []bool{false, false, true} {
		if got := c.Shards()[i].Client.GetMaintNotificationsManager() != nil; got != want {
			t.Errorf("shard %d: maintenance notifications manager %v, want %v", i, got, want)
		}
	}
}

// Commands with no sharded meaning are refused before anything is sent.
func TestUnsupportedCommands(t *testing.T) {
	m, m2 := miniredis.RunT(t), miniredis.RunT(t)
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: m.Addr()}, {Addr: m2.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for name, err := range map[string]error{
		"select":    c.Do(ctx, "select", 1).Err(),
		"nosuchcmd": c.Do(ctx, "nosuchcmd", "k").Err(),
		"sort":      c.SortRO(ctx, "k", &goredis.Sort{By: "w_*"}).Err(),
		"info":      c.Info(ctx).Err(),
		"set":       c.Do(ctx, "set", struct{}{}, "v").Err(),
		"watch":     c.Watch(ctx, func(*goredis.Tx) error { return nil }),
	} {
		var u *UnsupportedError
		if !errors.Is(err, ErrUnsupported) || !errors.As(err, &u) {
			t.Errorf("%s: %v, want an UnsupportedError", name, err)
		}
	}
	if n := len(m.Keys()) + len(m2.Keys()); n != 0 {
		t.Fatalf("refused commands wrote %d keys", n)
	}
}

// A cluster shard's *redis.ClusterClient is the client's own: SetShards
// that drops the shard closes it (once the commands of the old list end),
// as Close does, and forgets it.
func TestDroppedClusterShardIsClosed(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	cluster := ShardOptions{Name: "c", Cluster: &ClusterShard{Options: &goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}}}
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: m.Addr()}, cluster}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := c.ClusterClient()
	if cc == nil {
		t.Fatal("ClusterClient() = nil with a cluster shard")
	}
	if err := c.SetShards([]ShardOptions{{Name: "a", Addr: m.Addr()}}); err != nil {
		t.Fatal(err)
	}
	if got := c.ClusterClient(); got != nil {
		t.Fatalf("ClusterClient() after dropping the cluster shard = %p, want nil", got)
	}
	// The old list had no command in flight: its clients are closed by a
	// goroutine started at the swap; wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for err := cc.Ping(ctx).Err(); !errors.Is(err, goredis.ErrClosed); err = cc.Ping(ctx).Err() {
		if time.Now().After(deadline) {
			t.Fatalf("the dropped cluster shard's ClusterClient is still open 10 s later: Ping = %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	n := 0
	clusters.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d cluster shard clients still registered, want 0", n)
	}
}

// Only the commands of go-redis's connection setup are marked as its
// failure; the error of another CLIENT command is the server's answer.
func TestSetupFailure(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []any
		want string // the setupError's text, "" for none
	}{
		{[]any{"client", "setname", "a b"}, "connection setup (client setname): ERR x"},
		{[]any{"CLIENT", "TRACKING", "on"}, "connection setup (client tracking): ERR x"},
		{[]any{"client", "setinfo", "lib-name", "a b"}, "connection setup (client setinfo): ERR x"},
		{[]any{"select", 99}, "connection setup (select): ERR x"},
		{[]any{"client", "kill", "1.2.3.4:5"}, ""},
		{[]any{"client", "unblock", 7}, ""},
		{[]any{"client"}, ""},
		{[]any{"get", "k"}, ""},
	} {
		cmd := goredis.NewStatusCmd(ctx, c.args...)
		err := setupFailure(cmd, replyError("ERR x"))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("setupFailure(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

// replyError is an error reply of a server (redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
