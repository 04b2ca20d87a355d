package etcdstore_test

// The fleet's reference-model test: real redis-servers, a real etcd, and
// separate OS processes (this test binary run again as workers and
// drivers). Each worker joins the fleet and runs random operations on keys
// of its own (each key has one writer) and reads every worker's keys; it
// logs every operation with its start and end on the machine's clock. A
// driver reshards 3 -> 4 shards meanwhile, under chaos: a worker paused
// past every timeout, a worker killed and a new one started mid-change,
// the driver killed mid-migration and the change resumed by another
// process, the new shard's server hung mid-migration. At the end the logs
// are checked against a model: no lost acknowledged write, no resurrected
// delete, no read older than a write acknowledged before it started, no
// stray copy or move mark left on any server.

import (
	"bufio"
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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	"github.com/shardedcache/shardedcache/fleet/etcdstore/internal/etcdtest"
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
	envBackend  = "SC_FLEET_BACKEND"     // "redis" (default), "memcache"
	envBare     = "SC_FLEET_UNPROTECTED" // "1": the negative control (see fleetBackend.bare)
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

func envShardList(t *testing.T) []fleet.Shard {
	var list []fleet.Shard
	if err := json.Unmarshal([]byte(os.Getenv(envShards)), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

func runWorker(t *testing.T) {
	store, cli := processStore(t)
	defer cli.Close()
	c := backendOf().client(t, envShardList(t))
	defer c.close()
	ctx := context.Background()
	member, err := c.join(ctx, store, fleet.MemberOptions{OnError: func(err error) { fmt.Fprintln(os.Stderr, "member:", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
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
	var wg sync.WaitGroup
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
}

func runDriver(t *testing.T) {
	store, cli := processStore(t)
	defer cli.Close()
	target := envShardList(t)
	// The driver's client starts on the target's list; Reshard applies
	// the fleet's state to it at every step.
	backend, closeBackend := backendOf().driver(t, target)
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

func TestFleetResharding(t *testing.T) { testFleet(t, "redis", false) }

// TestFleetReshardingMemcache is the same test on memcached servers, whose
// fleet is protected by member leases (fleet.Unfenced) and compare-and-set
// moves rather than fences.
func TestFleetReshardingMemcache(t *testing.T) { testFleet(t, "memcache", false) }

// TestFleetReshardingMemcacheUnprotected is the negative control of
// TestFleetReshardingMemcache: the same run with the member leases taken
// out (members neither register nor refuse commands, the driver waits for
// no one) must lose writes or read stale values.
func TestFleetReshardingMemcacheUnprotected(t *testing.T) { testFleet(t, "memcache", true) }

func testFleet(t *testing.T, backend string, bare bool) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	endpoint := etcdtest.StartShared(t)
	b := backends[backend]
	for _, seed := range seeds() {
		if bare && seed > 1 {
			break // one run shows the failure
		}
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			got := fleetRun(t, b, bare, endpoint, seed)
			if bare {
				if got.lost+got.stale+got.stray == 0 {
					t.Errorf("without member leases: %+v; want lost writes, stale reads or stray copies", got)
				}
				t.Logf("without member leases, as expected: %d lost or resurrected, %d stale reads, %d stray copies", got.lost, got.stale, got.stray)
			} else if got.lost+got.stale+got.stray > 0 {
				t.Errorf("%+v", got)
			}
		})
	}
}

// seeds are the seeds run: two, or SHARDEDCACHE_LONG=1 for six.
func seeds() []uint64 {
	if os.Getenv("SHARDEDCACHE_LONG") == "1" {
		return []uint64{1, 2, 3, 4, 5, 6}
	}
	return []uint64{1, 2}
}

// fleetRun runs one reshard 3 -> 4 under chaos on b's servers and returns
// the check's counts.
func fleetRun(t *testing.T, b fleetBackend, bare bool, endpoint string, seed uint64) counts {
	servers := make([]*server, 4)
	for i := range servers {
		servers[i] = b.start(t)
	}
	initial := []fleet.Shard{{Name: "a", Addr: servers[0].addr}, {Name: "b", Addr: servers[1].addr}, {Name: "c", Addr: servers[2].addr}}
	target := append(slices.Clone(initial), fleet.Shard{Name: "d", Addr: servers[3].addr})
	dir := t.TempDir()
	prefix := fmt.Sprintf("/fleet-test/%d-%d", seed, time.Now().UnixNano())
	stopFile := filepath.Join(dir, "stop")
	list := func(l []fleet.Shard) string { b, _ := json.Marshal(l); return string(b) }
	common := []string{envEtcd + "=" + endpoint, envPrefix + "=" + prefix, envSeed + "=" + fmt.Sprint(seed), envStopFile + "=" + stopFile,
		envBackend + "=" + b.name(), envBare + "=" + map[bool]string{true: "1"}[bare]}
	var all []*proc // every process started, for a failure's report
	worker := func(id int) *proc {
		p := spawn(t, fmt.Sprint("worker ", id), append(common, envRole+"=worker", envWorker+"="+fmt.Sprint(id),
			envShards+"="+list(initial), envLog+"="+filepath.Join(dir, fmt.Sprintf("w%d.log", id)))...)
		all = append(all, p)
		return p
	}
	driver := func(role string) *proc {
		p := spawn(t, role, append(common, envRole+"="+role, envShards+"="+list(target))...)
		all = append(all, p)
		return p
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdstore.New(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	step := func() fleet.State {
		st, _, err := store.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor := func(what string, ok func(fleet.State) bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !ok(step()) {
			if time.Now().After(deadline) {
				for _, p := range all {
					t.Logf("%s:\n%s", p.name, tail(p.out.String(), 1500))
				}
				t.Fatalf("timed out waiting for %s; state %+v", what, step())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	workers := map[int]*proc{1: worker(1), 2: worker(2), 3: worker(3)}
	waitFor("the first state", func(st fleet.State) bool { return st.Epoch > 0 })
	time.Sleep(time.Second)

	var events []string
	chaos := func(format string, args ...any) { events = append(events, fmt.Sprintf(format, args...)) }
	// A worker paused before the change starts, past every timeout and the
	// fence, with commands in flight: it resumes in the middle of the
	// migration, two steps behind.
	paused := 1 + rng.IntN(3)
	_ = workers[paused].cmd.Process.Signal(syscall.SIGSTOP)
	chaos("SIGSTOP worker %d at step %s", paused, step().Step)
	d := driver("driver")
	waitFor("Moving", func(st fleet.State) bool { return st.Step == fleet.Moving })
	time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
	// The driver killed mid-migration.
	_ = d.cmd.Process.Kill()
	<-d.done
	chaos("SIGKILL driver at step %s", step().Step)
	// A worker killed, and a new one started mid-change.
	killed := 1 + (paused % 3)
	_ = workers[killed].cmd.Process.Kill()
	chaos("SIGKILL worker %d", killed)
	workers[4] = worker(4)
	chaos("start worker 4 at step %s", step().Step)
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	_ = workers[paused].cmd.Process.Signal(syscall.SIGCONT)
	chaos("SIGCONT worker %d", paused)
	// Another process resumes the change; the new shard's server hangs
	// while it migrates (see fleetBackend.hangs); a driver that fails is
	// started again, as an operator would.
	var hung sync.WaitGroup
	if b.hangs() {
		hung.Go(func() {
			time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
			_ = servers[3].cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(1500 * time.Millisecond)
			_ = servers[3].cmd.Process.Signal(syscall.SIGCONT)
		})
		chaos("SIGSTOP the new shard's server for 1.5 s during the resumed migration")
	}
	for attempt := 0; step().Step != fleet.Stable; attempt++ {
		if attempt == 20 {
			t.Fatalf("the change did not end after %d resumes: state %+v", attempt, step())
		}
		r := driver("resume")
		if err := <-r.done; err != nil {
			chaos("resume %d failed (%v); started again", attempt+1, err)
			t.Logf("resume %d: %v\n%s", attempt+1, err, tail(r.out.String(), 1500))
		}
	}
	hung.Wait()
	final := step()
	if !slices.Equal(final.Shards, target) {
		t.Fatalf("final state %+v, want Stable over the target", final)
	}
	time.Sleep(time.Second)
	if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for id, w := range workers {
		if id == killed {
			continue
		}
		if err := <-w.done; err != nil {
			t.Errorf("worker %d: %v\n%s", id, err, tail(w.out.String(), 3000))
		}
	}
	t.Logf("seed %d: chaos events: %s", seed, strings.Join(events, "; "))
	return check(t, b, dir, servers, target)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// check reads the workers' logs and the servers, and checks them against
// the model of a linearizable register per key with one writer.
// counts are the violations check found.
type counts struct{ lost, stale, stray int }

// check reads the workers' logs and the servers, and checks them against
// the model of a linearizable register per key with one writer. It logs
// the first violations of each kind and returns their counts (the caller
// decides whether they fail the test).
func check(t *testing.T, b fleetBackend, dir string, servers []*server, target []fleet.Shard) counts {
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
	// server that owns it under the target, nothing else.
	nodes := make([]ring.Node, len(target))
	for i, sh := range target {
		nodes[i] = ring.Node{Name: sh.Name, Addr: sh.Addr}
	}
	r, err := ring.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]string{}
	stray := 0
	for _, s := range servers {
		for k, v := range b.content(t, s.addr) {
			if target[r.Locate(k)].Addr != s.addr {
				stray++
				if stray <= 10 {
					t.Logf("stray copy: %s on %s, owned by %s", k, s.addr, target[r.Locate(k)].Name)
				}
				continue
			}
			if v != nil {
				final[k] = *v
			}
		}
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
	stale := 0
	for _, rd := range reads {
		if !slices.ContainsFunc(allowed(rd.Key, rd.Start, rd.End), func(v *string) bool { return same(v, rd.Val) }) {
			stale++
			if stale <= 10 {
				t.Logf("stale read of %s: got %v at [%d, %d]; allowed %v; its writes: %s", rd.Key, deref(rd.Val), rd.Start, rd.End,
					derefs(allowed(rd.Key, rd.Start, rd.End)), writes(ops[rd.Key], rd.End))
			}
		}
	}
	lost := 0
	for key := range ops {
		var got *string
		if v, ok := final[key]; ok {
			got = &v
		}
		if !slices.ContainsFunc(allowed(key, time.Now().UnixNano(), time.Now().UnixNano()), func(v *string) bool { return same(v, got) }) {
			lost++
			if lost <= 10 {
				t.Logf("key %s ends as %v; allowed %v", key, deref(got), derefs(allowed(key, time.Now().UnixNano(), time.Now().UnixNano())))
			}
		}
	}
	t.Logf("failures by cause: %v", causes)
	t.Logf("%d operations (%d failed or unknown), %d reads checked, %d keys: %d lost or resurrected, %d stale reads, %d stray copies",
		total, failed, len(reads), len(ops), lost, stale, stray)
	if total == 0 || len(reads) == 0 {
		t.Error("no operations logged")
	}
	return counts{lost, stale, stray}
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
