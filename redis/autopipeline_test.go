package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// apClient returns a client over n miniredis shards whose options have
// AutoPipelineOptions ap (nil: autopipelining off), with AutoPipelineFrom
// from.
func apClient(t *testing.T, n, from int, ap *goredis.AutoPipelineOptions) *ShardedClient {
	t.Helper()
	shards := make([]ShardOptions, n)
	for i := range shards {
		shards[i] = ShardOptions{Addr: miniredis.RunT(t).Addr()}
	}
	c, err := NewShardedClient(&ShardedOptions{Shards: shards, AutoPipelineFrom: from,
		Options: &goredis.Options{AutoPipelineOptions: ap}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keysOn returns n keys that shard i of c owns.
func keysOn(c *ShardedClient, i, n int) []string {
	var out []string
	for k := 0; len(out) < n; k++ {
		if key := fmt.Sprintf("ap:%d", k); c.GetShardInfo(key).Index == i {
			out = append(out, key)
		}
	}
	return out
}

func TestAutoPipelineOptionErrors(t *testing.T) {
	bad := &goredis.AutoPipelineOptions{MaxConcurrentBatches: 2}
	const refusal = "redis: AutoPipelineOptions.MaxConcurrentBatches=2 requires Unordered:true"
	for _, c := range []struct {
		name string
		opt  *ShardedOptions
		want string
	}{
		{"negative from", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1"}}, AutoPipelineFrom: -1},
			"shardedcache: AutoPipelineFrom -1 is negative; want 0 (the default, 4) or more"},
		{"shared", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1"}}, Options: &goredis.Options{AutoPipelineOptions: bad}},
			`shardedcache: shard 0 (""): ` + refusal},
		{"shard", &ShardedOptions{Shards: []ShardOptions{{Addr: "127.0.0.1:1"}, {Name: "b", Addr: "127.0.0.1:2", Options: &goredis.Options{AutoPipelineOptions: bad}}}},
			`shardedcache: shard 1 ("b"): ` + refusal},
		{"failover", &ShardedOptions{Shards: []ShardOptions{{Failover: &goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, AutoPipelineOptions: bad}}}},
			`shardedcache: shard 0 (""): ` + refusal},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := NewShardedClient(c.opt)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || sc != nil {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	c := apClient(t, 1, 0, nil)
	if err := c.SetAutoPipelineFrom(-3); err == nil || !strings.Contains(err.Error(), "AutoPipelineFrom -3 is negative") {
		t.Fatalf("SetAutoPipelineFrom(-3): %v", err)
	}
	if err := c.SetShards([]ShardOptions{{Addr: c.Shards()[0].Addr, Options: &goredis.Options{AutoPipelineOptions: bad}}}); err == nil ||
		!strings.Contains(err.Error(), refusal) {
		t.Fatalf("SetShards with bad AutoPipelineOptions: %v", err)
	}
}

// ctxMark marks a caller's context, so that a hook tells a command sent on
// the plain path (the caller's context) from one in a batch of go-redis's
// engine (context.Background()).
type ctxMark struct{}

// pathHook records, per command or pipeline a shard client sends, whether
// it came on the caller's context, and the size of each send.
type pathHook struct {
	mu       sync.Mutex
	callers  []bool
	sizes    []int
	hold     chan struct{} // when set, the first send waits until it is closed
	held     chan struct{} // closed when the first send waits
	holdOnce sync.Once
}

func (h *pathHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *pathHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.record(ctx, []goredis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *pathHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.record(ctx, cmds)
		return next(ctx, cmds)
	}
}

// record records a send of cmds, but for a new connection's setup (HELLO,
// CLIENT SETINFO).
func (h *pathHook) record(ctx context.Context, cmds []goredis.Cmder) {
	if name := cmds[0].Name(); name == "hello" || name == "client" {
		return
	}
	h.mu.Lock()
	h.callers = append(h.callers, ctx.Value(ctxMark{}) != nil)
	h.sizes = append(h.sizes, len(cmds))
	h.mu.Unlock()
	if h.hold != nil {
		h.holdOnce.Do(func() {
			close(h.held)
			<-h.hold
		})
	}
}

func (h *pathHook) got() ([]bool, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.callers), slices.Clone(h.sizes)
}

// From one goroutine, commands take the plain path below AutoPipelineFrom
// and the engine from it; a pipeline's group on the deferred engine keeps
// its order; with Unordered options a group is a plain pipeline.
func TestAutoPipelinePaths(t *testing.T) {
	mark := context.WithValue(context.Background(), ctxMark{}, true)
	for _, tc := range []struct {
		name string
		from int
		ap   *goredis.AutoPipelineOptions
		// plain tells, for a GET, an MGET's part and a pipeline's group,
		// whether it takes the plain path.
		plain [3]bool
	}{
		{"off", 1, nil, [3]bool{true, true, true}},
		{"below from", 0, goredis.DefaultBlockingAutoPipelineOptions(), [3]bool{true, true, true}},
		{"from 1", 1, goredis.DefaultBlockingAutoPipelineOptions(), [3]bool{false, false, false}},
		{"from 1 unordered", 1, &goredis.AutoPipelineOptions{Unordered: true, MaxConcurrentBatches: 2}, [3]bool{false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := apClient(t, 2, tc.from, tc.ap)
			k0, k1 := keysOn(c, 0, 3), keysOn(c, 1, 1)
			if err := c.MSet(mark, k0[0], "a", k1[0], "b").Err(); err != nil {
				t.Fatal(err)
			}
			h := &pathHook{}
			c.Shards()[0].Client.AddHook(h)
			seen := 0
			// sent checks the sends since the last call: all on the
			// caller's context when plain, none else, n commands in all,
			// in one send when plain.
			sent := func(what string, plain bool, n int) {
				t.Helper()
				callers, sizes := h.got()
				callers, sizes = callers[seen:], sizes[seen:]
				seen += len(sizes)
				total := 0
				for i, s := range sizes {
					total += s
					if callers[i] != plain {
						t.Fatalf("%s: sends on the caller's context %v, want %v", what, callers, plain)
					}
				}
				if total != n || plain && len(sizes) != 1 {
					t.Fatalf("%s: sends of %v commands, want %d", what, sizes, n)
				}
			}
			if v, err := c.Get(mark, k0[0]).Result(); v != "a" || err != nil {
				t.Fatalf("GET = %q, %v", v, err)
			}
			sent("GET", tc.plain[0], 1)
			if v, err := c.MGet(mark, k0[0], k1[0], k0[1]).Result(); err != nil || !slices.Equal(v, []any{"a", "b", nil}) {
				t.Fatalf("MGET = %q, %v", v, err)
			}
			sent("MGET", tc.plain[1], 1)
			var set *goredis.StatusCmd
			var get *goredis.StringCmd
			var incr *goredis.IntCmd
			if _, err := c.Pipelined(mark, func(p goredis.Pipeliner) error {
				set = p.Set(mark, k0[1], "c", 0)
				get = p.Get(mark, k0[1])
				incr = p.Incr(mark, k0[1])
				p.Get(mark, k1[0])
				return nil
			}); err == nil || err.Error() != "ERR value is not an integer or out of range" {
				t.Fatalf("pipeline: %v", err)
			}
			if set.Val() != "OK" || get.Val() != "c" || incr.Err() == nil {
				t.Fatalf("pipeline replies %v, %v, %v", set, get, incr)
			}
			sent("pipeline", tc.plain[2], 3)
			// A group with a command that the engine would run apart
			// (BLPOP) is a plain pipeline, in order.
			cmds, err := c.Pipelined(mark, func(p goredis.Pipeliner) error {
				p.RPush(mark, k0[2], "x")
				p.BLPop(mark, time.Second, k0[2])
				p.Exists(mark, k0[2])
				return nil
			})
			if err != nil || cmds[1].(*goredis.StringSliceCmd).Val()[1] != "x" || cmds[2].(*goredis.IntCmd).Val() != 0 {
				t.Fatalf("pipeline with BLPOP: %v, %v", cmds, err)
			}
			sent("pipeline with BLPOP", true, 3)
			if st := c.Stats()[0]; st.Requests != 5 || st.Errors != 0 { // MSET's part, GET, MGET's part, the groups
				t.Fatalf("shard 0 stats %+v", st)
			}
		})
	}
}

// Commands of many goroutines for one shard share a batch: while the
// engine's one batch in flight is held, the others queue, and go out
// together.
func TestAutoPipelineCoalesces(t *testing.T) {
	c := apClient(t, 2, 1, goredis.DefaultBlockingAutoPipelineOptions())
	ks := keysOn(c, 0, 11)
	for _, k := range ks {
		if err := c.Set(context.Background(), k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	h := &pathHook{hold: make(chan struct{}), held: make(chan struct{})}
	c.Shards()[0].Client.AddHook(h)
	errs := make(chan error, len(ks))
	get := func(k string) {
		v, err := c.Get(context.Background(), k).Result()
		if err == nil && v != "v:"+k {
			err = fmt.Errorf("GET %s = %q", k, v)
		}
		errs <- err
	}
	go get(ks[0])
	<-h.held // the first batch is on its way, and holds the engine's permit
	for _, k := range ks[1:] {
		go get(k)
	}
	engine, err := c.Shards()[0].Client.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); engine.Len() < len(ks)-1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(h.hold)
	for range ks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_, sizes := h.got()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != len(ks)-1 {
		t.Fatalf("batches %v, want [1 %d]", sizes, len(ks)-1)
	}
	if st := c.Stats()[0]; st.Requests != 2*uint64(len(ks)) || st.Errors != 0 {
		t.Fatalf("shard 0 stats %+v", st)
	}
	// The engine's one batch at a time used one connection of its pipeline
	// pool, which PoolStats sums.
	if ps := c.PoolStats().PipelineStats; ps == nil || ps.TotalConns != 1 {
		t.Fatalf("pipeline pool stats %+v, want 1 connection", ps)
	}
}

// The sharded client's AutoPipeline is go-redis's engine over the router:
// its batches are the sharded client's pipelines. AsyncAutoPipeline is
// refused.
func TestShardedAutoPipeliner(t *testing.T) {
	c := apClient(t, 3, 0, nil)
	ctx := context.Background()
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.AutoPipelineWithOptions(goredis.DefaultBlockingAutoPipelineOptions()); again != ap || err != nil {
		t.Fatalf("a second AutoPipeline: %p, %v; want the first, %p", again, err, ap)
	}
	ks := keysOn(c, 0, 10)
	ks = append(append(ks, keysOn(c, 1, 10)...), keysOn(c, 2, 10)...)
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Go(func() {
			if err := ap.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	vals, err := ap.MGet(ctx, ks...).Result()
	if err != nil || len(vals) != len(ks) {
		t.Fatalf("MGET: %d values, %v", len(vals), err)
	}
	for i, k := range ks {
		if vals[i] != "v:"+k {
			t.Fatalf("MGET %s = %v", k, vals[i])
		}
		if got, err := c.Shards()[c.GetShardInfo(k).Index].Client.Get(ctx, k).Result(); got != "v:"+k || err != nil {
			t.Fatalf("%s on its shard = %q, %v", k, got, err)
		}
	}
	var u *UnsupportedError
	if err := ap.Do(ctx, "select", 1).Err(); !errors.As(err, &u) {
		t.Fatalf("SELECT through the autopipeliner: %v, want an *UnsupportedError", err)
	}
	if err := ap.Watch(ctx, func(*goredis.Tx) error { return nil }, ks[0]); !errors.As(err, &u) || u.Command != "watch" {
		t.Fatalf("Watch on the autopipeliner: %v, want an *UnsupportedError", err)
	}
	if _, err := c.AutoPipelineWithOptions(&goredis.AutoPipelineOptions{FullDuplex: true}); !errors.Is(err, errRouterFullDuplex) {
		t.Fatalf("FullDuplex: %v", err)
	}
	if async, err := c.AsyncAutoPipeline(); async != nil || err != ErrAutoPipelineUnsupported {
		t.Fatalf("AsyncAutoPipeline: %v, %v", async, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AutoPipeline(); err != goredis.ErrClosed {
		t.Fatalf("AutoPipeline after Close: %v", err)
	}
	if err := ap.Get(ctx, ks[0]).Err(); err != goredis.ErrClosed {
		t.Fatalf("GET on the autopipeliner after Close: %v", err)
	}
}
