package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/workers"
)

// stubHook answers every command on the client it is added to without
// sending it: a GET gets "v", an MGET one "v" per key, anything else OK.
// With it on the shard clients, a benchmark measures the dispatch path
// alone (routing, splitting, merging, pipelines' grouping), no I/O.
type stubHook struct{}

func (stubHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (stubHook) ProcessHook(goredis.ProcessHook) goredis.ProcessHook {
	return func(_ context.Context, cmd goredis.Cmder) error { stubReply(cmd); return nil }
}

func (stubHook) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(_ context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			stubReply(cmd)
		}
		return nil
	}
}

func stubReply(cmd goredis.Cmder) {
	vals := func() []any { // one "v" per key of an MGET
		vals := make([]any, len(cmd.Args())-1)
		for i := range vals {
			vals[i] = "v"
		}
		return vals
	}
	switch cmd := cmd.(type) {
	case *goredis.StringCmd:
		cmd.SetVal("v")
	case *goredis.Cmd: // an MGET part
		cmd.SetVal(vals())
	case *goredis.SliceCmd:
		cmd.SetVal(vals())
	}
}

// BenchmarkDispatch compares this package's dispatch with go-redis Ring's,
// over 4 shards whose clients answer without I/O (stubHook): one GET, an
// MGET of 100 keys (Ring: a pipeline of 100 GETs, as it has no cross-shard
// MGET; floor: the keys split by shard beforehand, an MGET per shard) and a
// pipeline of 100 GETs (floor: queued straight into one pipeline per shard).
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	var shards []ShardOptions
	addrs := map[string]string{}
	for i := range 4 {
		a := net.JoinHostPort("127.0.0.1", strconv.Itoa(1+i))
		shards = append(shards, ShardOptions{Addr: a})
		addrs["shard"+strconv.Itoa(i)] = a
	}
	sharded, err := NewShardedClient(&ShardedOptions{Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	defer sharded.Close()
	sharded.AddHook(stubHook{})
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: addrs, NewClient: func(o *goredis.Options) *goredis.Client {
		c := goredis.NewClient(o)
		c.AddHook(stubHook{})
		return c
	}})
	defer ring.Close()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	pipeline := func(c goredis.Cmdable) error {
		cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range keys {
				p.Get(ctx, k)
			}
			return nil
		})
		if err == nil && (len(cmds) != len(keys) || cmds[len(keys)-1].(*goredis.StringCmd).Val() != "v") {
			err = fmt.Errorf("%d replies for %d GETs", len(cmds), len(keys))
		}
		return err
	}
	// The floor: the keys split by shard beforehand, one MGET per shard on
	// the shard clients, in parallel as execGroups runs them.
	var split [][]string
	for _, sh := range sharded.Shards() {
		var mine []string
		for _, k := range keys {
			if sharded.GetShard(k) == sh.Client {
				mine = append(mine, k)
			}
		}
		split = append(split, mine)
	}
	floor := func() error {
		return onWorkers(len(split), func(i int) error { return sharded.Shards()[i].Client.MGet(ctx, split[i]...).Err() })
	}
	// The pipeline's floor: the GETs queued straight into one pipeline per
	// shard (split beforehand), the pipelines run as execGroups runs them.
	pipeFloor := func() error {
		pipes := make([]goredis.Pipeliner, len(split))
		for i, keys := range split {
			pipes[i] = sharded.Shards()[i].Client.Pipeline()
			for _, k := range keys {
				pipes[i].Get(ctx, k)
			}
		}
		return onWorkers(len(split), func(i int) error {
			_, err := pipes[i].Exec(ctx)
			return err
		})
	}
	mget := func() error {
		vals, err := sharded.MGet(ctx, keys...).Result()
		if err == nil && (len(vals) != len(keys) || vals[len(keys)-1] != "v") {
			err = fmt.Errorf("MGET: %v", vals)
		}
		return err
	}
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"GET/sharded", func() error { return sharded.Get(ctx, "user:12345").Err() }},
		{"GET/ring", func() error { return ring.Get(ctx, "user:12345").Err() }},
		{"MGET-100/sharded", mget},
		{"MGET-100/ring", func() error { return pipeline(ring) }},
		{"MGET-100/floor", floor},
		{"Pipeline-100/sharded", func() error { return pipeline(sharded) }},
		{"Pipeline-100/ring", func() error { return pipeline(ring) }},
		{"Pipeline-100/floor", pipeFloor},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// onWorkers runs f(0) ... f(n-1) in parallel as execGroups runs groups: the
// last on the caller, the others on kept workers. It returns their errors
// joined.
func onWorkers(n int, f func(i int) error) error {
	errs := make([]error, n)
	workers.Each(n, nil, func(i int) { errs[i] = f(i) })
	return errors.Join(errs...)
}

// BenchmarkDispatchSteps times the sharded client's own work on the 100-key
// workloads of BenchmarkDispatch, with no go-redis call at all, over 4
// shards: an MGET's routing (each key located), then its split into
// per-shard parts grouped by shard, then the merge of the parts' replies
// (set beforehand, one "v" per key); and the routing of a pipeline's 100
// GETs into one keyShards, as processPipeline routes them.
func BenchmarkDispatchSteps(b *testing.B) {
	c := unreachableShards(b, 4)
	ctx := context.Background()
	args := []any{"mget"}
	for i := range 100 {
		args = append(args, "key:"+strconv.Itoa(i))
	}
	mget := goredis.NewSliceCmd(ctx, args...)
	gets := make([]goredis.Cmder, 100)
	for i := range gets {
		gets[i] = goredis.NewStringCmd(ctx, "get", args[i+1])
	}
	// mgetSteps routes mget and, after split, groups and merges it.
	mgetSteps := func(split, merge bool) {
		v := c.shards.Acquire()
		defer v.Release()
		var r keyShards
		if err := route(v, mget, &r); err != nil || r.shard != fanOut {
			b.Fatalf("shard %d, %v", r.shard, err)
		}
		if !split {
			return
		}
		p, err := planOf(ctx, v, mget, &r)
		if err != nil {
			b.Fatal(err)
		}
		gb := getGroupBuf(v.Len(), 0)
		defer gb.release()
		p.counts(gb.counts)
		groups := gb.group()
		p.addTo(groups)
		if !merge {
			return
		}
		for _, g := range groups {
			for _, cmd := range g {
				stubReply(cmd)
			}
		}
		if err := p.merge(); err != nil || len(mget.Val()) != 100 || mget.Val()[99] != "v" {
			b.Fatal(mget.Val(), err)
		}
	}
	for _, s := range []struct {
		name string
		op   func()
	}{
		{"MGET-100/route", func() { mgetSteps(false, false) }},
		{"MGET-100/route+split", func() { mgetSteps(true, false) }},
		{"MGET-100/route+split+merge", func() { mgetSteps(true, true) }},
		{"Pipeline-100/route", func() {
			v := c.shards.Acquire()
			defer v.Release()
			var r keyShards
			for _, cmd := range gets {
				if err := route(v, cmd, &r); err != nil || r.shard < 0 {
					b.Fatalf("shard %d, %v", r.shard, err)
				}
			}
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.op()
			}
		})
	}
}
