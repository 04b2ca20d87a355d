package redis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// miniShards is a ShardedClient over n miniredis servers, returned with
// them.
func miniShards(t *testing.T, n int) (*ShardedClient, []*miniredis.Miniredis) {
	t.Helper()
	var servers []*miniredis.Miniredis
	var opts []ShardOptions
	for i := range n {
		m := miniredis.RunT(t)
		servers = append(servers, m)
		opts = append(opts, ShardOptions{Name: fmt.Sprintf("s%d", i), Addr: m.Addr()})
	}
	c, err := NewShardedClient(&ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, servers
}

// scanPage is one page of SCAN as the typed method gives it.
type scanPage struct {
	keys   []string
	cursor uint64
}

// doPage is the same page as Do gives it: one server's reply.
func (p scanPage) do() []any {
	keys := make([]any, len(p.keys))
	for i, k := range p.keys {
		keys[i] = k
	}
	return []any{strconv.FormatUint(p.cursor, 10), keys}
}

// SCAN and RANDOMKEY give through Do and in a pipeline what the typed
// method gives alone: the same pages and sharded cursors, the same key.
func TestScanRandomKeyInPipelineAndDo(t *testing.T) {
	c, _ := miniShards(t, 3)
	ctx := context.Background()
	for i := range 12 {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var pages []scanPage
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, "", 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, scanPage{keys, next})
		if cursor = next; cursor == 0 {
			break
		}
	}
	seen := map[string]bool{}
	for _, p := range pages {
		for _, k := range p.keys {
			seen[k] = true
		}
	}
	// miniredis returns a shard's keys in one page, whatever COUNT. Each
	// cursor starts the next shard (index 1, then 2, in the low 12 bits)
	// from its cursor 0, with the list's check between them.
	v := c.shards.Acquire()
	check := listCheck(v)
	v.Release()
	if len(seen) != 12 || len(pages) != 3 || pages[0].cursor != check<<12|1 || pages[1].cursor != check<<12|2 {
		t.Fatalf("typed SCAN: %d keys in pages %v; want 12 keys, one page per shard", len(seen), pages)
	}
	cursor = 0
	for i, want := range pages {
		got, err := c.Do(ctx, "scan", cursor, "count", 2).Result()
		if err != nil || !reflect.DeepEqual(got, want.do()) {
			t.Errorf("Do SCAN %d: %#v, %v; want %#v", cursor, got, err, want.do())
		}
		var typed *goredis.ScanCmd
		var raw *goredis.Cmd
		var get *goredis.StringCmd
		_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			get = p.Get(ctx, "k1")
			typed = p.Scan(ctx, cursor, "", 2)
			raw = p.Do(ctx, "SCAN", strconv.FormatUint(cursor, 10), "COUNT", 2)
			return nil
		})
		keys, next := typed.Val()
		if err != nil || get.Val() != "1" || !reflect.DeepEqual(scanPage{keys, next}, want) || !reflect.DeepEqual(raw.Val(), want.do()) {
			t.Errorf("page %d in a pipeline: %v; GET %q, Scan %v %d, Do %#v; want %v", i, err, get.Val(), keys, next, raw.Val(), want)
		}
		cursor = want.cursor
	}

	// One key in all: RANDOMKEY can only draw it, alone, through Do, in a
	// pipeline.
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []error{goredis.Nil, nil} {
		var typed *goredis.StringCmd
		var raw *goredis.Cmd
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			typed, raw = p.RandomKey(ctx), p.Do(ctx, "randomkey")
			return nil
		})
		wantKey := ""
		if want == nil {
			wantKey = "only"
		}
		alone, aloneErr := c.RandomKey(ctx).Result()
		do, doErr := c.Do(ctx, "RANDOMKEY").Result()
		if err != want || alone != wantKey || aloneErr != want || do != anyKey(wantKey) || doErr != want ||
			typed.Val() != wantKey || typed.Err() != want || raw.Val() != anyKey(wantKey) || raw.Err() != want {
			t.Errorf("RANDOMKEY: alone %q %v, Do %#v %v, pipeline %q %v and %#v %v (%v); want %q, %v",
				alone, aloneErr, do, doErr, typed.Val(), typed.Err(), raw.Val(), raw.Err(), err, wantKey, want)
		}
		if err := c.Set(ctx, "only", 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// In a transaction, as before: refused, sent nowhere.
	_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Scan(ctx, 0, "", 0)
		return nil
	})
	if want := "shardedcache: scan: it runs on several shards, so not in a transaction; use ForEachShard or GetShard to run it on chosen shards"; err == nil || err.Error() != want {
		t.Errorf("SCAN in TxPipelined: %v, want %s", err, want)
	}
}

// anyKey is a key as Do returns it: a string, or nil for none.
func anyKey(k string) any {
	if k == "" {
		return nil
	}
	return k
}

// A call that breaks its command's arity gets the server's own error from
// one shard, as from one server, typed, through Do, in a pipeline and in a
// transaction; no other shard sees it.
func TestWrongArityGetsServersError(t *testing.T) {
	c, servers := miniShards(t, 3)
	one := goredis.NewClient(&goredis.Options{Addr: miniredis.RunT(t).Addr()})
	defer one.Close()
	ctx := context.Background()
	calls := []struct {
		name string
		run  func(goredis.UniversalClient) error
	}{
		{"MGet()", func(c goredis.UniversalClient) error { return c.MGet(ctx).Err() }},
		{"Del()", func(c goredis.UniversalClient) error { return c.Del(ctx).Err() }},
		{"Exists()", func(c goredis.UniversalClient) error { return c.Exists(ctx).Err() }},
		{"Do mget", func(c goredis.UniversalClient) error { return c.Do(ctx, "mget").Err() }},
		{"Do MSET a 1 b", func(c goredis.UniversalClient) error { return c.Do(ctx, "MSET", "a", 1, "b").Err() }},
		{"Do get a b", func(c goredis.UniversalClient) error { return c.Do(ctx, "get", "a", "b").Err() }},
		{"Do scan", func(c goredis.UniversalClient) error { return c.Do(ctx, "scan").Err() }},
		{"Do randomkey x", func(c goredis.UniversalClient) error { return c.Do(ctx, "randomkey", "x").Err() }},
		{"Do config", func(c goredis.UniversalClient) error { return c.Do(ctx, "config").Err() }},
		{"pipelined MGet()", func(c goredis.UniversalClient) error {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error { p.MGet(ctx); return nil })
			return err
		}},
	}
	var seen [3]atomic.Int64 // commands each shard's client sent
	c.OnNewShardNode(func(sh Shard, node *goredis.Client) {
		i := c.GetShardInfo("").Index
		for j, s := range c.Shards() {
			if s.Name == sh.Name {
				i = j
			}
		}
		node.AddHook(countHook{&seen[i]})
	})
	if err := c.Ping(ctx).Err(); err != nil { // every shard's connection open
		t.Fatal(err)
	}
	for _, call := range calls {
		want := call.run(one)
		var before [3]int64
		for i := range seen {
			before[i] = seen[i].Load()
		}
		got := call.run(c)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s: %v, want one server's %v", call.name, got, want)
		}
		var e goredis.Error
		if !errors.As(got, &e) {
			t.Errorf("%s: %T is not a reply of the server", call.name, got)
		}
		var reached int64
		for i := range seen {
			reached += seen[i].Load() - before[i]
		}
		if reached != 1 {
			t.Errorf("%s: %d shards saw it, want one", call.name, reached)
		}
	}
	// Inside MULTI the server refuses the queued command and EXEC, as one
	// server does.
	key := keyOn(t, c, 1, 0)
	_, want := one.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Set(ctx, key, 1, 0); p.MGet(ctx); return nil })
	_, got := c.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Set(ctx, key, 1, 0); p.MGet(ctx); return nil })
	if want == nil || got == nil || got.Error() != want.Error() || servers[1].Exists(key) {
		t.Errorf("MULTI with MGET(): %v, want %v, nothing written", got, want)
	}
}

// After Close, every path returns redis.ErrClosed itself: the client's
// error, not a shard's.
func TestClosedClientErrClosed(t *testing.T) {
	c, _ := miniShards(t, 3)
	opts := make([]ShardOptions, 0, 3)
	for _, sh := range c.Shards() {
		opts = append(opts, ShardOptions{Name: sh.Name, Addr: sh.Addr})
	}
	ctx := context.Background()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	iter := c.Scan(ctx, 0, "", 0).Iterator()
	iter.Next(ctx)
	sub := c.Subscribe(ctx, "ch")
	defer sub.Close()
	_, subErr := sub.Receive(ctx)
	psub := c.PSubscribe(ctx, "p*")
	defer psub.Close()
	_, psubErr := psub.Receive(ctx)
	_, migErr := c.NewMigration(MigrateOptions{})
	for name, err := range map[string]error{
		"Get":              c.Get(ctx, "k").Err(),
		"MGet":             c.MGet(ctx, "a", "b", "c", "d").Err(),
		"DBSize":           c.DBSize(ctx).Err(),
		"Echo":             c.Echo(ctx, "x").Err(),
		"Do":               c.Do(ctx, "get", "k").Err(),
		"Scan":             c.Scan(ctx, 0, "", 0).Err(),
		"RandomKey":        c.RandomKey(ctx).Err(),
		"ScanIterator":     iter.Err(),
		"Pipelined":        second(c.Pipelined(ctx, func(p goredis.Pipeliner) error { p.Get(ctx, "k"); p.DBSize(ctx); return nil })),
		"TxPipelined":      second(c.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Get(ctx, "k"); return nil })),
		"Watch":            c.Watch(ctx, func(*goredis.Tx) error { return nil }, "k"),
		"ForEachShard":     c.ForEachShard(ctx, func(context.Context, *goredis.Client) error { return nil }),
		"Subscribe":        subErr,
		"PSubscribe":       psubErr,
		"SetShards":        c.SetShards(opts),
		"BeginResharding":  c.BeginResharding(opts),
		"EndResharding":    c.EndResharding(),
		"NewMigration":     migErr,
		"Close once again": c.Close(),
	} {
		var se *shardedclient.ShardError
		if err != goredis.ErrClosed || errors.As(err, &se) {
			t.Errorf("%s after Close: %v (%T), want redis.ErrClosed itself", name, err, err)
		}
	}
}

// countHook counts the commands (and pipelines) a client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func second[T any](_ T, err error) error { return err }
