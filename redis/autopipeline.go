package redis

// Autopipelining: commands that many goroutines send to one shard share
// round trips, through go-redis's own engine (redis.AutoPipeliner), which
// the sharded client configures per shard and never reimplements.
//
// A shard autopipelines when its go-redis options have AutoPipelineOptions
// (see the package documentation, "Autopipelining"). Its client's two
// engines then carry what the sharded client sends to it, once
// AutoPipelineFrom of the client's commands are on the shard at once
// (engines.enter; below that, the plain path):
//   - a command that runs on the shard alone, and each per-shard part of a
//     command split over shards, ride the blocking engine
//     (Client.AutoPipeline): the caller waits for its command as on a
//     plain client, while other callers' commands share its batch;
//   - the per-shard group of a pipeline rides the deferred engine
//     (Client.AsyncAutoPipeline): its commands are queued in order, then
//     awaited. When the options give up ordering (Unordered, NumShards
//     above 1), or the group holds a command the engine runs apart
//     (diverted), the group is a plain pipeline: one round trip, in order.
//
// The engine itself diverts what cannot share a batch (blocking commands,
// connection state) to a pooled connection. Transactions, pub/sub, the
// resharding window's moves and the server state kept in step (execGroups)
// keep their plain paths. Everything else the sharded client does happens
// before a command reaches the engine (routing, refusals, barriers, moves) or
// after its reply (merging, errors, health), and is unchanged.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// engines are the autopipelining engines of one shard client.
type engines struct {
	blocking *goredis.AutoPipeliner // single commands
	// ordered is the deferred engine for a pipeline's groups; nil when the
	// options give up submit order (see ordered).
	ordered *goredis.AutoPipeliner
	// busy counts the sharded client's commands and groups on the shard
	// now (see enter).
	busy atomic.Int64
}

// defaultAutoPipelineFrom is ShardedOptions.AutoPipelineFrom's default.
// go-redis's engine costs a lone caller a hand-off to its flusher and back
// (a GET from one goroutine took 2.6 times as long as on the plain client,
// 83 against 32 us, on a loaded 2-core machine with a local redis-server),
// which only a batch of several callers' commands pays back: at 8
// goroutines over 4 shards, a GET through a per-shard AutoPipeline had
// half Ring's throughput (see docs/speed.md).
const defaultAutoPipelineFrom = 4

// enter counts a command or group in on the shard and reports whether it
// is to join a batch, from commands and groups on the shard at once (this
// one included); leave counts it out.
func (e *engines) enter(from int64) bool { return e.busy.Add(1) >= from }
func (e *engines) leave()                { e.busy.Add(-1) }

// autoPipelineFrom returns ShardedOptions.AutoPipelineFrom's value, n, with
// its default, or an error naming a negative n.
func autoPipelineFrom(n int) (int64, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("shardedcache: AutoPipelineFrom %d is negative; want 0 (the default, %d) or more", n, defaultAutoPipelineFrom)
	case n == 0:
		return defaultAutoPipelineFrom, nil
	}
	return int64(n), nil
}

// autopipelined holds the engines of each shard client that autopipelines,
// by client (*goredis.Client -> *engines): a lookup that neither locks nor
// allocates once built. closeShardClient forgets a client's.
var autopipelined sync.Map

// enginesOf returns the engines of client, built on first use, or nil when
// its options have no AutoPipelineOptions (the common case costs one
// pointer load) or it is closed: the plain path then returns the client's
// own error.
func enginesOf(client *goredis.Client) *engines {
	opt := client.Options().AutoPipelineOptions
	if opt == nil {
		return nil
	}
	if e, ok := autopipelined.Load(client); ok {
		return e.(*engines)
	}
	blocking, err := client.AutoPipeline()
	if err != nil {
		return nil // closed; the options were checked when it was built (checkAutoPipeline)
	}
	e := &engines{blocking: blocking}
	if ordered(opt) {
		if e.ordered, err = client.AsyncAutoPipeline(); err != nil {
			return nil
		}
	}
	got, _ := autopipelined.LoadOrStore(client, e)
	return got.(*engines)
}

// ordered reports whether opt keeps submit order on the deferred engine,
// which a pipeline's group needs.
func ordered(opt *goredis.AutoPipelineOptions) bool {
	return !opt.Unordered && opt.NumShards <= 1
}

// checkAutoPipeline returns the error of a shard's AutoPipelineOptions that
// go-redis would report only at first use (redis.AutoPipelineOptions.
// Validate), so that NewShardedClient, SetShards and BeginResharding refuse
// the shard instead.
func checkAutoPipeline(opt *goredis.AutoPipelineOptions) error {
	if opt == nil {
		return nil
	}
	return opt.Validate()
}

// send runs cmd on client: through its blocking engine when it
// autopipelines and enough commands are on it (see engines.enter), else as
// a plain command.
func (c *ShardedClient) send(ctx context.Context, client *goredis.Client, cmd goredis.Cmder) error {
	e := enginesOf(client)
	if e == nil || cachedRead(client, cmd) {
		return client.Process(ctx, cmd)
	}
	defer e.leave()
	if !e.enter(c.apFrom.Load()) {
		return client.Process(ctx, cmd)
	}
	return e.blocking.Process(ctx, cmd)
}

// cachedRead reports whether cmd is a read that go-redis caches (see
// cachedNames) on a shard client that caches (see cache.go): it takes the
// plain path, where go-redis answers it from the shard's cache. go-redis's
// engine consults the cache for a batch of one command only; a read in a
// larger batch would go to the server, its reply uncached. Any other
// command, reads that go-redis never caches included, may join a batch.
func cachedRead(client *goredis.Client, cmd goredis.Cmder) bool {
	return cacheOf(client) != nil && cachedNames[cmd.Name()]
}

// cachedNames are the commands whose replies go-redis caches (csc_commands.go
// of go-redis v9.23: defaultCacheableCommands). go-redis also leaves out a
// call that streams its reply and a SORT_RO with BY or GET: such a call
// takes the plain path here, unbatched but correct.
var cachedNames = map[string]bool{
	"get": true, "mget": true, "getbit": true, "getrange": true, "strlen": true, "substr": true,
	"hget": true, "hgetall": true, "hmget": true, "hkeys": true, "hvals": true, "hlen": true, "hexists": true, "hstrlen": true,
	"lindex": true, "llen": true, "lpos": true, "lrange": true,
	"scard": true, "sismember": true, "smembers": true, "smismember": true, "sdiff": true, "sinter": true, "sintercard": true, "sunion": true,
	"zcard": true, "zcount": true, "zlexcount": true, "zmscore": true, "zrange": true, "zrangebylex": true, "zrangebyscore": true,
	"zrank": true, "zrevrange": true, "zrevrangebylex": true, "zrevrangebyscore": true, "zrevrank": true, "zscore": true,
	"zdiff": true, "zinter": true, "zunion": true,
	"bitcount": true, "bitfield_ro": true, "bitpos": true,
	"exists": true, "type": true, "sort_ro": true, "lcs": true,
	"geodist": true, "geohash": true, "geopos": true, "geosearch": true, "georadiusbymember_ro": true, "georadius_ro": true,
	"xlen": true, "xrange": true, "xrevrange": true,
	"json.get": true, "json.mget": true, "json.arrindex": true, "json.arrlen": true, "json.objkeys": true, "json.objlen": true,
	"json.resp": true, "json.strlen": true, "json.type": true,
	"ts.get": true, "ts.info": true, "ts.range": true, "ts.revrange": true,
}

// sendGroups runs groups[i] on shard i as execGroups does, each group
// through the shard's engines when it autopipelines (see sendGroup).
func (c *ShardedClient) sendGroups(ctx context.Context, v *view, groups [][]goredis.Cmder) {
	eachGroup(ctx, v, groups, c.apFrom.Load())
}

// plainGroups is sendGroup's from for groups that never autopipeline
// (execGroups).
const plainGroups = 0

// sendGroup runs g on shard i: one command as send does; several queued in
// order on the shard's deferred engine and awaited, else as execGroup does.
// from is the AutoPipelineFrom of the call (loaded once for all its
// groups), or plainGroups: g runs as execGroup runs it.
func sendGroup(ctx context.Context, v *view, i int, g []goredis.Cmder, from int64) {
	if from == plainGroups {
		execGroup(ctx, v, i, g)
		return
	}
	e := enginesOf(v.Client(i))
	if e == nil || !batchable(e, v.Client(i), g) {
		execGroup(ctx, v, i, g)
		return
	}
	defer e.leave()
	switch {
	case !e.enter(from):
		execGroup(ctx, v, i, g)
		return
	case len(g) == 1:
		_ = e.blocking.Process(ctx, g[0])
	default:
		for _, cmd := range g {
			_ = e.ordered.Process(ctx, cmd) // a refusal at submit is on cmd
		}
		for _, cmd := range g {
			_ = cmd.Err() // waits for cmd's batch
		}
	}
	finishGroup(ctx, v, i, g)
}

// batchable reports whether group g of client may ride its engines e: one
// command that is not a cached read (see cachedRead), or several in order
// on the deferred engine when it keeps their order and none is diverted.
func batchable(e *engines, client *goredis.Client, g []goredis.Cmder) bool {
	if len(g) == 1 {
		return !cachedRead(client, g[0])
	}
	return e.ordered != nil && !slices.ContainsFunc(g, diverted)
}

// SetAutoPipelineFrom sets ShardedOptions.AutoPipelineFrom to n for the
// commands that start from now on: to follow a change of load, or for a
// client built by NewShardedClientFromClients (whose value is the
// default, 4). It returns an error naming a negative n, and changes
// nothing then.
func (c *ShardedClient) SetAutoPipelineFrom(n int) error {
	from, err := autoPipelineFrom(n)
	if err != nil {
		return err
	}
	c.apFrom.Store(from)
	return nil
}

// divertedNames are the commands that go-redis's engine runs off its
// batches, on a pooled connection of their own, whatever their arguments
// (autopipeline.go of go-redis v9.23: outsidePipelineCommands,
// blockingCommands): connection state, and commands that block the
// connection.
var divertedNames = map[string]bool{
	"shutdown": true, "monitor": true, "select": true, "auth": true, "hello": true, "reset": true, "quit": true,
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true,
	"subscribe": true, "unsubscribe": true, "psubscribe": true, "punsubscribe": true, "ssubscribe": true, "sunsubscribe": true,
	"client": true, "readonly": true, "readwrite": true, "asking": true, "himport": true,
	"blpop": true, "brpop": true, "brpoplpush": true, "blmove": true, "blmovem": true, "blmpop": true,
	"bzpopmin": true, "bzpopmax": true, "bzmpop": true, "wait": true, "waitaof": true, "migrate": true,
}

// diverted reports whether go-redis's deferred engine may run cmd off its
// ordered batches (see divertedNames; XREAD, XREADGROUP and TS.READ with a
// BLOCK argument too, counted here wherever the argument is), where it can
// settle after a command queued after it: a pipeline's group that holds one
// runs as a plain pipeline, in order.
func diverted(cmd goredis.Cmder) bool {
	name := cmd.Name()
	switch name {
	case "xread", "xreadgroup", "ts.read":
		return slices.ContainsFunc(cmd.Args()[1:], func(a any) bool {
			s, ok := commands.Arg(a)
			return ok && strings.EqualFold(s, "block")
		})
	}
	return divertedNames[name]
}

// errRouterFullDuplex refuses AutoPipeline with FullDuplex: a full-duplex engine holds a connection of its client's own,
// and the router has none.
var errRouterFullDuplex = errors.New("shardedcache: AutoPipelineOptions.FullDuplex needs a connection of the client's own, and a sharded client's AutoPipeline has none; set it in the shards' options (ShardOptions.Options or ShardedOptions.Options)")

// routerEngine returns the router's blocking engine with opt, or else the
// shards' shared AutoPipelineOptions, or else go-redis's default (nil).
func (c *ShardedClient) routerEngine(opt *goredis.AutoPipelineOptions) (*goredis.AutoPipeliner, error) {
	if err := c.errIfClosed(); err != nil {
		return nil, err
	}
	if opt == nil && c.build.shared != nil {
		opt = c.build.shared.AutoPipelineOptions
	}
	if opt != nil && opt.FullDuplex {
		return nil, errRouterFullDuplex
	}
	return c.router.AutoPipelineWithOptions(opt)
}
