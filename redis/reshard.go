package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// PlanResharding returns the exact change of ownership that moving to shards
// would make (ring.Compare of the current and the target ring: per (from,
// to) pair of shards, the share of the hash space that changes owner). It
// creates no client.
func (c *ShardedClient) PlanResharding(shards []ShardOptions) (ring.Diff, error) {
	return c.shards.Plan(c.nodes(shards))
}

// nodes returns the ring nodes of shards.
func (c *ShardedClient) nodes(shards []ShardOptions) []ring.Node {
	nodes := make([]ring.Node, len(shards))
	for i, so := range shards {
		nodes[i] = ring.Node{Name: so.Name, Weight: so.Weight, Addr: addrOf(c.build.withShared(so))}
	}
	return nodes
}

// ErrMigrationIncomplete is returned by EndResharding before the window's
// Migration has moved every key (Migration.Run returned nil): ending the
// window then would leave the keys not yet moved on their old shards,
// unreachable. Run the migration to the end, or call AbandonResharding.
var ErrMigrationIncomplete = errors.New("shardedcache: the resharding window's migration has not finished; run it to the end (Migration.Run), or end the window knowingly with AbandonResharding")

// ErrReshardingWindow is returned by ForEachShard while a resharding window
// is open: a raw shard client could write a key on its new owner before the
// key moved, and the move would then lose the key's other fields or revert
// it. Run the Migration to the end first, or use GetShard(key), which moves
// key first.
var ErrReshardingWindow = errors.New("shardedcache: ForEachShard is not available while a resharding window is open; run the migration to the end first, or use GetShard(key), which moves the key first")

// BeginResharding switches the client to a new shard list without a cold
// cache, and opens a resharding window. From now on keys are placed by the
// new ring, and the old ring is kept as the previous one: before any
// command touches a key whose owner changed, the client moves that key from
// its old owner to its new one (DUMP and PTTL there, RESTORE here, then DEL
// there), so reads see it and writes, deletes included, apply to the only
// copy. A shard that keeps its name but changes address (or DB) is a new
// shard: every key of the old one moves to it. A shard whose other options
// change gets a new client (see SetShards), and a shard that joins gets
// the function libraries and CONFIG SET parameters set through the client
// before the window opens.
//
// The rule that keeps every write: while the old owner still holds a key,
// its value is the truth, unless this process already moved the key inside
// this window (it moves a key before any command touches it, so a value on
// the new owner is then newer). A copy on a shard that does not own the key
// under the current ring is stale by definition and never wins. So, before
// the window opens, BeginResharding removes from every shard of the new
// list the keys it is about to receive and does not own now (leftovers of
// an earlier SetShards, or writes made while a shard was ejected): it SCANs
// those shards, which takes time in proportion to their keys. Inside the
// window RESTORE then never replaces: a value already on the new owner was
// written there in this window.
//
// The window's life cycle: BeginResharding opens it (ErrMoveInProgress if
// one is open); a Migration (NewMigration, then Run) moves the keys not yet
// used; when Run has moved every key it ends the window (unless
// MigrateOptions.KeepWindow, then EndResharding does); EndResharding before
// that returns ErrMigrationIncomplete, and AbandonResharding ends the window
// knowingly, leaving the keys not yet moved behind.
//
// A key the switch moves waits, before its first command, until the
// commands begun before BeginResharding have ended (a write of theirs could
// otherwise land on its old owner after the move): give blocking commands
// a timeout. Every client of the same shards must switch at the same time:
// a client still on the old ring would write keys to their old owners. It
// returns the errors of SetShards, ErrMoveInProgress, an *UnsupportedError
// for a list that would move keys out of a Redis Cluster shard (a
// migration cannot scan a cluster), and the failure to
// remove stale copies (a *shardedclient.ShardError naming the shard: a
// shard of the new list that cannot be reached, ejected or not, refuses the
// window), in which case nothing changes.
func (c *ShardedClient) BeginResharding(shards []ShardOptions) error {
	if err := c.clusterSourceErr(shards); err != nil {
		return err
	}
	return c.switchShards(shards, c.beginWindow("", 0, nil, func(v *view) error {
		return dropStale(context.Background(), v)
	}))
}

// clusterSourceErr refuses, with an *UnsupportedError naming the shard, a
// new shard list that would move keys out of a Redis Cluster shard (one
// that BeginClusterMove made): a migration scans its sources with one SCAN
// cursor per shard, which a cluster does not have, so such a window could
// only be abandoned. Keys may move into a cluster shard, and a cluster
// shard may stay with its share.
func (c *ShardedClient) clusterSourceErr(shards []ShardOptions) error {
	v := c.shards.Acquire() // one list for the plan and its shard indices
	defer v.Release()
	isCluster := func(i int) bool { return clusterClient(v.Client(i)) != nil }
	hasCluster := false
	for i := range v.Len() {
		hasCluster = hasCluster || isCluster(i)
	}
	if !hasCluster {
		return nil
	}
	diff, err := v.Plan(c.nodes(shards))
	if err != nil {
		return fmt.Errorf("shardedcache: BeginResharding: the shard list has a Redis Cluster shard, and no exact plan tells whether keys would leave it: %w", err)
	}
	for _, m := range diff.Moves {
		if isCluster(m.From) {
			sh := v.Shard(m.From)
			return &UnsupportedError{Command: "beginresharding",
				Reason: fmt.Sprintf("%.2f%% of the hash space would leave shard %d %q (%s), a Redis Cluster: a migration cannot scan keys out of a cluster shard",
					m.Share*100, m.From, sh.Name, sh.Addr),
				Instead: "give the cluster shard the same share in the new list, or move keys out of the cluster with the cluster's own tools"}
		}
	}
	return nil
}

// Window describes a resharding window.
type Window struct {
	// ID is that of the migration checkpoints the window accepts: random,
	// 16 hex digits.
	ID string
	// Migrated reports that the window's migration has moved every key
	// (EndResharding then ends it).
	Migrated bool
}

// Window returns the resharding window in progress, as it stands now, or
// nil outside a window.
func (c *ShardedClient) Window() *Window {
	w := c.shards.Window()
	if w == nil {
		return nil
	}
	return &Window{ID: w.ID, Migrated: w.Migrated()}
}

// EndResharding ends the window that BeginResharding opened, once its
// Migration has moved every key: the old ring is dropped, and the clients
// of shards that left are closed once the commands using them have ended.
// Before that it returns ErrMigrationIncomplete and changes nothing.
// Without a window it does nothing.
func (c *ShardedClient) EndResharding() error { return c.endWindow(false) }

// AbandonResharding ends the window that BeginResharding opened whether or
// not its Migration has finished: keys not yet moved stay on their old
// shards, unreachable through this client (a cold move for them). They are
// stale copies: KEYS and SCAN leave them out, but DBSIZE, which sums the
// servers' counts, and RANDOMKEY, which asks a server, count them until a
// later BeginResharding or migration removes them.
func (c *ShardedClient) AbandonResharding() error { return c.endWindow(true) }

func (c *ShardedClient) endWindow(force bool) error {
	if err := c.errIfClosed(); err != nil {
		return err
	}
	v := c.shards.Acquire()
	if v.Moving() && (force || v.Window().Migrated()) {
		// Best effort: what is left is harmless (internal keys that KEYS
		// and SCAN leave out).
		_ = cleanUp(context.Background(), v)
	}
	v.Release()
	err := c.shards.EndWindow(force)
	if errors.Is(err, shardedclient.ErrMoveIncomplete) {
		return ErrMigrationIncomplete
	}
	return err
}

// dropStale removes, from every shard of v's new list, the keys that
// the move gives it and that it did not own before the move: stale copies
// (see BeginResharding). Nothing writes them meanwhile: commands place keys
// by the old ring until the window opens, and view changes wait.
func dropStale(ctx context.Context, v *view) error {
	// Ejected shards too: they own nothing now, but take their keys back
	// when they rejoin, and their stale copies must not win then. One that
	// cannot be reached fails BeginResharding, naming it. Owners are judged
	// as if every ejected shard were back (the old ring has every shard
	// live; View.AllLiveOwner): a copy written on a stand-in is stale, and
	// an ejected shard's own keys are not.
	for j := range v.FullRing().Len() {
		// Every server of the shard: one, or every master of a cluster.
		err := eachServer(ctx, v.Client(j), func(ctx context.Context, client *goredis.Client) error {
			return scanAll(ctx, client, func(keys []string) error {
				var stale []string
				for _, k := range keys {
					// j owns k now, or will once it rejoins.
					if from, to, _ := v.Moved(k); !isInternal(k) && from != j && (to == j || v.AllLiveOwner(k) == j) {
						stale = append(stale, k)
					}
				}
				return unlinkBySlot(ctx, client, stale)
			})
		})
		if err != nil {
			return v.Err(j, fmt.Errorf("BeginResharding: removing stale copies: %w", err))
		}
	}
	return nil
}

// KeyMoveError is the failure to move one key to its new owner during
// resharding; the key stays on its old owner (From), which still serves it.
type KeyMoveError struct {
	Key      string
	From, To string // the shards, as `shard 1 "b" (10.0.0.2:6379)`
	Err      error
}

func (e *KeyMoveError) Error() string {
	// The cause, often a *shardedclient.ShardError, without its own prefix.
	return fmt.Sprintf("shardedcache: moving key %q from %s to %s: %s", e.Key, e.From, e.To,
		strings.TrimPrefix(e.Err.Error(), "shardedcache: "))
}

func (e *KeyMoveError) Unwrap() error { return e.Err }

// MoveError lists the keys that could not be moved to their new owner, each
// a *KeyMoveError; errors.As finds the first.
type MoveError struct {
	Keys []*KeyMoveError
}

func (e *MoveError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shardedcache: %d key(s) could not be moved", len(e.Keys))
	for i, k := range e.Keys {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Keys)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(strings.TrimPrefix(k.Error(), "shardedcache: "))
	}
	return b.String()
}

func (e *MoveError) Unwrap() []error {
	out := make([]error, len(e.Keys))
	for i, k := range e.Keys {
		out[i] = k
	}
	return out
}

// moveCounts are the outcomes of moving keys.
type moveCounts struct {
	moved   int             // restored on the new owner and deleted from the old
	onOwner int             // the new owner had it (written there in this window); old copy deleted
	gone    int             // not on the old owner (moved already, deleted, or expired)
	failed  []*KeyMoveError // each stays on its old owner
}

// moveKeys is the client's shardcore.Mover: it moves keys (see
// moveOn) and returns a *MoveError naming each key that failed.
func (c *ShardedClient) moveKeys(ctx context.Context, v *view, keys []shardcore.MovingKey) error {
	if counts := c.moveOn(ctx, v, keys, nil); len(counts.failed) > 0 {
		return &MoveError{Keys: counts.failed}
	}
	return nil
}

// moveOn moves keys by the protocol of package fleet (fleetMoves.move,
// with the moves of v's window: a destination in dead fails its keys at
// once, and one that stops answering is added to it). A view whose window
// has ended moves nothing: its keys fail with ErrNoResharding.
func (c *ShardedClient) moveOn(ctx context.Context, v *view, keys []shardcore.MovingKey, dead *sync.Map) moveCounts {
	if mv := c.fleet.moves.Load(); mv != nil && mv.prev == v.Previous() {
		// Into a Redis Cluster shard too: its restoring scripts go to the
		// master of their keys' slot, with that slot's records.
		return mv.move(ctx, v, keys, dead)
	}
	var counts moveCounts
	for _, k := range keys {
		counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: ErrNoResharding})
	}
	return counts
}

// beginWindow opens a resharding window to shards (BeginWindow) whose keys
// move by the protocol of package fleet, for the fleet's resharding change
// of Moving epoch moving ("" and 0 in one process alone, see fleetMoves):
// the shards that leave get the clients leaving returns (nil: they keep
// theirs); after prepare (the servers' state, and what the caller adds in
// also), the moves are bound to the window before it serves a command.
func (c *ShardedClient) beginWindow(change string, moving uint64, leaving func(Shard) (*goredis.Client, error), also func(*view) error) func([]Shard, func(*view) error) error {
	return func(sh []Shard, prepare func(*view) error) error {
		return c.shards.BeginWindow(sh, leaving, func(v *view) error {
			if err := prepare(v); err != nil {
				return err
			}
			if also != nil {
				if err := also(v); err != nil {
					return err
				}
			}
			c.fleet.moves.Store(&fleetMoves{change: change, moving: moving, prev: v.Previous()})
			return nil
		})
	}
}

// delOld deletes keys[i], for each i of which, from its old owner: one DEL
// per old owner, the owners in parallel. It returns the DEL of each old
// owner (by shard; nil for a shard with none). (An old owner is never a
// Redis Cluster shard, whose nodes would refuse a DEL across hash slots:
// BeginResharding refuses to take keys out of one, see clusterSourceErr.)
func delOld(ctx context.Context, v *view, keys []shardcore.MovingKey, which []int) []*goredis.IntCmd {
	delArgs := make([][]any, v.Len())
	for _, i := range which {
		k := keys[i]
		if delArgs[k.From] == nil {
			delArgs[k.From] = []any{"del"}
		}
		delArgs[k.From] = append(delArgs[k.From], k.Key)
	}
	dels := make([]*goredis.IntCmd, v.Len())
	groups := make([][]goredis.Cmder, v.Len())
	for from, args := range delArgs {
		if args != nil {
			dels[from] = goredis.NewIntCmd(ctx, args...)
			groups[from] = []goredis.Cmder{dels[from]}
		}
	}
	execGroups(ctx, v, groups)
	return dels
}

// dumpErr explains a DUMP refused with WRONGTYPE, which a real Redis never
// answers: miniredis serves DUMP for strings only, so resharding on
// miniredis moves strings only.
func dumpErr(err error) error {
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("DUMP refused (miniredis dumps strings only; a real Redis dumps every type): %w", err)
	}
	return err
}
