package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/internal/fleetstep"
	"github.com/shardedcache/shardedcache/ring"
)

// fleetState is a client's part in a fleet (JoinFleet): the state it
// applied, and the connection name of each shard's client.
type fleetState struct {
	on     atomic.Bool
	joined atomic.Bool // JoinFleet succeeded, or is under way
	member string      // random, names this process's connections
	// step is the state applied; its epoch is read by commands that a
	// fence refused (see process): a newer one means a new view.
	step fleetstep.Applied
	// moves is the moving-key state of the Moving step applied, nil
	// otherwise.
	moves  atomic.Pointer[fleetMoves]
	labels map[string]string // shard (name@addr/db) -> its client's connection name (under step's Apply)
}

// connPrefix starts the connection names of fleet clients:
// "shardedcache-fleet:<epoch>:<member>".
const connPrefix = "shardedcache-fleet:"

// ErrFenced is matched (errors.Is) by a *FencedError: a command refused
// before it was sent (a command that may have run is ErrFenceClosed).
var ErrFenced = errors.New("shardedcache: fenced: a resharding of the fleet has moved past this process's state")

// FencedError is a command's error when a server refused this process's
// connection: a resharding of the fleet fenced the server at Fence, and
// this process has not applied that step yet (see package fleet). The
// command was not sent. A command of the sharded client that gets it waits
// for the process to apply the new state (at most FleetWait, within its
// context) and runs again on the new shard list; the error reaches the
// caller only when that wait ends first. It is the caller's, not the
// shard's: no failure is counted and no shard is ejected.
type FencedError struct {
	Epoch uint64 // the connection's epoch
	Fence uint64 // the oldest epoch the server accepts
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("shardedcache: fenced: this connection's epoch %d is older than the server's fence %d (the fleet's resharding moved on; this process has not applied the new state)", e.Epoch, e.Fence)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// ErrFenceClosed is matched (errors.Is) by a *FenceClosedError. Unlike
// ErrFenced (a command refused before it was sent), it marks a command that
// may have run.
var ErrFenceClosed = errors.New("shardedcache: fenced in flight: the connection was lost after a resharding of the fleet fenced the server")

// FenceClosedError is the error of a command that lost its connection
// while in flight, to a server that, asked afterwards, refuses this
// process's epoch: a resharding of the fleet fenced it (the driver's Fence
// closes the connections of older epochs). Its reply was lost, and it ran
// before the fence or not at all, so a write may have been applied: it is
// not sent again, and it does not match ErrFenced, which means "not sent".
// For the same reason a fleet's shard clients do not retry (MaxRetries is
// -1 whatever the options say): a retry would meet the fence, be refused
// with a *FencedError, and pass for a command never sent. Like a
// *FencedError it is the caller's failure, not the shard's: no failure is
// counted and no shard is ejected. The caller gets it inside a
// *shardedclient.ShardError naming the shard; errors.Is sees the
// connection's error (io.EOF, a reset) through both.
type FenceClosedError struct {
	// Fenced is the server's refusal of a new connection, which the client
	// opens on its own after the loss to ask whether the fence caused it
	// (once for all the commands that lost their connections meanwhile, at
	// most 1 s).
	Fenced *FencedError
	Err    error // the command's error: the connection's
}

func (e *FenceClosedError) Error() string {
	return fmt.Sprintf("shardedcache: fenced in flight: the connection was lost (%v), and the server now refuses this process's epoch %d (the fleet's fence is %d): the command ran before the fence or not at all", e.Err, e.Fenced.Epoch, e.Fenced.Fence)
}

// Is makes errors.Is(err, ErrFenceClosed) true.
func (e *FenceClosedError) Is(target error) bool { return target == ErrFenceClosed }

func (e *FenceClosedError) Unwrap() error { return e.Err }

// fenceWatch is a fleet shard client's view of the fleet's fence (see
// shardHook): the client, whose server it asks, and the refusal of the
// client's epoch once found. A fence only rises, so a refusal found once
// stays true for the client's life.
type fenceWatch struct {
	client  *goredis.Client
	probes  singleflight.Group // one probe at a time, shared by those who ask meanwhile
	refusal atomic.Pointer[FencedError]
}

// newFenceWatch returns the fenceWatch of shard client c when c is a
// fleet's (its connections carry an epoch), else nil.
func newFenceWatch(c *goredis.Client) *fenceWatch {
	if _, ok := connEpoch(c.Options().ClientName); !ok {
		return nil
	}
	return &fenceWatch{client: c}
}

// probeTimeout bounds a fence probe (fenceWatch.refused): a server that
// does not answer within it is taken for one that accepts the epoch, and
// the loss is the shard's failure.
const probeTimeout = time.Second

// refused returns the refusal (a *FencedError) of a new connection to the
// client's server with the client's options (its fence check, and the
// user's Dialer and OnConnect, run for it), or nil when the server accepts
// it, does not answer within probeTimeout, or ctx ends first (the caller
// does not wait past its own deadline; the probe, shared, goes on). It asks on a connection of its
// own (soloClient): the client's pool may still hold connections that the
// fence closed, which would fail with their EOF. Concurrent calls share
// one probe; a refusal found is kept.
func (w *fenceWatch) refused(ctx context.Context) *FencedError {
	if f := w.refusal.Load(); f != nil {
		return f
	}
	probed := w.probes.DoChan("", func() (any, error) {
		probe := soloClient(w.client)
		defer probe.Close()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		defer cancel()
		var fenced *FencedError
		if errors.As(probe.Ping(ctx).Err(), &fenced) {
			w.refusal.Store(fenced)
		}
		return fenced, nil
	})
	select {
	case r := <-probed:
		return r.Val.(*FencedError)
	case <-ctx.Done():
		return nil // the caller's end, not the shard's failure (see View.Report)
	}
}

// fenceProbe tells whether the commands of one call (a command, a
// pipeline's) that lost their connection lost it to the fleet's fence,
// asking the server once for all of them.
type fenceProbe struct {
	watch  *fenceWatch // nil: the client is not a fleet's
	asked  bool
	fenced *FencedError // the server's refusal, nil when it accepts the client's epoch
}

// closed returns err, a command's error, as a *FenceClosedError when the
// command lost its connection (connLost) and the server now refuses the
// client's epoch. Any other err is returned as is.
func (p *fenceProbe) closed(ctx context.Context, err error) error {
	if p.watch == nil || err == nil || !connLost(err) {
		return err
	}
	if !p.asked {
		p.asked, p.fenced = true, p.watch.refused(ctx)
	}
	if p.fenced == nil {
		return err
	}
	return &FenceClosedError{Fenced: p.fenced, Err: err}
}

// connLost reports whether err is the loss of the command's connection:
// closed or reset by the server (not a timeout).
func connLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// FleetWait bounds how long a command refused by a fence waits for this
// process to apply the fleet's new state before it returns the
// *FencedError (its context may end it sooner): 5 s.
const FleetWait = 5 * time.Second

// fenceCheckScript refuses, with "FENCED <fence>", a connection whose
// epoch ARGV[1] is older than the server's fence (KEYS[1] "epoch").
const fenceCheckScript = `
local f = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if tonumber(ARGV[1]) < f then return redis.error_reply('FENCED ' .. f) end
return 1`

// fenceCheck is the OnConnect of a fleet client whose connections carry
// epoch: after go-redis set the connection's name (HELLO SETNAME), it asks
// the server whether it accepts that epoch, then runs the user's
// OnConnect, if any. The order matters (see Fence): a connection the check
// passes was named before, so a later fence sees it and closes it.
func fenceCheck(epoch uint64, next func(context.Context, *goredis.Conn) error) func(context.Context, *goredis.Conn) error {
	return func(ctx context.Context, cn *goredis.Conn) error {
		err := cn.Eval(ctx, fenceCheckScript, []string{fenceKey}, epoch).Err()
		if err != nil {
			if f, ok := strings.CutPrefix(err.Error(), "FENCED "); ok {
				fence, _ := strconv.ParseUint(f, 10, 64)
				return &FencedError{Epoch: epoch, Fence: fence}
			}
			return err
		}
		if next != nil {
			return next(ctx, cn)
		}
		return nil
	}
}

// connEpoch returns the epoch of a fleet connection name, and whether name
// is one.
func connEpoch(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, connPrefix)
	if !ok {
		return 0, false
	}
	e, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(e, 10, 64)
	return n, err == nil
}

// JoinFleet makes c a member of the fleet whose state store holds: it
// reads the fleet's shard list (storing c's own list first, as the
// fleet's, when the store is empty and opt.Initial is nil), switches c to
// it, and keeps c on every later state until the returned Member is
// closed. Every process that shares the shards joins the same store; a
// resharding is then driven by one of them (fleet.Reshard with
// c.FleetBackend), and every member follows it with no lost write (see
// package fleet for the protocol and its guarantees). A client joins once:
// a second JoinFleet returns fleet.ErrJoined.
//
// A fleet's shards are plain servers (Addr and DB; not Sentinel shards),
// placed by c's preset, or a Redis Cluster as the fleet's whole list (the
// move into a cluster, see fleet.Shard.Cluster); their go-redis options are
// c's shared options (ShardedOptions.Options), since the store holds no
// credentials. A member names its connections "shardedcache-fleet:<epoch>:
// <member>" (ClientName is overridden) and checks, when one is set up,
// that the server accepts its epoch: one EVAL per new connection, nothing
// per command. Its shard clients never retry a command (MaxRetries is -1
// whatever the options say; see FenceClosedError): over TLS, or wherever
// the pool cannot see that a server or load balancer closed an idle
// connection, set ConnMaxIdleTime below that idle timeout. It returns the store's error, an error naming a shard c
// cannot place in a fleet, or the failure to apply the first state.
func (c *ShardedClient) JoinFleet(ctx context.Context, store fleet.Store, opt fleet.MemberOptions) (*fleet.Member, error) {
	if err := c.errIfClosed(); err != nil {
		return nil, err
	}
	if opt.Initial == nil {
		list, err := c.fleetList()
		if err != nil {
			return nil, err
		}
		opt.Initial = list
	}
	if !c.fleet.joined.CompareAndSwap(false, true) {
		return nil, fleet.ErrJoined
	}
	m, err := fleet.Join(ctx, store, c.FleetBackend(MigrateOptions{}), opt)
	if err != nil {
		c.fleet.joined.Store(false)
	}
	return m, err
}

// FleetBackend returns c as a fleet.Backend: for fleet.Reshard and
// fleet.Resume, which drive a resharding of the fleet from this process.
// Its migration (Backend.Migrate) runs with opt's BatchSize, Parallelism,
// InFlight and KeysPerSecond; the other fields are set by the fleet
// (ServerSide is refused: see NewMigration).
func (c *ShardedClient) FleetBackend(opt MigrateOptions) fleet.Backend {
	c.enableFleet()
	opt.Resume, opt.KeepWindow = nil, true
	return fleetBackend{c, opt}
}

func (c *ShardedClient) enableFleet() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fleet.on.Load() {
		return
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	c.fleet.member = hex.EncodeToString(b[:])
	c.build.fence = true
	c.fleet.on.Store(true)
}

// fleetList returns c's shard list as a fleet's, or an error naming a
// shard that a fleet cannot hold (a Sentinel shard, a Unix socket). A
// Redis Cluster shard is held with its seeds (fleet.Shard.Cluster).
func (c *ShardedClient) fleetList() ([]fleet.Shard, error) {
	var out []fleet.Shard
	for i, sh := range c.shards.AllShards() {
		if cc := clusterClient(sh.Client); cc != nil {
			out = append(out, fleet.Shard{Name: sh.Name, Addr: strings.Join(cc.Options().Addrs, ","), Weight: sh.Weight, Cluster: true})
			continue
		}
		o := sh.Client.Options()
		if strings.HasPrefix(sh.Addr, "sentinel:") || o.Network == "unix" {
			return nil, fmt.Errorf("shardedcache: shard %d (%q, %s): a fleet's shards are servers reached by host:port", i, sh.Name, sh.Addr)
		}
		out = append(out, fleet.Shard{Name: sh.Name, Addr: o.Addr, DB: o.DB, Weight: sh.Weight})
	}
	return out, nil
}

// fleetBackend is a ShardedClient as a fleet.Backend.
type fleetBackend struct {
	c   *ShardedClient
	opt MigrateOptions // of Migrate
}

// CheckTarget implements fleet.TargetChecker: every shard of st.Target
// that is new to the fleet answers a PING (a Redis Cluster shard: every
// master, each with cluster support), and the migration's options are ones
// a fleet can use (not ServerSide).
func (b fleetBackend) CheckTarget(ctx context.Context, st fleet.State) error {
	if b.opt.ServerSide {
		return fmt.Errorf("%w: a fleet's resharding moves keys by its own protocol, which MIGRATE cannot follow", ErrServerSide)
	}
	for _, sh := range st.Target {
		if slices.Contains(st.Shards, sh) {
			continue
		}
		var err error
		if sh.Cluster {
			cc := b.c.adminCluster(sh)
			err = cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error { return m.Ping(ctx).Err() })
			_ = cc.Close()
		} else {
			err = b.c.onAdmin([]fleet.Shard{sh}, func(_ fleet.Shard, client *goredis.Client) error { return client.Ping(ctx).Err() })
		}
		if err != nil {
			return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr, err)
		}
	}
	return nil
}

// Floor implements fleet.EpochFloor: the highest fence epoch or moved mark
// of any shard of list.
func (b fleetBackend) Floor(ctx context.Context, list []fleet.Shard) (uint64, error) {
	var floor uint64
	err := b.c.onAdmin(serverShards(list), func(_ fleet.Shard, client *goredis.Client) error {
		vals, err := client.HMGet(ctx, fenceKey, "epoch", "moved").Result()
		for _, v := range vals {
			if s, ok := v.(string); ok {
				n, _ := strconv.ParseUint(s, 10, 64)
				floor = max(floor, n)
			}
		}
		return err
	})
	return floor, err
}

// fleetServer returns the server and DB that sh reaches, its host resolved
// ("127.0.0.1:6379/0" for "localhost:6379"), as serverKey does for a
// shard; its address as written when it does not resolve.
func fleetServer(sh fleet.Shard) string {
	if sh.Cluster {
		return "cluster:" + strings.Join(slices.Sorted(slices.Values(sh.Seeds())), ",")
	}
	addr := sh.Addr
	if srv, ok := resolveServer(addr); ok {
		addr = srv
	}
	return addr + "/" + strconv.Itoa(sh.DB)
}

// shardKey identifies sh across lists, for its connection name.
func shardKey(sh fleet.Shard) string { return sh.Name + "@" + sh.Addr + dbSuffix(sh.DB) }

// Apply implements fleet.Backend: it switches the client to st's shard
// list (Stable, Preparing) or opens the resharding window to st.Target
// (Moving), giving the clients of the sources new connections named with
// st's epoch. A state that does not follow the applied one step by step
// (a process that joins mid-change or was cut off) renames every shard's
// connections with st's epoch. An epoch not newer than the applied one
// does nothing.
func (b fleetBackend) Apply(_ context.Context, st fleet.State) error {
	return b.c.fleet.step.Apply(st, func(prev fleet.State) error { return b.c.applyStep(prev, st) })
}

// applyStep switches c from the applied state prev to st (see Apply).
func (c *ShardedClient) applyStep(prev, st fleet.State) error {
	next := prev.Epoch+1 == st.Epoch
	windowOpen := c.shards.Window() != nil
	all := func(fleet.Shard) bool { return true }
	var err error
	switch st.Step {
	case fleet.Stable:
		if windowOpen && next && prev.Step == fleet.Moving {
			err = c.shards.EndWindow(true) // the driver migrated every key
			break
		}
		err = c.fleetSwitch(st.Epoch, st.Shards, all, windowOpen)
	case fleet.Preparing:
		if next && !windowOpen && prev.Step == fleet.Stable && slices.Equal(prev.Shards, st.Shards) {
			break // routing stays
		}
		err = c.fleetSwitch(st.Epoch, st.Shards, all, windowOpen)
	case fleet.Moving:
		// The window opens in one switch, in which the sources get clients
		// of st's epoch (every shard does after missed steps; see
		// fleetBegin). A process not at Preparing of this change first
		// routes by st.Shards with the connections it has.
		relabel := all
		if next && prev.Step == fleet.Preparing && prev.Change == st.Change && !windowOpen {
			var sources map[string]bool
			if sources, err = c.fleetSources(st); err != nil {
				break
			}
			relabel = func(sh fleet.Shard) bool { return sources[shardKey(sh)] }
		} else if err = c.fleetSwitch(st.Epoch-1, st.Shards, func(fleet.Shard) bool { return false }, windowOpen); err != nil {
			break
		}
		err = c.fleetBegin(st, relabel)
	}
	return err
}

// await waits, at most FleetWait and within ctx, until a state newer than
// epoch is applied; it reports whether one was. Outside a fleet it
// returns false at once.
func (f *fleetState) await(ctx context.Context, epoch uint64) bool {
	return f.on.Load() && f.step.Wait(ctx, FleetWait, func() bool { return f.step.Epoch() > epoch }) == nil
}

// fleetSwitch switches c to list (SetShards): a shard for which relabel
// is true, or that has no client yet, gets a client whose connections are
// named with epoch; the others keep theirs. endWindow first ends an open
// window.
func (c *ShardedClient) fleetSwitch(epoch uint64, list []fleet.Shard, relabel func(fleet.Shard) bool, endWindow bool) error {
	opts, labels := c.fleetOptions(epoch, list, relabel)
	if endWindow {
		if err := c.shards.EndWindow(true); err != nil {
			return err
		}
	}
	if err := c.SetShards(opts); err != nil {
		return err
	}
	c.fleet.labels = labels
	return nil
}

// fleetBegin opens the window of st, a Moving step, from c's list
// (st.Shards) to st.Target (BeginWindow, without removing stale copies:
// the driver did, once, for the whole fleet) in one switch, in which every
// shard of either list for which relabel is true gets a client whose
// connections are named with st's epoch: the target's shards, and those
// that leave. So no view ever routes by st.Shards with connections that a
// source's fence accepts: a command routed by st.Shards (this process's
// view before, or one begun on it still running) reaches a source only on
// a connection the fence refuses, or closed. If the switch fails, nothing
// changes.
func (c *ShardedClient) fleetBegin(st fleet.State, relabel func(fleet.Shard) bool) error {
	opts, labels := c.fleetOptions(st.Epoch, st.Target, relabel)
	prevOpts, prevLabels := c.fleetOptions(st.Epoch, st.Shards, relabel)
	byShard := make(map[string]ShardOptions, len(st.Shards))
	for i, sh := range st.Shards {
		byShard[shardKey(sh)] = prevOpts[i]
	}
	var built []Shard
	leaving := func(sh Shard) (*goredis.Client, error) { // under c.mu (switchShards)
		so, ok := byShard[sh.Name+"@"+sh.Addr] // shardKey's form
		if !ok {
			return sh.Client, nil
		}
		next, err := c.build.shard(so, c.shards.AllShards())
		if err != nil {
			return nil, fmt.Errorf("shardedcache: shard %q (%s): %w", sh.Name, sh.Addr, err)
		}
		if next.Client != sh.Client {
			built = append(built, next)
		}
		return next.Client, nil
	}
	if err := c.switchShards(opts, c.beginWindow(st.Change, st.MovingEpoch(), leaving, nil)); err != nil {
		closeClients(built, c.shards.AllShards())
		return err
	}
	for k, label := range prevLabels { // the shards that leave
		if _, ok := labels[k]; !ok {
			labels[k] = label
		}
	}
	c.fleet.labels = labels
	return nil
}

// fleetOptions returns the options of list's shards, with c's shared
// options, and their connection names (by shardKey): a shard for which
// relabel is true, or that has no name yet, is named with epoch; the
// others keep theirs. A Redis Cluster shard is never a source: its
// connections carry no epoch.
func (c *ShardedClient) fleetOptions(epoch uint64, list []fleet.Shard, relabel func(fleet.Shard) bool) ([]ShardOptions, map[string]string) {
	name := connPrefix + strconv.FormatUint(epoch, 10) + ":" + c.fleet.member
	labels := make(map[string]string, len(list))
	opts := make([]ShardOptions, len(list))
	for i, sh := range list {
		if sh.Cluster {
			opts[i] = ShardOptions{Name: sh.Name, Weight: sh.Weight, Cluster: &ClusterShard{Options: &goredis.ClusterOptions{Addrs: sh.Seeds()}}}
			continue
		}
		label, kept := c.fleet.labels[shardKey(sh)]
		if !kept || relabel(sh) {
			label = name
		}
		labels[shardKey(sh)] = label
		opts[i] = ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight, Options: &goredis.Options{DB: sh.DB, ClientName: label}}
	}
	return opts, labels
}

// fleetRings returns the rings of st's two lists (Target's nil while
// Stable), placed by c's preset, their nodes' addresses with the DB.
func (c *ShardedClient) fleetRings(st fleet.State) (from, to *ring.Ring, err error) {
	build := func(list []fleet.Shard) (*ring.Ring, error) {
		nodes := make([]ring.Node, len(list))
		for i, sh := range list {
			nodes[i] = ring.Node{Name: sh.Name, Weight: sh.Weight, Addr: sh.Addr + dbSuffix(sh.DB)}
		}
		return ring.New(nodes, c.shards.Preset())
	}
	if from, err = build(st.Shards); err != nil || st.Target == nil {
		return from, nil, err
	}
	to, err = build(st.Target)
	return from, to, err
}

// fleetSources returns the shards of st.Shards that lose keys to
// st.Target, by shardKey.
func (c *ShardedClient) fleetSources(st fleet.State) (map[string]bool, error) {
	from, to, err := c.fleetRings(st)
	if err != nil {
		return nil, err
	}
	diff, err := ring.Compare(from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range diff.Moves {
		out[shardKey(st.Shards[m.From])] = true
	}
	return out, nil
}

// adminClient returns a client of sh with c's shared options, outside the
// fleet: its connections carry no epoch, so no fence closes or refuses
// them (the driver's own fence and removal of stale copies use it).
func (c *ShardedClient) adminClient(sh fleet.Shard) *goredis.Client {
	var o goredis.Options
	if c.build.shared != nil {
		o = *c.build.shared
	}
	o.Addr, o.DB, o.ClientName, o.OnConnect = sh.Addr, sh.DB, "", nil
	retryDefaults(&o)
	maintDefault(&o)
	return goredis.NewClient(&o)
}

// adminCluster returns a cluster client of sh, a Redis Cluster shard, with
// c's shared options, outside the fleet.
func (c *ShardedClient) adminCluster(sh fleet.Shard) *goredis.ClusterClient {
	o := goredis.ClusterOptions{Addrs: sh.Seeds()}
	if c.build.shared != nil {
		inherit(&o, c.build.shared)
	}
	o.ClientName, o.OnConnect = "", nil
	return goredis.NewClusterClient(&o)
}

// serverShards returns the shards of list that are servers, not Redis
// Cluster shards.
func serverShards(list []fleet.Shard) []fleet.Shard {
	return slices.DeleteFunc(slices.Clone(list), func(sh fleet.Shard) bool { return sh.Cluster })
}

// onAdmin runs fn on an admin client of each shard of list, in order, and
// closes them; the first error, naming the shard, stops it.
func (c *ShardedClient) onAdmin(list []fleet.Shard, fn func(fleet.Shard, *goredis.Client) error) error {
	for _, sh := range list {
		client := c.adminClient(sh)
		err := fn(sh, client)
		_ = client.Close()
		if err != nil {
			return fmt.Errorf("shard %q (%s): %w", sh.Name, sh.Addr+dbSuffix(sh.DB), err)
		}
	}
	return nil
}

// dropStaleScript unlinks KEYS[2..] unless the server is marked moved for
// the resharding of Moving epoch ARGV[1] or a later one (KEYS[1] is the
// fence: the server's, or on a Redis Cluster the one of the keys' hash
// slot): then it does nothing and returns -1.
const dropStaleScript = `
if tonumber(redis.call('HGET', KEYS[1], 'moved') or '0') >= tonumber(ARGV[1]) then return -1 end
local n = 0
for i = 2, #KEYS do n = n + redis.call('UNLINK', KEYS[i]) end
return n`

// DropStale implements fleet.Backend: it scans every shard of st.Target
// and unlinks the keys that the shard gains in the resharding and did
// not hold as their owner before (owners compared by server and DB), in
// batches that the server refuses once Fence marked it moved. A Redis
// Cluster target gains every key: each of its masters is scanned, and
// every key but the fleet's own goes, in batches of one hash slot that
// the slot's fence refuses once Fence marked it moved.
func (b fleetBackend) DropStale(ctx context.Context, st fleet.State) error {
	c := b.c
	m := st.MovingEpoch()
	if fleet.IsCluster(st.Target) {
		sh := st.Target[0]
		cc := c.adminCluster(sh)
		defer cc.Close()
		err := cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
			return scanAll(ctx, master, func(keys []string) error {
				keys = slices.DeleteFunc(keys, isInternal)
				return dropStaleOn(ctx, master, keys, func(k string) string { return slotKey(fenceKey, Slot(k)) }, m)
			})
		})
		if err != nil {
			return fmt.Errorf("shard %q (Redis Cluster %s): %w", sh.Name, sh.Addr, err)
		}
		return nil
	}
	fromRing, toRing, err := c.fleetRings(st)
	if err != nil {
		return err
	}
	// Owners compared by server and DB resolved: a shard whose address is
	// written another way is the same shard, whose keys are not stale.
	from, to := servers(st.Shards, fromRing), servers(st.Target, toRing)
	return c.onAdmin(st.Target, func(sh fleet.Shard, client *goredis.Client) error {
		me := fleetServer(sh)
		return scanAll(ctx, client, func(keys []string) error {
			keys = slices.DeleteFunc(keys, func(k string) bool { return isInternal(k) || to(k) != me || from(k) == me })
			return dropStaleOn(ctx, client, keys, func(string) string { return fenceKey }, m)
		})
	})
}

// dropStaleOn unlinks keys from server by dropStaleScript, for Moving
// epoch m: one script per fence (fence(key) names a key's), in one
// pipeline. A fence that refuses fails it.
func dropStaleOn(ctx context.Context, server *goredis.Client, keys []string, fence func(string) string, m uint64) error {
	byFence := map[string][]string{}
	for _, k := range keys {
		byFence[fence(k)] = append(byFence[fence(k)], k)
	}
	if len(byFence) == 0 {
		return nil
	}
	pipe := server.Pipeline()
	cmds := make([]*goredis.Cmd, 0, len(byFence))
	for f, ks := range byFence {
		cmds = append(cmds, pipe.Eval(ctx, dropStaleScript, append([]string{f}, ks...), m))
	}
	_, _ = pipe.Exec(ctx)
	for _, cmd := range cmds {
		n, err := cmd.Int()
		if err == nil && n < 0 {
			err = errors.New("the server is already marked moved for this resharding or a later one: removing stale copies now would remove moved keys")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// servers returns the function that gives a key's owner's fleetServer in
// list, placed by r.
func servers(list []fleet.Shard, r *ring.Ring) func(string) string {
	names := make([]string, len(list))
	for i, sh := range list {
		names[i] = fleetServer(sh)
	}
	return func(key string) string { return names[r.Locate(key)] }
}

// scanAll calls fn with every page of a SCAN of client's DB.
func scanAll(ctx context.Context, client *goredis.Client, fn func([]string) error) error {
	for cursor, first := uint64(0), true; first || cursor != 0; first = false {
		keys, next, err := client.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return err
		}
		if err := fn(keys); err != nil {
			return err
		}
		cursor = next
	}
	return nil
}

// raiseScript raises field ARGV[1] of the fence (KEYS[1]: "epoch" or
// "moved") to ARGV[2], never lowers it: a fence that lands late (a driver
// paused past its lease) changes nothing a later one set.
const raiseScript = `
local f = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if f < tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1`

// Fence implements fleet.Backend: on each source (a shard of st.Shards
// that loses keys), in this order, it raises the fence of its DB to
// st.MovingEpoch(), closes the fleet's connections to that DB named with
// an older epoch (CLIENT LIST, CLIENT KILL ID), and marks the DB moved for
// the Moving epoch; it marks every other shard of both lists moved, and a
// Redis Cluster target each of its hash slots (the fence of each slot,
// see DropStale). Both marks are only ever raised.
func (b fleetBackend) Fence(ctx context.Context, st fleet.State) error {
	c := b.c
	sources, err := c.fleetSources(st)
	if err != nil {
		return err
	}
	m := st.MovingEpoch()
	if fleet.IsCluster(st.Target) {
		if err := c.markSlotsMoved(ctx, st.Target[0], m); err != nil {
			return err
		}
	}
	var all []fleet.Shard // every server and DB of both lists, once
	for _, sh := range serverShards(append(slices.Clone(st.Shards), st.Target...)) {
		if !slices.ContainsFunc(all, func(o fleet.Shard) bool { return fleetServer(o) == fleetServer(sh) }) {
			all = append(all, sh)
		}
	}
	return c.onAdmin(all, func(sh fleet.Shard, client *goredis.Client) error {
		if slices.ContainsFunc(st.Shards, func(o fleet.Shard) bool { return sources[shardKey(o)] && fleetServer(o) == fleetServer(sh) }) {
			if err := client.Eval(ctx, raiseScript, []string{fenceKey}, "epoch", m).Err(); err != nil {
				return fmt.Errorf("raising the fence: %w", err)
			}
			if err := killOlder(ctx, client, sh.DB, m); err != nil {
				return err
			}
		}
		if err := client.Eval(ctx, raiseScript, []string{fenceKey}, "moved", m).Err(); err != nil {
			return fmt.Errorf("marking the server moved: %w", err)
		}
		return nil
	})
}

// markSlotsMoved marks every hash slot of sh, a Redis Cluster shard, moved
// for Moving epoch m (raiseScript on each slot's fence, in one pipeline
// that the cluster client splits by master).
func (c *ShardedClient) markSlotsMoved(ctx context.Context, sh fleet.Shard, m uint64) error {
	cc := c.adminCluster(sh)
	defer cc.Close()
	cmds, err := cc.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for slot := range slotCount {
			p.Eval(ctx, raiseScript, []string{slotKey(fenceKey, slot)}, "moved", m)
		}
		return nil
	})
	if err == nil {
		err = firstErr(cmds)
	}
	if err != nil {
		return fmt.Errorf("shard %q (Redis Cluster %s): marking its hash slots moved: %w", sh.Name, sh.Addr, err)
	}
	return nil
}

// killOlder closes the fleet's connections to DB db of client's server
// that are named with an epoch older than m.
func killOlder(ctx context.Context, client *goredis.Client, db int, m uint64) error {
	list, err := client.ClientList(ctx).Result()
	if err != nil {
		return fmt.Errorf("listing connections: %w", err)
	}
	pipe := client.Pipeline()
	for _, line := range strings.Split(list, "\n") {
		f := map[string]string{}
		for _, field := range strings.Fields(line) {
			if k, v, ok := strings.Cut(field, "="); ok {
				f[k] = v
			}
		}
		if e, ok := connEpoch(f["name"]); ok && e < m && f["db"] == strconv.Itoa(db) {
			pipe.ClientKillByFilter(ctx, "ID", f["id"])
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReplyError(err) { // a connection that closed meanwhile: "No such client"
		return fmt.Errorf("closing fenced connections: %w", err)
	}
	return nil
}

// Migrate implements fleet.Backend: it runs a Migration of the window
// that Apply opened for st (Run, KeepWindow) with the fleet's move, then
// settles every move still marked on a source, until none is. Progress is
// reported every 500 ms and at the end.
func (b fleetBackend) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	c := b.c
	if mv := c.fleet.moves.Load(); mv == nil || mv.change != st.Change || c.shards.Window() == nil {
		return fmt.Errorf("%w: Migrate of resharding %s before Apply of its Moving step", errNotFleet, st.Change)
	}
	m, err := c.NewMigration(b.opt)
	if err != nil {
		return err
	}
	report := func() {
		if progress == nil {
			return
		}
		var p fleet.Progress
		for _, sp := range m.Progress() {
			p.Sources++
			p.Scanned += sp.Scanned
			p.Moved += sp.Moved
			if sp.Done {
				p.Done++
			}
		}
		progress(p)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report()
			case <-stop:
				return
			}
		}
	})
	err = m.Run(ctx)
	close(stop)
	wg.Wait()
	report()
	if err != nil {
		return err
	}
	if err := c.settleMarks(ctx); err != nil {
		return err
	}
	v := c.shards.Acquire()
	defer v.Release()
	return cleanUp(ctx, v)
}

// settleMarks moves (settling their marks) the keys still marked on the
// sources of the window, until no source holds a mark.
func (c *ShardedClient) settleMarks(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		v := c.shards.Acquire()
		prev := v.Previous()
		if prev == nil {
			v.Release()
			return ErrNoResharding
		}
		var marked []string
		var err error
		for i := range prev.Len() {
			keys, e := v.Client(v.PreviousIndex(i)).HKeys(ctx, marksKey).Result()
			if e != nil {
				err = v.Err(v.PreviousIndex(i), fmt.Errorf("listing move marks: %w", e))
				break
			}
			marked = append(marked, keys...)
		}
		if err == nil && len(marked) > 0 {
			err = c.moveNow(ctx, v, marked)
		}
		v.Release()
		switch {
		case err != nil:
			return err
		case len(marked) == 0:
			return nil
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}

// moveNow moves keys on v (with their locks, as a command would).
func (c *ShardedClient) moveNow(ctx context.Context, v *view, keys []string) error {
	var r keyShards
	for _, k := range keys {
		v.Track(&r.pending, k)
	}
	return v.Prepare(ctx, &r.pending, nil)
}
