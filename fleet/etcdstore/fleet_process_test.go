package etcdstore_test

// The fleet's reference-model test: real servers (redis-servers, a Redis
// Cluster, memcached), a real etcd, and separate OS processes (this test
// binary run again as workers and drivers). Each worker joins the fleet
// and runs random operations on keys of its own (each key has one writer)
// and reads every worker's keys; it logs every operation with its start
// and end on the machine's clock. A driver changes the fleet meanwhile --
// reshards 3 -> 4 shards (TestFleetResharding on redis-servers,
// TestFleetReshardingMemcache on memcached, TestFleetReshardingCached on
// redis-servers with every client caching), or moves 3 redis-servers into
// a real 3-master Redis Cluster (TestFleetClusterMove) -- under chaos: a
// worker paused past every timeout, a worker killed and a new one started
// mid-change, the driver killed mid-migration and the change resumed by
// another process, a destination redis-server (the new shard's, or a
// master of the cluster) hung mid-migration. At the end the logs are
// checked against a model: no lost acknowledged write, no resurrected
// delete, no read older than a write acknowledged before it started (with
// caching, by more than the read's allowance: see harness.allowance), no
// stray copy or move mark left on any server.
//
// One harness runs every test: a fleetCase is a backend (fleet_backends_test.go:
// redis, memcache), a target (the servers and a fourth; a Redis Cluster,
// redis only) and a protection: the fleet as it is, or one of two negative
// controls, which must make the same check find what the fleet prevents:
// TestFleetReshardingMemcacheUnprotected (the memcache run without member
// leases) and TestFleetClusterMoveControl (no fleet: each worker calls
// BeginClusterMove on its own, 1.5 s apart).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
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
	"github.com/shardedcache/shardedcache/internal/etcdtest"
	"github.com/shardedcache/shardedcache/internal/rediscluster"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

// The environment of a re-executed test binary.
const (
	envRole      = "SC_FLEET_ROLE" // "worker", "driver", "resume"
	envEtcd      = "SC_FLEET_ETCD"
	envPrefix    = "SC_FLEET_PREFIX"
	envShards    = "SC_FLEET_SHARDS" // JSON []fleet.Shard: the initial list (workers), the target (driver)
	envWorker    = "SC_FLEET_WORKER"
	envLog       = "SC_FLEET_LOG"
	envSeed      = "SC_FLEET_SEED"
	envStopFile  = "SC_FLEET_STOP"
	envBackend   = "SC_FLEET_BACKEND"   // a key of backends
	envLeaseless = "SC_FLEET_LEASELESS" // "1": the memcache negative control (noLeases)
	envCached    = "SC_FLEET_CACHED"    // "1": every redis client caches (fleetCase.cached)
	// The cluster's negative control's workers (noFleet): the cluster
	// they move to (JSON []fleet.Shard), the file whose creation makes
	// them call BeginClusterMove, and, for the one that runs the
	// migration, the file it creates when the migration has ended.
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
	by    string  // the log it was read from (check)
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
		t.Skip("run by the TestFleet tests as a separate process")
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
		t.Fatalf("%s=%q: %v", name, os.Getenv(name), err)
	}
	return list
}

func runWorker(t *testing.T) {
	store, cli := processStore(t)
	defer cli.Close()
	c := backendOf(t).client(t, envShardList(t, envShards))
	defer c.close()
	ctx := context.Background()
	var wg sync.WaitGroup
	if os.Getenv(envSoloTarget) != "" {
		rc, ok := c.(redisClient)
		if !ok {
			t.Fatalf("%s=%s: the control without a fleet runs on redis only", envBackend, os.Getenv(envBackend))
		}
		wg.Go(func() { soloClusterMove(t, rc.c) })
	} else {
		member, err := c.join(ctx, store, fleet.MemberOptions{OnError: func(err error) { fmt.Fprintln(os.Stderr, "member:", err) }})
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
					err = c.set(octx, mine, v)
				case r < 55:
					o.Op = "del"
					logOp(o)
					err = c.del(octx, mine)
				default:
					o.Op = "get"
					o.Key = keyName(rng.IntN(4)+1, rng.IntN(goroutinesPerWorker), rng.IntN(keysPerGoroutine))
					o.Val, err = c.get(octx, o.Key)
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
	if rc, ok := c.(redisClient); ok && cached() {
		// The cache's hits, for the harness to see that the run cached.
		var hits uint64
		for _, st := range rc.c.CacheStats() {
			hits += st.Hits
		}
		if err := os.WriteFile(os.Getenv(envLog)+".hits", []byte(fmt.Sprint(hits)), 0o644); err != nil {
			t.Error(err)
		}
	}
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
	cs := redisShard(envShardList(t, envSoloTarget)[0]).Cluster
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
		if m, err = c.NewMigration(redisMigrate); err == nil {
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
	backend, closeBackend := backendOf(t).driver(t, target)
	defer closeBackend()
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

// TestFleetResharding: redis-servers, 3 -> 4, fenced.
func TestFleetResharding(t *testing.T) { testFleet(t, fleetCase{backend: "redis"}) }

// TestFleetReshardingMemcache is the same test on memcached servers, whose
// fleet is protected by member leases (fleet.Unfenced) and compare-and-set
// moves rather than fences.
func TestFleetReshardingMemcache(t *testing.T) { testFleet(t, fleetCase{backend: "memcache"}) }

// TestFleetReshardingMemcacheUnprotected is the negative control of
// TestFleetReshardingMemcache: the same run with the member leases taken
// out (members neither register nor refuse commands, the driver waits for
// no one) must lose writes, read stale values or leave stray copies.
func TestFleetReshardingMemcacheUnprotected(t *testing.T) {
	testFleet(t, fleetCase{backend: "memcache", protection: noLeases})
}

// TestFleetReshardingCached is TestFleetResharding with every process's
// client caching (go-redis's client-side cache through every shard, RESP3
// CLIENT TRACKING; docs/caching.md): the same servers, change and chaos,
// and the same check, which then allows what the cache's guarantee allows
// and nothing more (cacheAllowance): a process reads its own writes
// exactly, and may miss another process's write acknowledged less than
// otherWriteBound before its read started.
func TestFleetReshardingCached(t *testing.T) {
	testFleet(t, fleetCase{backend: "redis", cached: true})
}

// TestFleetClusterMove: the move of 3 redis-servers into a real Redis
// Cluster, by the fleet's protocol, under the same workers, chaos and
// check as TestFleetResharding.
func TestFleetClusterMove(t *testing.T) { testFleet(t, fleetCase{backend: "redis", cluster: true}) }

// TestFleetClusterMoveControl is the negative control of
// TestFleetClusterMove: the same workers and check, without the fleet.
// Each worker calls BeginClusterMove on its own, 1.5 s apart (a rolling
// deploy), and the first runs the migration: a later BeginClusterMove
// removes from the cluster, as stale copies, the keys an earlier process
// moved or wrote there, and a process still on the old list reads the old
// owners. The check must find stale reads or lost writes (the workers
// write every key again and again after the last switch, which hides most
// losses: the reads see them).
func TestFleetClusterMoveControl(t *testing.T) {
	testFleet(t, fleetCase{backend: "redis", cluster: true, protection: noFleet})
}

// protection is what a run keeps of the fleet's protocol.
type protection int

const (
	// protected: the fleet as it is; the check must find nothing (no
	// lost, stale or stray value, no move mark left).
	protected protection = iota
	// noLeases: the memcache fleet without member leases (envLeaseless);
	// the check must find lost or stale values or stray copies.
	noLeases
	// noFleet: no fleet; each worker calls BeginClusterMove on its own
	// (soloRun); the check must find lost writes or stale reads.
	noFleet
)

// fleetCase is one test's backend x target x protection, and whether the
// clients cache.
type fleetCase struct {
	backend    string // a key of backends
	cluster    bool   // the target: a Redis Cluster of 3 masters (redis only); else the 3 servers and a fourth
	protection protection
	cached     bool // every worker's client caches (redis only, the servers' target, protected)
}

// validate returns the case's backend, or an error naming what does not
// fit: an unknown backend, a cluster target or noFleet without redis,
// noLeases without memcache, noFleet without the cluster target, caching
// other than on redis-servers resharded by the fleet.
func (c fleetCase) validate() (fleetBackend, error) {
	b, ok := backends[c.backend]
	switch {
	case !ok:
		return nil, fmt.Errorf("backend %q: want one of redis, memcache", c.backend)
	case c.cluster && c.backend != "redis":
		return nil, fmt.Errorf("backend %q: a Redis Cluster target is redis's only", c.backend)
	case c.protection == noLeases && c.backend != "memcache":
		return nil, fmt.Errorf("backend %q: noLeases is memcache's only (redis has fences)", c.backend)
	case c.protection == noFleet && !c.cluster:
		return nil, fmt.Errorf("noFleet needs the Redis Cluster target (its workers call BeginClusterMove)")
	case c.protection < protected || c.protection > noFleet:
		return nil, fmt.Errorf("protection %d: want protected, noLeases or noFleet", c.protection)
	case c.cached && (c.backend != "redis" || c.cluster || c.protection != protected):
		return nil, fmt.Errorf("backend %q, cluster %v, protection %d: caching is run on redis-servers resharded by the fleet only", c.backend, c.cluster, c.protection)
	}
	return b, nil
}

// seeds are the seeds run: two, or SHARDEDCACHE_LONG=1 for six; a
// negative control runs the first only (one run shows the failure).
func (c fleetCase) seeds() []uint64 {
	s := []uint64{1, 2}
	if os.Getenv("SHARDEDCACHE_LONG") == "1" {
		s = []uint64{1, 2, 3, 4, 5, 6}
	}
	if c.protection != protected {
		return s[:1]
	}
	return s
}

// judge fails t unless v is what c's protection must give.
func (c fleetCase) judge(t *testing.T, v verdict) {
	switch c.protection {
	case protected:
		if v != (verdict{}) {
			t.Errorf("%+v; want 0 of each", v)
		}
	case noLeases:
		if v.lost+v.stale+v.stray == 0 {
			t.Errorf("without member leases: %+v; want lost writes, stale reads or stray copies", v)
		}
		t.Logf("without member leases: %d lost or resurrected, %d stale reads, %d stray copies", v.lost, v.stale, v.stray)
	case noFleet:
		if v.lost+v.stale == 0 {
			t.Errorf("the control shows no lost write and no stale read (%+v): the check would not see what the fleet prevents", v)
		}
	}
}

func testFleet(t *testing.T, c fleetCase) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := etcdtest.StartShared(t)
	var cluster []*rediscluster.Node
	if c.cluster {
		cluster = startCluster(t)
	}
	for _, seed := range c.seeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			var setup fleetSetup
			if c.cluster {
				setup = clusterSetup(t, b, cluster)
			} else {
				setup = reshardSetup(t, b)
			}
			h := newHarness(t, endpoint, seed, b, c, setup)
			if c.protection == noFleet {
				c.judge(t, soloRun(h))
			} else {
				c.judge(t, fleetRun(h))
			}
		})
	}
}

// fleetSetup is what one run changes: the fleet's initial list and its
// target, the destination server that hangs during the resumed migration
// (nil: none), and every server the check reads.
type fleetSetup struct {
	initial, target []fleet.Shard
	hung            *rediscluster.Node
	places          []place
	// owner is the name of the shard of target that owns key.
	owner func(key string) string
}

// place is a server the check reads, and the name of its shard: a key
// there whose owner is another shard is a stray copy.
type place struct {
	shard, addr string
}

// reshardSetup: 3 new servers of b -> the same and a fourth, which hangs
// if b's servers may hang (server.node).
func reshardSetup(t *testing.T, b fleetBackend) fleetSetup {
	servers := b.start(t, 4)
	s := fleetSetup{hung: servers[3].node}
	nodes := make([]ring.Node, len(servers))
	for i, sv := range servers {
		sh := fleet.Shard{Name: string(rune('a' + i)), Addr: sv.addr}
		s.target = append(s.target, sh)
		s.places = append(s.places, place{sh.Name, sh.Addr})
		nodes[i] = ring.Node{Name: sh.Name, Addr: sh.Addr}
	}
	s.initial = s.target[:3]
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.owner = func(key string) string { return s.target[r.Locate(key)].Name }
	return s
}

// clusterSetup: 3 new redis-servers -> cluster, emptied first (an earlier
// run's keys and the protocol's). A master of the cluster hangs.
func clusterSetup(t *testing.T, b fleetBackend, cluster []*rediscluster.Node) fleetSetup {
	const name = "cluster"
	s := fleetSetup{hung: cluster[0], owner: func(string) string { return name }}
	for i, sv := range b.start(t, 3) {
		s.initial = append(s.initial, fleet.Shard{Name: string(rune('a' + i)), Addr: sv.addr})
		s.places = append(s.places, place{s.initial[i].Name, sv.addr})
	}
	var seeds []string
	for _, n := range cluster {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		err := c.FlushAll(context.Background()).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, n.Addr)
		s.places = append(s.places, place{name, n.Addr}) // a node lists the keys of its slots
	}
	s.target = []fleet.Shard{{Name: name, Addr: strings.Join(seeds, ","), Cluster: true}}
	return s
}

func list(l []fleet.Shard) string { b, _ := json.Marshal(l); return string(b) }

// harness is one run's processes, store and logs.
type harness struct {
	t       *testing.T
	backend fleetBackend
	setup   fleetSetup
	dir     string
	common  []string
	store   *etcdstore.Store
	workers map[int]*proc
	all     []*proc    // every process started, for a time-out's report
	mu      sync.Mutex // guards events and steps
	events  []event    // the chaos, in order
	steps   []event    // the fleet's steps, as the harness saw them
	seed    uint64
	cached  bool
	stopped map[string][][2]int64 // a worker's log name -> the times it was stopped (SIGSTOP to SIGCONT), Unix ns
}

// event is something that happened during a run, and when (Unix ns).
type event struct {
	at   int64
	what string
}

func newHarness(t *testing.T, endpoint string, seed uint64, b fleetBackend, c fleetCase, setup fleetSetup) *harness {
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
	flag := func(on bool) string { return map[bool]string{true: "1"}[on] }
	h := &harness{t: t, backend: b, setup: setup, dir: dir, store: store, workers: map[int]*proc{}, seed: seed,
		cached: c.cached, stopped: map[string][][2]int64{},
		common: []string{envEtcd + "=" + endpoint, envPrefix + "=" + prefix, envSeed + "=" + fmt.Sprint(seed),
			envStopFile + "=" + filepath.Join(dir, "stop"), envBackend + "=" + b.name(),
			envLeaseless + "=" + flag(c.protection == noLeases), envCached + "=" + flag(c.cached)}}
	h.watchSteps()
	return h
}

func (h *harness) spawn(name string, env ...string) *proc {
	p := spawn(h.t, name, append(slices.Clone(h.common), env...)...)
	h.all = append(h.all, p)
	return p
}

// worker starts worker id, on the initial list, with env added.
func (h *harness) worker(id int, env ...string) *proc {
	p := h.spawn(fmt.Sprint("worker ", id), append([]string{envRole + "=worker", envWorker + "=" + fmt.Sprint(id),
		envShards + "=" + list(h.setup.initial), envLog + "=" + filepath.Join(h.dir, fmt.Sprintf("w%d.log", id))}, env...)...)
	h.workers[id] = p
	return p
}

// driver starts a driver of the change to the target: role "driver"
// begins it, "resume" resumes it.
func (h *harness) driver(role string) *proc {
	return h.spawn(role, envRole+"="+role, envShards+"="+list(h.setup.target))
}

func (h *harness) step() fleet.State {
	st, _, err := h.store.Load(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// waitFor waits until ok, at most 90 s; then it fails the test with the
// state and every process's last output.
func (h *harness) waitFor(what string, ok func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			for _, p := range h.all {
				h.t.Logf("%s:\n%s", p.name, tail(p.out.String(), 1500))
			}
			h.t.Fatalf("timed out waiting for %s; state %+v", what, h.step())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) chaos(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, event{time.Now().UnixNano(), fmt.Sprintf(format, args...)})
}

// watchSteps records every step of the fleet's state as the harness
// sees it (every 10 ms), until the run ends: a violation's report shows
// the steps and the chaos around it.
func (h *harness) watchSteps() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		last := ""
		for {
			st, _, err := h.store.Load(context.Background())
			if now := fmt.Sprintf("%s (epoch %d)", st.Step, st.Epoch); err == nil && now != last {
				h.mu.Lock()
				h.steps = append(h.steps, event{time.Now().UnixNano(), now})
				h.mu.Unlock()
				last = now
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	h.t.Cleanup(func() { close(stop); wg.Wait() })
}

// timeline describes the chaos events and steps relative to at (ms).
func (h *harness) timeline(at int64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	all := slices.Concat(h.events, h.steps)
	slices.SortFunc(all, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	out := make([]string, len(all))
	for i, e := range all {
		out[i] = fmt.Sprintf("%+.0f ms %s", float64(e.at-at)/1e6, e.what)
	}
	return strings.Join(out, "; ")
}

// end lets the workers run a second more, stops them (but killed, which
// has no exit to wait for; 0: none), and checks the logs and the servers.
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
	h.mu.Lock()
	what := make([]string, len(h.events))
	for i, e := range h.events {
		what[i] = e.what
	}
	h.mu.Unlock()
	h.t.Logf("seed %d: %d chaos events: %s", h.seed, len(h.events), strings.Join(what, "; "))
	if h.cached {
		h.cacheHits()
	}
	return check(h.t, h.backend, h.dir, h.setup, h.timeline, h.allowance)
}

// cacheHits logs the cache hits of the workers that ended (a killed one
// writes none), and fails the test if there were none: the run would not
// have tested caching. They are the hits of the shard clients each worker
// had at the end, those the change gave it (CacheStats: a client replaced
// by the change takes its counters with it), so the hits before the
// change are not in them.
func (h *harness) cacheHits() {
	files, _ := filepath.Glob(filepath.Join(h.dir, "w*.log.hits"))
	var hits uint64
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			h.t.Fatal(err)
		}
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			h.t.Fatalf("%s: %v", name, err)
		}
		hits += n
	}
	h.t.Logf("%d cache hits in %d workers", hits, len(files))
	if hits == 0 {
		h.t.Error("no read was served from a cache")
	}
}

// otherWriteBound is B, how long after another process's write was
// acknowledged a caching process may still read the value it replaced.
// go-redis applies the invalidations of CLIENT TRACKING asynchronously
// (on the connection's next read, or its drainer's tick, DrainInterval 5
// ms, which visits a few idle connections per tick), so nothing gives a
// hard bound. docs/caching.md states B as the bound this test enforces,
// with what was measured: max 59 ms in the speed benchmark, and 109 ms
// once in 54 runs of this test under -race on a machine at load 10-13 on
// 2 cores. A read that misses an older write fails the check. Time a
// reader spends stopped (SIGSTOP) does not count toward B: a stopped
// process applies no invalidation (see runningBack).
const otherWriteBound = 250 * time.Millisecond

// allowance is check's allowance of a read rd (ns): how long before rd
// started a write of its key may have been acknowledged and still be
// missed by rd. Without caching, 0 (the register is linearizable). With
// caching (go-redis's guarantee as docs/caching.md states it): 0 for a
// key that rd's own process writes (read-your-writes: each key has one
// writer, the worker its name gives), otherWriteBound of rd's process's
// running time for another process's key.
func (h *harness) allowance(rd op) int64 {
	if !h.cached || strings.HasPrefix(rd.Key, rd.by+":") {
		return 0
	}
	return runningBack(rd.Start, int64(otherWriteBound), h.stopped[rd.by])
}

// runningBack returns how long before at (Unix ns) a process stopped
// during stops (intervals in order, Unix ns) had to start for it to have
// run d ns by at: d, plus the stops' time in between.
func runningBack(at, d int64, stops [][2]int64) int64 {
	c := at
	for _, s := range slices.Backward(stops) {
		if s[0] >= c {
			continue
		}
		ran := c - min(s[1], c)
		if ran >= d {
			break
		}
		d -= ran
		c = s[0]
	}
	return at - (c - d)
}

// fleetRun runs the change from the initial list to the target by the
// fleet's protocol under chaos, and returns the check's verdict.
func fleetRun(h *harness) verdict {
	t, setup := h.t, h.setup
	rng := rand.New(rand.NewPCG(h.seed, 99))
	for id := 1; id <= 3; id++ {
		h.worker(id)
	}
	h.waitFor("the first state", func() bool { return h.step().Epoch > 0 })
	time.Sleep(time.Second)

	// A worker paused before the change starts, past every timeout and the
	// fence, with commands in flight: it resumes in the middle of the
	// migration, two steps behind.
	paused := 1 + rng.IntN(3)
	_ = h.workers[paused].cmd.Process.Signal(syscall.SIGSTOP)
	stoppedAt := time.Now().UnixNano()
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
	h.worker(4)
	h.chaos("start worker 4 at step %s", h.step().Step)
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	// Stopped until the signal is sent: a read it starts after that was
	// started by a running process.
	h.stopped[fmt.Sprint("w", paused)] = append(h.stopped[fmt.Sprint("w", paused)], [2]int64{stoppedAt, time.Now().UnixNano()})
	_ = h.workers[paused].cmd.Process.Signal(syscall.SIGCONT)
	h.chaos("SIGCONT worker %d", paused)
	// Another process resumes the change; a destination server hangs
	// while it migrates (if the setup has one); a driver that fails is
	// started again, as an operator would.
	var hung sync.WaitGroup
	if setup.hung != nil {
		hung.Go(func() {
			time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
			setup.hung.Pause()
			h.chaos("SIGSTOP destination %s for 1.5 s during the resumed migration", setup.hung.Addr)
			time.Sleep(1500 * time.Millisecond)
			setup.hung.Continue()
			h.chaos("SIGCONT destination %s", setup.hung.Addr)
		})
	}
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
	return h.end(killed)
}

// soloRun runs the cluster move without the fleet (noFleet): 3 workers,
// each calls BeginClusterMove on its own, 1.5 s apart; the first runs the
// migration. It returns the check's verdict.
func soloRun(h *harness) verdict {
	target := envSoloTarget + "=" + list(h.setup.target)
	begin := func(id int) string { return filepath.Join(h.dir, fmt.Sprintf("begin-w%d", id)) }
	migrated := filepath.Join(h.dir, "migrated")
	for id := 1; id <= 3; id++ {
		env := []string{target, envSoloBegin + "=" + begin(id)}
		if id == 1 {
			env = append(env, envSoloMigrate+"="+migrated)
		}
		h.worker(id, env...)
	}
	time.Sleep(time.Second)
	for id := 1; id <= 3; id++ {
		if err := os.WriteFile(begin(id), nil, 0o644); err != nil {
			h.t.Fatal(err)
		}
		h.chaos("worker %d calls BeginClusterMove", id)
		time.Sleep(1500 * time.Millisecond)
	}
	h.waitFor("the migration", func() bool { _, err := os.Stat(migrated); return err == nil })
	return h.end(0)
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

// check reads the workers' logs in dir and the servers of setup (through
// b), and checks them against the model of a linearizable register per
// key with one writer, whose reads may lag by their allowance: a read rd
// may miss the writes acknowledged less than allowance(rd) ns before it
// started (0: none; see harness.allowance). It logs the first violations
// of each kind, and how many reads used their allowance and the most any
// of them lagged, and returns the violations' counts (the caller judges
// them).
func check(t *testing.T, b fleetBackend, dir string, setup fleetSetup, timeline func(at int64) string, allowance func(rd op) int64) verdict {
	var v verdict
	ops := map[string][]op{} // key -> its writes, in order
	var reads []op
	files, _ := filepath.Glob(filepath.Join(dir, "w*.log"))
	var total, failed int
	causes := map[string]int{} // the failures' errors, without addresses and keys
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
			o.by = strings.TrimSuffix(filepath.Base(name), ".log")
			switch {
			case o.Op == "get":
				total++
				if o.OK {
					reads = append(reads, o)
				} else {
					failed++
					causes[cause(o.Err)]++
				}
			case o.End == 0:
				open[o.Key] = len(ops[o.Key])
				ops[o.Key] = append(ops[o.Key], o)
			default:
				total++
				if !o.OK {
					failed++
					causes[cause(o.Err)]++
				}
				ops[o.Key][open[o.Key]] = o
			}
		}
		f.Close()
	}
	// The servers' content, read without the client: every key on the
	// server of the shard that owns it under the target, nothing else.
	final := map[string]string{}
	for _, p := range setup.places {
		keys, marks := b.content(t, p.addr)
		for k, val := range keys {
			if owner := setup.owner(k); owner != p.shard {
				if v.stray++; v.stray <= 10 {
					t.Logf("stray copy: %s on %s (%s), owned by %s", k, p.addr, p.shard, owner)
				}
				continue
			}
			if val != nil {
				final[k] = *val
			}
		}
		if marks != 0 {
			v.marks += marks
			t.Logf("%d move marks left on %s", marks, p.addr)
		}
	}
	var lagged int
	var maxLag int64
	for _, rd := range reads {
		ws, from := ops[rd.Key], rd.Start-allowance(rd)
		switch {
		case !fits(ws, rd, from):
			if v.stale++; v.stale <= 10 {
				t.Logf("stale read of %s by %s: got %v at [%d, %d], allowance %.1f ms; allowed %v; its writes: %s; the reader's next reads of it: %s; around it: %s",
					rd.Key, rd.by, deref(rd.Val), rd.Start, rd.End, float64(rd.Start-from)/1e6, derefs(allowed(ws, from, rd.End)), writes(ws, rd.End),
					nextReads(reads, rd), timeline(rd.End))
			}
		case !fits(ws, rd, rd.Start):
			lagged++
			maxLag = max(maxLag, rd.Start-missed(ws, rd))
		}
	}
	if lagged > 0 {
		t.Logf("%d reads within their allowance missed a write acknowledged before they started, the oldest %.1f ms before", lagged, float64(maxLag)/1e6)
	}
	now := time.Now().UnixNano()
	for key := range ops {
		var got *string
		if v, ok := final[key]; ok {
			got = &v
		}
		if !fits(ops[key], op{Val: got, End: now}, now) {
			if v.lost++; v.lost <= 10 {
				t.Logf("key %s ends as %v; allowed %v", key, deref(got), derefs(allowed(ops[key], now, now)))
			}
		}
	}
	t.Logf("failures by cause: %v", causes)
	t.Logf("%d operations (%d failed or unknown), %d reads checked, %d keys: %d lost or resurrected, %d stale reads, %d stray copies, %d move marks left",
		total, failed, len(reads), len(ops), v.lost, v.stale, v.stray, v.marks)
	if total == 0 || len(reads) == 0 {
		t.Error("no operations logged")
	}
	return v
}

// allowed returns the values a key whose writes are ws may hold for a read
// over [start, end]: the last write acknowledged before start, and every
// write after it that started before end (acknowledged or not).
func allowed(ws []op, start, end int64) []*string {
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

// fits reports whether rd's value is one that a read over [from, rd.End]
// of a key whose writes are ws may return: rd.Start, or earlier by the
// read's allowance.
func fits(ws []op, rd op, from int64) bool {
	return slices.ContainsFunc(allowed(ws, from, rd.End), func(v *string) bool { return same(v, rd.Val) })
}

// value is what a write leaves: its value, or nil for a delete.
func value(o op) *string {
	if o.Op == "del" {
		return nil
	}
	return o.Val
}

func same(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// missed returns when the first write of ws that rd missed was
// acknowledged (Unix ns): the first acknowledged write after the last
// write of rd's value that started before rd ended (a nil value may be
// the key's start).
func missed(ws []op, rd op) int64 {
	from := 0
	for i, w := range ws {
		if w.Start < rd.End && same(value(w), rd.Val) {
			from = i + 1
		}
	}
	for _, w := range ws[from:] {
		if w.OK && w.End > 0 {
			return w.End
		}
	}
	return rd.Start
}

// cause is err without what varies between failures of one kind: its
// text up to the first address or quoted key, at most 80 bytes.
func cause(err string) string {
	if i := strings.IndexAny(err, "\"("); i >= 0 {
		err = err[:i]
	}
	return err[:min(len(err), 80)]
}

// writes describes the writes of ws that started before end, the last
// five, relative to end (ms).
func writes(ws []op, end int64) string {
	var out []string
	for _, w := range ws {
		if w.Start < end {
			out = append(out, fmt.Sprintf("%s %s [%.1f, %.1f] ok=%v %s", w.Op, deref(w.Val), float64(w.Start-end)/1e6, float64(w.End-end)/1e6, w.OK, w.Err))
		}
	}
	return strings.Join(out[max(0, len(out)-5):], "; ")
}

// nextReads describes the next five reads of rd's key by rd's reader,
// relative to rd's end (ms): whether a stale value stays.
func nextReads(reads []op, rd op) string {
	var out []string
	for _, o := range reads {
		if o.by == rd.by && o.Key == rd.Key && o.Start > rd.Start && len(out) < 5 {
			out = append(out, fmt.Sprintf("%s [%.1f, %.1f]", deref(o.Val), float64(o.Start-rd.End)/1e6, float64(o.End-rd.End)/1e6))
		}
	}
	return strings.Join(out, "; ")
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

// TestFleetCaseValidate: the harness refuses the cases it cannot run, by
// name, and accepts the six it runs.
func TestFleetCaseValidate(t *testing.T) {
	for c, want := range map[fleetCase]string{
		{backend: "redis"}:                                     "",
		{backend: "memcache"}:                                  "",
		{backend: "memcache", protection: noLeases}:            "",
		{backend: "redis", cluster: true}:                      "",
		{backend: "redis", cluster: true, protection: noFleet}: "",
		{backend: "redis", cached: true}:                       "",
		{backend: "memcache", cached: true}:                    `backend "memcache", cluster false, protection 0: caching is run on redis-servers resharded by the fleet only`,
		{backend: "redis", cluster: true, cached: true}:        `backend "redis", cluster true, protection 0: caching is run on redis-servers resharded by the fleet only`,
		{backend: "etcd"}:                                      `backend "etcd": want one of redis, memcache`,
		{backend: "memcache", cluster: true}:                   `backend "memcache": a Redis Cluster target is redis's only`,
		{backend: "redis", protection: noLeases}:               `backend "redis": noLeases is memcache's only (redis has fences)`,
		{backend: "redis", protection: noFleet}:                "noFleet needs the Redis Cluster target (its workers call BeginClusterMove)",
		{backend: "redis", protection: protection(7)}:          "protection 7: want protected, noLeases or noFleet",
	} {
		b, err := c.validate()
		switch {
		case want == "" && (err != nil || b.name() != c.backend):
			t.Errorf("%+v: %v, %v; want the backend %s", c, b, err, c.backend)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("%+v: %v; want %q", c, err, want)
		}
	}
}

// TestRunningBack: the allowance of a reader stopped for a while is B of
// its running time: the stops between are added, the others not.
func TestRunningBack(t *testing.T) {
	stops := [][2]int64{{100, 200}, {1000, 5000}}
	for _, c := range []struct{ at, d, want int64 }{
		{50, 30, 30},       // before every stop
		{300, 50, 50},      // after the first, which is farther back
		{300, 150, 250},    // back over the first: 100 ran after it, 50 before
		{5010, 30, 4030},   // 10 after the second, 20 before it
		{5010, 5, 5},       // within the running time after the second
		{5010, 1000, 5100}, // over both stops: 10 ran after the second, 800 between, 190 before the first
		{3000, 30, 2030},   // a read cannot start while stopped; counted from the stop's start
	} {
		if got := runningBack(c.at, c.d, stops); got != c.want {
			t.Errorf("runningBack(%d, %d) = %d; want %d", c.at, c.d, got, c.want)
		}
	}
}

// TestCacheAllowance: what check allows a read of key w1:g0:k0 (worker 1's)
// with caching on, and without it: two writes, the second acknowledged at
// 1001 ms; worker 3 stopped from 900 ms to 5000 ms.
func TestCacheAllowance(t *testing.T) {
	const ms = int64(time.Millisecond)
	key, v1, v2, never := "w1:g0:k0", "1:0:1", "1:0:2", "1:0:9"
	ws := []op{
		{Op: "set", Key: key, Val: &v1, Start: 0, End: 1 * ms, OK: true},
		{Op: "set", Key: key, Val: &v2, Start: 1000 * ms, End: 1001 * ms, OK: true},
	}
	h := &harness{cached: true, stopped: map[string][][2]int64{"w3": {{900 * ms, 5000 * ms}}}}
	for _, c := range []struct {
		name      string
		by        string
		start     int64
		val       *string
		allowance int64
		fits      bool
	}{
		{"its writer reads the value it replaced", "w1", 1002 * ms, &v1, 0, false},
		{"its writer reads the last value", "w1", 1002 * ms, &v2, 0, true},
		{"another reads the replaced value 249 ms after", "w2", 1250 * ms, &v1, 250 * ms, true},
		{"another reads the replaced value 251 ms after", "w2", 1252 * ms, &v1, 250 * ms, false},
		{"another reads the last value", "w2", 1252 * ms, &v2, 250 * ms, true},
		{"another reads a value never written", "w2", 1002 * ms, &never, 250 * ms, false},
		{"another reads none", "w2", 1002 * ms, nil, 250 * ms, false},
		{"a stopped reader, 10 ms after it resumed", "w3", 5010 * ms, &v1, 4350 * ms, true},
		{"a stopped reader, 260 ms after it resumed", "w3", 5260 * ms, &v1, 250 * ms, false},
	} {
		rd := op{Op: "get", Key: key, Val: c.val, Start: c.start, End: c.start + ms, OK: true, by: c.by}
		a := h.allowance(rd)
		if got := fits(ws, rd, rd.Start-a); a != c.allowance || got != c.fits {
			t.Errorf("%s: allowance %d ns, fits %v; want %d ns, %v", c.name, a, got, c.allowance, c.fits)
		}
	}
	h.cached = false
	rd := op{Op: "get", Key: key, Val: &v1, Start: 1002 * ms, End: 1003 * ms, OK: true, by: "w2"}
	if a := h.allowance(rd); a != 0 || fits(ws, rd, rd.Start-a) {
		t.Errorf("without caching, another reads the replaced value 1 ms after: allowance %d, fits %v; want 0, false", a, fits(ws, rd, rd.Start-a))
	}
}
