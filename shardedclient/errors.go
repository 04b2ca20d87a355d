package shardedclient

import "fmt"

// ShardError is the failure of a call on one shard: it names the shard and
// wraps the cause, so errors.Is and errors.As see through it (to a
// net.Error, a context error, ...). Backends return it for transport
// failures (refused connection, timeout, closed client), for a server's
// refusal to set up a connection (authentication, ...), and for a call that
// the caller's cancel or deadline ended while it waited on the shard (then
// errors.Is(err, context.DeadlineExceeded) or context.Canceled holds, and
// the shard's health does not count it: see View.Report); a server's own
// replies to a command are returned unwrapped.
type ShardError struct {
	Index int    // position in the shard list
	Name  string // configured name, possibly empty
	Addr  string // server address, possibly empty
	Err   error  // the cause
}

func (e *ShardError) Error() string {
	return "shardedcache: " + label(e.Index, e.Name, e.Addr) + ": " + e.Err.Error()
}

// label names a shard in messages: shard 1 "b" (10.0.0.2:6379).
func label(index int, name, addr string) string {
	l := fmt.Sprintf("shard %d", index)
	if name != "" {
		l += fmt.Sprintf(" %q", name)
	}
	if addr != "" {
		l += " (" + addr + ")"
	}
	return l
}

func (e *ShardError) Unwrap() error { return e.Err }
