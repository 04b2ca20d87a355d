package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/shardedclient"
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

// move is a move done by the servers: for each old owner, one
// transaction (MULTI, EXISTS of every key, one MIGRATE ... KEYS per new
// owner, EXEC), in which the old owner sends its keys straight to their new
// owners and deletes them (never REPLACE: the new owner's copy wins, see
// BeginResharding; TTLs go with the keys). The EXISTS in the transaction
// tell a key that was gone from one that moved (a key whose TTL runs out
// during the transaction may count as moved: MIGRATE reads the clock, the
// EXISTS the transaction's start). A MIGRATE that fails
// (the new owner had a key: BUSYKEY; or it failed part way) is settled:
// each of its keys still on the old owner is
// deleted there if the new owner holds it, else fails. A transaction whose
// reply is lost (a read timeout while the servers still move big values)
// is settled so too, once the old owner answers again (see awaitAnswer;
// its health then counts an answer, not a failure); a key no longer there
// counts as moved (one deleted meanwhile too). A key
// whose old and new owners are two DBs of one server moves through the
// client (viaClient): MIGRATE to its own server would wait on itself. The
// caller holds the keys' locks.
//
// Batches run at once unless the gate holds them back (see enter); a batch
// holds it until its keys are settled.
func (s *serverSide) move(ctx context.Context, v *view, keys []shardedclient.MovingKey, viaClient func(context.Context, *view, []shardedclient.MovingKey) moveCounts) moveCounts {
	defer dropKeys(v, keys) // the new owner's server wrote them, not its client
	srv := func(i int) string { return s.server[v.ID(i)] }
	var local []shardedclient.MovingKey
	keys = slices.DeleteFunc(slices.Clone(keys), func(k shardedclient.MovingKey) bool {
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
	fail := func(k shardedclient.MovingKey, err error) {
		counts.failed = append(counts.failed, &KeyMoveError{Key: k.Key, From: v.Label(k.From), To: v.Label(k.To), Err: err})
	}
	// One MIGRATE per pair of owners, after the EXISTS, in one transaction
	// per old owner.
	type pair struct{ from, to int }
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
	var edges [][2]string // the servers each MIGRATE goes from and to
	for _, p := range order {
		edges = append(edges, [2]string{srv(p.from), srv(p.to)})
		args := append(append(append([]any{"migrate"}, s.target[v.ID(p.to)]...), "keys"), pairKeys[p]...)
		migs[p] = goredis.NewStatusCmd(ctx, args...)
		txs[p.from] = append(txs[p.from], migs[p])
	}
	// The gate is held until the keys are settled: the old owners must
	// not start another MIGRATE meanwhile.
	s.enter(edges)
	defer s.leave(edges)
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
	// Settle the keys of the failed MIGRATEs and lost transactions: where
	// is each now?
	var left []int                  // indices of keys to settle
	why := make([]error, len(keys)) // their MIGRATE's or transaction's error
	for i, k := range keys {
		mig := migs[pair{k.From, k.To}]
		switch err := exists[i].Err(); {
		case err != nil && isReplyError(err): // refused: nothing ran (EXECABORT)
			fail(k, err)
		case err != nil:
			why[i] = err
			left = append(left, i)
		case exists[i].Val() == 0:
			counts.gone++
		case mig.Err() == nil:
			counts.moved++
		default:
			why[i] = mig.Err()
			left = append(left, i)
		}
	}
	if len(left) == 0 {
		return counts
	}
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
			counts.moved++
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
			counts.onOwner++
		}
	}
	return counts
}

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
