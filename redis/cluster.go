package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/ring"
)

// A Redis Cluster as one shard of the ring. Its shard client is a
// *redis.Client that never connects: a hook hands every command and
// pipeline to a *redis.ClusterClient, which routes by hash slot and follows
// MOVED and ASK. So the resharding window moves keys into a cluster as into
// any shard (BeginClusterMove), and a ShardedClient whose only shard is a
// cluster sends every command to it.

// ClusterShard configures a shard that is a Redis Cluster (ShardOptions.Cluster).
type ClusterShard struct {
	// Options are the cluster's go-redis options; Addrs must name at
	// least one node (the seeds).
	Options *goredis.ClusterOptions
	// WaitReplicas, when above 0, makes every RESTORE sent to the cluster
	// wait (WAIT on the master's connection that restored it, within
	// WaitTimeout) until that many replicas acknowledged it; fewer
	// acknowledgements fail the RESTORE with a *ReplicationError, so a move
	// keeps the key's old copy until a failover cannot lose the new one.
	WaitReplicas int
	// WaitTimeout bounds each WAIT; 0 means one second.
	WaitTimeout time.Duration
}

// clusterAddr is the identity of a cluster shard (its Shard.Addr):
// "cluster:" and its seed addresses, sorted, joined by ",".
func clusterAddr(cs *ClusterShard) string {
	if cs.Options == nil {
		return "cluster:"
	}
	return "cluster:" + strings.Join(slices.Sorted(slices.Values(cs.Options.Addrs)), ",")
}

// clusterShard builds the shard of so, whose Cluster is set.
func (b *builder) clusterShard(so ShardOptions, reuse []Shard) (Shard, error) {
	cs := *so.Cluster
	switch {
	case so.Addr != "" || so.Options != nil || so.Failover != nil:
		return Shard{}, errors.New("give either Cluster, or Addr and Options, or Failover")
	case cs.Options == nil || len(cs.Options.Addrs) == 0:
		return Shard{}, errors.New("Cluster needs Options with Addrs")
	}
	if cs.WaitTimeout <= 0 {
		cs.WaitTimeout = time.Second
	}
	from := cs
	opt := *cs.Options
	from.Options = &opt
	sh := Shard{Name: so.Name, Weight: so.Weight, Addr: clusterAddr(&cs)}
	sh.Client = b.client(reuse, sh, from, func() *goredis.Client {
		built := opt // go-redis fills in its defaults
		return newClusterShardClient(goredis.NewClusterClient(&built), cs)
	})
	return sh, nil
}

// clusters maps the shard client of every cluster shard to its cluster
// client and settings.
var clusters sync.Map // *goredis.Client -> *forward

// newClusterShardClient returns the shard client over cc: a client that
// never connects, whose hook forwards to cc.
func newClusterShardClient(cc *goredis.ClusterClient, cs ClusterShard) *goredis.Client {
	c := newRouter(func(context.Context, string, string) (net.Conn, error) { return nil, errRouterDial })
	f := &forward{cc: cc, wait: cs.WaitReplicas, waitTimeout: cs.WaitTimeout}
	c.AddHook(f)
	clusters.Store(c, f)
	return c
}

// clusterOf returns the cluster client behind a cluster shard's client, or
// nil for another client.
func clusterOf(c *goredis.Client) *forward {
	f, _ := clusters.Load(c)
	fw, _ := f.(*forward)
	return fw
}

// clusterClient returns the cluster client behind a cluster shard's client,
// or nil for another client: the pub/sub fan-in subscribes through it.
func clusterClient(c *goredis.Client) *goredis.ClusterClient {
	if f := clusterOf(c); f != nil {
		return f.cc
	}
	return nil
}

// ClusterClient returns the *redis.ClusterClient of the shard that is a
// Redis Cluster (the last one BeginClusterMove or ShardOptions.Cluster
// gave), or nil when no shard is one. It is the client's own: do not close it.
func (c *ShardedClient) ClusterClient() *goredis.ClusterClient {
	for _, sh := range slices.Backward(c.shards.AllShards()) {
		if f := clusterOf(sh.Client); f != nil {
			return f.cc
		}
	}
	return nil
}

// onNode hands fn every client that serves shard client c: c itself, or,
// for a cluster shard, the client of every cluster node it connects to
// from now on (ClusterClient.OnNewNode; its nodes are connected on first
// use, so a hook given before the first command sees them all).
func onNode(c *goredis.Client, fn func(*goredis.Client)) {
	if f := clusterOf(c); f != nil {
		f.cc.OnNewNode(fn)
		return
	}
	fn(c)
}

// closeShardClient closes shard client c (its autopipelining engines
// forgotten) and, for a cluster shard, its cluster client, which it then
// forgets.
func closeShardClient(c *goredis.Client) error {
	err := c.Close()
	autopipelined.Delete(c) // after Close: a command meanwhile cannot build engines again
	leaveServer(c)
	if f := clusterOf(c); f != nil {
		clusters.Delete(c)
		err = errors.Join(err, f.cc.Close())
	}
	return err
}

// eachServer calls fn with the client of every server that holds keys of
// shard client c: c itself, or every master of a cluster shard (in
// parallel; the first error is returned).
func eachServer(ctx context.Context, c *goredis.Client, fn func(ctx context.Context, server *goredis.Client) error) error {
	if f := clusterOf(c); f != nil {
		return f.cc.ForEachMaster(ctx, fn)
	}
	return fn(ctx, c)
}

// unlinkBySlot removes keys from server, one UNLINK per hash slot in one
// pipeline: a cluster node refuses a command whose keys are in several
// slots.
func unlinkBySlot(ctx context.Context, server *goredis.Client, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	bySlot := map[int][]string{}
	for _, k := range keys {
		bySlot[Slot(k)] = append(bySlot[Slot(k)], k)
	}
	pipe := server.Pipeline()
	for _, group := range bySlot {
		pipe.Unlink(ctx, group...)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// watchOn returns the Watch of shard client c: its own, or its cluster's
// (every key in one hash slot, on that slot's master).
func watchOn(c *goredis.Client) func(context.Context, func(*goredis.Tx) error, ...string) error {
	if f := clusterOf(c); f != nil {
		return f.cc.Watch
	}
	return c.Watch
}

// forward is the hook of a cluster shard's client.
type forward struct {
	cc          *goredis.ClusterClient
	wait        int
	waitTimeout time.Duration
}

func (f *forward) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// ProcessHook runs one command on the cluster, on the master of its keys'
// slot (see check for what is refused).
func (f *forward) ProcessHook(goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := f.check(cmd); err != nil {
			return err
		}
		if f.wait > 0 && waitsForReplicas(cmd) {
			return f.restore(ctx, []goredis.Cmder{cmd})
		}
		err := f.cc.Process(ctx, cmd)
		if err = f.nodeErr(ctx, cmd, err); err != nil {
			cmd.SetErr(err)
		}
		return err
	}
}

// ProcessPipelineHook runs a pipeline on the cluster (the cluster client
// groups it by node), or a transaction (MULTI ... EXEC) on the master of
// the one hash slot of its keys: a transaction whose keys are in several
// slots is refused as a whole with a *CrossSlotError, and so is, in a
// pipeline, each command whose keys are in several slots.
func (f *forward) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		n := len(cmds)
		if n >= 2 && cmds[0].Name() == "multi" && cmds[n-1].Name() == "exec" {
			inner := cmds[1 : n-1]
			var s slotSet
			for _, cmd := range inner {
				if _, err := s.addCmd(cmd); err != nil {
					return setErrs(inner, err)
				}
			}
			if err := s.err("multi"); err != nil {
				return setErrs(inner, err)
			}
			return f.exec(ctx, f.cc.TxPipeline(), inner)
		}
		send := make([]goredis.Cmder, 0, n)
		restores := 0
		for _, cmd := range cmds {
			if err := f.check(cmd); err != nil {
				cmd.SetErr(err)
				continue
			}
			if waitsForReplicas(cmd) {
				restores++
			}
			send = append(send, cmd)
		}
		if f.wait > 0 && restores == len(send) && restores > 0 {
			_ = f.restore(ctx, send)
		} else if len(send) > 0 {
			_ = f.exec(ctx, f.cc.Pipeline(), send)
		}
		return firstErr(cmds)
	}
}

// exec runs cmds in pipe and names the node in each failure.
func (f *forward) exec(ctx context.Context, pipe goredis.Pipeliner, cmds []goredis.Cmder) error {
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, cmd := range cmds {
		if err := f.nodeErr(ctx, cmd, cmd.Err()); err != nil {
			cmd.SetErr(err)
		}
	}
	return firstErr(cmds)
}

// check refuses, before sending, a command whose keys are in several hash
// slots (a *CrossSlotError: MGET, DEL and MSET included, as Redis Cluster
// does), and a keyless command that concerns the whole keyspace or every
// server (SCAN, RANDOMKEY, DBSIZE, KEYS, FLUSHDB, FUNCTION LOAD, ...: an
// *UnsupportedError), which the cluster client would send to one node.
func (f *forward) check(cmd goredis.Cmder) error {
	var s slotSet
	info, err := s.addCmd(cmd)
	switch {
	case err != nil || info == nil:
		return err // an unknown command: the cluster answers it as Redis does
	case s.first < 0 && (info.Request == commands.AllShards || info.Request == commands.Special):
		return &UnsupportedError{Command: info.Name, Reason: "on a Redis Cluster shard it would reach one node; run it on ClusterClient() (ForEachMaster)"}
	}
	return s.err(info.Name)
}

// waitsForReplicas reports whether cmd is one that a cluster shard with
// WaitReplicas follows with WAIT (see forward.restore): a RESTORE, or a
// move's restoring or settling script (a settled "restored" finishes the
// move: its record must be on the replicas too).
func waitsForReplicas(cmd goredis.Cmder) bool {
	args := cmd.Args()
	switch cmd.Name() {
	case "restore":
		return true
	case "eval":
		script, _ := args[1].(string)
		return script == restoreScript || script == settleScript
	}
	return false
}

// restore runs commands that write what a move needs (waitsForReplicas)
// on the masters of their keys' slots, each master's in one pipeline
// ended by WAIT f.wait, so that WAIT counts the replicas that acknowledged
// those writes; a command whose master got fewer acknowledgements fails
// with a *ReplicationError (the key is on the master, and a move keeps its
// old copy: the move stays unsettled until the token's record is on the
// replicas, or a failover lost it and settling revokes it). A command sent
// to a master that no longer serves the slot fails with its MOVED reply,
// and the cluster's layout is reloaded for the next try.
func (f *forward) restore(ctx context.Context, cmds []goredis.Cmder) error {
	byMaster := map[*goredis.Client][]goredis.Cmder{}
	for _, cmd := range cmds {
		var s slotSet
		_, _ = s.addCmd(cmd) // checked (forward.check)
		master, err := f.cc.MasterForKey(ctx, s.firstKey)
		if err != nil {
			cmd.SetErr(f.nodeErr(ctx, cmd, err))
			continue
		}
		byMaster[master] = append(byMaster[master], cmd)
	}
	var wg sync.WaitGroup
	for master, group := range byMaster {
		wg.Go(func() {
			pipe := master.Pipeline()
			for _, cmd := range group {
				_ = pipe.Process(ctx, cmd)
			}
			wait := goredis.NewIntCmd(ctx, "wait", f.wait, f.waitTimeout.Milliseconds())
			_ = pipe.Process(ctx, wait)
			_, _ = pipe.Exec(ctx)
			for _, cmd := range group {
				err := cmd.Err()
				if err == nil && wait.Err() == nil && wait.Val() < int64(f.wait) {
					err = &ReplicationError{Node: master.Options().Addr, Acked: int(wait.Val()), Want: f.wait}
				} else if err == nil {
					err = wait.Err()
				}
				if err = f.nodeErr(ctx, cmd, err); err != nil {
					cmd.SetErr(err)
				}
			}
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && isReplyError(err) &&
			(strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
			// The slot moved (a failover, resharding in the cluster): the
			// key stays where it was, and the next try finds the new master.
			f.cc.ReloadState(ctx)
			break
		}
	}
	return firstErr(cmds)
}

// nodeErr names the cluster node in err when err is a failure to reach it
// (not the server's answer): a *ClusterNodeError with the master of the
// slot of cmd's first key. A keyless command's failure names no node.
func (f *forward) nodeErr(ctx context.Context, cmd goredis.Cmder, err error) error {
	var ne *ClusterNodeError
	var re *ReplicationError
	switch {
	case err == nil || err == goredis.Nil || isReplyError(err) || errors.As(err, &ne) || errors.As(err, &re) ||
		errors.Is(err, goredis.ErrClosed) || ctx.Err() != nil:
		return err
	}
	var s slotSet
	if _, err := s.addCmd(cmd); err != nil || s.first < 0 {
		return err
	}
	node := "?"
	if m, merr := f.cc.MasterForKey(context.WithoutCancel(ctx), s.firstKey); merr == nil {
		node = m.Options().Addr
	}
	f.cc.ReloadState(ctx) // a failover may have moved the slot
	return &ClusterNodeError{Node: node, Slot: s.first, Err: err}
}

// slotSet gathers the hash slots of commands' keys: first is the slot of
// the first key (-1 before any), multi lists every slot once more than
// one is involved, each with its first key.
type slotSet struct {
	first    int
	firstKey string
	multi    map[int]string
	started  bool
}

// addCmd adds the slots of cmd's keys and returns cmd's table entry. An
// unknown command adds nothing and returns nil and no error: its keys are
// not known.
func (s *slotSet) addCmd(cmd goredis.Cmder) (*commands.Info, error) {
	if !s.started {
		s.first, s.started = -1, true
	}
	args := cmd.Args()
	info, err := commands.Lookup(args)
	if err != nil {
		return nil, nil
	}
	return info, info.KeyPositions(args, func(pos int) {
		if key, ok := commands.Arg(args[pos]); ok {
			s.add(key)
		}
	})
}

func (s *slotSet) add(key string) {
	slot := Slot(key)
	switch {
	case s.first < 0:
		s.first, s.firstKey = slot, key
	case s.multi == nil && slot != s.first:
		s.multi = map[int]string{s.first: s.firstKey, slot: key}
	case s.multi != nil:
		if _, ok := s.multi[slot]; !ok {
			s.multi[slot] = key
		}
	}
}

// err is the *CrossSlotError of command when more than one slot was added.
func (s *slotSet) err(command string) error {
	if s.multi == nil {
		return nil
	}
	e := &CrossSlotError{Command: command}
	for _, slot := range slices.Sorted(maps.Keys(s.multi)) {
		e.Slots = append(e.Slots, slot)
		e.Keys = append(e.Keys, s.multi[slot])
	}
	return e
}

// ErrCrossSlot is matched (errors.Is) by a *CrossSlotError.
var ErrCrossSlot = errors.New("keys are in different hash slots")

// CrossSlotError is returned, before anything is sent, for a command,
// transaction or WATCH on a Redis Cluster shard whose keys are in several
// hash slots and that the cluster cannot split: Redis Cluster would refuse
// it (CROSSSLOT). Keys that must meet need one hash tag ({...}; see Slot).
type CrossSlotError struct {
	Command string   // the command, lower case ("rename", "multi", ...)
	Slots   []int    // the hash slots involved, ascending, each 0..16383
	Keys    []string // a key of each slot, in the order of Slots
}

func (e *CrossSlotError) Error() string {
	parts := make([]string, len(e.Slots))
	for i, slot := range e.Slots {
		parts[i] = fmt.Sprintf("slot %d (key %q)", slot, e.Keys[i])
	}
	return fmt.Sprintf("shardedcache: %s: keys are in different hash slots of the Redis Cluster (%s); a common hash tag {...} puts them in one",
		e.Command, strings.Join(parts, ", "))
}

// Is reports whether target is ErrCrossSlot.
func (e *CrossSlotError) Is(target error) bool { return target == ErrCrossSlot }

// ClusterNodeError is the failure to reach the cluster node that serves a
// command's hash slot (refused or reset connection, timeout): Node is the
// master's address as the cluster announces it, Slot the slot of the
// command's first key.
type ClusterNodeError struct {
	Node string
	Slot int
	Err  error
}

func (e *ClusterNodeError) Error() string {
	return fmt.Sprintf("cluster node %s (slot %d): %v", e.Node, e.Slot, e.Err)
}

func (e *ClusterNodeError) Unwrap() error { return e.Err }

// ReplicationError is a RESTORE on the cluster master Node that fewer
// replicas than ClusterShard.WaitReplicas acknowledged within WaitTimeout.
// The key is on the master; a move keeps its old copy and retries.
type ReplicationError struct {
	Node        string
	Acked, Want int
}

func (e *ReplicationError) Error() string {
	return fmt.Sprintf("cluster node %s: %d of %d replica(s) acknowledged the write", e.Node, e.Acked, e.Want)
}

// Slot returns the Redis Cluster hash slot of key, 0..16383: CRC16
// (XMODEM) of its hash tag modulo 16384. The hash tag is what lies between
// the first '{' and the first '}' after it, when that is not empty; else
// the whole key. Redis Cluster's rule differs from Jedis's key tags
// (ring.KeyTag) at the edges: "{}}x" has no tag here (Jedis: "}"), and
// "{}{x}" has none here (Jedis: "}{x").
func Slot(key string) int {
	// CRC16Twemproxy's low 16 bits are CRC-16/XMODEM, Redis Cluster's CRC16.
	return int(ring.CRC16Twemproxy([]byte(ring.ClusterHashTag(key))) & 16383)
}

// BeginClusterMove opens a resharding window (see BeginResharding) whose
// new shard list is one shard, the Redis Cluster of cs: every key's new
// owner is the cluster. Before the window opens, every key the cluster's
// masters hold is removed (SCAN and UNLINK on each master: a copy there is
// stale, since no key is the cluster's yet; the protocol's own keys,
// "__shardedcache:...", stay). In the window a key moves to its slot's
// master before any command uses it, and a Migration moves the rest, by
// the moves of a fleet (package fleet, "The move into a Redis Cluster":
// marked and read on its shard, restored on the slot's master with that
// slot's token records, then deleted from its shard); once the migration
// has run to the end, the client sends every command to the cluster. It
// is the move of a fleet of one process: processes that share the shards
// move together with JoinFleet and fleet.Reshard instead (each one's own
// BeginClusterMove would remove, as stale, the keys another already moved
// there). It returns the errors of BeginResharding (a cluster it cannot
// reach: a *shardedclient.ShardError naming the cluster shard).
func (c *ShardedClient) BeginClusterMove(cs ClusterShard) error {
	return c.BeginResharding([]ShardOptions{{Name: "cluster", Cluster: &cs}})
}
