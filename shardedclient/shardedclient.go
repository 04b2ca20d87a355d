// Package shardedclient is a ring of shards, each holding a client of any
// type: it answers which shard owns a key (placed by a ring preset: Jedis,
// ketama, ...), tracks each shard's health (failure counts, ejection and
// rejoining, events and counters), swaps the shard list at run time and
// closes every shard. It knows nothing of Redis or memcached, so it maps
// keys to any named target (database tables, say); the backends (packages
// redis and memcache) are built on the same engine, and the types below are
// the vocabulary they share: their errors, health policy, events and
// statistics are these.
package shardedclient

import (
	"context"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// Shard is one shard: a client and its place on the ring (Name, Weight;
// Addr for messages and the ketama presets). Its Client must not be nil.
type Shard[C comparable] = shardcore.Shard[C]

// Info describes the shard that owns a key: its position, name and weight.
type Info = shardcore.Info

// Health is the policy for failing shards: FailureMode (nothing moves) or
// EjectMode (a shard that fails FailureLimit times in a row is ejected and
// probed back after RetryTimeout), with probes, events and a classifier.
type Health[C comparable] = shardcore.Health[C]

// Mode is what happens to the keys of a shard that keeps failing.
type Mode = shardcore.Mode

// The modes of Health.
const (
	// FailureMode (the default, memcached's "failure"): a dead shard's keys
	// fail until it returns; nothing moves.
	FailureMode = shardcore.FailureMode
	// EjectMode (twemproxy's auto_eject_hosts): the shard is ejected and its
	// keys go where the ring's preset sends them until it rejoins.
	EjectMode = shardcore.EjectMode
)

// Defaults of Health, twemproxy's: 2 failures, 30 s out, 1 s probes.
const (
	DefaultFailureLimit = shardcore.DefaultFailureLimit
	DefaultRetryTimeout = shardcore.DefaultRetryTimeout
	DefaultProbeTimeout = shardcore.DefaultProbeTimeout
)

// Class is what the error of a call on a shard says about the shard.
type Class = shardcore.Class

// The classes of Health.Classify.
const (
	// Answered: the server answered (success, a miss, an error reply).
	Answered = shardcore.Answered
	// Local: the call failed on the client's side, through no fault of
	// the server; the shard's health does not count it.
	Local = shardcore.Local
	// Failed: the shard failed; its health counts it.
	Failed = shardcore.Failed
)

// Event reports a change of a shard's health (Health.OnEvent).
type Event = shardcore.Event

// EventKind says what happened to a shard.
type EventKind = shardcore.EventKind

// The kinds of Event.
const (
	EventFailure  = shardcore.EventFailure
	EventEjected  = shardcore.EventEjected
	EventRejoined = shardcore.EventRejoined
)

// ShardStats are one shard's counters since it joined the shard list.
type ShardStats = shardcore.ShardStats

// ShardError is the failure of a call on one shard: it names the shard and
// wraps the cause (errors.Is and errors.As see through it).
type ShardError = shardcore.ShardError

// MultiShardError is the failure of a call that reached several shards on
// one or more of them; it lists each failed shard's *ShardError.
type MultiShardError = shardcore.MultiShardError

// ShardRef names one shard: its position, name and address.
type ShardRef = shardcore.ShardRef

// PlacementShiftError is SetShards's refusal of a list under which keys of
// shards that stay would move (it matches ErrPlacementShift).
type PlacementShiftError = shardcore.PlacementShiftError

// Errors of Sharded and of the backends' windows.
var (
	// ErrClosed is returned by calls after Close.
	ErrClosed = shardcore.ErrClosed
	// ErrPlacementShift is matched by a *PlacementShiftError.
	ErrPlacementShift = shardcore.ErrPlacementShift
	// ErrMoveInProgress: a resharding window is open already.
	ErrMoveInProgress = shardcore.ErrMoveInProgress
	// ErrMoveIncomplete: the window's migration has not finished.
	ErrMoveIncomplete = shardcore.ErrMoveIncomplete
)

// Sharded is a ring of shards, each holding a client of type C. Its methods
// are safe for concurrent use; lookups take no lock and allocate nothing.
type Sharded[C comparable] struct {
	core *shardcore.Sharded[C]
}

// New builds a Sharded over shards, in order, placed by preset p (nil is
// ring.Jedis{}: Jedis 3.x Sharded), with health policy h (the zero Health:
// failure mode, nothing ejected). Clients that implement io.Closer are
// closed by SetShards when their shard leaves, and by Close. With
// h.ProbeInterval set it starts a goroutine that Close stops. It returns an
// error for a bad policy, an empty list, a nil client (naming the shard),
// two shards on one address, or any error of ring.New (weight < 0,
// duplicate name, ...).
func New[C comparable](shards []Shard[C], h Health[C], p ring.Preset) (*Sharded[C], error) {
	core, err := shardcore.New(shards, shardcore.Backend[C]{Health: h}, p)
	if err != nil {
		return nil, err
	}
	return &Sharded[C]{core: core}, nil
}

// GetShard returns the client of the live shard that owns key.
func (s *Sharded[C]) GetShard(key string) C {
	v := s.core.Acquire()
	defer v.Release()
	return v.Client(v.Locate(key))
}

// Do runs fn with the client of the live shard that owns key, and reports
// fn's error to that shard's health (classified by Health.Classify; the
// caller's own cancel or deadline is never the shard's failure). The error
// returned is fn's, wrapped in a *ShardError naming the shard unless
// Classify says Answered. The shard's client stays open until fn returns,
// even if SetShards drops it meanwhile.
func (s *Sharded[C]) Do(ctx context.Context, key string, fn func(context.Context, C) error) error {
	v := s.core.Acquire()
	defer v.Release()
	i := v.Locate(key)
	return v.Finish(ctx, i, fn(ctx, v.Client(i)))
}

// Locate returns the index, in the shard list, of the live shard that owns
// key.
func (s *Sharded[C]) Locate(key string) int { return s.core.Locate(key) }

// GetShardInfo returns the index, name and weight of the live shard that owns key.
func (s *Sharded[C]) GetShardInfo(key string) Info { return s.core.GetShardInfo(key) }

// Ring returns the ring of the live shards (ejected ones own nothing).
func (s *Sharded[C]) Ring() *ring.Ring { return s.core.Ring() }

// AllShards returns a copy of the shard list, in order.
func (s *Sharded[C]) AllShards() []Shard[C] { return s.core.AllShards() }

// Plan returns the share of the keyspace that moves between each pair of
// shards if the shard list became nodes (see ring.Diff).
func (s *Sharded[C]) Plan(nodes []ring.Node) (ring.Diff, error) { return s.core.Plan(nodes) }

// SetShards replaces the shard list at run time, atomically (each GetShard or Do
// sees the old list or the new one), with minimal key movement. A shard
// that keeps its identity keeps its health record; the clients of shards
// that leave are closed once the calls using them have ended. It refuses
// (*PlacementShiftError) a list under which keys of shards that stay would
// move, and returns ErrClosed after Close.
func (s *Sharded[C]) SetShards(shards []Shard[C]) error { return s.core.SetShards(shards) }

// Stats returns each shard's counters, in list order.
func (s *Sharded[C]) Stats() []ShardStats { return s.core.Stats() }

// Changes returns a channel that receives a value after every change of the
// shard list or of a shard's ejection; changes not yet taken are merged into
// one value. stop ends the subscription (the channel is not closed).
func (s *Sharded[C]) Changes() (changes <-chan struct{}, stop func()) { return s.core.Changes() }

// Close stops the health goroutines, then closes every shard's client that
// implements io.Closer, and returns a *MultiShardError naming each shard
// whose Close failed, or nil. SetShards after Close returns ErrClosed.
func (s *Sharded[C]) Close() error { return s.core.Close() }
