package etcdstore_test

// The fleet's reference-model test: real redis-servers, a real etcd, and
// separate OS processes (this test binary run again as workers and
// drivers). Each worker joins the fleet and runs random operations on keys
// of its own (each key has one writer) and reads every worker's keys; it
// logs every operation with its start and end on the machine's clock. A
// driver changes the fleet meanwhile -- reshards 3 -> 4 shards
// (TestFleetResharding), or moves 3 shards into a real 3-master Redis
// Cluster (TestFleetClusterMove) -- under chaos: a worker paused past
// every timeout, a worker killed and a new one started mid-change, the
// driver killed mid-migration and the change resumed by another process,
// a destination server (the new shard's, or a master of the cluster) hung
// mid-migration. At the end the logs are checked against a model: no lost
// acknowledged write, no resurrected delete, no read older than a write
// acknowledged before it started, no stray copy or move mark left on any
// server. A negative control (TestFleetClusterMoveControl) runs the same
// workers and check without the fleet: each process calls BeginClusterMove
// on its own, 1.5 s apart, and the check must find stale reads or lost
// writes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	"github.com/shardedcache/shardedcache/fleet/etcdstore/internal/etcdtest"
	"github.com/shardedcache/shardedcache/internal/rediscluster"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

// The environment of a re-executed test binary.
const (
	envRole     = "SC_FLEET_ROLE" // "worker", "driver", "resume"
	envEtcd     = "SC_FLEET_ETCD"
	envPrefix   = "SC_FLEET_PREFIX"
	envShards   = "SC_FLEET_SHARDS" // JSON []fleet.Shard: the initial list (workers), the target (driver)
	envWorker   = "SC_FLEET_WORKER"
	envLog      = "SC_FLEET_LOG"
	envSeed     = "SC_FLEET_SEED"
	envStopFile = "SC_FLEET_STOP"
	// The negative control's workers (no fleet): the cluster they move to
	// (JSON []fleet.Shard), the file whose creation makes them call
	// BeginClusterMove, and, for the one that runs the migration, the
	// file it creates when the migration has ended.
	envSoloTarget  = "SC_FLEET_SOLO_TARGET"
	envSoloBegin   = "SC_FLEET_SOLO_BEGIN"
	envSoloMigrate = "SC_FLEET_SOLO_MIGRATED"
)

// op is one logged operation of a worker.
type op struct {
	Op    string  `json:"op"` // set, del, get
	Key   string  `json:"key"`
	Val   *string `json:"val,omitempty"` // set: the value; get: the reply (nil: none)
	Start int64   `json:"start"`         // Unix ns
	End   int64   `json:"end,omitempty"` // 0: no reply logged (killed)
	OK    bool    `json:"ok"`
	Err   string  `json:"err,omitempty"`
}

// keysPerGoroutine and goroutinesPerWorker size a worker's key space.
const (
	keysPerGoroutine    = 60
	goroutinesPerWorker = 3
)

func keyName(worker, g, i int) string { return fmt.Sprintf("w%d:g%d:k%d", worker, g, i) }

// TestFleetProcess is the entry of a re-executed test binary; it does
// nothing in a normal run.
func TestFleetProcess(t *testing.T) {
	switch os.Getenv(envRole) {
	case "worker":
		runWorker(t)
	case "driver", "resume":
		runDriver(t)
	default:
		t.Skip("run by TestFleetResharding as a separate process")
	}
}

func processStore(t *testing.T) (*etcdstore.Store, *clientv3.Client) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Getenv(envEtcd)}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store, err := etcdstore.New(cli, os.Getenv(envPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return store, cli
}

func envShardList(t *testing.T, name string) []fleet.Shard {
	var list []fleet.Shard
	if err := json.Unmarshal([]byte(os.Getenv(name)), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

// shardOptions returns the sharded client's options of sh: a server, or a
// Redis Cluster by its seeds.
func shardOptions(sh fleet.Shard) shardedredis.ShardOptions {
	if sh.Cluster {
		return shardedredis.ShardOptions{Name: sh.Name, Weight: sh.Weight,
			Cluster: &shardedredis.ClusterShard{Options: &goredis.ClusterOptions{Addrs: sh.Seeds()}}}
	}
	return shardedredis.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
}

// newFleetClient returns a sharded client over list with the test's
// timeouts (short, so that a hung server is noticed).
func newFleetClient(t *testing.T, list []fleet.Shard) *shardedredis.ShardedClient {
	opts := make([]shardedredis.ShardOptions, len(list))
	for i, sh := range list {
		opts[i] = shardOptions(sh)
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts, Options: &goredis.Options{
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, PoolSize: 8,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runWorker(t *testing.T) {
	store, cli := processStore(t)
	defer cli.Close()
	c := newFleetClient(t, envShardList(t, envShards))
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	if os.Getenv(envSoloTarget) != "" {
		wg.Go(func() { soloClusterMove(t, c) })
	} else {
		member, err := c.JoinFleet(ctx, store, fleet.MemberOptions{OnError: func(err error) { fmt.Fprintln(os.Stderr, "member:", err) }})
		if err != nil {
			t.Fatal(err)
		}
		defer member.Close()
	}
	worker, _ := strconv.Atoi(os.Getenv(envWorker))
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	f, err := os.OpenFile(os.Getenv(envLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var logMu sync.Mutex
	logOp := func(o op) {
		b, _ := json.Marshal(o)
		logMu.Lock()
		defer logMu.Unlock()
		_, _ = f.Write(append(b, '\n'))
	}
	stop := os.Getenv(envStopFile)
	for g := range goroutinesPerWorker {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(worker*100+g)))
			seq := 0
			for n := 0; ; n++ {
				if n%50 == 0 {
					if _, err := os.Stat(stop); err == nil {
						return
					}
				}
				octx, cancel := context.WithTimeout(ctx, 2*time.Second)
				var err error // this goroutine's own
				mine := keyName(worker, g, rng.IntN(keysPerGoroutine))
				o := op{Key: mine, Start: time.Now().UnixNano()}
				switch r := rng.IntN(100); {
				case r < 45:
					seq++
					v := fmt.Sprintf("%d:%d:%d", worker, g, seq)
					o.Op, o.Val = "set", &v
					logOp(o) // logged before it is sent: a killed worker's last write is "unknown"
					err = c.Set(octx, mine, v, 0).Err()
				case r < 55:
					o.Op = "del"
					logOp(o)
					err = c.Del(octx, mine).Err()
				default:
					o.Op = "get"
					o.Key = keyName(rng.IntN(4)+1, rng.IntN(goroutinesPerWorker), rng.IntN(keysPerGoroutine))
					var v string
					v, err = c.Get(octx, o.Key).Result()
					switch {
					case err == nil:
						o.Val = &v
					case errors.Is(err, goredis.Nil):
						err = nil
					}
				}
				cancel()
				o.End, o.OK = time.Now().UnixNano(), err == nil
				if err != nil {
					o.Err = err.Error()
				}
				logOp(o)
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// soloClusterMove is the negative control's worker without a fleet: once
// the file envSoloBegin exists, it calls BeginClusterMove as a process
// alone would, and runs the migration if envSoloMigrate names a file (which
// it creates when the migration has ended, failed or not: in the control
// a failure is one of the outcomes, and the check judges the keys).
func soloClusterMove(t *testing.T, c *shardedredis.ShardedClient) {
	for {
		if _, err := os.Stat(os.Getenv(envSoloBegin)); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs := shardOptions(envShardList(t, envSoloTarget)[0]).Cluster
	err := c.BeginClusterMove(*cs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "BeginClusterMove:", err)
	}
	done := os.Getenv(envSoloMigrate)
	if done == "" {
		return
	}
	if err == nil {
		var m *shardedredis.Migration
		if m, err = c.NewMigration(shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 300}); err == nil {
			err = m.Run(context.Background())
		}
		fmt.Fprintln(os.Stderr, "the migration:", err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Error(err)
	}
}

func runDriver(t *testing.T) {
	store, cli := processStore(t)
	defer cli.Close()
	target := envShardList(t, envShards)
	// The driver's client starts on the target's list; Reshard applies
	// the fleet's state to it at every step.
	c := newFleetClient(t, target)
	defer c.Close()
	backend := c.FleetBackend(shardedredis.MigrateOptions{BatchSize: 20, KeysPerSecond: 300})
	opt := fleet.DriverOptions{LockTTL: 2 * time.Second}
	var err error
	if os.Getenv(envRole) == "resume" {
		_, err = fleet.Resume(context.Background(), store, backend, opt)
	} else {
		_, err = fleet.Reshard(context.Background(), store, backend, target, opt)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// startServers starts n redis-servers (internal/rediscluster, as the
// cluster's nodes are started), stopped when t ends; without redis-server
// the test is skipped, unless CI=true.
func startServers(t *testing.T, n int) []*rediscluster.Node {
	t.Helper()
	return nodes(t, func(ctx context.Context) (*rediscluster.Cluster, error) { return rediscluster.StartServers(ctx, n) })
}

// startCluster starts a Redis Cluster of 3 masters without replicas (a
// node timeout of 5 s, longer than a hang of the chaos), as startServers
// does.
func startCluster(t *testing.T) []*rediscluster.Node {
	t.Helper()
	return nodes(t, func(ctx context.Context) (*rediscluster.Cluster, error) {
		return rediscluster.Start(ctx, 3, 0, 5*time.Second)
	})
}

func nodes(t *testing.T, start func(context.Context) (*rediscluster.Cluster, error)) []*rediscluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := start(ctx)
	switch {
	case errors.Is(err, rediscluster.ErrNoBinaries) && os.Getenv("CI") != "true":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c.Nodes
}

// proc is a re-executed test binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
	out  *strings.Builder
}

func spawn(t *testing.T, name string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, done: make(chan error, 1), out: &strings.Builder{}}
	var mu sync.Mutex
	cmd.Stdout = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return p.out.Write(b) })
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestFleetResharding(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	endpoint := etcdtest.StartShared(t)
	for _, seed := range seeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { fleetRun(t, endpoint, seed, reshardSetup(t)) })
	}
}

// The move into a real Redis Cluster, by the fleet's protocol, under the
// same workers, chaos and check as TestFleetResharding.
func TestFleetClusterMove(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	endpoint := etcdtest.StartShared(t)
	cluster := startCluster(t)
	for _, seed := range seeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { fleetRun(t, endpoint, seed, clusterSetup(t, cluster)) })
	}
}

// The negative control of TestFleetClusterMove: the same workers and
// check, without the fleet. Each worker calls BeginClusterMove on its own,
// 1.5 s apart (a rolling deploy), and the first runs the migration: a
// later BeginClusterMove removes from the cluster, as stale copies, the
// keys an earlier process moved or wrote there, and a process still on
// the old list reads the old owners. The check must find stale reads or
// lost writes (the workers write every key again and again after the
// last switch, which hides most losses: the reads see them).
func TestFleetClusterMoveControl(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	endpoint := etcdtest.StartShared(t)
	cluster := startCluster(t)
	h := newHarness(t, endpoint, 1, clusterSetup(t, cluster))
	target := envSoloTarget + "=" + list(h.setup.target)
	begin := func(id int) string { return filepath.Join(h.dir, fmt.Sprintf("begin-w%d", id)) }
	migrated := filepath.Join(h.dir, "migrated")
	for id := 1; id <= 3; id++ {
		env := []string{target, envSoloBegin + "=" + begin(id)}
		if id == 1 {
			env = append(env, envSoloMigrate+"="+migrated)
		}
		h.workers[id] = h.worker(id, env...)
	}
	time.Sleep(time.Second)
	for id := 1; id <= 3; id++ {
		if err := os.WriteFile(begin(id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		h.chaos("worker %d calls BeginClusterMove", id)
		time.Sleep(1500 * time.Millisecond)
	}
	h.waitFor("the migration", func() bool { _, err := os.Stat(migrated); return err == nil })
	if v := h.end(0); v.lost+v.stale == 0 {
		t.Errorf("the control shows no lost write and no stale read (%+v): the check would not see what the fleet prevents", v)
	}
}

// seeds are the seeds run: two, or SHARDEDCACHE_LONG=1 for six.
func seeds() []uint64 {
	if os.Getenv("SHARDEDCACHE_LONG") == "1" {
		return []uint64{1, 2, 3, 4, 5, 6}
	}
	return []uint64{1, 2}
}

// fleetSetup is what one run changes: the fleet's initial list and its
// target, the destination server that hangs during the resumed migration,
// and every server the check reads.
type fleetSetup struct {
	initial, target []fleet.Shard
	hung            *rediscluster.Node
	places          []place
}

// place is a server the check reads: a key there that it does not own at
// the end is a stray copy.
type place struct {
	addr string
	owns func(key string) bool
}

// reshardSetup: 3 new redis-servers -> the same and a fourth.
func reshardSetup(t *testing.T) fleetSetup {
	servers := startServers(t, 4)
	s := fleetSetup{hung: servers[3]}
	for i, n := range servers {
		s.target = append(s.target, fleet.Shard{Name: string(rune('a' + i)), Addr: n.Addr})
	}
	s.initial = s.target[:3]
	nodes := make([]ring.Node, len(s.target))
	for i, sh := range s.target {
		nodes[i] = ring.Node{Name: sh.Name, Addr: sh.Addr}
	}
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range servers {
		s.places = append(s.places, place{n.Addr, func(k string) bool { return s.target[r.Locate(k)].Addr == n.Addr }})
	}
	return s
}

// clusterSetup: 3 new redis-servers -> cluster, emptied first (an earlier
// run's keys and the protocol's). A master of the cluster hangs.
func clusterSetup(t *testing.T, cluster []*rediscluster.Node) fleetSetup {
	servers := startServers(t, 3)
	var seeds []string
	s := fleetSetup{hung: cluster[0]}
	for i, n := range servers {
		s.initial = append(s.initial, fleet.Shard{Name: string(rune('a' + i)), Addr: n.Addr})
		s.places = append(s.places, place{n.Addr, func(string) bool { return false }})
	}
	for _, n := range cluster {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		err := c.FlushAll(context.Background()).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, n.Addr)
		s.places = append(s.places, place{n.Addr, func(string) bool { return true }}) // a node lists the keys of its slots
	}
	s.target = []fleet.Shard{{Name: "cluster", Addr: strings.Join(seeds, ","), Cluster: true}}
	return s
}

func list(l []fleet.Shard) string { b, _ := json.Marshal(l); return string(b) }

// harness is one run's processes, store and logs.
type harness struct {
	t       *testing.T
	setup   fleetSetup
	dir     string
	common  []string
	store   *etcdstore.Store
	workers map[int]*proc
	killed  int // a worker killed (no exit to wait for), or 0
	events  []string
	seed    uint64
}

func newHarness(t *testing.T, endpoint string, seed uint64, setup fleetSetup) *harness {
	dir := t.TempDir()
	prefix := fmt.Sprintf("/fleet-test/%d-%d", seed, time.Now().UnixNano())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	store, err := etcdstore.New(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, setup: setup, dir: dir, store: store, workers: map[int]*proc{}, seed: seed,
		common: []string{envEtcd + "=" + endpoint, envPrefix + "=" + prefix, envSeed + "=" + fmt.Sprint(seed),
			envStopFile + "=" + filepath.Join(dir, "stop")}}
}

func (h *harness) worker(id int, env ...string) *proc {
	return spawn(h.t, fmt.Sprint("worker ", id), append(append(h.common, envRole+"=worker", envWorker+"="+fmt.Sprint(id),
		envShards+"="+list(h.setup.initial), envLog+"="+filepath.Join(h.dir, fmt.Sprintf("w%d.log", id))), env...)...)
}

func (h *harness) driver(role string) *proc {
	return spawn(h.t, role, append(h.common, envRole+"="+role, envShards+"="+list(h.setup.target))...)
}

func (h *harness) step() fleet.State {
	st, _, err := h.store.Load(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) waitFor(what string, ok func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; state %+v", what, h.step())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) chaos(format string, args ...any) {
	h.events = append(h.events, fmt.Sprintf(format, args...))
}

// end lets the workers run a second more, stops them, and checks the logs
// and the servers.
func (h *harness) end(killed int) verdict {
	time.Sleep(time.Second)
	if err := os.WriteFile(filepath.Join(h.dir, "stop"), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	for id, w := range h.workers {
		if id == killed {
			continue
		}
		if err := <-w.done; err != nil {
			h.t.Errorf("worker %d: %v\n%s", id, err, tail(w.out.String(), 3000))
		}
	}
	h.t.Logf("seed %d: events: %s", h.seed, strings.Join(h.events, "; "))
	return check(h.t, h.dir, h.setup.places)
}

func fleetRun(t *testing.T, endpoint string, seed uint64, setup fleetSetup) {
	h := newHarness(t, endpoint, seed, setup)
	rng := rand.New(rand.NewPCG(seed, 99))
	for id := 1; id <= 3; id++ {
		h.workers[id] = h.worker(id)
	}
	h.waitFor("the first state", func() bool { return h.step().Epoch > 0 })
	time.Sleep(time.Second)

	// A worker paused before the change starts, past every timeout and the
	// fence, with commands in flight: it resumes in the middle of the
	// migration, two steps behind.
	paused := 1 + rng.IntN(3)
	_ = h.workers[paused].cmd.Process.Signal(syscall.SIGSTOP)
	h.chaos("SIGSTOP worker %d at step %s", paused, h.step().Step)
	d := h.driver("driver")
	h.waitFor("Moving", func() bool { return h.step().Step == fleet.Moving })
	time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
	// The driver killed mid-migration.
	_ = d.cmd.Process.Kill()
	<-d.done
	h.chaos("SIGKILL driver at step %s", h.step().Step)
	// A worker killed, and a new one started mid-change.
	killed := 1 + (paused % 3)
	_ = h.workers[killed].cmd.Process.Kill()
	h.chaos("SIGKILL worker %d", killed)
	h.workers[4] = h.worker(4)
	h.chaos("start worker 4 at step %s", h.step().Step)
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	_ = h.workers[paused].cmd.Process.Signal(syscall.SIGCONT)
	h.chaos("SIGCONT worker %d", paused)
	// Another process resumes the change; a destination server hangs
	// while it migrates; a driver that fails is started again, as an
	// operator would.
	var hung sync.WaitGroup
	hung.Go(func() {
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		setup.hung.Pause()
		time.Sleep(1500 * time.Millisecond)
		setup.hung.Continue()
	})
	h.chaos("SIGSTOP destination %s for 1.5 s during the resumed migration", setup.hung.Addr)
	for attempt := 0; h.step().Step != fleet.Stable; attempt++ {
		if attempt == 20 {
			t.Fatalf("the change did not end after %d resumes: state %+v", attempt, h.step())
		}
		r := h.driver("resume")
		if err := <-r.done; err != nil {
			h.chaos("resume %d failed (%v); started again", attempt+1, err)
			t.Logf("resume %d: %v\n%s", attempt+1, err, tail(r.out.String(), 1500))
		}
	}
	hung.Wait()
	if final := h.step(); !slices.Equal(final.Shards, setup.target) {
		t.Fatalf("final state %+v, want Stable over the target", final)
	}
	if v := h.end(killed); v != (verdict{}) {
		t.Errorf("%+v; want 0 of each", v)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// verdict counts what check found wrong.
type verdict struct {
	lost, stale, stray, marks int
}

// check reads the workers' logs and the servers, and checks them against
// the model of a linearizable register per key with one writer; it logs
// the first failures of each kind.
func check(t *testing.T, dir string, places []place) verdict {
	var v verdict
	ops := map[string][]op{} // key -> its writes, in order
	var reads []op
	files, _ := filepath.Glob(filepath.Join(dir, "w*.log"))
	var total, failed int
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		open := map[string]int{} // key -> index in ops of its write logged without an end
		for sc.Scan() {
			var o op
			if json.Unmarshal(sc.Bytes(), &o) != nil {
				continue // a line cut by SIGKILL
			}
			switch {
			case o.Op == "get":
				total++
				if o.OK {
					reads = append(reads, o)
				} else {
					failed++
				}
			case o.End == 0:
				open[o.Key] = len(ops[o.Key])
				ops[o.Key] = append(ops[o.Key], o)
			default:
				total++
				if !o.OK {
					failed++
				}
				ops[o.Key][open[o.Key]] = o
			}
		}
		f.Close()
	}
	// The servers' content, read without the client: every key on the
	// server that owns it under the target, nothing else.
	final := map[string]string{}
	for _, p := range places {
		c := goredis.NewClient(&goredis.Options{Addr: p.addr})
		keys, err := c.Keys(context.Background(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if strings.HasPrefix(k, "__shardedcache:") {
				continue
			}
			if !p.owns(k) {
				if v.stray++; v.stray <= 10 {
					t.Logf("stray copy: %s on %s", k, p.addr)
				}
				continue
			}
			final[k], _ = c.Get(context.Background(), k).Result()
		}
		// (A cluster node that does not serve the marks' slot answers
		// MOVED: no marks there.)
		if n, _ := c.HLen(context.Background(), "__shardedcache:moving").Result(); n != 0 {
			v.marks += int(n)
			t.Logf("%d move marks left on %s", n, p.addr)
		}
		c.Close()
	}
	// value of a write: its value, or nil for a delete.
	value := func(o op) *string {
		if o.Op == "del" {
			return nil
		}
		return o.Val
	}
	same := func(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	// allowed returns the values key may hold for a read over [start, end]:
	// the last write acknowledged before start, and every write after it
	// that started before end (acknowledged or not).
	allowed := func(key string, start, end int64) []*string {
		ws := ops[key]
		last := -1
		for i, w := range ws {
			if w.OK && w.End > 0 && w.End < start {
				last = i
			}
		}
		var out []*string
		if last < 0 {
			out = append(out, nil)
		} else {
			out = append(out, value(ws[last]))
		}
		for _, w := range ws[last+1:] {
			if w.Start < end {
				out = append(out, value(w))
			}
		}
		return out
	}
	for _, rd := range reads {
		if !slices.ContainsFunc(allowed(rd.Key, rd.Start, rd.End), func(v *string) bool { return same(v, rd.Val) }) {
			if v.stale++; v.stale <= 10 {
				t.Logf("stale read of %s: got %v at [%d, %d]; allowed %v", rd.Key, deref(rd.Val), rd.Start, rd.End, derefs(allowed(rd.Key, rd.Start, rd.End)))
			}
		}
	}
	now := time.Now().UnixNano()
	for key := range ops {
		var got *string
		if v, ok := final[key]; ok {
			got = &v
		}
		if !slices.ContainsFunc(allowed(key, now, now), func(v *string) bool { return same(v, got) }) {
			if v.lost++; v.lost <= 10 {
				t.Logf("key %s ends as %v; allowed %v", key, deref(got), derefs(allowed(key, now, now)))
			}
		}
	}
	t.Logf("%d operations (%d failed or unknown), %d reads checked, %d keys: %d lost or resurrected, %d stale reads, %d stray copies, %d move marks left",
		total, failed, len(reads), len(ops), v.lost, v.stale, v.stray, v.marks)
	if total == 0 || len(reads) == 0 {
		t.Error("no operations logged")
	}
	return v
}

func deref(v *string) string {
	if v == nil {
		return "<none>"
	}
	return *v
}

func derefs(vs []*string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = deref(v)
	}
	return out
}
