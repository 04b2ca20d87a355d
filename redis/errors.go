package redis

import (
	"errors"
	"fmt"
	"strings"
)

// ErrCrossShard is matched (errors.Is) by a *CrossShardError.
var ErrCrossShard = errors.New("keys are on different shards")

// ErrUnsupported is matched (errors.Is) by an *UnsupportedError.
var ErrUnsupported = errors.New("not supported on a sharded client")

// CrossShardError is returned, before anything is sent, for a command or
// transaction whose keys are on several shards and that cannot be split.
type CrossShardError struct {
	Command string   // the command, lower case ("rename", "multi", ...)
	Shards  []string // the shards involved, as "shard <i> \"<name>\""
}

func (e *CrossShardError) Error() string {
	return fmt.Sprintf("shardedcache: %s: keys are on different shards (%s); key tags can put them on one",
		e.Command, strings.Join(e.Shards, ", "))
}

// Is reports whether target is ErrCrossShard.
func (e *CrossShardError) Is(target error) bool { return target == ErrCrossShard }

// UnsupportedError is returned, before anything is sent, for a command that
// has no single meaning on a sharded client.
type UnsupportedError struct {
	Command string // the command, lower case
	Reason  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("shardedcache: %s: %s; use ForEachShard or GetShard to run it on chosen shards",
		e.Command, e.Reason)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }
