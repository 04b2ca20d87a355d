package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
)

// migrateTimeout is MIGRATE's timeout argument: the longest the old owner
// waits on the new one for one read or write, in milliseconds.
const migrateTimeout = 2000

// migrateTarget returns MIGRATE's arguments (after the command's name) that
// reach shard i of v: host, port, "" (the KEYS form), DB, timeout, then
// AUTH or AUTH2 with the shard's password. It fails, naming the shard, when
// MIGRATE cannot make the connection the shard client makes: a Redis
// Cluster or Sentinel shard, a Unix socket, TLS (MIGRATE has none) or a
// credentials provider (the password is not known in advance).
func migrateTarget(v *view, i int) ([]any, error) {
	c := v.Client(i)
	o := c.Options()
	var why string
	switch addr := v.Shard(i).Addr; {
	case clusterOf(c) != nil:
		why = "a Redis Cluster shard"
	case strings.HasPrefix(addr, "sentinel:"):
		why = "a Sentinel group"
	case o.Network == "unix":
		why = "a Unix socket"
	case o.TLSConfig != nil:
		why = "TLS"
	case o.CredentialsProvider != nil || o.CredentialsProviderContext != nil || o.StreamingCredentialsProvider != nil:
		why = "a credentials provider"
	}
	host, port, err := net.SplitHostPort(o.Addr)
	switch {
	case why != "":
	case err != nil:
		why = fmt.Sprintf("address %q: %v", o.Addr, err)
	default:
		args := []any{host, port, "", o.DB, migrateTimeout}
		switch {
		case o.Username != "":
			args = append(args, "auth2", o.Username, o.Password)
		case o.Password != "":
			args = append(args, "auth", o.Password)
		}
		return args, nil
	}
	return nil, fmt.Errorf("%w: ServerSide: MIGRATE cannot reach %s: %s", ErrServerSide, v.Label(i), why)
}

// serverSide is what a ServerSide migration knows of its window's shards,
// by identity (View.ID; the shard list cannot change in a window): the
// MIGRATE arguments that reach each new owner, and each shard's server;
// and the gate of its transactions (see enter).
type serverSide struct {
	target  map[string][]any  // shard identity -> migrateTarget's arguments (new owners)
	server  map[string]string // shard identity -> its server
	moves   *fleetMoves       // the window's moves (their undrained new owners)
	mu      sync.Mutex
	cond    sync.Cond
	running map[[2]string]int // (old owner's server, new owner's) -> transactions running
}

// newServerSide prepares a migration of v's window with MIGRATE. It
// refuses, with an error matching ErrServerSide that names the shard, a new
// owner that MIGRATE cannot reach (migrateTarget) and a live old owner that
// does not list MIGRATE in COMMAND INFO (miniredis, which would leave a
// transaction holding it unanswered); an old owner that does not answer is
// left to the run, which reports it as for any migration. A shard's server
// is its address without the DB, the host resolved when it resolves (a
// Sentinel group: its name).
func newServerSide(v *view) (*serverSide, error) {
	s := newGate()
	s.target = map[string][]any{}
	for i := range v.FullRing().Len() { // the new list's shards
		args, err := migrateTarget(v, i)
		if err != nil {
			return nil, err
		}
		s.target[v.ID(i)] = args
	}
	for i := range v.Previous().Len() {
		src := v.PreviousIndex(i)
		if v.Ejected(src) {
			continue
		}
		info, err := v.Client(src).Do(context.Background(), "command", "info", "migrate").Slice()
		if err != nil {
			continue
		}
		if len(info) != 1 || !hasName(info[0], "migrate") {
			return nil, fmt.Errorf("%w: %s does not list MIGRATE in COMMAND INFO", ErrServerSide, v.Label(src))
		}
	}
	for i := range v.Len() {
		s.server[v.ID(i)] = server(v.Shard(i))
	}
	return s, nil
}

// newGate returns a serverSide with its gate ready and no shard known.
func newGate() *serverSide {
	s := &serverSide{server: map[string]string{}, running: map[[2]string]int{}}
	s.cond.L = &s.mu
	return s
}

// hasName reports whether entry, one command of a COMMAND INFO reply, is
// the command name.
func hasName(entry any, name string) bool {
	e, ok := entry.([]any)
	return ok && len(e) > 0 && e[0] == name
}

// ErrServerSide is matched (errors.Is) by the error of NewMigration with
// MigrateOptions.ServerSide when a shard of the new list cannot be reached
// by MIGRATE; the error names the shard and the reason.
var ErrServerSide = errors.New("shardedcache: server-side migration refused")

// move is a batch of moves done by the servers: for each old owner, the
// keys' absolute expiries (PEXPIRETIME), then one transaction (MULTI,
// EXISTS of every key, one MIGRATE ... KEYS per new owner, EXEC), in which the old owner sends its keys straight
// to their new owners and deletes them (never REPLACE: a copy on the new
// owner came from an earlier MIGRATE of the key, see below). The EXISTS
// tell a key that was gone from one that moved (a key whose TTL runs out
// during the transaction may count as moved: MIGRATE reads the clock, the
// EXISTS the transaction's start). MIGRATE sends a TTL as a time to live,
// read when it sends the key: each key that lands on its new owner is then
// given the absolute expiry read in the transaction (PEXPIREAT), so that
// neither the transfer nor a hang lengthens it (a key whose expiry cannot
// be read fails, unsent).
//
// A MIGRATE that fails with the new owner's answer (BUSYKEY: a copy there
// from an earlier attempt) is settled: each of its keys still on the old
// owner is deleted there if the new owner holds it, else fails. One that
// fails without an answer (IOERR: MIGRATE's own timeout, the new owner hung
// or gone), or whose transaction's reply is lost, may have left a RESTORE
// in the new owner's buffers that runs when it wakes up: the new owner is
// drained (see drain) before its keys are settled; if it does not answer
// within ctx, its keys fail, the migration sends it no more (dead), and no
// key of the window moves there until it has drained (fleetMoves.drained).
// A transaction whose reply is lost is settled once the old owner answers
// again (see awaitAnswer; its health then counts an answer, not a
// failure); a key no longer there counts as moved (one deleted meanwhile
// too). A key whose old and new owners are two DBs of one server moves
// through the client (viaClient): MIGRATE to its own server would wait on
// itself. The caller holds the keys' locks, so no command changes them on
// either owner meanwhile.
//
// Batches run at once unless the barrier holds them back (see enter); a
// batch holds it until its keys are settled.
func (s *serverSide) move(ctx context.Context, v *view, keys []shardcore.MovingKey, dead *sync.Map, viaClient func(context.Context, *view, []shardcore.MovingKey) moveCounts) moveCounts {
	defer dropKeys(v, keys) // the new owner's server wrote them, not its client
	srv := func(i int) string { return s.server[v.ID(i)] }
	var local []shardcore.MovingKey
	keys = slices.DeleteFunc(slices.Clone(keys), func(k shardcore.MovingKey) bool {
		if srv(k.From) == srv(k.To) {
			local = append(local, k)
			return true
		}
		return false
	})
	var counts moveCounts
	if len(local) > 0 {
		counts = viaClient(ctx, v, local)
	}
	fail := func(k shardcore.MovingKey, err error) {
		counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
	}
	// A new owner that failed earlier in the run, or has not drained since
	// a MIGRATE to it failed, is sent nothing.
	refused := map[int]error{}
	keys = slices.DeleteFunc(keys, func(k shardcore.MovingKey) bool {
		err, seen := refused[k.To]
		if !seen {
			err = cmp.Or(deadErr(dead, v, k.To), s.moves.drained(ctx, v, k.To))
			refused[k.To] = err
		}
		if err != nil {
			fail(k, err)
		}
		return err != nil
	})
	// The barrier is held until the keys are settled: the old owners must
	// not start another MIGRATE meanwhile (nor be busy with one while
	// their keys' expiries are read).
	type pair struct{ from, to int }
	var edges [][2]string // the servers each MIGRATE goes from and to
	seen := map[pair]bool{}
	for _, k := range keys {
		if p := (pair{k.From, k.To}); !seen[p] {
			seen[p] = true
			edges = append(edges, [2]string{srv(p.from), srv(p.to)})
		}
	}
	s.enter(edges)
	defer s.leave(edges)
	// Each key's absolute expiry, read first: the transaction's reply may
	// be lost. (The keys are locked: it can only run out meanwhile.)
	keys, expiry := s.expiries(ctx, v, keys, fail)
	// One MIGRATE per pair of owners, after the EXISTS, in one transaction
	// per old owner.
	migs := map[pair]*goredis.StatusCmd{}
	txs := make([][]goredis.Cmder, v.Len()) // by old owner
	exists := make([]*goredis.IntCmd, len(keys))
	var order []pair
	pairKeys := map[pair][]any{}
	for i, k := range keys {
		exists[i] = goredis.NewIntCmd(ctx, "exists", k.Key)
		txs[k.From] = append(txs[k.From], exists[i])
		p := pair{k.From, k.To}
		if pairKeys[p] == nil {
			order = append(order, p)
		}
		pairKeys[p] = append(pairKeys[p], k.Key)
	}
	for _, p := range order {
		args := append(append(append([]any{"migrate"}, s.target[v.ID(p.to)]...), "keys"), pairKeys[p]...)
		migs[p] = goredis.NewStatusCmd(ctx, args...)
		txs[p.from] = append(txs[p.from], migs[p])
	}
	for from, tx := range txs {
		if len(tx) == 0 {
			continue
		}
		pipe := v.Client(from).TxPipeline()
		_ = pipe.BatchProcess(ctx, tx...)
		_, err := pipe.Exec(ctx)
		// A lost reply: the transaction may still run. Wait until the old
		// owner answers, so that the settling below sees where it left the
		// keys; then it was busy, not failing, and its health hears so.
		if err != nil && !isReplyError(err) && awaitAnswer(ctx, v.Client(from)) {
			for _, cmd := range tx {
				cmd.SetErr(v.Wrap(ctx, from, cmd.Err()))
			}
			v.Report(ctx, from, nil)
		} else {
			finishGroup(ctx, v, from, tx)
		}
	}
	// A new owner that a MIGRATE failed to without an answer is drained
	// before its keys are settled.
	undrained := map[int]error{}
	for _, p := range order {
		if unanswered(migs[p].Err()) {
			var ks []shardcore.MovingKey
			var exp []int64
			for i, k := range keys {
				if k.From == p.from && k.To == p.to {
					ks, exp = append(ks, k), append(exp, expiry[i])
				}
			}
			s.moves.undrainedOwner(v, p.to, ks, exp)
		}
	}
	for _, p := range order {
		if _, done := undrained[p.to]; !done && unanswered(migs[p].Err()) {
			err := s.moves.drained(ctx, v, p.to)
			if err != nil && !isContextErr(err) {
				dead.Store(v.ID(p.to), err)
			}
			undrained[p.to] = err
		}
	}
	// Settle the keys of the failed MIGRATEs and lost transactions: where
	// is each now?
	var left []int                  // indices of keys to settle
	var landed []int                // indices of keys MIGRATE moved
	why := make([]error, len(keys)) // their MIGRATE's or transaction's error
	for i, k := range keys {
		mig := migs[pair{k.From, k.To}]
		switch err := exists[i].Err(); {
		case err != nil && isReplyError(err): // refused: nothing ran (EXECABORT)
			fail(k, err)
		case undrained[k.To] != nil:
			fail(k, undrained[k.To])
		case err != nil:
			why[i] = err
			left = append(left, i)
		case exists[i].Val() == 0:
			counts.gone++
		case mig.Err() == nil:
			landed = append(landed, i)
		default:
			why[i] = mig.Err()
			left = append(left, i)
		}
	}
	if len(left) > 0 {
		moved, onOwner := s.settle(ctx, v, keys, left, why, fail)
		landed = append(landed, moved...)
		counts.onOwner += onOwner
	}
	s.keepExpiry(ctx, v, keys, expiry, landed, &counts, fail)
	return counts
}

// expiries reads each key's absolute expiry on its old owner
// (PEXPIRETIME, Unix ms; -1 none), and returns the keys read and their
// expiries; a key whose read fails is failed, unsent. A read whose reply is
// lost (the old owner busy) is tried again once the old owner answers.
func (s *serverSide) expiries(ctx context.Context, v *view, keys []shardcore.MovingKey, fail func(shardcore.MovingKey, error)) ([]shardcore.MovingKey, []int64) {
	reads := make([]*goredis.IntCmd, len(keys))
	read := func(which []int) {
		groups := make([][]goredis.Cmder, v.Len())
		for _, i := range which {
			reads[i] = goredis.NewIntCmd(ctx, "pexpiretime", keys[i].Key)
			groups[keys[i].From] = append(groups[keys[i].From], reads[i])
		}
		execGroups(ctx, v, groups)
	}
	read(indices(len(keys)))
	var again []int
	answered := map[int]bool{} // by old owner: it answered after a lost reply
	for i, k := range keys {
		if err := reads[i].Err(); err != nil && !isReplyError(err) {
			if _, asked := answered[k.From]; !asked {
				answered[k.From] = awaitAnswer(ctx, v.Client(k.From))
			}
			if answered[k.From] {
				again = append(again, i)
			}
		}
	}
	if len(again) > 0 {
		read(again)
	}
	var kept []shardcore.MovingKey
	var expiry []int64
	for i, k := range keys {
		if err := reads[i].Err(); err != nil {
			fail(k, err)
		} else {
			kept, expiry = append(kept, k), append(expiry, reads[i].Val())
		}
	}
	return kept, expiry
}

// indices returns 0, 1, ..., n-1.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// settle finds where each key of keys[left] is after a MIGRATE or a
// transaction that failed (why[i]): a key gone from its old owner moved
// (its index is returned in moved); a key on both owners has its old copy
// deleted (counted in onOwner: the new owner's copy came from an earlier
// MIGRATE, its expiry set when that new owner drained); a key on its old
// owner alone fails.
func (s *serverSide) settle(ctx context.Context, v *view, keys []shardcore.MovingKey, left []int, why []error, fail func(shardcore.MovingKey, error)) (moved []int, onOwner int) {
	groups := make([][]goredis.Cmder, v.Len())
	onOld := make([]*goredis.IntCmd, len(keys))
	onNew := make([]*goredis.IntCmd, len(keys))
	for _, i := range left {
		k := keys[i]
		onOld[i] = goredis.NewIntCmd(ctx, "exists", k.Key)
		onNew[i] = goredis.NewIntCmd(ctx, "exists", k.Key)
		groups[k.From] = append(groups[k.From], onOld[i])
		groups[k.To] = append(groups[k.To], onNew[i])
	}
	execGroups(ctx, v, groups)
	var deleting []int
	for _, i := range left {
		k := keys[i]
		switch {
		case onOld[i].Err() != nil:
			fail(k, fmt.Errorf("%w; then: %w", why[i], onOld[i].Err()))
		case onOld[i].Val() == 0: // MIGRATE moved it before it failed
			moved = append(moved, i)
		case onNew[i].Err() != nil:
			fail(k, fmt.Errorf("%w; then: %w", why[i], onNew[i].Err()))
		case onNew[i].Val() == 0:
			fail(k, why[i])
		default:
			deleting = append(deleting, i)
		}
	}
	dels := delOld(ctx, v, keys, deleting)
	for _, i := range deleting {
		k := keys[i]
		if err := dels[k.From].Err(); err != nil {
			fail(k, fmt.Errorf("deleting the old copy: %w", err))
		} else {
			onOwner++
		}
	}
	return moved, onOwner
}

// keepExpiry gives each key of keys[landed] that had a TTL the absolute
// expiry its old owner gave (expiry[i], PEXPIRETIME), and counts it moved;
// a key whose PEXPIREAT fails is counted failed (it is on its new owner,
// its TTL as MIGRATE set it).
func (s *serverSide) keepExpiry(ctx context.Context, v *view, keys []shardcore.MovingKey, expiry []int64, landed []int, counts *moveCounts, fail func(shardcore.MovingKey, error)) {
	groups := make([][]goredis.Cmder, v.Len())
	at := make([]*goredis.BoolCmd, len(keys))
	for _, i := range landed {
		if ms := expiry[i]; ms > 0 {
			k := keys[i]
			at[i] = goredis.NewBoolCmd(ctx, "pexpireat", k.Key, ms)
			groups[k.To] = append(groups[k.To], at[i])
		}
	}
	execGroups(ctx, v, groups)
	for _, i := range landed {
		if at[i] != nil && at[i].Err() != nil {
			fail(keys[i], fmt.Errorf("moved, but its expiry could not be set on the new owner: %w", at[i].Err()))
		} else {
			counts.moved++
		}
	}
}

// unanswered reports whether err, a MIGRATE's, says that the new owner may
// not have answered: MIGRATE's own I/O error or timeout (IOERR), or a lost
// reply of its transaction.
func unanswered(err error) bool {
	var reply goredis.Error
	if err == nil {
		return false
	}
	return !errors.As(err, &reply) || strings.HasPrefix(reply.Error(), "IOERR")
}

// drain waits until c's server answers (awaitAnswer), then makes a few
// more round trips: by then the server has read and run what other
// connections had left in its buffers when it stopped (a RESTORE that a
// MIGRATE gave up on), since it reads every ready connection, and accepts
// every pending one, once per turn of its event loop, and each round trip
// takes a turn at least. What is still in the network (a retransmission
// held up longer than those round trips) is not covered. It asks on a
// connection of its own (soloClient): c's pooled ones may be to a server
// that died and came back.
func drain(ctx context.Context, c *goredis.Client) error {
	own := soloClient(c)
	defer own.Close()
	if !awaitAnswer(ctx, own) {
		return cmp.Or(ctx.Err(), errors.New("it does not answer"))
	}
	for range drainTurns {
		if err := own.Ping(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// drainTurns is how many round trips drain makes after the first answer.
const drainTurns = 4

// awaitAnswer PINGs c until it answers, and reports whether it did. A
// server answers nothing while it runs MIGRATE, however long the transfer
// takes (MIGRATE's timeout bounds each of its reads and writes, not the
// whole), so its answer means that a transaction whose reply was lost is
// over (the gate lets one transaction run per server at a time; if the
// server had not even read it when the client gave up, stalled longer
// than ReadTimeout by something else, it may run after the answer: its
// keys then count failed, though they move, and a rerun counts them gone).
// It waits as long as the PINGs time out (the server is busy, or
// stopped), and gives up when ctx ends or a PING fails otherwise (the
// server is gone: refused, reset).
func awaitAnswer(ctx context.Context, c *goredis.Client) bool {
	for {
		err := c.Ping(ctx).Err()
		var ne net.Error
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, goredis.ErrPoolTimeout):
		default:
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// enter waits until the MIGRATE transactions of one batch, each from
// server edges[i][0] to edges[i][1], may run, and records them as running.
// A server runs MIGRATE to the end before it serves anything else, so a
// MIGRATE to a server that is running one waits until that one ends; if it
// ran from A to B while another ran from B to A (or round any cycle of
// servers), each would wait on the other until MIGRATE's timeout. So a
// transaction waits while its new owner's server reaches its old owner's
// over the transactions running, and while another transaction runs from
// its old owner's server: that server would run them one after the other
// anyway, and a transaction whose reply is lost must be the only one that
// server still owes (see awaitAnswer). Servers, not shards: two DBs of one
// server are one. (A batch's own transactions run one after the other.)
func (s *serverSide) enter(edges [][2]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.held(edges) {
		s.cond.Wait()
	}
	for _, e := range edges {
		s.running[e]++
	}
}

// held reports whether the transactions edges must wait (see enter).
func (s *serverSide) held(edges [][2]string) bool {
	for _, e := range edges {
		if s.sending(e[0]) || s.reaches(e[1], e[0]) {
			return true
		}
	}
	return false
}

// leave records the end of the transactions that enter let run.
func (s *serverSide) leave(edges [][2]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range edges {
		if s.running[e]--; s.running[e] == 0 {
			delete(s.running, e)
		}
	}
	s.cond.Broadcast()
}

// sending reports whether a transaction runs from server from.
func (s *serverSide) sending(from string) bool {
	for e := range s.running {
		if e[0] == from {
			return true
		}
	}
	return false
}

// reaches reports whether server target is server start or is reached
// from it over the running transactions.
func (s *serverSide) reaches(start, target string) bool {
	seen := map[string]bool{}
	todo := []string{start}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if n == target {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		for e := range s.running {
			if e[0] == n {
				todo = append(todo, e[1])
			}
		}
	}
	return false
}
