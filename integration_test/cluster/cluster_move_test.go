package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// The move under live writers: every key, of every type, is on the
// cluster with its value and TTL at the end; the window ended; the same
// client serves from the cluster, and a second Run moves nothing.
func TestClusterMove(t *testing.T) {
	m := fixtures.NewClusterMove(t, 4000, nil, nil)
	stop := make(chan struct{})
	written := m.Writers(stop)
	if err := m.C.BeginClusterMove(m.ClusterShard(true)); err != nil {
		t.Fatal(err)
	}
	mig, err := m.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	last := written()
	if m.C.Window() != nil {
		t.Fatal("the window is still open after the migration")
	}
	for _, p := range mig.Progress() {
		if p.Failed != 0 || p.Owned != 0 || p.Stale != 0 {
			t.Fatalf("progress of %s: %+v; want no key failed, owned or stale", p.Shard, p)
		}
	}
	m.Check(t, last)
	if got := m.C.Get(ctx, "k:5").Val(); got != "5" {
		t.Fatalf("GET k:5 through the sharded client after the move = %q", got)
	}
	var unsupported *shardedredis.UnsupportedError
	if err := m.C.DBSize(ctx).Err(); !errors.As(err, &unsupported) {
		t.Fatalf("DBSIZE through the sharded client after the move: %v; want an *UnsupportedError (one node would answer)", err)
	}
}

// A master killed during the move: the run stops with errors naming the
// node (*ClusterNodeError); once its replica has taken over, the run
// resumed from the checkpoint finishes, and no key is lost, those moved to
// the killed master included (each RESTORE waited for its replica).
func TestClusterMoveMasterKilledAndResumed(t *testing.T) {
	m := fixtures.NewClusterMove(t, 4000, nil, nil)
	mig, masters := m.BeginWithFailover(t)
	victim := m.Cluster.Node(masters[0])
	runErr := make(chan error, 1)
	go func() { runErr <- mig.Run(ctx) }()
	waitFor(t, func() bool { return progressMoved(mig) >= int64(m.N/4) })
	victim.Kill()
	err := <-runErr
	var me *shardedredis.MigrationError
	var ne *shardedredis.ClusterNodeError
	if !errors.As(err, &me) || !errors.As(err, &ne) || ne.Node != victim.Addr {
		t.Fatalf("Run with master %s killed = %v; want a *MigrationError naming the node (*ClusterNodeError)", victim.Addr, err)
	}
	// Its replica takes over (a node restarted before that, empty, would
	// come back as the master of its slots); the node comes back as the
	// replica of the one that took over, whose writes then have a replica
	// to wait for.
	waitFor(t, func() bool {
		now, _ := m.Cluster.Masters(ctx)
		return len(now) == 3 && !slices.Contains(now, victim.Addr)
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := victim.Restart(wctx, fixtures.ClusterNodeTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.Cluster.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	m.Resume(t, mig)
	m.Check(t, nil)
}

// A manual failover (CLUSTER FAILOVER on a replica) during the move: the
// cluster client follows the new master; the run (resumed if the
// failover failed some keys) finishes, and every key is there.
func TestClusterMoveFailover(t *testing.T) {
	m := fixtures.NewClusterMove(t, 4000, nil, nil)
	mig, masters := m.BeginWithFailover(t)
	var replica string
	for _, n := range m.Cluster.Nodes {
		if !slices.Contains(masters, n.Addr) {
			replica = n.Addr
			break
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- mig.Run(ctx) }()
	waitFor(t, func() bool { return progressMoved(mig) >= int64(m.N/4) })
	r := goredis.NewClient(&goredis.Options{Addr: replica})
	defer r.Close()
	if err := r.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica, err)
	}
	err := <-runErr
	var me *shardedredis.MigrationError
	switch {
	case errors.As(err, &me):
		t.Logf("the run during the failover: %v; resuming", err)
		m.Resume(t, mig)
	case err != nil:
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Cluster.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if now, _ := m.Cluster.Masters(ctx); !slices.Contains(now, replica) {
		t.Fatalf("after CLUSTER FAILOVER, %s is not a master (masters: %v)", replica, now)
	}
	m.Check(t, nil)
}

func progressMoved(m *shardedredis.Migration) int64 {
	var n int64
	for _, p := range m.Progress() {
		n += p.Moved
	}
	return n
}

// waitFor polls cond every 5 ms for up to a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
	}
}

// Once the keys are in the cluster shard, BeginResharding with a list that
// would take keys out of it is refused before anything changes (a migration
// cannot scan a cluster shard).
func TestClusterShardIsNoMigrationSource(t *testing.T) {
	m := fixtures.NewClusterMove(t, 400, nil, nil)
	cs := m.ClusterShard(false)
	if err := m.C.BeginClusterMove(cs); err != nil {
		t.Fatal(err)
	}
	mig, err := m.C.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cluster := m.C.Shards()[0]
	extra := shardedredis.ShardOptions{Name: "redis-x", Addr: fixtures.SharedRedis(t, 4)[3].Addr}
	err = m.C.BeginResharding([]shardedredis.ShardOptions{{Name: cluster.Name, Cluster: &cs}, extra})
	var unsupported *shardedredis.UnsupportedError
	if !errors.As(err, &unsupported) || unsupported.Command != "beginresharding" || !strings.Contains(err.Error(), "a Redis Cluster") {
		t.Fatalf("BeginResharding taking keys out of the cluster shard: %v; want an *UnsupportedError naming it", err)
	}
	if m.C.Window() != nil || len(m.C.Shards()) != 1 {
		t.Fatalf("after the refusal: window %v, %d shards; want no window and the cluster shard alone", m.C.Window(), len(m.C.Shards()))
	}
	if got := m.C.Get(ctx, "k:5").Val(); got != "5" {
		t.Fatalf("GET k:5 after the refusal = %q, want 5", got)
	}
}

// PlanClusterMove reports, exactly, the keys of the shards by the master
// that will serve them, the keys the masters hold now (which
// BeginClusterMove deletes), and a key group that one Jedis key tag keeps
// on one shard today but Redis Cluster splits over two slots; it writes
// nothing.
func TestPlanClusterMove(t *testing.T) {
	const n = 400
	m := fixtures.NewClusterMove(t, n, nil, nil)
	cc := goredis.NewClusterClient(m.ClusterShard(false).Options)
	defer cc.Close()
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
		return master.FlushAll(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	// Two keys with one Jedis key tag in two Redis slots, and a few keys
	// already on the cluster.
	var split []string
	for i := 0; len(split) < 2 && i < 10000; i++ {
		k := "{}}" + strconv.Itoa(i)
		if len(split) == 0 {
			split = append(split, k)
			continue
		}
		t0, _ := ring.KeyTag(split[0])
		t1, ok := ring.KeyTag(k)
		if ok && t0 == t1 && shardedredis.Slot(k) != shardedredis.Slot(split[0]) {
			split = append(split, k)
		}
	}
	if len(split) != 2 {
		t.Fatalf("no two keys with one Jedis tag in two slots among the candidates: %q", split)
	}
	for _, k := range split {
		if err := m.C.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		if err := cc.Set(ctx, "already:"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := m.C.PlanClusterMove(ctx, m.ClusterShard(false).Options, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Scanned != n+2 {
		t.Fatalf("Scanned = %d, want %d", plan.Scanned, n+2)
	}
	want := map[string]int64{} // master -> keys whose slot it serves
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	keys := split
	for i := range n {
		keys = append(keys, "k:"+strconv.Itoa(i))
	}
	for _, k := range keys {
		s := shardedredis.Slot(k)
		for _, r := range slots {
			if s >= r.Start && s <= r.End {
				want[r.Nodes[0].Addr]++
			}
		}
	}
	var existing, slotCount int64
	for _, node := range plan.Nodes {
		if node.Keys != want[node.Addr] {
			t.Fatalf("master %s: %d keys planned, want %d (%+v)", node.Addr, node.Keys, want[node.Addr], plan.Nodes)
		}
		existing += node.Existing
		slotCount += int64(node.Slots)
	}
	if existing != 7 || slotCount != 16384 || len(plan.Nodes) != 3 {
		t.Fatalf("plan: %d keys on the cluster (want 7), %d slots (want 16384), %d masters (want 3):\n%s", existing, slotCount, len(plan.Nodes), plan)
	}
	if plan.GroupsSplit != 1 || len(plan.Groups) != 1 || len(plan.Groups[0].Slots) != 2 {
		t.Fatalf("split groups: %d %+v, want the one of %q", plan.GroupsSplit, plan.Groups, split)
	}
	if !strings.Contains(plan.String(), "which BeginClusterMove deletes") {
		t.Fatalf("the plan does not say that the cluster's keys will be deleted:\n%s", plan)
	}
	for i := range 7 { // the plan wrote nothing
		if got, err := cc.Get(ctx, "already:"+strconv.Itoa(i)).Result(); err != nil || got != strconv.Itoa(i) {
			t.Fatalf("already:%d after the plan: %q, %v", i, got, err)
		}
	}
}

// The move with every shard caching (client-side caching): while keys move
// into the cluster, writers SET counters through the client and readers of
// the same process read them; a read never returns a value older than the
// last write the client acknowledged before the read began (read-your-writes
// within the process, across the move), and the cluster holds every key's
// last value at the end.
func TestClusterMoveCached(t *testing.T) {
	m := fixtures.NewClusterMove(t, 2000, nil, fixtures.CachedOptions())
	const counters = 64
	var acked, sent [counters]atomic.Int64
	key := func(i int) string { return "c:" + strconv.Itoa(i) }
	for i := range counters { // cached before the move: read until a hit
		if err := m.C.Set(ctx, key(i), 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		fixtures.CacheKey(t, m.C, key(i), "0")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	report := func(format string, args ...any) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for w := range 4 {
		wg.Go(func() { // writer w owns the counters i with i%4 == w
			for n := int64(1); ; n++ {
				for i := w; i < counters; i += 4 {
					select {
					case <-stop:
						return
					default:
					}
					sent[i].Store(n)
					if err := m.C.Set(ctx, key(i), n, 0).Err(); err != nil {
						report("SET %s %d: %v", key(i), n, err)
						return
					}
					acked[i].Store(n)
				}
			}
		})
	}
	var reads atomic.Int64
	for r := range 4 {
		wg.Go(func() {
			for j := r; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				i := j * 7 % counters
				lo := acked[i].Load()
				got, err := m.C.Get(ctx, key(i)).Int64()
				if hi := sent[i].Load(); err != nil || got < lo || got > hi {
					report("GET %s = %d (%v), want %d..%d", key(i), got, err, lo, hi)
					return
				}
				reads.Add(1)
			}
		})
	}
	if err := m.C.BeginClusterMove(m.ClusterShard(false)); err != nil {
		t.Fatal(err)
	}
	mig, err := m.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, KeysPerSecond: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // reads and writes on the cluster alone
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d wrong read(s) or failed write(s) of %d reads, first: %v", len(bad), reads.Load(), bad[:min(5, len(bad))])
	}
	last := map[string][2]string{}
	for i := range counters {
		v := strconv.FormatInt(acked[i].Load(), 10)
		last[key(i)] = [2]string{v, v}
	}
	m.Check(t, last)
	t.Logf("%d reads checked during the move", reads.Load())
}
