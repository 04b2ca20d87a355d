package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// fanOut is the shard of a command that runs on several shards.
const fanOut = -1

// hook receives every command and pipeline that the router clients build,
// and runs them on the shards instead of on the router's own connection.
type hook struct {
	c  *ShardedClient
	tx bool // the router of MULTI/EXEC pipelines
}

func (h hook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h hook) ProcessHook(goredis.ProcessHook) goredis.ProcessHook { return h.c.process }

func (h hook) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	if h.tx {
		return h.c.processTx
	}
	return h.c.processPipeline
}

// route returns the shard that cmd runs on, or fanOut with the command's
// table entry when it runs on several shards.
func (c *ShardedClient) route(cmd goredis.Cmder) (int, *commands.Info, error) {
	args := cmd.Args()
	info, err := commands.Lookup(args)
	if err != nil {
		return 0, nil, &UnsupportedError{Command: cmd.Name(), Reason: err.Error()}
	}
	ks := keyShards{c: c, name: info.Name, args: args, shard: noKeys}
	if err := info.KeyPositions(args, ks.add); err != nil {
		return 0, nil, &UnsupportedError{Command: info.Name, Reason: err.Error()}
	}
	switch {
	case ks.err != nil:
		return 0, nil, ks.err
	case ks.shard >= 0:
		return ks.shard, info, nil
	case ks.shard == noKeys && info.Request == commands.AllShards:
		return c.fanOut(info)
	case ks.shard == noKeys:
		return 0, nil, &UnsupportedError{Command: info.Name, Reason: "a command without keys has no shard"}
	case info.Request == commands.MultiShard: // keys on several shards
		return c.fanOut(info)
	}
	return 0, nil, c.crossShard(info.Name, args, func(f func(int)) { _ = info.KeyPositions(args, f) })
}

// fanOut accepts a command that runs on several shards when its replies can
// be merged.
func (c *ShardedClient) fanOut(info *commands.Info) (int, *commands.Info, error) {
	switch info.Response {
	case commands.Default, commands.AllSucceeded, commands.OneSucceeded,
		commands.AggSum, commands.AggMin, commands.AggMax:
		return fanOut, info, nil
	}
	return 0, nil, &UnsupportedError{Command: info.Name, Reason: "its replies from several shards have no defined merge"}
}

// Values of keyShards.shard besides a shard index.
const (
	noKeys    = -1
	manyShard = -2
)

// keyShards finds the shard that owns all of a command's keys, fed one
// argument position at a time: the shard, noKeys, or manyShard when the
// keys are on several shards. err is an *UnsupportedError for a key of a
// type go-redis does not send as a string.
type keyShards struct {
	c     *ShardedClient
	name  string
	args  []any
	shard int
	err   error
}

func (k *keyShards) add(pos int) {
	key, ok := commands.Arg(k.args[pos])
	if !ok {
		k.err = &UnsupportedError{Command: k.name, Reason: fmt.Sprintf("key argument %d has type %T", pos, k.args[pos])}
		return
	}
	switch s := k.c.shards.Locate(key); {
	case k.shard == noKeys:
		k.shard = s
	case k.shard != s:
		k.shard = manyShard
	}
}

// crossShard builds the *CrossShardError of a command whose keys, at the
// positions each yields, span shards.
func (c *ShardedClient) crossShard(name string, args []any, each func(f func(pos int))) error {
	var idx []int
	each(func(p int) {
		key, _ := commands.Arg(args[p])
		idx = append(idx, c.shards.Locate(key))
	})
	slices.Sort(idx)
	e := &CrossShardError{Command: name}
	for _, i := range slices.Compact(idx) {
		e.Shards = append(e.Shards, c.shards.Label(i))
	}
	return e
}

// wrapErr names shard i in a transport error; reply errors from Redis and
// redis.Nil are returned unchanged.
func (c *ShardedClient) wrapErr(i int, err error) error {
	var reply goredis.Error
	if err == nil || err == goredis.Nil || errors.As(err, &reply) {
		return err
	}
	return c.shards.Err(i, err)
}

// process runs one command: on its shard, or on several and merged.
func (c *ShardedClient) process(ctx context.Context, cmd goredis.Cmder) error {
	shard, info, err := c.route(cmd)
	if err != nil {
		return err
	}
	if shard >= 0 {
		return c.wrapErr(shard, c.shards.Shard(shard).Client.Process(ctx, cmd))
	}
	f := c.split(ctx, cmd, info)
	groups := make([][]goredis.Cmder, c.shards.Len())
	f.addTo(groups)
	c.execGroups(ctx, groups)
	return f.merge()
}

// processPipeline runs a pipeline: its commands grouped by shard, one
// pipeline per shard, the shards in parallel. Each command keeps its own
// reply and error; the first error in call order is returned.
func (c *ShardedClient) processPipeline(ctx context.Context, cmds []goredis.Cmder) error {
	groups := make([][]goredis.Cmder, c.shards.Len())
	var fans []*fanout
	for _, cmd := range cmds {
		shard, info, err := c.route(cmd)
		switch {
		case err != nil:
			cmd.SetErr(err)
		case shard >= 0:
			groups[shard] = append(groups[shard], cmd)
		default:
			f := c.split(ctx, cmd, info)
			f.addTo(groups)
			fans = append(fans, f)
		}
	}
	c.execGroups(ctx, groups)
	for _, f := range fans {
		_ = f.merge()
	}
	return firstErr(cmds)
}

// processTx runs a MULTI/EXEC pipeline (cmds wrapped in MULTI and EXEC by
// go-redis) on the one shard that owns every key of its commands.
func (c *ShardedClient) processTx(ctx context.Context, cmds []goredis.Cmder) error {
	inner := cmds[1 : len(cmds)-1]
	shard := noKeys
	var involved []int
	for _, cmd := range inner {
		s, info, err := c.route(cmd)
		if err == nil && s == fanOut {
			err = &UnsupportedError{Command: info.Name, Reason: "it runs on several shards, so not in a transaction"}
		}
		if err != nil {
			return setErrs(inner, err)
		}
		involved = append(involved, s)
		if shard == noKeys {
			shard = s
		} else if shard != s {
			shard = manyShard
		}
	}
	if shard == manyShard {
		slices.Sort(involved)
		e := &CrossShardError{Command: "multi"}
		for _, i := range slices.Compact(involved) {
			e.Shards = append(e.Shards, c.shards.Label(i))
		}
		return setErrs(inner, e)
	}
	pipe := c.shards.Shard(shard).Client.TxPipeline()
	for _, cmd := range inner {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, cmd := range inner {
		cmd.SetErr(c.wrapErr(shard, cmd.Err()))
	}
	return firstErr(inner)
}

// execGroups runs groups[i] on shard i, the shards in parallel: one command
// alone, several as a pipeline. Transport errors are wrapped per command.
func (c *ShardedClient) execGroups(ctx context.Context, groups [][]goredis.Cmder) {
	var wg sync.WaitGroup
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		wg.Go(func() {
			client := c.shards.Shard(i).Client
			if len(g) == 1 {
				_ = client.Process(ctx, g[0])
			} else {
				pipe := client.Pipeline()
				for _, cmd := range g {
					_ = pipe.Process(ctx, cmd)
				}
				_, _ = pipe.Exec(ctx)
			}
			for _, cmd := range g {
				cmd.SetErr(c.wrapErr(i, cmd.Err()))
			}
		})
	}
	wg.Wait()
}

func setErrs(cmds []goredis.Cmder, err error) error {
	for _, cmd := range cmds {
		cmd.SetErr(err)
	}
	return err
}

func firstErr(cmds []goredis.Cmder) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}
