package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// fanout is one command split into parts, one per shard, whose replies
// merge back into the command.
type fanout struct {
	v    *view
	cmd  goredis.Cmder
	info *commands.Info
	// owners is the shard of each key of the command, in key order; nil for
	// a keyless command.
	owners []int
	// slot is, for each shard of v, 1 + the index of its part; 0 when it
	// has none.
	slot  []int
	parts []part
}

// part is the piece of a fanout that runs on one shard.
type part struct {
	shard int
	cmd   *goredis.Cmd
	nkeys int   // the part's keys
	args  []any // its arguments, while split builds them
	vals  []any // its reply's values, while combine merges them
	// next is where split puts the part's next key in args, then where
	// combine takes its next value from vals.
	next int
}

// split builds the parts of cmd: the same command on every shard when it is
// keyless (see everyShard), else one command per shard with that shard's
// keys (and the arguments that go with each key, such as MSET's values), in
// their order in cmd. r is what route found: the shard of each key
// (r.owners) and where the keys are (r.first, r.step). A command that runs
// on several shards has one key specification (TestMultiShardKeysEvenlySpaced),
// so its keys are evenly spaced: key k is at r.first + k*r.step, followed by
// its r.step-1 arguments (KeyPositions has checked that the last key has
// them: an odd MSET is an arity error, answered by one shard). It fails,
// sending nothing, with an *EjectedError for a keyless command that changes
// every shard while some are ejected.
func split(ctx context.Context, v *view, cmd goredis.Cmder, r *keyShards) (*fanout, error) {
	args := cmd.Args()
	f := &fanout{v: v, cmd: cmd, info: r.info, owners: r.owners}
	if len(f.owners) == 0 {
		return f, f.everyShard(ctx, v, args)
	}
	prefix, suffix := args[:r.first], args[r.first+len(f.owners)*r.step:]
	// One pass over the keys numbers the shards in the order of their first
	// key (r.all holds as many) and counts their keys, so that the parts
	// and all their arguments are allocated once, at their size; a second
	// puts each key, with its arguments, in its part.
	f.slot = make([]int, v.Len())
	f.parts = make([]part, 0, len(r.all))
	for _, s := range f.owners {
		if f.slot[s] == 0 {
			f.parts = append(f.parts, part{shard: s})
			f.slot[s] = len(f.parts)
		}
		f.parts[f.slot[s]-1].nkeys++
	}
	flat := make([]any, len(f.parts)*(len(prefix)+len(suffix))+len(f.owners)*r.step)
	at := 0
	for i := range f.parts {
		size := len(prefix) + f.parts[i].nkeys*r.step + len(suffix)
		p := &f.parts[i]
		p.args, p.next = flat[at:at+size:at+size], len(prefix)
		copy(p.args, prefix)
		copy(p.args[size-len(suffix):], suffix)
		at += size
	}
	for k, s := range f.owners {
		p := &f.parts[f.slot[s]-1]
		for j, pos := 0, r.first+k*r.step; j < r.step; j++ {
			p.args[p.next+j] = args[pos+j]
		}
		p.next += r.step
	}
	for i := range f.parts {
		p := &f.parts[i]
		p.cmd = goredis.NewCmd(ctx, p.args...)
		p.args, p.next = nil, 0
	}
	return f, nil
}

// everyShard adds a part with args on every shard, for a keyless command.
// A command that reads (DBSIZE, KEYS, PING, SCRIPT EXISTS, ...) skips an
// ejected shard: the live shards serve every key. Any other changes each
// shard (FLUSHDB, FLUSHALL, SCRIPT LOAD and FLUSH, FUNCTION LOAD and DELETE,
// CONFIG SET, ...) and would leave an ejected shard behind, to serve its
// old state when it rejoins: it is refused with an *EjectedError naming the
// ejected shards, and sent to none. A command on the whole server (FLUSHALL,
// FUNCTION, SCRIPT, CONFIG, ...) runs once per server when shards share one
// (two DBs): FUNCTION LOAD twice on one server would fail.
func (f *fanout) everyShard(ctx context.Context, v *view, args []any) error {
	reads, wide := liveReads[f.info.Name], serverWide(f.info)
	var ejected []int
	for i := range v.Len() {
		switch {
		case v.Ejected(i):
			if !reads {
				ejected = append(ejected, i)
			}
		case wide && slices.ContainsFunc(f.parts, func(p part) bool { return server(v.Shard(p.shard)) == server(v.Shard(i)) }):
			// its server has a part already
		default:
			f.parts = append(f.parts, part{shard: i, cmd: goredis.NewCmd(ctx, args...)})
		}
	}
	if len(ejected) > 0 {
		e := &EjectedError{Command: f.info.Name}
		for _, i := range ejected {
			e.Shards = append(e.Shards, v.Ref(i))
		}
		return e
	}
	return nil
}

// liveReads are the keyless commands on every shard that may skip an
// ejected shard: they read (or act on what runs now), so the live shards'
// answer is the answer for the keys the client serves. Any other is taken
// to change every shard.
var liveReads = map[string]bool{
	"dbsize": true, "keys": true, "ping": true, "wait": true, "script|exists": true,
	"slowlog|get": true, "slowlog|len": true, "script|kill": true, "function|kill": true,
	"pubsub|channels": true, "pubsub|shardchannels": true, "ts.queryindex": true,
}

// serverWide reports whether the keyless command info acts on the whole
// server, not on the shard's DB (pub/sub ignores the DB: PUBSUB CHANNELS
// over two DBs of one server would list each channel twice).
func serverWide(info *commands.Info) bool {
	container, _, _ := strings.Cut(info.Name, "|")
	switch container {
	case "flushall", "function", "script", "config", "acl", "slowlog", "latency", "memory", "pubsub":
		return true
	}
	return false
}

// counts adds to counts[i] the number of f's parts on shard i, and returns
// counts.
func (f *fanout) counts(counts []int) []int {
	for _, p := range f.parts {
		counts[p.shard]++
	}
	return counts
}

// addTo queues the parts in groups, by shard.
func (f *fanout) addTo(groups [][]goredis.Cmder) {
	for _, p := range f.parts {
		groups[p.shard] = append(groups[p.shard], p.cmd)
	}
}

// merge combines the parts' replies into the command by its response
// policy, and returns the command's error. Unless the policy needs only one
// shard to succeed, any failed part fails the command (no partial reply):
// see partsErr.
func (f *fanout) merge() error {
	failed := 0
	for _, p := range f.parts {
		if p.cmd.Err() != nil {
			failed++
		}
	}
	if failed > 0 && (f.info.Response != commands.OneSucceeded || failed == len(f.parts)) {
		err := f.partsErr()
		f.cmd.SetErr(err)
		return err
	}
	v, err := f.combine()
	if err == nil {
		err = setVal(f.cmd, v)
	}
	f.cmd.SetErr(err)
	return err
}

// partsErr is the error of a command whose parts failed: the part's own
// error when the command ran on one shard only, or when every part failed
// with the same reply of the server (FUNCTION LOAD of a library every shard
// has: nothing was applied), as one server's; else a
// *shardedclient.MultiShardError whose Op is the command ("mset",
// "function load") and which names each shard that failed with its error
// (a reply of the server, such as FUNCTION LOAD's "already exists", or a
// *shardedclient.ShardError): the other shards' parts succeeded, and a
// write there was applied. errors.As finds a go-redis reply (redis.Error)
// or a ShardError through it.
func (f *fanout) partsErr() error {
	if first := f.parts[0].cmd.Err(); len(f.parts) == 1 || sameReply(first, f.parts) {
		return first
	}
	parts := slices.SortedFunc(slices.Values(f.parts), func(a, b part) int { return a.shard - b.shard })
	shards := make([]int, len(parts))
	errs := make([]error, len(parts))
	for i, p := range parts {
		shards[i], errs[i] = p.shard, p.cmd.Err()
	}
	return f.v.MultiErr(strings.ReplaceAll(f.info.Name, "|", " "), shards, errs)
}

// sameReply reports whether every part failed with err, a reply of the
// server, word for word.
func sameReply(err error, parts []part) bool {
	if !isReplyError(err) {
		return false
	}
	for _, p := range parts {
		if e := p.cmd.Err(); e == nil || e.Error() != err.Error() || !isReplyError(e) {
			return false
		}
	}
	return true
}

func (f *fanout) combine() (any, error) {
	switch f.info.Response {
	case commands.AllSucceeded:
		return f.parts[0].cmd.Val(), nil
	case commands.OneSucceeded:
		for _, p := range f.parts {
			if p.cmd.Err() == nil {
				return p.cmd.Val(), nil
			}
		}
	case commands.AggSum, commands.AggMin, commands.AggMax:
		var acc int64
		for i, p := range f.parts {
			n, err := p.cmd.Int64()
			if err != nil {
				return nil, f.badReply(p)
			}
			switch {
			case i == 0:
				acc = n
			case f.info.Response == commands.AggSum:
				acc += n
			case f.info.Response == commands.AggMin:
				acc = min(acc, n)
			default:
				acc = max(acc, n)
			}
		}
		return acc, nil
	case commands.AggLogicalAnd, commands.AggLogicalOr:
		return f.logical(f.info.Response == commands.AggLogicalAnd)
	}
	// Default policy: a multi-key command's values go back in key order; a
	// keyless command's arrays are concatenated (KEYS).
	out := []any{}
	for i := range f.parts {
		p := &f.parts[i]
		vals, ok := p.cmd.Val().([]any)
		if !ok || f.owners != nil && len(vals) != p.nkeys {
			return nil, f.badReply(*p)
		}
		p.vals = vals
		if f.owners == nil {
			out = append(out, f.served(p.shard, vals)...)
		}
	}
	if f.owners == nil {
		return out, nil
	}
	out = make([]any, len(f.owners))
	for k, s := range f.owners {
		p := &f.parts[f.slot[s]-1]
		out[k] = p.vals[p.next]
		p.next++
	}
	return out, nil
}

// served returns vals, shard i's reply to a keyless command, without the
// keys that shard does not serve when the command lists keys (KEYS): its
// stale copies (see serves).
func (f *fanout) served(i int, vals []any) []any {
	if f.info.Name != "keys" {
		return vals
	}
	return slices.DeleteFunc(vals, func(k any) bool {
		s, ok := k.(string)
		return ok && !serves(f.v, i, s)
	})
}

// logical combines the shards' arrays of 0/1 integers element by element
// with a logical AND (and) or OR (SCRIPT EXISTS: a script exists when every
// shard has it).
func (f *fanout) logical(and bool) (any, error) {
	var out []any
	for n, p := range f.parts {
		vals, ok := p.cmd.Val().([]any)
		if !ok || n > 0 && len(vals) != len(out) {
			return nil, f.badReply(p)
		}
		if n == 0 {
			out = make([]any, len(vals))
		}
		for i, v := range vals {
			b, ok := v.(int64)
			if !ok {
				return nil, f.badReply(p)
			}
			switch {
			case n == 0:
				out[i] = b
			case and:
				out[i] = min(out[i].(int64), b)
			default:
				out[i] = max(out[i].(int64), b)
			}
		}
	}
	return out, nil
}

func (f *fanout) badReply(p part) error {
	return fmt.Errorf("shardedcache: %s: unexpected reply %T from shard %d", f.info.Name, p.cmd.Val(), p.shard)
}

// setVal stores a merged reply in cmd, whose type go-redis chose for the
// command.
func setVal(cmd goredis.Cmder, v any) error {
	switch cmd := cmd.(type) {
	case *goredis.Cmd:
		cmd.SetVal(v)
		return nil
	case *goredis.IntCmd:
		if n, ok := v.(int64); ok {
			cmd.SetVal(n)
			return nil
		}
		if s, ok := v.(string); ok { // go-redis reads an integer from a string reply too
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				cmd.SetVal(n)
				return nil
			}
		}
	case *goredis.StatusCmd:
		if s, ok := asString(v); ok {
			cmd.SetVal(s)
			return nil
		}
	case *goredis.StringCmd:
		if s, ok := asString(v); ok {
			cmd.SetVal(s)
			return nil
		}
	case *goredis.SliceCmd:
		if vals, ok := v.([]any); ok {
			cmd.SetVal(vals)
			return nil
		}
	case *goredis.BoolSliceCmd:
		if vals, ok := v.([]any); ok {
			bs := make([]bool, len(vals))
			for i, x := range vals {
				bs[i] = x == int64(1)
			}
			cmd.SetVal(bs)
			return nil
		}
	case *goredis.StringSliceCmd:
		if vals, ok := v.([]any); ok {
			ss := make([]string, len(vals))
			for i, x := range vals {
				if ss[i], ok = x.(string); !ok {
					break
				}
			}
			if ok {
				cmd.SetVal(ss)
				return nil
			}
		}
	}
	return fmt.Errorf("shardedcache: %s: cannot store a merged %T reply in a %T", cmd.Name(), v, cmd)
}

// asString returns a reply for a status or string command: a string, or an
// integer in decimal, as go-redis reads an integer reply into a string
// (LATENCY RESET's count into a *redis.StatusCmd).
func asString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}
