package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/semaphore"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// serverState keeps in step, on every shard, what a server holds besides
// keys and the client sets on every shard: the function libraries (FUNCTION
// LOAD, DELETE, FLUSH and RESTORE run on every shard) and the parameters of
// CONFIG SET. A shard that joins the list gets both before it serves a
// command (see carry).
type serverState struct {
	// use is held shared (one unit) by the FUNCTION and CONFIG commands
	// run through the client, from before they take their view until they
	// end, and exclusively (all of it) by a shard-list change while it
	// copies and installs: a library loaded meanwhile is either copied or
	// sent to the shard that joins. A command waits for it no longer than
	// its context (a list change may wait on a slow joining shard); a
	// waiting change holds back the commands that come after it.
	use *semaphore.Weighted

	recMu     sync.Mutex
	functions bool           // a FUNCTION command ran through the client
	config    map[string]any // CONFIG SET parameter (lower case) -> value
}

// stateful reports whether cmd is one that serverState follows.
func stateful(cmd goredis.Cmder) bool {
	// The name as sent, not cmd.Name(), which lowers it: this runs for every
	// command of a pipeline.
	args := cmd.Args()
	if len(args) == 0 {
		return false
	}
	name, _ := commands.Arg(args[0])
	return strings.EqualFold(name, "function") || strings.EqualFold(name, "config")
}

// stateUnits is the weight of serverState.use: a list change takes all.
const stateUnits = 1 << 30

func newServerState() serverState { return serverState{use: semaphore.NewWeighted(stateUnits)} }

// enter takes s.use shared for a FUNCTION or CONFIG command, or returns
// ctx's error if ctx ends first; done releases it.
func (s *serverState) enter(ctx context.Context) error { return s.use.Acquire(ctx, 1) }

// done records what cmds, which ran under s.use held shared (enter), did
// to the state: a FUNCTION command, the parameters of a CONFIG SET that
// succeeded on every shard. Then it releases s.use.
func (s *serverState) done(cmds ...goredis.Cmder) {
	defer s.use.Release(1)
	s.recMu.Lock()
	defer s.recMu.Unlock()
	for _, cmd := range cmds {
		args := cmd.Args()
		sub := ""
		if len(args) > 1 {
			sub, _ = commands.Arg(args[1])
		}
		switch name := cmd.Name(); {
		case name == "function":
			s.functions = true
		case name == "config" && strings.EqualFold(sub, "set") && cmd.Err() == nil:
			if s.config == nil {
				s.config = map[string]any{}
			}
			for i := 2; i+1 < len(args); i += 2 {
				param, _ := commands.Arg(args[i])
				s.config[strings.ToLower(param)] = args[i+1]
			}
		}
	}
}

// carry installs next, the shards replacing cur, through install, whose
// prepare step brings the shards that join (an address and DB that cur does
// not have) in step before they serve a command:
//   - when a FUNCTION command ever ran through the client, each gets an
//     exact copy of the libraries of the first live shard in use that
//     answers (FUNCTION DUMP there, FUNCTION RESTORE ... FLUSH here: its own
//     libraries are replaced, as FUNCTION FLUSH through the client would);
//     nothing is copied from shards without FUNCTION (Redis before 7, an
//     ACL user without it), and a shard without FUNCTION may join a list
//     whose shards have no library;
//   - each gets every CONFIG SET parameter set through the client, its last
//     value, one CONFIG SET per parameter in the order of their names.
//
// It fails, and install is not called or changes nothing, when no live
// shard in use answers FUNCTION DUMP, or a joining shard refuses a step:
// a *shardedclient.ShardError naming the shard and the step (a parameter's
// name, never its value).
func (s *serverState) carry(sc *shardcore.Sharded[*goredis.Client], cur, next []Shard,
	install func([]Shard, func(*view) error) error) error {
	_ = s.use.Acquire(context.Background(), stateUnits) // fails only when its context ends
	defer s.use.Release(stateUnits)
	var joining []int
	for i, sh := range next {
		if !slices.ContainsFunc(cur, func(c Shard) bool { return c.Addr == sh.Addr }) {
			joining = append(joining, i)
		}
	}
	// No command records anything meanwhile (done runs under s.use shared).
	lib := library{n: -1}
	if len(joining) > 0 && s.functions {
		var err error
		if lib, err = libraries(sc); err != nil {
			return err
		}
	}
	ctx := context.Background()
	return install(next, func(v *view) error {
		groups := make([][]goredis.Cmder, v.Len())
		for _, i := range joining {
			if lib.n >= 0 {
				groups[i] = append(groups[i], goredis.NewStatusCmd(ctx, "function", "restore", lib.dump, "flush"))
			}
			for _, param := range slices.Sorted(maps.Keys(s.config)) {
				groups[i] = append(groups[i], goredis.NewStatusCmd(ctx, "config", "set", param, s.config[param]))
			}
		}
		execGroups(ctx, v, groups)
		for _, i := range joining {
			for _, cmd := range groups[i] {
				switch err := cmd.Err(); {
				case err == nil:
				case cmd.Name() == "function" && lib.n == 0 && noFunctions(err):
					// No library to copy to a server without FUNCTION.
				case cmd.Name() == "function":
					return stepErr(v, i, fmt.Sprintf("copying the %d function libraries of the shards in use", lib.n), err)
				default:
					return stepErr(v, i, fmt.Sprintf("applying CONFIG SET %s, set through this client", cmd.Args()[2]), err)
				}
			}
		}
		return nil
	})
}

// library is a FUNCTION DUMP and the number of libraries in it; n is -1
// when there is nothing to copy: no FUNCTION command ran through the
// client, or the shards have no FUNCTION command.
type library struct {
	dump string
	n    int
}

// libraries reads the function libraries of the first live shard of sc
// that answers, trying the next on a failure to reach one. It returns the
// first failure when none answers, or a shard's refusal of FUNCTION DUMP
// other than "no such command".
func libraries(sc *shardcore.Sharded[*goredis.Client]) (library, error) {
	ctx := context.Background()
	v := sc.Acquire()
	defer v.Release()
	var failed error
	for i := range v.Len() {
		if v.Ejected(i) {
			continue
		}
		list := goredis.NewCmd(ctx, "function", "list")
		dump := goredis.NewStringCmd(ctx, "function", "dump")
		execGroup(ctx, v, i, []goredis.Cmder{list, dump})
		err := errors.Join(list.Err(), dump.Err())
		switch {
		case err == nil:
			libs, _ := list.Slice()
			return library{dump: dump.Val(), n: len(libs)}, nil
		case noFunctions(err):
			return library{n: -1}, nil
		case isReplyError(err):
			return library{}, stepErr(v, i, "reading the function libraries to copy to the shards that join", err)
		}
		if failed == nil {
			failed = stepErr(v, i, "reading the function libraries to copy to the shards that join (no shard in use answered)", err)
		}
	}
	return library{}, failed
}

// noFunctions reports whether err is a server's refusal of FUNCTION: no
// such command (Redis before 7, miniredis), or not for this ACL user.
func noFunctions(err error) bool {
	return isReplyError(err) && (strings.Contains(strings.ToLower(err.Error()), "unknown command") ||
		strings.HasPrefix(err.Error(), "NOPERM"))
}

// stepErr is the failure of a step on shard i, naming the shard once (err
// may already be its *ShardError, see finishGroup).
func stepErr(v *view, i int, step string, err error) error {
	var se *shardedclient.ShardError
	if errors.As(err, &se) && se.Index == i {
		err = se.Err
	}
	return v.Err(i, fmt.Errorf("%s: %w", step, err))
}
