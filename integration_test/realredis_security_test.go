package integration_test

// Security of the Redis side on real redis-server processes: a shard that
// cannot authenticate or set up its connection fails as that shard (named,
// counted), with no password in any error or event; TLS per shard, with a
// certificate authority made by the test.
//
// Locally the tests are skipped when redis-server is missing; in CI
// (CI=true) that fails them.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

const (
	testPassword = "s3cret-default-pw"
	testACLUser  = "alice"
	testACLPass  = "s3cret-alice-pw"
)

// Every shard below points at one redis-server that wants a password and
// knows the ACL user alice; each but the first is misconfigured in its own
// way. A command on a misconfigured shard fails with a *ShardError naming
// it, counted in its Stats and reported as an event; the server's reply
// stays reachable (errors.As, redis.IsAuthError), and no error holds a
// password.
func TestRealRedisConnectionSetupErrors(t *testing.T) {
	bin := realRedisBin(t)
	p := startRedisProc(t, bin, "", "--requirepass", testPassword,
		"--user", testACLUser, "on", ">"+testACLPass, "~*", "&*", "+@all")
	const (
		wrongpass = "WRONGPASS invalid username-password pair or user is disabled."
		noauth    = "NOAUTH Authentication required."
	)
	cases := []struct {
		name  string
		opt   goredis.Options
		cause string // the setup step and the server's reply; "" for the good shard
		reply string
		auth  bool
	}{
		{name: "good", opt: goredis.Options{Password: testPassword}},
		{name: "acl-user", opt: goredis.Options{Username: testACLUser, Password: testACLPass}},
		{name: "wrong-password", opt: goredis.Options{Password: "not-" + testPassword},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "unknown-user", opt: goredis.Options{Username: "mallory", Password: testACLPass},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "acl-user-wrong-password", opt: goredis.Options{Username: testACLUser, Password: testPassword},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "no-password", reply: noauth, auth: true},
		{name: "db-out-of-range", opt: goredis.Options{Password: testPassword, DB: 99},
			cause: "connection setup (select): ", reply: "ERR DB index is out of range"},
		{name: "bad-client-name", opt: goredis.Options{Password: testPassword, ClientName: "a b"},
			cause: "connection setup (client setname): ", reply: "ERR Client names cannot contain spaces, newlines or special characters."},
	}
	opts := make([]shardedredis.ShardOptions, len(cases))
	for i, tc := range cases {
		o := tc.opt
		o.MaxRetries = -1
		opts[i] = shardedredis.ShardOptions{Name: tc.name, Addr: p.addr, Options: &o}
	}
	var (
		mu     sync.Mutex
		events []shardedclient.Event
	)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts,
		Health: shardedredis.Health{OnEvent: func(e shardedclient.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	closeAndSettle(t, c)
	owners := byOwner(c, keys(400))
	wantStats := make([]shardedclient.ShardStats, len(cases))
	for i, tc := range cases {
		wantStats[i] = shardedclient.ShardStats{Name: tc.name, Addr: p.addr}
	}
	for i, tc := range cases {
		ks := owners[i]
		setErr := c.Set(ctx, ks[0], "v", 0).Err()
		get, getErr := c.Get(ctx, ks[0]).Result()
		cmds, pipeErr := c.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.Get(ctx, ks[0])
			pipe.Exists(ctx, ks[1])
			return nil
		})
		txCmds, txErr := c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.Incr(ctx, ks[1])
			return nil
		})
		wantStats[i].Requests = 4 // four round trips: the pipelines count once
		if tc.reply == "" {
			if setErr != nil || getErr != nil || get != "v" || pipeErr != nil || txErr != nil ||
				cmds[0].(*goredis.StringCmd).Val() != "v" || cmds[1].(*goredis.IntCmd).Val() != 0 ||
				txCmds[0].(*goredis.IntCmd).Val() != 1 {
				t.Fatalf("shard %q: SET %v, GET %q %v, pipeline %v %v, transaction %v %v",
					tc.name, setErr, get, getErr, cmds, pipeErr, txCmds, txErr)
			}
			continue
		}
		wantStats[i].Errors = 4
		want := fmt.Sprintf("shardedcache: shard %d %q (%s): %s%s", i, tc.name, p.addr, tc.cause, tc.reply)
		for _, r := range []struct {
			what string
			err  error
		}{
			{"SET", setErr}, {"GET", getErr}, {"pipeline", pipeErr}, {"pipelined GET", cmds[0].Err()},
			{"pipelined EXISTS", cmds[1].Err()}, {"transaction", txErr}, {"INCR in the transaction", txCmds[0].Err()},
		} {
			what := tc.name + ": " + r.what
			if se := wantShardError(t, what, r.err, i, p.addr); se.Name != tc.name || r.err.Error() != want {
				t.Fatalf("%s: error %q (shard name %q), want %q", what, r.err, se.Name, want)
			}
			var reply goredis.Error
			if !errors.As(r.err, &reply) || reply.Error() != tc.reply {
				t.Fatalf("%s: errors.As finds the reply %v, want %q", what, reply, tc.reply)
			}
			if got := goredis.IsAuthError(r.err); got != tc.auth {
				t.Fatalf("%s: redis.IsAuthError = %v, want %v", what, got, tc.auth)
			}
			noSecret(t, what, r.err.Error())
		}
	}
	if got := c.Stats(); !slices.Equal(got, wantStats) {
		t.Fatalf("stats\n%+v\nwant\n%+v", got, wantStats)
	}
	mu.Lock()
	defer mu.Unlock()
	failures := map[string]int{}
	for _, e := range events {
		if e.Kind != shardedclient.EventFailure || e.Addr != p.addr || e.Name != cases[e.Shard].name {
			t.Fatalf("event %+v", e)
		}
		failures[e.Name]++
		noSecret(t, "event", fmt.Sprintf("%v %+v %#v", e, e, e))
	}
	for i, tc := range cases {
		if failures[tc.name] != int(wantStats[i].Errors) {
			t.Fatalf("%d failure events of shard %q, want %d", failures[tc.name], tc.name, wantStats[i].Errors)
		}
	}
}

// noSecret fails the test when s holds one of the test's passwords.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, pw := range []string{testPassword, testACLPass} {
		if strings.Contains(s, pw) {
			t.Fatalf("%s shows a password: %s", what, s)
		}
	}
}
