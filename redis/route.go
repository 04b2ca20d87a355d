package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/internal/workers"
	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// hook receives every command and pipeline that the router client builds,
// and runs them on the shards instead of on the router's own connection.
type hook struct{ c *ShardedClient }

func (h hook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h hook) ProcessHook(goredis.ProcessHook) goredis.ProcessHook { return h.c.process }

// ProcessPipelineHook serves both the router's pipelines and its
// transactions (go-redis passes the same hook both): a transaction is a
// pipeline framed by MULTI and EXEC.
func (h hook) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if n := len(cmds); n >= 2 && cmds[0].Name() == "multi" && cmds[n-1].Name() == "exec" {
			return h.c.processTx(ctx, cmds)
		}
		return h.c.processPipeline(ctx, cmds)
	}
}

// guard is added to the *redis.Tx of Watch: it refuses, before sending, a
// command whose keys are not all on the watched shard, and a keyless
// command that runs on every shard (DBSIZE, KEYS, SCAN, FLUSHDB, ...), as
// TxPipelined does.
type guard struct {
	c     *ShardedClient
	v     *view
	shard int
}

func (g guard) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// ProcessHook and ProcessPipelineHook run what check accepts on the
// watched shard, then report it as any command of the shard: to its health,
// and with a failure that is not the server's answer named by a
// *ShardError that matches the caller's cause when the caller ended it (see
// finishGroup).
func (g guard) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := g.check(ctx, cmd); err != nil {
			return err
		}
		return g.finish(ctx, next(ctx, cmd), cmd)
	}
}

func (g guard) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			if err := g.check(ctx, cmd); err != nil {
				return setErrs(cmds, err)
			}
		}
		return g.finish(ctx, next(ctx, cmds), cmds...)
	}
}

// finish reports cmds, run on the watched shard, whose run returned err,
// and returns what the caller gets: the first command's error, else err.
func (g guard) finish(ctx context.Context, err error, cmds ...goredis.Cmder) error {
	finishGroup(ctx, g.v, g.shard, cmds)
	if first := firstErr(cmds); first != nil || err == nil {
		return first
	}
	return g.v.Wrap(ctx, g.shard, err)
}

// check accepts a keyless command of one server (MULTI, EXEC, UNWATCH,
// ECHO, ...) or a command with every key on the guarded shard, whose keys it
// first settles during resharding. A keyless command that runs on every
// shard or walks them is an *UnsupportedError, as in TxPipelined; a command
// with keys elsewhere a *CrossShardError. Over one server (asOneServer) it
// accepts every command.
func (g guard) check(ctx context.Context, cmd goredis.Cmder) error {
	var ks keyShards
	switch err := keysOf(g.v, cmd, &ks); {
	case asOneServer(g.v, &ks):
		return nil
	case errors.Is(err, commands.ErrArity):
		return nil // the server refuses it, as one server would (see route)
	case err != nil:
		return err
	case ks.shard == noKeys && ks.info.Request != commands.ByKeys:
		return notInTx(ks.info.Name)
	case ks.shard == noKeys:
		return nil
	case ks.shard == g.shard:
		return g.v.Prepare(ctx, &ks.pending, nil)
	}
	ks.addShard(g.shard)
	return crossShard(g.v, ks.info.Name, ks.all)
}

// notInTx is the refusal of a command that runs on several shards inside a
// transaction.
func notInTx(command string) error {
	return &UnsupportedError{Command: command, Reason: "it runs on several shards, so not in a transaction"}
}

// view is one snapshot of the shards, for the whole of a command.
type view = shardcore.View[*goredis.Client]

// keysOf finds cmd in Redis's command table (ks.info) and the shards of its
// keys, into ks. A call that breaks the command's arity is an error matching
// commands.ErrArity (ks.info nil when it has no subcommand), with ks.shard
// noKeys.
func keysOf(v *view, cmd goredis.Cmder, ks *keyShards) error {
	args := cmd.Args()
	info := ks.info
	if !sameCommand(info, args) {
		var err error
		if info, err = commands.Lookup(args); err != nil {
			if !errors.Is(err, commands.ErrArity) {
				err = &UnsupportedError{Command: cmd.Name(), Reason: err.Error()}
			}
			*ks = keyShards{shard: noKeys, pending: ks.pending} // nothing of the last command stays
			return err
		}
	}
	// Field by field, keeping pending: a composite literal would build the
	// whole keyShards aside and copy it in, for every command of a pipeline
	// (a tenth of routing a pipeline's GETs: BenchmarkDispatchSteps). Every
	// field but pending is set here (TestKeyShardsReusedRoutesAsFresh).
	ks.v, ks.info, ks.args, ks.shard, ks.channels = v, info, args, noKeys, info.Channels()
	ks.all, ks.err, ks.owners = nil, nil, nil
	ks.nkeys, ks.first, ks.step = 0, 0, 0
	switch err := info.KeyPositions(args, ks.add); {
	case err == nil:
	case errors.Is(err, commands.ErrArity):
		ks.shard = noKeys // keys found before the arity check do not count
		return err
	default:
		return &UnsupportedError{Command: info.Name, Reason: err.Error()}
	}
	return ks.err
}

// sameCommand reports whether args call info, the command of the last call
// routed into the same keyShards (nil for none), as the commands of a
// pipeline often do: a command without subcommands, named as the table
// names it, which commands.Lookup would find again by that name alone.
func sameCommand(info *commands.Info, args []any) bool {
	if info == nil || info.HasSubcommands() || len(args) == 0 {
		return false
	}
	name, ok := args[0].(string)
	return ok && name == info.Name
}

// route finds where cmd runs, by Redis's rule for clients of a sharded
// deployment: r.shard is the shard of its keys; noKeys for a keyless command
// that Redis gives no request policy (ECHO, TIME, EVAL with no keys, ...),
// which runs on any one shard (see anyShard); fanOut when it runs on
// several, all_shards or multi_shard (r.info is its table entry); or walk
// for SCAN and RANDOMKEY (see walkOf). Over one server (asOneServer) every
// known command runs on shard 0, as sent.
//
// A call that breaks the command's arity (MGET or DEL with no key, CONFIG
// with no subcommand, MSET with a key and no value) is noKeys too: Redis
// refuses it with its own "wrong number of arguments" error before it runs
// anything, so any one shard answers as one server would, and nothing is
// written (TestCommandWrongArityRealRedis sends every command of the table
// so to redis-server).
// r.pending gathers what its keys need first during and after resharding
// (see View.Prepare), across the commands of a pipeline routed into the
// same r. r is the caller's, so that the hot path copies nothing. A command
// that the table refuses, or whose replies cannot be merged into its
// go-redis type, is an *UnsupportedError.
func route(v *view, cmd goredis.Cmder, r *keyShards) error {
	err := keysOf(v, cmd, r)
	if asOneServer(v, r) {
		r.shard = 0
		return nil
	}
	switch {
	case r.info != nil && r.info.Refused != "":
		return refusal(r.info, cmd)
	case err == nil:
	case errors.Is(err, commands.ErrArity):
		return nil // r.shard is noKeys
	default:
		return err
	}
	switch info := r.info; {
	case r.shard >= 0:
		return nil
	case r.shard == noKeys && info.Request == commands.AllShards,
		r.shard == manyShard && info.Request == commands.MultiShard:
		r.shard = fanOut
		return fanOutOf(info, cmd)
	case r.shard == noKeys && info.Request == commands.Special:
		r.shard = walk
		return nil
	case r.shard == noKeys:
		return nil
	}
	return crossShard(v, r.info.Name, r.all)
}

// asOneServer reports whether the command found by keysOf into ks runs as
// it would on v's server alone: v is one shard, outside a resharding
// window, and the table knows the command and refuses it, if at all, for
// several shards only (Info.OneServer). Such a command is sent unchanged,
// keys or not: a report of the server (INFO, SLOWLOG GET), a keyless
// command of every shard in a transaction (PING), a SORT with BY or GET
// patterns, or arguments whose keys cannot be found (the server answers
// with its own error). Connection state (SELECT, AUTH, ...) stays refused:
// a pooled connection would keep it; so does a key of a type that go-redis
// cannot send.
func asOneServer(v *view, ks *keyShards) bool {
	return ks.info != nil && (ks.info.Refused == "" || ks.info.OneServer) && ks.err == nil && oneServer(v)
}

// oneServer reports whether v is one shard, outside a resharding window.
func oneServer(v *view) bool { return v.Len() == 1 && !v.Moving() }

// refusal is the *UnsupportedError of a command that the table refuses.
func refusal(info *commands.Info, cmd goredis.Cmder) error {
	name := info.Name
	if strings.HasSuffix(name, ".") { // a family: name the command
		name = cmd.Name()
	}
	return &UnsupportedError{Command: name, Reason: info.Refused, Instead: info.Instead}
}

// anyShard is the shard of a keyless command that runs on any one shard: the
// first live one, so that such commands see one server while the shard
// list stays.
func anyShard(v *view) int {
	for i := range v.Len() {
		if !v.Ejected(i) {
			return i
		}
	}
	return 0
}

// fanOutOf accepts a command that runs on several shards when its replies
// can be merged into the command's go-redis type; otherwise nothing is sent.
func fanOutOf(info *commands.Info, cmd goredis.Cmder) error {
	var ok bool
	switch r := info.Response; cmd.(type) {
	case *goredis.Cmd:
		ok = r != commands.SpecialResponse
	case *goredis.IntCmd, *goredis.StatusCmd, *goredis.StringCmd: // see setVal
		ok = r == commands.AggSum || r == commands.AggMin || r == commands.AggMax ||
			r == commands.AllSucceeded || r == commands.OneSucceeded
	case *goredis.SliceCmd, *goredis.StringSliceCmd:
		ok = r == commands.Default
	case *goredis.BoolSliceCmd:
		ok = r == commands.AggLogicalAnd || r == commands.AggLogicalOr
	}
	if !ok {
		return &UnsupportedError{Command: info.Name, Reason: fmt.Sprintf("replies from several shards cannot be merged into a %T", cmd)}
	}
	return nil
}

// Values of keyShards.shard besides a shard index.
const (
	noKeys    = -1
	manyShard = -2
	fanOut    = -3 // set by route: the command runs on several shards
	walk      = -4 // set by route: SCAN or RANDOMKEY (see walkOf)
)

// plan is a command that runs on several shards: how many commands it
// sends to each shard (counts adds them to counts[shard] and returns
// counts), its commands for each shard (addTo) and the reply it makes of
// theirs (merge).
type plan interface {
	counts(counts []int) []int
	addTo(groups [][]goredis.Cmder)
	merge() error
}

// planOf builds the plan of cmd, which route sent to fanOut or walk; it
// fails, sending nothing, as split and walkOf do.
func planOf(ctx context.Context, v *view, cmd goredis.Cmder, r *keyShards) (plan, error) {
	if r.shard == walk {
		return walkOf(ctx, v, cmd)
	}
	f, err := split(ctx, v, cmd, r)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// keyShards finds the shard that owns all of a command's keys, fed one
// argument position at a time: shard is that shard, noKeys, or manyShard
// with every shard involved in all. err is an *UnsupportedError for a key of
// a type that go-redis does not send.
type keyShards struct {
	v     *view
	info  *commands.Info
	args  []any
	shard int
	all   []int // the shards involved, once more than one is
	// pending is what the keys need first during and after resharding
	// (barriers, keys to move); keysOf keeps it, so that it gathers the keys
	// of every command routed into the same keyShards.
	pending shardcore.Pending
	err     error
	// owners is the shard of each key, in the order of the key positions,
	// once the keys are on more than one shard (split uses it rather than
	// hash every key again); nil while they are on one.
	owners []int
	nkeys  int // keys seen
	// first is the position of the first key in args, step the distance
	// from it to the second (see split).
	first, step int
	// channels: the command's "keys" are channels (Info.Channels), placed
	// as keys are but never moved: a key of the same name is not theirs.
	channels bool
}

func (k *keyShards) add(pos int) {
	key, ok := commands.Arg(k.args[pos])
	if !ok {
		k.err = &UnsupportedError{Command: k.info.Name, Reason: fmt.Sprintf("key argument %d has type %T", pos, k.args[pos])}
		return
	}
	switch k.nkeys {
	case 0:
		k.first = pos
	case 1:
		k.step = pos - k.first
	}
	var s int
	if k.channels {
		s = k.v.Locate(key)
	} else {
		if isInternal(key) {
			k.err = &UnsupportedError{Command: k.info.Name, Reason: fmt.Sprintf("key %q: the prefix %q is reserved for the resharding protocol's own keys, which no migration moves", key, internalPrefix),
				Instead: "use another key name"}
			return
		}
		s = k.v.Track(&k.pending, key)
	}
	if k.owners == nil && k.shard >= 0 && s != k.shard {
		// The first key elsewhere: every key before it is on k.shard.
		k.owners = make([]int, k.nkeys, len(k.args))
		for i := range k.owners {
			k.owners[i] = k.shard
		}
	}
	if k.owners != nil {
		k.owners = append(k.owners, s)
	}
	k.nkeys++
	k.addShard(s)
}

func (k *keyShards) addShard(s int) {
	switch {
	case k.shard == noKeys:
		k.shard = s
	case k.shard >= 0 && k.shard != s:
		k.all = []int{k.shard, s}
		k.shard = manyShard
	case k.shard == manyShard && !slices.Contains(k.all, s):
		k.all = append(k.all, s)
	}
}

// crossShard builds the *CrossShardError of a command whose keys are on the
// given shards.
func crossShard(v *view, name string, shards []int) error {
	shards = slices.Sorted(slices.Values(shards))
	e := &CrossShardError{Command: name}
	for _, i := range shards {
		e.Shards = append(e.Shards, v.Ref(i))
	}
	return e
}

// classify tells what err, a shard client's error for a command, says about
// the shard: it is the redis backend's Health.Classify (see
// shardedclient.Class).
//   - Answered: success, redis.Nil and the server's replies to the command
//     itself.
//   - Local: a pool full of the caller's own commands (redis.ErrPoolTimeout,
//     redis.ErrPoolExhausted), a closed client (redis.ErrClosed), and a
//     fleet's fence (ErrFenced, ErrFenceClosed).
//   - Failed: a failure to reach the server (refused or reset connection,
//     timeout, TLS handshake, a pool that gave up dialing and returns its
//     last dial error) or to set up a connection (authentication, SELECT,
//     CLIENT SETNAME: see shardHook).
//
// The caller's cancel or deadline, whatever go-redis made of it (the
// context's error, or a read timeout cut short by the deadline), is never
// the shard's failure: shardcore.View.Report sees to that.
func classify(err error) shardedclient.Class {
	switch {
	case err == nil || err == goredis.Nil || isReplyError(err) && !isSetupError(err):
		return shardedclient.Answered
	case errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, goredis.ErrPoolExhausted) || errors.Is(err, goredis.ErrClosed) || errors.Is(err, ErrFenced) || errors.Is(err, ErrFenceClosed):
		return shardedclient.Local
	}
	return shardedclient.Failed
}

// isReplyError reports whether err is an error reply of the server. (Apart
// from classify, so that the common nil error allocates nothing.)
func isReplyError(err error) bool {
	var reply goredis.Error
	return errors.As(err, &reply)
}

// process runs one command: on its shard, or on several and merged.
func (c *ShardedClient) process(ctx context.Context, cmd goredis.Cmder) error {
	if stateful(cmd) { // before the view: see serverState
		if err := c.state.enter(ctx); err != nil {
			return err
		}
		defer c.state.done(cmd)
	}
	if err := c.errIfClosed(); err != nil {
		return err
	}
	for {
		epoch := c.fleet.step.Epoch()
		err, fenced := c.processOn(ctx, cmd)
		if !fenced || !c.fleet.await(ctx, epoch) {
			return err
		}
		cmd.SetErr(nil) // the fence refused its connection: it was not sent
	}
}

// processOn runs cmd on the current view; fenced reports that cmd, run on
// one shard, was refused by a fleet's fence before it was sent.
func (c *ShardedClient) processOn(ctx context.Context, cmd goredis.Cmder) (err error, fenced bool) {
	v := c.shards.Acquire()
	defer v.Release()
	var r keyShards
	if err := route(v, cmd, &r); err != nil {
		return err, false
	}
	if err := v.Prepare(ctx, &r.pending, nil); err != nil {
		return err, false
	}
	if r.shard == noKeys {
		r.shard = anyShard(v)
	}
	if r.shard >= 0 {
		err := c.send(ctx, v.Client(r.shard), cmd)
		return v.Finish(ctx, r.shard, err), err != nil && c.fleet.on.Load() && errors.Is(err, ErrFenced)
	}
	p, err := planOf(ctx, v, cmd, &r)
	if err != nil {
		return err, false
	}
	b := getGroupBuf(v.Len(), 0)
	defer b.release()
	p.counts(b.counts)
	groups := b.group()
	p.addTo(groups)
	c.sendGroups(ctx, v, groups)
	return p.merge(), false
}

// groupBuf holds the working slices of a call that groups commands by
// shard (a plan's parts in processOn, a pipeline's commands): how many
// commands go to each shard, each command's shard, and the groups. None
// outlives the call (the shards' pipelines copy their group), so they are
// kept in groupBufs between calls: a call reuses them instead of
// allocating them.
type groupBuf struct {
	counts []int // commands per shard
	shard  []int // a pipeline's commands' shards (see processPipeline)
	flat   []goredis.Cmder
	groups [][]goredis.Cmder
}

var groupBufs = sync.Pool{New: func() any { return new(groupBuf) }}

// maxKeptCommands bounds the commands a groupBuf keeps room for between
// calls, so that one huge pipeline does not hold its memory in the pool.
const maxKeptCommands = 1 << 12

// getGroupBuf returns a groupBuf from the pool with counts for shards
// shards and shard for cmds commands, all zero.
func getGroupBuf(shards, cmds int) *groupBuf {
	b := groupBufs.Get().(*groupBuf)
	b.counts, b.shard = zeros(b.counts, shards), zeros(b.shard, cmds)
	return b
}

// zeros returns s holding n zeros, in s's array when it has room.
func zeros(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// group returns per-shard groups of commands with room for b.counts[i]
// commands in group i, all carved from one array: filling them with
// append allocates nothing more.
func (b *groupBuf) group() [][]goredis.Cmder {
	total := 0
	for _, n := range b.counts {
		total += n
	}
	if cap(b.flat) < total {
		b.flat = make([]goredis.Cmder, total)
	}
	if cap(b.groups) < len(b.counts) {
		b.groups = make([][]goredis.Cmder, len(b.counts))
	}
	b.flat, b.groups = b.flat[:total], b.groups[:len(b.counts)]
	at := 0
	for i, n := range b.counts {
		b.groups[i] = b.flat[at : at : at+n]
		at += n
	}
	return b.groups
}

// release drops b's commands, so that the pool keeps none of them alive,
// and puts b back in the pool.
func (b *groupBuf) release() {
	clear(b.flat[:cap(b.flat)])
	clear(b.groups[:cap(b.groups)])
	if cap(b.flat) > maxKeptCommands || cap(b.shard) > maxKeptCommands {
		return
	}
	groupBufs.Put(b)
}

// processPipeline runs a pipeline: its commands grouped by shard, one
// pipeline per shard, the shards in parallel. Each command keeps its own
// reply and error; the first error in call order is returned.
func (c *ShardedClient) processPipeline(ctx context.Context, cmds []goredis.Cmder) error {
	if slices.ContainsFunc(cmds, stateful) { // before the view: see serverState
		if err := c.state.enter(ctx); err != nil {
			return setErrs(cmds, err)
		}
		defer c.state.done(cmds...)
	}
	if err := c.errIfClosed(); err != nil {
		return setErrs(cmds, err)
	}
	v := c.shards.Acquire()
	defer v.Release()
	// Route every command first (shard[j], or fanOut for a plan), counting
	// the commands of each shard, then fill groups sized to those counts.
	b := getGroupBuf(v.Len(), len(cmds))
	defer b.release()
	shard, counts := b.shard, b.counts
	var plans []plan
	var r keyShards
	for j, cmd := range cmds {
		err := route(v, cmd, &r)
		if r.shard == noKeys {
			r.shard = anyShard(v)
		}
		shard[j] = noKeys
		switch {
		case err != nil:
			cmd.SetErr(err)
		case r.shard >= 0:
			shard[j] = r.shard
			counts[r.shard]++
		default:
			p, err := planOf(ctx, v, cmd, &r)
			if err != nil {
				cmd.SetErr(err)
				continue
			}
			p.counts(counts)
			plans = append(plans, p)
			shard[j] = fanOut
		}
	}
	if err := v.Prepare(ctx, &r.pending, nil); err != nil {
		return setErrs(cmds, err)
	}
	groups := b.group()
	next := 0 // the next plan, in call order
	for j, cmd := range cmds {
		switch {
		case shard[j] >= 0:
			groups[shard[j]] = append(groups[shard[j]], cmd)
		case shard[j] == fanOut:
			plans[next].addTo(groups)
			next++
		}
	}
	c.sendGroups(ctx, v, groups)
	for _, p := range plans {
		_ = p.merge()
	}
	return firstErr(cmds)
}

// processTx runs a MULTI/EXEC pipeline (cmds wrapped in MULTI and EXEC by
// go-redis) on the one shard that owns every key of its commands.
func (c *ShardedClient) processTx(ctx context.Context, cmds []goredis.Cmder) error {
	if err := c.errIfClosed(); err != nil {
		return setErrs(cmds[1:len(cmds)-1], err)
	}
	v := c.shards.Acquire()
	defer v.Release()
	inner := cmds[1 : len(cmds)-1]
	acc := keyShards{shard: noKeys}
	var r keyShards
	for _, cmd := range inner {
		err := route(v, cmd, &r)
		if err == nil && (r.shard == fanOut || r.shard == walk) {
			err = notInTx(r.info.Name)
		}
		if err != nil {
			return setErrs(inner, err)
		}
		if r.shard != noKeys { // a keyless command of one server runs on the transaction's
			acc.addShard(r.shard)
		}
	}
	switch acc.shard {
	case manyShard:
		return setErrs(inner, crossShard(v, "multi", acc.all))
	case noKeys:
		acc.shard = anyShard(v)
	}
	if err := v.Prepare(ctx, &r.pending, nil); err != nil {
		return setErrs(inner, err)
	}
	pipe := v.Client(acc.shard).TxPipeline()
	_ = pipe.BatchProcess(ctx, inner...)
	_, _ = pipe.Exec(ctx)
	finishGroup(ctx, v, acc.shard, inner)
	return firstErr(inner)
}

// execGroups runs groups[i] on shard i, the shards in parallel: one command
// alone, several as a pipeline (execGroup).
func execGroups(ctx context.Context, v *view, groups [][]goredis.Cmder) {
	eachGroup(ctx, v, groups, plainGroups)
}

// eachGroup runs each shard i's group (sendGroup, with from: see there),
// the shards in parallel (workers.Each): one shard needs no worker.
func eachGroup(ctx context.Context, v *view, groups [][]goredis.Cmder, from int64) {
	workers.Each(len(groups), func(i int) bool { return len(groups[i]) == 0 },
		func(i int) { sendGroup(ctx, v, i, groups[i], from) })
}

// execGroup runs g on shard i: one command alone, several as a pipeline.
func execGroup(ctx context.Context, v *view, i int, g []goredis.Cmder) {
	client := v.Client(i)
	if len(g) == 1 {
		_ = client.Process(ctx, g[0])
	} else {
		pipe := client.Pipeline()
		_ = pipe.BatchProcess(ctx, g...) // one copy of g, not one append per command
		_, _ = pipe.Exec(ctx)
	}
	finishGroup(ctx, v, i, g)
}

// finishGroup reports one round trip of shard i, made under ctx, to its
// health (its first error that is not the server's answer, or success; see
// shardcore.View.Report) and names the shard in each command's error
// that is not the server's answer.
func finishGroup(ctx context.Context, v *view, i int, cmds []goredis.Cmder) {
	var failure error
	for _, cmd := range cmds {
		if err := cmd.Err(); v.Classify(err) != shardedclient.Answered {
			cmd.SetErr(v.Wrap(ctx, i, err))
			failure = cmp.Or(failure, err)
		}
	}
	v.Report(ctx, i, failure)
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
