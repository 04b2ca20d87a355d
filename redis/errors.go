package redis

import (
	"errors"
	"fmt"
	"strings"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// ErrCrossShard is matched (errors.Is) by a *CrossShardError.
var ErrCrossShard = errors.New("keys are on different shards")

// ErrUnsupported is matched (errors.Is) by an *UnsupportedError.
var ErrUnsupported = errors.New("not supported on a sharded client")

// CrossShardError is returned, before anything is sent, for a command or
// transaction whose keys are on several shards and that cannot be split.
type CrossShardError struct {
	Command string // the command, lower case ("rename", "multi", ...)
	// Shards are the shards involved, in shard order, each by its index in
	// the shard list, name and address (Shard.Addr).
	Shards []shardedclient.ShardRef
}

func (e *CrossShardError) Error() string {
	names := make([]string, len(e.Shards))
	for i, s := range e.Shards {
		names[i] = s.String()
	}
	return fmt.Sprintf("shardedcache: %s: keys are on different shards (%s); key tags can put them on one",
		e.Command, strings.Join(names, ", "))
}

// Is reports whether target is ErrCrossShard.
func (e *CrossShardError) Is(target error) bool { return target == ErrCrossShard }

// UnsupportedError is returned, before anything is sent, for a command that
// has no single meaning on a sharded client.
type UnsupportedError struct {
	Command string // the command, lower case
	Reason  string
	// Instead says what to use instead; empty means ForEachShard or
	// GetShard, to run the command on chosen shards.
	Instead string
}

func (e *UnsupportedError) Error() string {
	instead := e.Instead
	if instead == "" {
		instead = "use ForEachShard or GetShard to run it on chosen shards"
	}
	return fmt.Sprintf("shardedcache: %s: %s; %s", e.Command, e.Reason, instead)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ErrEjected is matched (errors.Is) by an *EjectedError, and by the Err of
// a migration's *KeyMoveError for a key left where it is because a shard
// that owns it before or after the move is ejected (Run moves it once the
// shard is back).
var ErrEjected = errors.New("shards are ejected")

// EjectedError is returned, before anything is sent, for a keyless command
// that changes every shard (FLUSHDB, FLUSHALL, SCRIPT LOAD and FLUSH,
// FUNCTION LOAD, DELETE and FLUSH, CONFIG SET, ...) while shards are
// ejected: it would not reach them, and they would serve their old state
// when they rejoin. No shard is sent the command. Run it again once they
// have rejoined (Stats), or on chosen shards with ForEachShard.
type EjectedError struct {
	Command string                   // the command, lower case ("flushdb", "function|load", ...)
	Shards  []shardedclient.ShardRef // the ejected shards, in shard order
}

func (e *EjectedError) Error() string {
	names := make([]string, len(e.Shards))
	for i, s := range e.Shards {
		names[i] = s.String()
	}
	verb := "are"
	if len(names) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("shardedcache: %s: sent to no shard: it must reach every shard, and %s %s ejected; run it once they rejoin, or on chosen shards with ForEachShard",
		e.Command, strings.Join(names, ", "), verb)
}

// Is reports whether target is ErrEjected.
func (e *EjectedError) Is(target error) bool { return target == ErrEjected }
