package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

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
// tell a key that was gone from one that moved. A MIGRATE that fails (the
// new owner had a key: BUSYKEY; or it failed part way) is settled as
// moveBatch settles BUSYKEY: each of its keys still on the old owner is
// deleted there if the new owner holds it, else fails. The caller holds
// the keys' locks.
//
// Transactions run at once unless gate holds them back (see migrateGate).
//
// A transaction whose reply is lost counts its keys as failed, and the
// retry counts those that had moved as gone.
func migrateBatch(ctx context.Context, v *view, keys []shardedclient.MovingKey, gate *migrateGate) moveCounts {
	var counts moveCounts
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
		_, _ = pipe.Exec(ctx)
		gate.leave(from, tos[from])
		finishGroup(ctx, v, from, tx)
	}
	// Settle the keys of the failed MIGRATEs: where is each now?
	var left []int // indices of keys whose MIGRATE failed
	for i, k := range keys {
		mig := migs[pair{k.From, k.To}]
		switch {
		case exists[i].Err() != nil:
			fail(k, exists[i].Err())
		case exists[i].Val() == 0:
			counts.gone++
		case mig.Err() == nil:
			counts.moved++
		default:
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
		migErr := migs[pair{k.From, k.To}].Err()
		switch {
		case onOld[i].Err() != nil:
			fail(k, fmt.Errorf("%w; then: %w", migErr, onOld[i].Err()))
		case onOld[i].Val() == 0: // MIGRATE moved it before it failed
			counts.moved++
		case onNew[i].Err() != nil:
			fail(k, fmt.Errorf("%w; then: %w", migErr, onNew[i].Err()))
		case onNew[i].Val() == 0:
			fail(k, migErr)
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

// migrateGate lets the MIGRATE transactions of a migration run at once
// unless they could wait on each other for good. A server runs MIGRATE to
// the end before it serves anything else, so a MIGRATE to a server that is
// running one waits until that one ends; if it ran from A to B while
// another ran from B to A (or round any cycle of servers), each would wait
// on the other until MIGRATE's timeout. enter holds a transaction back
// while one of its new owners reaches its old owner over the transactions
// running.
type migrateGate struct {
	mu      sync.Mutex
	cond    sync.Cond
	running map[[2]int]int // (old owner, new owner) -> transactions running
}

func newMigrateGate() *migrateGate {
	g := &migrateGate{running: map[[2]int]int{}}
	g.cond.L = &g.mu
	return g
}

// enter waits until a transaction from shard from to shards tos closes no
// cycle, and records it as running.
func (g *migrateGate) enter(from int, tos []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.reaches(tos, from) {
		g.cond.Wait()
	}
	for _, to := range tos {
		g.running[[2]int{from, to}]++
	}
}

// leave records the end of a transaction that enter let run.
func (g *migrateGate) leave(from int, tos []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, to := range tos {
		e := [2]int{from, to}
		if g.running[e]--; g.running[e] == 0 {
			delete(g.running, e)
		}
	}
	g.cond.Broadcast()
}

// reaches reports whether shard target is one of starts or is reached from
// one of them over the running transactions.
func (g *migrateGate) reaches(starts []int, target int) bool {
	seen := map[int]bool{}
	todo := slices.Clone(starts)
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if s == target {
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
