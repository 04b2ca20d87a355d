package shardcore

import (
	"fmt"
	"strconv"
	"strings"
)

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

// ShardRef names one shard of a View: its position, name and address.
type ShardRef struct {
	Index int    // position in the shard list
	Name  string // configured name, possibly empty
	Addr  string // server address, possibly empty
}

// String names the shard as messages do: shard 1 "b" (10.0.0.2:6379).
func (r ShardRef) String() string { return label(r.Index, r.Name, r.Addr) }

// Ref returns shard i's ShardRef.
func (v *View[C]) Ref(i int) ShardRef {
	return ShardRef{Index: i, Name: v.shards[i].Name, Addr: v.shards[i].Addr}
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

// MultiShardError is the failure of a call that reached several shards on
// one or more of them: every fan-out of the backends returns it (a memcache
// GetMulti or FlushAll, a Redis ForEachShard, Close). It lists one
// *ShardError per failed shard, naming it (index, name, address) and
// wrapping the cause; the other shards succeeded (a write to them was
// applied). Its Unwrap returns them, so errors.As(err, &shardErr) finds the
// first failed shard and errors.Is sees every cause.
type MultiShardError struct {
	// Op is the call, as its method is named ("GetMulti", "ForEachShard",
	// "Close", ...), or the Redis command split over shards, in lower case
	// ("mset", "function load").
	Op string
	// Reached is the number of shards the call was for.
	Reached int
	// Shards are the failed shards, in shard order.
	Shards []*ShardError
}

func (e *MultiShardError) Error() string {
	var b strings.Builder
	b.WriteString("shardedcache: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(len(e.Shards)))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(e.Reached))
	b.WriteString(" shards failed")
	for i, s := range e.Shards {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(label(s.Index, s.Name, s.Addr) + ": " + s.Err.Error())
	}
	return b.String()
}

// Unwrap returns the failed shards' errors, each a *ShardError.
func (e *MultiShardError) Unwrap() []error {
	out := make([]error, len(e.Shards))
	for i, s := range e.Shards {
		out[i] = s
	}
	return out
}

// MultiErr collects the errors of a call on several shards of v (errs[j] is
// shard shards[j]'s; nil for success) into a *MultiShardError for op, each
// error named after its shard (kept as it is when it is already that
// shard's *ShardError), or returns nil when none failed.
func (v *View[C]) MultiErr(op string, shards []int, errs []error) error {
	var failed []*ShardError
	for j, err := range errs {
		if err == nil {
			continue
		}
		se, ok := err.(*ShardError)
		if !ok || se.Index != shards[j] {
			se = &ShardError{Index: shards[j], Name: v.shards[shards[j]].Name, Addr: v.shards[shards[j]].Addr, Err: err}
		}
		failed = append(failed, se)
	}
	if failed == nil {
		return nil
	}
	return &MultiShardError{Op: op, Reached: len(shards), Shards: failed}
}
