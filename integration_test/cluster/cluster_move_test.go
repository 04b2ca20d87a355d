package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/rediscluster"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

// clusterMove is a sharded client over three shared redis-servers holding n
// keys of several types (key i: a string with a TTL of 1 h, a string
// without TTL, a hash or a list, by i mod 4), and the shared cluster.
type clusterMove struct {
	c       *shardedredis.ShardedClient
	cluster *rediscluster.Cluster
	n       int
}

func newClusterMove(tb testing.TB, n int, p ring.Preset) *clusterMove {
	tb.Helper()
	cl := sharedCluster(tb)
	var shards []shardedredis.ShardOptions
	for i, p := range sharedRedis(tb, 3) {
		shards = append(shards, shardedredis.ShardOptions{Name: fmt.Sprintf("redis-%c", 'a'+i), Addr: p.addr})
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards, Placement: p})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	seedTypes(tb, c, n)
	return &clusterMove{c: c, cluster: cl, n: n}
}

// clusterShard is the cluster as a shard; WAIT for one replica when wait.
func (m *clusterMove) clusterShard(wait bool) shardedredis.ClusterShard {
	cs := shardedredis.ClusterShard{Options: &goredis.ClusterOptions{Addrs: m.cluster.Addrs(), DialerRetries: 1}}
	if wait {
		cs.WaitReplicas, cs.WaitTimeout = 1, 2*time.Second
	}
	return cs
}

// writers runs, until stop, one goroutine per 100 keys of "w:" keys that
// SETs its keys in turn and records the last value written; it returns
// the records once stopped. A write that failed (a cluster node down) is
// recorded as unknown: either value may be there.
func (m *clusterMove) writers(stop <-chan struct{}) func() map[string][2]string {
	var mu sync.Mutex
	last := map[string][2]string{} // key -> {value written, value before it (when the write failed)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := 0; ; round++ {
				for i := range 100 {
					select {
					case <-stop:
						return
					default:
					}
					k := fmt.Sprintf("w:%d:%d", g, i)
					v := strconv.Itoa(round)
					err := m.c.Set(ctx, k, v, 0).Err()
					mu.Lock()
					prev := last[k]
					if err == nil {
						last[k] = [2]string{v, v}
					} else {
						last[k] = [2]string{v, prev[0]}
					}
					mu.Unlock()
				}
			}
		})
	}
	return func() map[string][2]string {
		wg.Wait()
		return last
	}
}

// check reads every key of the setup through a plain ClusterClient (what
// the application uses at its next deploy) and compares its value and
// TTL; and the writers' keys with their last value.
func (m *clusterMove) check(t *testing.T, written map[string][2]string) {
	t.Helper()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: m.cluster.Addrs()})
	defer cc.Close()
	var bad []string
	for from := 0; from < m.n; from += 500 {
		cmds, err := cc.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := from; i < min(m.n, from+500); i++ {
				k := "k:" + strconv.Itoa(i)
				switch i % 4 {
				case 0, 1:
					p.Get(ctx, k)
					p.PTTL(ctx, k)
				case 2:
					p.HGetAll(ctx, k)
				default:
					p.LRange(ctx, k, 0, -1)
				}
			}
			return nil
		})
		if err != nil && err != goredis.Nil {
			t.Fatal(err)
		}
		j := 0
		for i := from; i < min(m.n, from+500); i++ {
			var got, want string
			switch i % 4 {
			case 0, 1:
				ttl := cmds[j+1].(*goredis.DurationCmd).Val()
				ttlOK := i%4 == 1 && ttl == -1 || i%4 == 0 && ttl > 50*time.Minute && ttl <= time.Hour
				got, want = fmt.Sprintf("%s ttl-ok=%v", cmds[j].(*goredis.StringCmd).Val(), ttlOK), fmt.Sprintf("%d ttl-ok=true", i)
				j += 2
			case 2:
				got, want = fmt.Sprint(cmds[j].(*goredis.MapStringStringCmd).Val()), fmt.Sprint(map[string]string{"f": strconv.Itoa(i), "g": strconv.Itoa(i + 1)})
				j++
			default:
				got, want = fmt.Sprint(cmds[j].(*goredis.StringSliceCmd).Val()), fmt.Sprint([]string{strconv.Itoa(i), strconv.Itoa(i + 1), strconv.Itoa(i + 2)})
				j++
			}
			if got != want {
				bad = append(bad, fmt.Sprintf("k:%d = %s, want %s", i, got, want))
			}
		}
	}
	for k, w := range written {
		if got, err := cc.Get(ctx, k).Result(); got != w[0] && got != w[1] {
			bad = append(bad, fmt.Sprintf("%s = %q (%v), want %q (or %q, its write failed)", k, got, err, w[0], w[1]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d key(s) wrong after the move, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	// go-redis sums DBSIZE over the masters (Redis 7's request policy).
	if total, err := cc.DBSize(ctx).Result(); err != nil || total != int64(m.n+len(written)) {
		t.Fatalf("the cluster's masters hold %d keys (%v), want %d", total, err, m.n+len(written))
	}
}

// The move under live writers: every key, of every type, is on the
// cluster with its value and TTL at the end; the window ended; the same
// client serves from the cluster, and a second Run moves nothing.
func TestClusterMove(t *testing.T) {
	m := newClusterMove(t, 4000, nil)
	stop := make(chan struct{})
	written := m.writers(stop)
	if err := m.c.BeginClusterMove(m.clusterShard(true)); err != nil {
		t.Fatal(err)
	}
	mig, err := m.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	last := written()
	if m.c.Window() != nil {
		t.Fatal("the window is still open after the migration")
	}
	for _, p := range mig.Progress() {
		if p.Failed != 0 || p.Owned != 0 || p.Stale != 0 {
			t.Fatalf("progress of %s: %+v; want no key failed, owned or stale", p.Shard, p)
		}
	}
	m.check(t, last)
	if got := m.c.Get(ctx, "k:5").Val(); got != "5" {
		t.Fatalf("GET k:5 through the sharded client after the move = %q", got)
	}
	var unsupported *shardedredis.UnsupportedError
	if err := m.c.DBSize(ctx).Err(); !errors.As(err, &unsupported) {
		t.Fatalf("DBSIZE through the sharded client after the move: %v; want an *UnsupportedError (one node would answer)", err)
	}
}

// A master killed during the move: the run stops with errors naming the
// node (*ClusterNodeError); once its replica has taken over, the run
// resumed from the checkpoint finishes, and no key is lost, those moved to
// the killed master included (each RESTORE waited for its replica).
func TestClusterMoveMasterKilledAndResumed(t *testing.T) {
	m := newClusterMove(t, 4000, nil)
	if err := m.c.BeginClusterMove(m.clusterShard(true)); err != nil {
		t.Fatal(err)
	}
	mig, err := m.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Parallelism: 1, KeysPerSecond: 8000})
	if err != nil {
		t.Fatal(err)
	}
	masters, err := m.cluster.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := m.cluster.Node(masters[0])
	runErr := make(chan error, 1)
	go func() { runErr <- mig.Run(ctx) }()
	waitFor(t, func() bool { return progressMoved(mig) >= int64(m.n/4) })
	victim.Kill()
	err = <-runErr
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
		now, _ := m.cluster.Masters(ctx)
		return len(now) == 3 && !slices.Contains(now, victim.Addr)
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := victim.Restart(wctx, clusterNodeTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.cluster.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	m.resume(t, mig)
	m.check(t, nil)
}

// resume runs the migration again from mig's checkpoint until it finishes:
// up to 5 runs, 300 ms apart, while keys fail because the cluster's
// layout changed (MOVED) since the cluster client last read it.
func (m *clusterMove) resume(t *testing.T, mig *shardedredis.Migration) {
	t.Helper()
	for try := 1; ; try++ {
		again, err := m.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Resume: mig.Checkpoint()})
		if err != nil {
			t.Fatal(err)
		}
		err = again.Run(ctx)
		var me *shardedredis.MigrationError
		switch {
		case err == nil:
			return
		case !errors.As(err, &me) || try == 5:
			t.Fatalf("resumed run %d: %v", try, err)
		}
		t.Logf("resumed run %d: %v", try, err)
		mig = again
		time.Sleep(300 * time.Millisecond)
	}
}

// A manual failover (CLUSTER FAILOVER on a replica) during the move: the
// cluster client follows the new master; the run (resumed if the
// failover failed some keys) finishes, and every key is there.
func TestClusterMoveFailover(t *testing.T) {
	m := newClusterMove(t, 4000, nil)
	if err := m.c.BeginClusterMove(m.clusterShard(true)); err != nil {
		t.Fatal(err)
	}
	mig, err := m.c.NewMigration(shardedredis.MigrateOptions{BatchSize: 100, Parallelism: 1, KeysPerSecond: 8000})
	if err != nil {
		t.Fatal(err)
	}
	masters, err := m.cluster.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var replica string
	for _, n := range m.cluster.Nodes {
		if !slices.Contains(masters, n.Addr) {
			replica = n.Addr
			break
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- mig.Run(ctx) }()
	waitFor(t, func() bool { return progressMoved(mig) >= int64(m.n/4) })
	r := goredis.NewClient(&goredis.Options{Addr: replica})
	defer r.Close()
	if err := r.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica, err)
	}
	err = <-runErr
	var me *shardedredis.MigrationError
	switch {
	case errors.As(err, &me):
		t.Logf("the run during the failover: %v; resuming", err)
		m.resume(t, mig)
	case err != nil:
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.cluster.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if now, _ := m.cluster.Masters(ctx); !slices.Contains(now, replica) {
		t.Fatalf("after CLUSTER FAILOVER, %s is not a master (masters: %v)", replica, now)
	}
	m.check(t, nil)
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
	m := newClusterMove(t, 400, nil)
	cs := m.clusterShard(false)
	if err := m.c.BeginClusterMove(cs); err != nil {
		t.Fatal(err)
	}
	mig, err := m.c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cluster := m.c.Shards()[0]
	extra := shardedredis.ShardOptions{Name: "redis-x", Addr: sharedRedis(t, 4)[3].addr}
	err = m.c.BeginResharding([]shardedredis.ShardOptions{{Name: cluster.Name, Cluster: &cs}, extra})
	var unsupported *shardedredis.UnsupportedError
	if !errors.As(err, &unsupported) || unsupported.Command != "beginresharding" || !strings.Contains(err.Error(), "a Redis Cluster") {
		t.Fatalf("BeginResharding taking keys out of the cluster shard: %v; want an *UnsupportedError naming it", err)
	}
	if m.c.Window() != nil || len(m.c.Shards()) != 1 {
		t.Fatalf("after the refusal: window %v, %d shards; want no window and the cluster shard alone", m.c.Window(), len(m.c.Shards()))
	}
	if got := m.c.Get(ctx, "k:5").Val(); got != "5" {
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
	m := newClusterMove(t, n, nil)
	cc := goredis.NewClusterClient(m.clusterShard(false).Options)
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
		if err := m.c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		if err := cc.Set(ctx, "already:"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := m.c.PlanClusterMove(ctx, m.clusterShard(false).Options, 0)
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
