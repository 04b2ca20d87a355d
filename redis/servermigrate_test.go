package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// TestMigrateTarget checks MIGRATE's arguments for each kind of shard, and
// the refusal, naming the shard and the reason, of those MIGRATE cannot
// reach. The clients are never used: nothing connects.
func TestMigrateTarget(t *testing.T) {
	creds := func() (string, string) { return "u", "p" }
	cases := []struct {
		name string
		so   ShardOptions
		want string // MIGRATE's arguments, or the reason of the refusal
	}{
		{"plain", ShardOptions{Addr: "10.0.0.1:6379"}, "[10.0.0.1 6379  0 2000]"},
		{"db", ShardOptions{Addr: "10.0.0.1:6380", Options: &goredis.Options{DB: 3}}, "[10.0.0.1 6380  3 2000]"},
		{"ipv6", ShardOptions{Addr: "[::1]:6379"}, "[::1 6379  0 2000]"},
		{"password", ShardOptions{Addr: "h:1", Options: &goredis.Options{Password: "pw"}}, "[h 1  0 2000 auth pw]"},
		{"acl", ShardOptions{Addr: "h:1", Options: &goredis.Options{Username: "u", Password: "pw"}}, "[h 1  0 2000 auth2 u pw]"},
		{"unix", ShardOptions{Addr: "/tmp/r.sock", Options: &goredis.Options{Network: "unix"}}, "a Unix socket"},
		{"tls", ShardOptions{Addr: "h:1", Options: &goredis.Options{TLSConfig: &tls.Config{}}}, "TLS"},
		{"credentials", ShardOptions{Addr: "h:1", Options: &goredis.Options{CredentialsProvider: creds}}, "a credentials provider"},
		{"sentinel", ShardOptions{Failover: &goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"h:1"}}}, "a Sentinel group"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.so.Name = "s"
			c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{tc.so}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v := c.shards.Acquire()
			defer v.Release()
			args, err := migrateTarget(v, 0)
			got := fmt.Sprint(args)
			if err != nil {
				if !errors.Is(err, ErrServerSide) || !strings.Contains(err.Error(), `shard 0 "s"`) {
					t.Errorf("error %q: want ErrServerSide naming shard 0 \"s\"", err)
				}
				got = err.Error()[strings.LastIndex(err.Error(), ": ")+2:]
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestNewMigrationServerSideRefused: NewMigration with ServerSide refuses,
// with ErrServerSide naming the shard, a window whose new list has a shard
// MIGRATE cannot reach, and one whose old owner has no MIGRATE (miniredis,
// which would leave a transaction holding it unanswered); it accepts both
// without ServerSide. (A shard MIGRATE cannot reach may leave: it is an old
// owner only, TestMigrationServerSideLeavingShard.)
func TestNewMigrationServerSideRefused(t *testing.T) {
	creds := func() (string, string) { return "", "" } // miniredis needs none
	for _, tc := range []struct {
		name  string
		bOpts *goredis.Options
		want  string // the end of the error
	}{
		{"credentials provider", &goredis.Options{CredentialsProvider: creds}, `shard 1 "b" (%[2]s): a credentials provider`},
		{"no MIGRATE", nil, `shard 0 "a" (%[1]s) does not list MIGRATE in COMMAND INFO`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m1, m2 := miniredis.RunT(t), miniredis.RunT(t)
			a, b := ShardOptions{Name: "a", Addr: m1.Addr()}, ShardOptions{Name: "b", Addr: m2.Addr(), Options: tc.bOpts}
			c, err := NewShardedClient(&ShardedOptions{Shards: []ShardOptions{a}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.BeginResharding([]ShardOptions{a, b}); err != nil {
				t.Fatal(err)
			}
			_, err = c.NewMigration(MigrateOptions{ServerSide: true})
			if want := fmt.Sprintf(tc.want, m1.Addr(), m2.Addr()); !errors.Is(err, ErrServerSide) || !strings.HasSuffix(fmt.Sprint(err), want) {
				t.Fatalf("NewMigration: %v, want ErrServerSide ending %q", err, want)
			}
			if _, err := c.NewMigration(MigrateOptions{}); err != nil {
				t.Fatalf("NewMigration without ServerSide: %v", err)
			}
		})
	}
}

// TestMigrateGate: transactions run at once unless one would close a cycle
// of servers waiting on each other, or another runs from its old owner's
// server; it then waits until neither holds. Shard 6 is a second DB of
// shard 1's server.
func TestMigrateGate(t *testing.T) {
	g := newGate()
	servers := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s1"} // by shard
	batch := func(from int, to ...int) [][2]string {
		var edges [][2]string
		for _, x := range to {
			edges = append(edges, [2]string{servers[from], servers[x]})
		}
		return edges
	}
	entered := func(from int, to ...int) chan struct{} {
		done := make(chan struct{})
		go func() {
			g.enter(batch(from, to...))
			close(done)
		}()
		return done
	}
	wait := func(what string, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still held back", what)
		}
	}
	held := func(what string, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
			t.Fatalf("%s: let run", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	wait("0 -> 1", entered(0, 1))
	second := entered(0, 2)
	held("0 -> 2 while 0 -> 1 runs (one per old owner's server)", second)
	wait("1 -> 2", entered(1, 2))
	wait("3 -> 1 (waits on 1, no cycle)", entered(3, 1))
	back := entered(2, 4, 0)
	held("2 -> 0 (closes 2 -> 0 -> 1 -> 2)", back)
	g.leave(batch(1, 2))
	wait("2 -> 0 once 1 -> 2 ended", back)
	g.leave(batch(0, 1))
	held("0 -> 2 while 2 -> 0 runs (a cycle)", second)
	wait("6 -> 0 (s1 sends nothing, no cycle)", entered(6, 0))
	oneFive := entered(1, 5)
	held("1 -> 5 while 6 -> 0 runs (6 is on 1's server)", oneFive)
	g.leave(batch(2, 4, 0))
	wait("0 -> 2 once 2 -> 0 ended", second)
	g.leave(batch(6, 0))
	wait("1 -> 5 once 6 -> 0 ended", oneFive)
	g.mu.Lock()
	running := len(g.running)
	g.mu.Unlock()
	if running != 3 {
		t.Errorf("%d pairs of servers running, want s0 -> s2, s3 -> s1, s1 -> s5", running)
	}
	g.leave(batch(0, 2))
	g.leave(batch(3, 1))
	g.leave(batch(1, 5))
}
