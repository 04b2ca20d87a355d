package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// printed is v as %v, %+v and %#v show it.
func printed(v any) string { return fmt.Sprintf("%v\n%+v\n%#v", v, v, v) }

// ShardOptions hands out copies whose Password prints as "xxxxx", in every
// format, while the rest is intact and the shards keep authenticating
// with the real password.
func TestShardOptionsRedactPasswords(t *testing.T) {
	const (
		userPW     = "hunter2-user-secret"
		masterPW   = "hunter2-master-secret"
		sentinelPW = "hunter2-sentinel-secret"
	)
	m := miniredis.RunT(t)
	m.RequireUserAuth("alice", userPW)
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{
		{Name: "a", Addr: m.Addr(), Options: &goredis.Options{Username: "alice", Password: userPW, PoolSize: 7, ClientName: "app-a"}},
		{Name: "fo", Failover: &goredis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:1"},
			Password: masterPW, SentinelPassword: sentinelPW}},
		{Name: "open", Addr: "127.0.0.1:2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := c.ShardOptions()
	if len(opts) != 3 {
		t.Fatalf("%d options, want 3", len(opts))
	}
	type view struct{ addr, user, password, clientName string }
	want := []view{
		{m.Addr(), "alice", redacted, "app-a"},
		{"FailoverClient", "", redacted, ""},
		{"127.0.0.1:2", "", "", ""},
	}
	for i, o := range opts {
		if got := (view{o.Addr, o.Username, o.Password, o.ClientName}); got != want[i] {
			t.Fatalf("shard %d options %+v, want %+v", i, got, want[i])
		}
	}
	if opts[0].PoolSize != 7 {
		t.Fatalf("pool size %d, want 7", opts[0].PoolSize)
	}
	out := printed(opts) + printed(opts[0]) + printed(*opts[0]) + printed(opts[1]) + printed(c.Shards()) + printed(c.Stats()) + printed(c)
	if want := `shardedcache.ShardedClient{shard 0 "a" (` + m.Addr() + `), shard 1 "fo" (sentinel:mymaster), shard 2 "open" (127.0.0.1:2)}`; fmt.Sprint(c) != want {
		t.Fatalf("%%v of the client = %s, want %s", c, want)
	}
	for _, pw := range []string{userPW, masterPW, sentinelPW} {
		if strings.Contains(out, pw) {
			t.Fatalf("printed options show the password %q:\n%s", pw, out)
		}
	}
	for _, s := range []string{`Password:"xxxxx"`, `Username:"alice"`, `Addr:"` + m.Addr() + `"`, "PoolSize:7", `ClientName:"app-a"`} {
		if !strings.Contains(out, s) {
			t.Fatalf("printed options lack %s:\n%s", s, out)
		}
	}
	// The shard's own client keeps the password: commands authenticate.
	k := "k"
	for i := 0; c.GetShardInfo(k).Index != 0; i++ {
		k = fmt.Sprintf("k%d", i)
	}
	if err := c.Set(context.Background(), k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get(k); err != nil || v != "v" {
		t.Fatalf("%s = %q, %v", k, v, err)
	}
	if pw := c.Shards()[0].Client.Options().Password; pw != userPW {
		t.Fatalf("the shard's client has password %q", pw)
	}
}

// An address given as a URL or with user information is refused by
// NewShardedClient and SetShards with its password redacted (net/url's
// Redacted for URLs), in every format of the error.
func TestAddressErrorsRedactPasswords(t *testing.T) {
	const pw = "pw-secret"
	const hint = " is not host:port (for a URL, give its host:port as Addr and its password in Options.Password)"
	cases := []struct{ addr, shown string }{
		{"redis://:" + pw + "@host:6379", "redis://:xxxxx@host:6379"},
		{"rediss://alice:" + pw + "@host:6380/2", "rediss://alice:xxxxx@host:6380/2"},
		{"redis://" + pw + "@host", "redis://xxxxx@host"},
		{"redis://alice:" + pw + "@[::1]:6379", "redis://alice:xxxxx@[::1]:6379"},
		{"alice:" + pw + "@host:6379", "xxxxx@host:6379"},
		{":" + pw + "@host:6379", "xxxxx@host:6379"},
		{pw + "@host:6379", "xxxxx@host:6379"},
		{"redis://host:6379", "redis://host:6379"},
	}
	m := miniredis.RunT(t)
	c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: m.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range cases {
		_, newErr := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Name: "a", Addr: tc.addr}}})
		setErr := c.SetShards([]ShardOptions{{Name: "a", Addr: m.Addr()}, {Name: "b", Addr: tc.addr}})
		for i, err := range []error{newErr, setErr} {
			want := fmt.Sprintf("shardedcache: shard %d (%q): address %q%s", i, string(rune('a'+i)), tc.shown, hint)
			if err == nil || err.Error() != want {
				t.Fatalf("address %q: error %v, want %q", tc.addr, err, want)
			}
			if out := printed(err); strings.Contains(out, pw) {
				t.Fatalf("address %q: the error shows the password:\n%s", tc.addr, out)
			}
		}
	}
	if n := len(c.Shards()); n != 1 {
		t.Fatalf("%d shards after refused SetShards, want 1", n)
	}
}
