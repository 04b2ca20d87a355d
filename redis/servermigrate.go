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

// checkServerSide refuses, with an error matching ErrServerSide that names
// the shard, a migration of v's window with MIGRATE when a new owner cannot
// be reached by it (migrateTarget) or a live old owner does not list
// MIGRATE in COMMAND INFO (miniredis, which would leave a transaction
// holding it unanswered). An old owner that does not answer is left to the
// run, which reports it as for any migration.
func checkServerSide(v *view) error {
	for i := range v.FullRing().Len() { // the new list's shards
		if _, err := migrateTarget(v, i); err != nil {
			return err
		}
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
			return fmt.Errorf("%w: %s does not list MIGRATE in COMMAND INFO", ErrServerSide, v.Label(src))
		}
	}
	return nil
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

// migrateBatch is moveBatch done by the servers: for each old owner, one
// transaction (MULTI, EXISTS of every key, one MIGRATE ... KEYS per new
// owner, EXEC), in which the old owner sends its keys straight to their new
// owners and deletes them (never REPLACE: the new owner's copy wins, see
// BeginResharding; TTLs go with the keys). The EXISTS in the transaction
// tell a key that was gone from one that moved (the server's clock stands
// still inside EXEC: no key expires between the two). A MIGRATE that fails
// (the new owner had a key: BUSYKEY; or it failed part way) is settled as
// moveBatch settles BUSYKEY: each of its keys still on the old owner is
// deleted there if the new owner holds it, else fails. A transaction whose
// reply is lost (a read timeout while the servers still move big values)
// is settled so too, once the old owner answers again: it serves nothing
// else while it runs MIGRATE, so it answers once the transaction is over;
// a key no longer there counts as moved (one deleted meanwhile too). A key
// whose old and new owners are two DBs of one server moves through the
// client (moveBatch): MIGRATE to its own server would wait on itself. The
// caller holds the keys' locks.
//
// Transactions run at once unless gate holds them back (see migrateGate).
func migrateBatch(ctx context.Context, v *view, keys []shardedclient.MovingKey, gate *migrateGate) moveCounts {
	var local []shardedclient.MovingKey
	keys = slices.DeleteFunc(slices.Clone(keys), func(k shardedclient.MovingKey) bool {
		if gate.server[k.From] == gate.server[k.To] {
			local = append(local, k)
			return true
		}
		return false
	})
	var counts moveCounts
	if len(local) > 0 {
		counts = moveBatch(ctx, v, local)
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
	tos := make([][]int, v.Len()) // by old owner, its new owners
	for _, p := range order {
		tos[p.from] = append(tos[p.from], p.to)
		args, err := migrateTarget(v, p.to)
		if err != nil {
			migs[p] = goredis.NewStatusCmd(ctx, "migrate")
			migs[p].SetErr(err)
			continue
		}
		args = append(append(append([]any{"migrate"}, args...), "keys"), pairKeys[p]...)
		migs[p] = goredis.NewStatusCmd(ctx, args...)
		txs[p.from] = append(txs[p.from], migs[p])
	}
	for from, tx := range txs {
		if len(tx) == 0 {
			continue
		}
		pipe := v.Client(from).TxPipeline()
		_ = pipe.BatchProcess(ctx, tx...)
		gate.enter(from, tos[from])
		if _, err := pipe.Exec(ctx); err != nil && !isReplyError(err) {
			// The reply is lost, and the transaction may still run: wait
			// until the old owner answers, so that the settling below sees
			// where it left the keys.
			awaitAnswer(ctx, v.Client(from), time.Duration(len(tos[from])+1)*migrateTimeout*time.Millisecond)
		}
		gate.leave(from, tos[from])
		finishGroup(ctx, v, from, tx)
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

// awaitAnswer PINGs c until it answers, for at most limit (or until ctx
// ends). A server answers nothing while it runs MIGRATE, so its answer
// means that a transaction whose reply was lost is over.
func awaitAnswer(ctx context.Context, c *goredis.Client, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for c.Ping(ctx).Err() != nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// migrateGate lets the MIGRATE transactions of a migration run at once
// unless they could wait on each other for good. A server runs MIGRATE to
// the end before it serves anything else, so a MIGRATE to a server that is
// running one waits until that one ends; if it ran from A to B while
// another ran from B to A (or round any cycle of servers), each would wait
// on the other until MIGRATE's timeout. enter holds a transaction back
// while one of its new owners' servers reaches its old owner's over the
// transactions running. Servers, not shards: two DBs of one server are
// one.
type migrateGate struct {
	server  []string // the server of each shard of the window's view
	mu      sync.Mutex
	cond    sync.Cond
	running map[[2]string]int // (old owner's server, new owner's) -> transactions running
}

// newMigrateGate returns the gate of a migration over v's shards. A shard's
// server is its address without the DB, the host resolved when it
// resolves (a Sentinel group: its name).
func newMigrateGate(v *view) *migrateGate {
	servers := make([]string, v.Len())
	for i := range servers {
		servers[i] = server(v.Shard(i))
		if tcp, err := net.ResolveTCPAddr("tcp", servers[i]); err == nil {
			servers[i] = tcp.String()
		}
	}
	return gateOf(servers)
}

// gateOf returns a gate over shards on the given servers, by shard index.
func gateOf(servers []string) *migrateGate {
	g := &migrateGate{server: servers, running: map[[2]string]int{}}
	g.cond.L = &g.mu
	return g
}

// enter waits until a transaction from shard from to shards tos closes no
// cycle of servers, and records it as running.
func (g *migrateGate) enter(from int, tos []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.reaches(tos, from) {
		g.cond.Wait()
	}
	for _, to := range tos {
		g.running[[2]string{g.server[from], g.server[to]}]++
	}
}

// leave records the end of a transaction that enter let run.
func (g *migrateGate) leave(from int, tos []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, to := range tos {
		e := [2]string{g.server[from], g.server[to]}
		if g.running[e]--; g.running[e] == 0 {
			delete(g.running, e)
		}
	}
	g.cond.Broadcast()
}

// reaches reports whether shard target's server is one of starts' or is
// reached from one of them over the running transactions.
func (g *migrateGate) reaches(starts []int, target int) bool {
	seen := map[string]bool{}
	var todo []string
	for _, s := range starts {
		todo = append(todo, g.server[s])
	}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if s == g.server[target] {
			return true
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		for e := range g.running {
			if e[0] == s {
				todo = append(todo, e[1])
			}
		}
	}
	return false
}
