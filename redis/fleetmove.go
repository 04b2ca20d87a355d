package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
)

// The server-side steps of a fleet move (see package fleet, "Where the
// truth is"). Each is one script, atomic on its server. Internal keys
// start with internalPrefix: the migration, KEYS, SCAN and the removal of
// stale copies leave them alone.
const (
	internalPrefix = "__shardedcache:"
	// fenceKey is a hash: "epoch", the oldest connection epoch the server
	// accepts; "moved", the Moving epoch of the latest resharding whose
	// moves may begin here (only ever raised).
	fenceKey = internalPrefix + "fence"
	// marksKey is a hash on a source: moving key -> the token of its move.
	marksKey = internalPrefix + "moving"
	// restoredKey and revokedKey are hashes on a destination: token -> 1.
	restoredKey = internalPrefix + "restored"
	revokedKey  = internalPrefix + "revoked"
)

// isInternal reports whether key is one of the fleet's own keys.
func isInternal(key string) bool { return strings.HasPrefix(key, internalPrefix) }

// markScript, on a source: for each key, {"busy", token} when a move
// marks it, {"gone"} when the source does not hold it, else it marks the
// key with ARGV[1] and returns {"dump", DUMP, PEXPIRETIME}. In a fleet
// (ARGV[2] not empty) it refuses (NOTMOVED) unless the server is marked
// moved for exactly the resharding whose Moving epoch is ARGV[2]: no key
// leaves a source before every source is fenced, and a mover of an older
// resharding (a process paused past it) moves nothing. One process alone
// is the whole fleet: it has no other process to fence, and passes "".
const markScript = `
if ARGV[2] ~= '' and redis.call('HGET', '` + fenceKey + `', 'moved') ~= ARGV[2] then
  return redis.error_reply('NOTMOVED this server is not fenced for the resharding of Moving epoch ' .. ARGV[2])
end
local out = {}
for i, k in ipairs(KEYS) do
  local m = redis.call('HGET', '` + marksKey + `', k)
  if m then
    out[i] = {'busy', m}
  elseif redis.call('EXISTS', k) == 0 then
    out[i] = {'gone'}
  else
    redis.call('HSET', '` + marksKey + `', k, ARGV[1])
    out[i] = {'dump', redis.call('DUMP', k), redis.call('PEXPIRETIME', k)}
  end
end
return out`

// restoreScript, on a destination: unless token ARGV[1] was revoked (in
// the record KEYS[2]), it restores each key KEYS[i], i >= 3, from
// ARGV[2(i-2)] with the absolute expiry ARGV[2(i-2)+1] in Unix ms (-1:
// none), replacing a stale copy, records the token as restored (in the
// record KEYS[1]), and returns "ok"; else "revoked". A token restored
// already restores nothing again and returns "ok": a copy of the script
// run twice must not bring back the moved values over writes made since
// (go-redis never resends it, see scriptCmd; this check is the second
// line, while the token's record is kept). The records are the destination's (see records): on a
// Redis Cluster, those of the keys' one hash slot.
const restoreScript = `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'revoked' end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'ok' end
for i = 3, #KEYS do
  local j = i - 2
  local at = tonumber(ARGV[2*j+1])
  if at < 0 then at = 0 end
  redis.call('RESTORE', KEYS[i], at, ARGV[2*j], 'ABSTTL', 'REPLACE')
end
redis.call('HSET', KEYS[1], ARGV[1], 1)
return 'ok'`

// finishScript, on a source: each key still marked with token ARGV[1]
// is deleted with its mark (its move is done); it returns how many.
// With ARGV[2] == "abort" it removes the marks only (the key stays).
const finishScript = `
local n = 0
for i, k in ipairs(KEYS) do
  if redis.call('HGET', '` + marksKey + `', k) == ARGV[1] then
    redis.call('HDEL', '` + marksKey + `', k)
    if ARGV[2] ~= 'abort' then redis.call('DEL', k) end
    n = n + 1
  end
end
return n`

// settleScript, on a destination: "restored" if token ARGV[1] was
// restored there (the record KEYS[1]), else it revokes the token (in the
// record KEYS[2]: a RESTORE of it that arrives later does nothing) and
// returns "revoked".
const settleScript = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'restored' end
redis.call('HSET', KEYS[2], ARGV[1], 1)
return 'revoked'`

// cleanupScript, once no move of a resharding is left unsettled: the
// restored tokens go (the record KEYS[1]). The revoked tokens stay (one
// field per move whose reply was lost): such a RESTORE may arrive at any
// time, and only the revocation stops it (no clock bounds it;
// fleet/model_test.go's control "revoked tokens expire" shows the write it
// would lose).
const cleanupScript = `
redis.call('DEL', KEYS[1])
return 1`

// cleanUp runs cleanupScript on every shard of v, in parallel: on a Redis
// Cluster shard, once for each hash slot's record (16384 scripts in one
// pipeline, which the cluster client splits by master).
func cleanUp(ctx context.Context, v *view) error {
	cmds := make([][]goredis.Cmder, v.Len())
	for i := range v.Len() {
		if clusterClient(v.Client(i)) == nil {
			cmds[i] = []goredis.Cmder{evalCmd(ctx, cleanupScript, []string{restoredKey})}
			continue
		}
		for slot := range slotCount {
			cmds[i] = append(cmds[i], evalCmd(ctx, cleanupScript, []string{slotKey(restoredKey, slot)}))
		}
	}
	execGroups(ctx, v, cmds)
	for _, group := range cmds {
		if err := firstErr(group); err != nil {
			return fmt.Errorf("cleaning up the resharding's state: %w", err) // names the shard (execGroups)
		}
	}
	return nil
}

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// slotTags holds, for each hash slot, a short hash tag in that slot.
var slotTags = sync.OnceValue(func() *[slotCount]string {
	var tags [slotCount]string
	for n, left := uint64(0), slotCount; left > 0; n++ {
		tag := strconv.FormatUint(n, 36)
		if s := Slot(tag); tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})

// slotKey returns base with a hash tag that puts it in Redis Cluster hash
// slot slot (0..16383): base + "{" + tag + "}". base has no braces.
func slotKey(base string, slot int) string { return base + "{" + slotTags()[slot] + "}" }

// records returns the names of the token records of a move of key to
// destination to (see restoreScript): restoredKey and revokedKey, and
// slot -1; on a Redis Cluster destination, their copies in key's hash slot
// (slotKey), and that slot, since a script runs on the one master of its
// keys' slot.
func records(v *view, to int, key string) (slot int, restored, revoked string) {
	if clusterClient(v.Client(to)) == nil {
		return -1, restoredKey, revokedKey
	}
	slot = Slot(key)
	return slot, slotKey(restoredKey, slot), slotKey(revokedKey, slot)
}

// fleetSettleAfter is how old a move's mark must be before a command or
// the migration that finds it settles the move rather than wait for its
// mover to end it. Settling early is safe (it revokes, or finishes, the
// move), only wasteful.
const fleetSettleAfter = time.Second

// fleetMoves is the state of the fleet moves of one resharding in this
// process: its ID, and the keys known to have left their source (nothing
// puts them back, so they need no round trip again).
type fleetMoves struct {
	change string // the fleet's resharding; "" in one process alone
	// moving is the Moving epoch of a fleet's resharding, whose sources
	// are fenced and marked moved for it (see markScript); 0 in one
	// process alone.
	moving uint64
	// prev is the previous ring of the window the moves belong to (a
	// window's views share it): a view of another window, or of none,
	// has no moves (see moveOn).
	prev *ring.Ring
	gone sync.Map // key -> struct{}
	// ended holds the tokens of this process's attempts that ended with
	// keys failed: a mark of one is no move in progress, so a later move
	// settles it at once rather than wait fleetSettleAfter.
	ended sync.Map // token -> struct{}
	// undrained holds the new owners that a MIGRATE failed to without an
	// answer (shard ID -> *undrainedOwner; see serverSide.move): the
	// RESTORE it sent may still run there, so no key moves there until
	// they answer again and have run what they were sent (drain).
	undrained sync.Map
}

// undrainedOwner is a new owner that a MIGRATE failed to without an
// answer, and the keys it may have been sent.
type undrainedOwner struct {
	client *goredis.Client
	mu     sync.Mutex
	// expiry holds the keys with a TTL that a MIGRATE may have restored
	// there, and their absolute expiry (Unix ms): MIGRATE sent a time to
	// live read before the new owner stopped, so it lengthens by the stop.
	expiry  map[string]int64
	drained bool
}

// undrainedOwner records shard to of v as undrained, with keys[i] (whose
// expiry is expiry[i]) added to its record: the current one, or a new one
// when the current one has drained already (its fixes are applied).
func (f *fleetMoves) undrainedOwner(v *view, to int, keys []shardcore.MovingKey, expiry []int64) {
	for {
		val, _ := f.undrained.LoadOrStore(v.ID(to), &undrainedOwner{client: v.Client(to), expiry: map[string]int64{}})
		u := val.(*undrainedOwner)
		u.mu.Lock()
		if u.drained {
			u.mu.Unlock()
			f.undrained.CompareAndDelete(v.ID(to), u)
			continue
		}
		for i, k := range keys {
			if expiry[i] > 0 {
				u.expiry[k.Key] = expiry[i]
			}
		}
		u.mu.Unlock()
		return
	}
}

// drain drains u's server (see drain), then gives every key it may have
// been sent its absolute expiry (PEXPIREAT; a key it does not hold is left
// alone): no other move or command has reached those keys there, since
// they all wait for this. Calls wait for one another; once one succeeded
// the others return nil.
func (u *undrainedOwner) drain(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.drained {
		return nil
	}
	if err := drain(ctx, u.client); err != nil {
		return err
	}
	if len(u.expiry) > 0 {
		pipe := u.client.Pipeline()
		for key, ms := range u.expiry {
			pipe.PExpireAt(ctx, key, time.UnixMilli(ms))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("setting the expiry of the keys a MIGRATE may have left there: %w", err)
		}
	}
	u.drained = true
	return nil
}

// drainAll drains every undrained new owner of f; the error names the
// first that does not drain.
func (f *fleetMoves) drainAll(ctx context.Context) error {
	var err error
	f.undrained.Range(func(id, val any) bool {
		if err = val.(*undrainedOwner).drain(ctx); err != nil {
			err = fmt.Errorf("shardedcache: the new owner %s: a MIGRATE to it failed without an answer, and it has not drained since: %w", id, err)
			return false
		}
		f.undrained.CompareAndDelete(id, val)
		return true
	})
	return err
}

// deadErr returns why a migration sends shard to of v no more keys, when
// dead (shard ID -> error; nil outside a migration) holds it; else nil.
func deadErr(dead *sync.Map, v *view, to int) error {
	if dead == nil {
		return nil
	}
	if err, ok := dead.Load(v.ID(to)); ok {
		return fmt.Errorf("the new owner stopped answering earlier in this migration; no more keys are sent to it: %w", err.(error))
	}
	return nil
}

// drained returns nil once shard to of v may be moved keys: it is not in
// f.undrained, or it has drained (and leaves it). Else it returns why not,
// naming the shard.
func (f *fleetMoves) drained(ctx context.Context, v *view, to int) error {
	val, ok := f.undrained.Load(v.ID(to))
	if !ok {
		return nil
	}
	if err := val.(*undrainedOwner).drain(ctx); err != nil {
		return v.Err(to, fmt.Errorf("a MIGRATE to it failed without an answer, and it has not drained since (the RESTORE it was sent may still run): %w", err))
	}
	f.undrained.CompareAndDelete(v.ID(to), val)
	return nil
}

// newToken returns a move token: the resharding's ID, 8 random hex
// digits, and the time in Unix ms (how old the mark is, see
// fleetSettleAfter).
func (f *fleetMoves) newToken() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return f.change + ":" + hex.EncodeToString(b[:]) + ":" + strconv.FormatInt(time.Now().UnixMilli(), 10)
}

// tokenAge returns how long ago token was made, or a large age for a
// token that does not parse.
func tokenAge(token string) time.Duration {
	i := strings.LastIndexByte(token, ':')
	ms, err := strconv.ParseInt(token[i+1:], 10, 64)
	if i < 0 || err != nil {
		return time.Hour
	}
	return time.Since(time.UnixMilli(ms))
}

// move moves keys (their locks held by the caller) off their sources onto
// their destinations, by the fleet protocol: every key ends moved (or found
// gone from its source), or failed with its source still the truth, or
// failed with its move unsettled (its mark stays until a later move or the
// migration settles it). A mark older than fleetSettleAfter is settled; a
// younger one is waited for, within ctx. With dead not nil (a
// migration), a key whose destination is in dead (shard ID -> error: the view may change meanwhile, an ejection)
// fails at once, and a destination that does not answer a RESTORE nor
// the settling after it is added: a migration sends it no more batches.
func (f *fleetMoves) move(ctx context.Context, v *view, keys []shardcore.MovingKey, dead *sync.Map) moveCounts {
	var counts moveCounts
	todo := make([]shardcore.MovingKey, 0, len(keys))
	undrained := map[int]error{} // by new owner
	for _, k := range keys {
		if _, ok := f.gone.Load(k.Key); ok {
			counts.gone++
			continue
		}
		err, seen := undrained[k.To]
		if !seen {
			err = f.drained(ctx, v, k.To)
			undrained[k.To] = err
		}
		if err != nil {
			counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
			continue
		}
		if err := deadErr(dead, v, k.To); err != nil {
			counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
			continue
		}
		todo = append(todo, k)
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		var busy []busyKey
		todo, busy = f.try(ctx, v, todo, &counts, dead)
		if len(busy) == 0 && len(todo) == 0 {
			break
		}
		// Keys marked by another move: settle the old marks, wait for the
		// young ones, then try them again.
		todo = append(todo, f.settleBusy(ctx, v, busy, &counts)...)
		if len(todo) == 0 {
			break
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			for _, k := range todo {
				counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
			}
			break
		}
	}
	return counts
}

// busyKey is a key found marked by another move's token.
type busyKey struct {
	key   shardcore.MovingKey
	token string
}

// try runs one round of the move for keys: mark and read on the sources,
// restore on the destinations, finish on the sources. It returns the keys
// to try again (their move was revoked by a settler, or aborted here) and
// those found busy.
func (f *fleetMoves) try(ctx context.Context, v *view, keys []shardcore.MovingKey, counts *moveCounts, dead *sync.Map) (again []shardcore.MovingKey, busy []busyKey) {
	fail := func(k shardcore.MovingKey, err error) {
		counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
	}
	token := f.newToken()
	failedBefore := len(counts.failed)
	defer func() {
		if len(counts.failed) > failedBefore {
			f.ended.Store(token, struct{}{})
		}
	}()
	// 1. Mark and read, one script per source.
	bySource := groupBy(keys, func(k shardcore.MovingKey) int { return k.From })
	marks := make(map[int]scriptCmd, len(bySource))
	groups := make([][]goredis.Cmder, v.Len())
	for from, ks := range bySource {
		fence := ""
		if f.moving > 0 {
			fence = strconv.FormatUint(f.moving, 10)
		}
		marks[from] = evalCmd(ctx, markScript, keyNames(ks), token, fence)
		groups[from] = []goredis.Cmder{marks[from]}
	}
	execGroups(ctx, v, groups)
	type dumped struct {
		k    shardcore.MovingKey
		dump string
		at   int64
	}
	// A destination's keys go in one script; a Redis Cluster's, in one
	// script per hash slot, with that slot's records.
	type dest struct{ to, slot int }
	byDest := map[dest][]dumped{}
	unmark := map[int][]shardcore.MovingKey{}
	defer func() { _ = f.finish(ctx, v, token, unmark, "abort") }() // its keys have failed already
	for from, ks := range bySource {
		replies, err := marks[from].Slice()
		if err == nil && len(replies) != len(ks) {
			err = fmt.Errorf("mark script: %d replies for %d keys", len(replies), len(ks))
		}
		if err != nil {
			// The script may have marked keys before it failed (a
			// refused DUMP), or its reply was lost: take this token's
			// marks back (no RESTORE was sent with it). If that fails too,
			// a later move finds them and settles them.
			unmark[from] = ks
			for _, k := range ks {
				fail(k, dumpErr(err)) // names the shard (execGroups)
			}
			continue
		}
		for i, k := range ks {
			r, _ := replies[i].([]any)
			state, _ := first(r).(string)
			switch {
			case state == "gone":
				f.gone.Store(k.Key, struct{}{})
				counts.gone++
			case state == "busy" && len(r) == 2:
				tok, _ := r[1].(string)
				busy = append(busy, busyKey{k, tok})
			case state == "dump" && len(r) == 3:
				dump, _ := r[1].(string)
				at, _ := r[2].(int64)
				slot, _, _ := records(v, k.To, k.Key)
				byDest[dest{k.To, slot}] = append(byDest[dest{k.To, slot}], dumped{k, dump, at})
			default:
				fail(k, fmt.Errorf("mark script: unexpected reply %v", r))
			}
		}
	}
	// 2. Restore, one script per destination (and hash slot).
	restores := make(map[dest]scriptCmd, len(byDest))
	groups = make([][]goredis.Cmder, v.Len())
	for d, ds := range byDest {
		_, restored, revoked := records(v, d.to, ds[0].k.Key)
		names := make([]string, 0, 2+len(ds))
		names = append(names, restored, revoked)
		args := make([]any, 0, 1+2*len(ds))
		args = append(args, token)
		for _, dd := range ds {
			names = append(names, dd.k.Key)
			args = append(args, dd.dump, dd.at)
		}
		restores[d] = evalCmd(ctx, restoreScript, names, args...)
		groups[d.to] = append(groups[d.to], restores[d])
	}
	execGroups(ctx, v, groups)
	// 3. Finish (or abort) on the sources.
	finish := map[int][]shardcore.MovingKey{}
	abort := map[int][]shardcore.MovingKey{}
	var refused []*KeyMoveError // aborted: the destination refused the RESTORE
	for d, ds := range byDest {
		ks := make([]shardcore.MovingKey, len(ds))
		for i, dd := range ds {
			ks[i] = dd.k
		}
		outcome, err := restores[d].Text()
		restoreErr := err
		if err != nil {
			// No answer (the RESTORE may still run), or a refusal (the
			// script may have restored some keys before it failed):
			// settle the token now if the destination answers; else the
			// marks stay until a later move settles them.
			outcome, err = settle(ctx, v, d.to, ks[0].Key, token)
		}
		switch {
		case err != nil:
			// The RESTORE's failure, naming the shard (execGroups); the
			// settling's was no better. A replica behind is no dead
			// destination: the master answers.
			err = restoreErr
			var re *ReplicationError
			if dead != nil && !isReplyError(err) && !isContextErr(err) && !errors.As(err, &re) {
				dead.Store(v.ID(d.to), err)
			}
			for _, k := range ks {
				fail(k, fmt.Errorf("restoring on the new owner (the move stays unsettled until it answers): %w", err))
			}
			continue
		case outcome == "ok", outcome == "restored":
			for _, k := range ks {
				finish[k.From] = append(finish[k.From], k)
			}
			continue
		case restoreErr != nil:
			for _, k := range ks {
				refused = append(refused, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: restoreErr})
			}
		default: // "revoked": a settler took the move back; the source holds the key
			again = append(again, ks...)
		}
		for _, k := range ks {
			abort[k.From] = append(abort[k.From], k)
		}
	}
	finishFailed := f.finish(ctx, v, token, finish, "finish")
	counts.failed = append(counts.failed, finishFailed...)
	counts.moved += countKeys(finish) - len(finishFailed)
	for _, ks := range finish {
		for _, k := range ks {
			// One whose finish failed is still marked on its source: a
			// later move finds it busy and settles it.
			if !slices.ContainsFunc(finishFailed, func(e *KeyMoveError) bool { return e.Key == k.Key }) {
				f.gone.Store(k.Key, struct{}{})
			}
		}
	}
	counts.failed = append(counts.failed, refused...)
	counts.failed = append(counts.failed, f.finish(ctx, v, token, abort, "abort")...)
	return again, busy
}

// finish runs finishScript (mode "finish" or "abort") with token for the
// keys of each source; it returns a failure for each key of a source that
// did not answer (its mark stays: a later move settles it).
func (f *fleetMoves) finish(ctx context.Context, v *view, token string, bySource map[int][]shardcore.MovingKey, mode string) []*KeyMoveError {
	cmds := make(map[int]scriptCmd, len(bySource))
	groups := make([][]goredis.Cmder, v.Len())
	for from, ks := range bySource {
		cmds[from] = evalCmd(ctx, finishScript, keyNames(ks), token, mode)
		groups[from] = []goredis.Cmder{cmds[from]}
	}
	execGroups(ctx, v, groups)
	var failed []*KeyMoveError
	for from, ks := range bySource {
		if err := cmds[from].Err(); err != nil {
			for _, k := range ks {
				failed = append(failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To),
					Err: fmt.Errorf("ending the move on the old owner (%s): %w", mode, err)})
			}
		}
	}
	return failed
}

// settleBusy settles the marks of busy that are older than
// fleetSettleAfter, or left by an attempt of this process that ended:
// a move restored on its new owner is finished (and counted moved), one
// revoked is taken back and its key returned to try again, as are the
// keys whose marks are young.
func (f *fleetMoves) settleBusy(ctx context.Context, v *view, busy []busyKey, counts *moveCounts) []shardcore.MovingKey {
	again := make([]shardcore.MovingKey, 0, len(busy))
	// A token's outcome is its destination's: one attempt's token goes to
	// every destination of its keys (every hash slot of a Redis Cluster's),
	// and each restores or revokes it alone.
	type tokenAt struct {
		token    string
		to, slot int
	}
	settled := map[tokenAt]string{}
	for _, b := range busy {
		if _, ended := f.ended.Load(b.token); !ended && tokenAge(b.token) < fleetSettleAfter {
			again = append(again, b.key)
			continue
		}
		slot, _, _ := records(v, b.key.To, b.key.Key)
		at := tokenAt{b.token, b.key.To, slot}
		outcome, ok := settled[at]
		if !ok {
			var err error
			if outcome, err = settle(ctx, v, b.key.To, b.key.Key, b.token); err != nil {
				counts.failed = append(counts.failed, &KeyMoveError{Key: b.key.Key, From: v.Label(b.key.From), To: v.Label(b.key.To),
					Err: fmt.Errorf("settling an earlier move of the key (it stays unsettled until the new owner answers): %w", v.Err(b.key.To, err))})
				continue
			}
			settled[at] = outcome
		}
		mode := "abort"
		if outcome == "restored" {
			mode = "finish"
		}
		if failed := f.finish(ctx, v, b.token, map[int][]shardcore.MovingKey{b.key.From: {b.key}}, mode); len(failed) > 0 {
			counts.failed = append(counts.failed, failed...)
			continue
		}
		if mode == "finish" { // the move is done now
			counts.moved++
			f.gone.Store(b.key.Key, struct{}{})
			continue
		}
		again = append(again, b.key)
	}
	return again
}

// settle asks destination to, once it answers, settle token for key (by
// its records, see records): "restored" (the move is done there) or
// "revoked" (it never will be).
func settle(ctx context.Context, v *view, to int, key, token string) (string, error) {
	_, restored, revoked := records(v, to, key)
	cmd := evalCmd(ctx, settleScript, []string{restored, revoked}, token)
	_ = v.Client(to).Process(ctx, cmd)
	return cmd.Text()
}

// evalCmd returns EVAL of script with keys and args, as a scriptCmd.
func evalCmd(ctx context.Context, script string, keys []string, args ...any) scriptCmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "eval", script, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	return scriptCmd{goredis.NewCmd(ctx, append(cmdArgs, args...)...)}
}

// scriptCmd is a script of the moves, which go-redis never sends again by
// itself (NoRetry: not after a timeout, whatever MaxRetries says, nor as
// a cluster client's resend; MOVED and ASK are still followed). A copy the
// client stopped waiting for may still run (a hung server runs what it
// was sent when it wakes), so a second copy could run after the move was
// settled, its records cleaned up and the key written since: a restoring
// script would bring the moved value back over that write. A move whose
// reply is lost is settled by the protocol instead (settle).
type scriptCmd struct{ *goredis.Cmd }

// NoRetry implements goredis.Cmder: see scriptCmd.
func (scriptCmd) NoRetry() bool { return true }

func groupBy[T any](items []T, key func(T) int) map[int][]T {
	out := map[int][]T{}
	for _, it := range items {
		out[key(it)] = append(out[key(it)], it)
	}
	return out
}

func keyNames(ks []shardcore.MovingKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Key
	}
	return out
}

func countKeys(m map[int][]shardcore.MovingKey) int {
	n := 0
	for _, ks := range m {
		n += len(ks)
	}
	return n
}

func first(r []any) any {
	if len(r) == 0 {
		return nil
	}
	return r[0]
}

// backoff is the wait before the attempt-th retry of keys whose move
// another mover holds: 2 ms, doubling, at most 50 ms.
func backoff(attempt int) time.Duration {
	return min(2*time.Millisecond<<min(attempt, 5), 50*time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNotFleet is returned by fleet operations on a client that has not
// joined a fleet.
var errNotFleet = errors.New("shardedcache: the client has not joined a fleet (JoinFleet)")
