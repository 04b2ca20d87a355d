package integration_test

// Shard failure on real redis-server processes: a shard killed with SIGKILL,
// a hung shard (SIGSTOP, then SIGCONT), and a Sentinel-managed shard whose
// master is killed and replaced by promotion.
//
// Locally the tests are skipped when redis-server is missing; in CI
// (CI=true) that fails them.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/serverproc"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

const realTimeout = 300 * time.Millisecond

// realRedisBin finds redis-server, or skips the test (fails it in CI).
func realRedisBin(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr == nil {
			return "/usr/bin/redis-server"
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required in CI: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	return path
}

// redisProc is a redis-server (or sentinel) process that the test can
// signal.
type redisProc struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedisProc starts bin on a free port of 127.0.0.1 with no
// persistence and extra arguments, waits until it answers PING (a NOAUTH
// reply counts: the server runs, and wants a password), and kills it in
// t.Cleanup. With conf set, it is written to a file that is passed first
// (Sentinel needs a writable config file). "{port}" in conf and in extra is
// the port.
func startRedisProc(t testing.TB, bin, conf string, extra ...string) *redisProc {
	t.Helper()
	return startRedisProcTLS(t, bin, nil, conf, extra...)
}

// startRedisProcTLS is startRedisProc for a server that listens with TLS
// only (extra has "--tls-port {port} --port 0"): PING goes over TLS with
// tlsConf.
func startRedisProcTLS(t testing.TB, bin string, tlsConf *tls.Config, conf string, extra ...string) *redisProc {
	t.Helper()
	var lastErr error
	for range 5 {
		p, err := tryRedisProc(t, bin, tlsConf, conf, extra)
		if err == nil {
			return p
		}
		lastErr = err // most likely the free port was taken meanwhile
	}
	t.Fatalf("%s does not start: %v", bin, lastErr)
	return nil
}

func tryRedisProc(t testing.TB, bin string, tlsConf *tls.Config, conf string, extra []string) (*redisProc, error) {
	p, err := launchRedisProc(bin, tlsConf, conf, extra, t.TempDir())
	if err == nil {
		t.Cleanup(p.kill)
	}
	return p, err
}

// launchRedisProc starts bin in dir and waits until it answers (see
// startRedisProc); the caller kills it.
func launchRedisProc(bin string, tlsConf *tls.Config, conf string, extra []string, dir string) (*redisProc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var args []string
	if conf != "" {
		file := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(conf, "{port}", strconv.Itoa(port))), 0o644); err != nil {
			return nil, err
		}
		args = append(args, file)
	} else {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--daemonize", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	for _, a := range extra {
		args = append(args, strings.ReplaceAll(a, "{port}", strconv.Itoa(port)))
	}
	p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: serverproc.Command(bin, args...), exited: make(chan struct{})}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	c := goredis.NewClient(&goredis.Options{Addr: p.addr, MaxRetries: -1, DialTimeout: time.Second, TLSConfig: tlsConf})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := c.Ping(ctx).Err()
		if err == nil || goredis.IsAuthError(err) {
			break
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s on port %d exited: %s", bin, port, p.log())
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("%s on port %d does not answer PING: %v", bin, port, err)
		}
	}
	return p, nil
}

// log returns the last lines of the process's log.
func (p *redisProc) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// kill kills the process (stopped or not) and waits for it to exit.
func (p *redisProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// signal sends sig and waits until the process is in the state it causes
// (/proc/<pid>/stat: "T" stopped; anything else once continued).
func (p *redisProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	stopped := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return false
		}
		// pid (comm) state ...
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		return len(fields) > 0 && fields[0] == "T"
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return // no procfs: the signal is delivered promptly anyway
	}
	for deadline := time.Now().Add(5 * time.Second); stopped() != (sig == syscall.SIGSTOP); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d does not change state after %v", p.cmd.Process.Pid, sig)
		}
	}
}

func realShard(addr string) shardedredis.ShardOptions {
	return shardedredis.ShardOptions{Addr: addr, Options: &goredis.Options{
		DialTimeout: realTimeout, ReadTimeout: realTimeout, WriteTimeout: realTimeout,
		DialerRetries: 1, MaxRetries: -1, PoolSize: 4,
	}}
}

// startRealShards starts n redis-servers and a ShardedClient over them.
func startRealShards(t *testing.T, n int) ([]*redisProc, *shardedredis.ShardedClient) {
	t.Helper()
	bin := realRedisBin(t)
	procs := make([]*redisProc, n)
	opts := make([]shardedredis.ShardOptions, n)
	for i := range procs {
		procs[i] = startRedisProc(t, bin, "")
		opts[i] = realShard(procs[i].addr)
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts})
	if err != nil {
		t.Fatal(err)
	}
	closeAndSettle(t, c)
	return procs, c
}

// A SIGKILLed shard: commands for its keys fail within the timeouts with
// its ShardError (a broken pooled connection, then refused dials); the
// other shards are untouched.
func TestRealRedisKilledShard(t *testing.T) {
	procs, c := startRealShards(t, 3)
	ks := keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const dead = 1
	procs[dead].kill()
	var last error
	for _, k := range ks {
		start := time.Now()
		v, err := c.Get(ctx, k).Result()
		d := time.Since(start)
		if c.GetShardInfo(k).Index != dead {
			if err != nil || v != "v:"+k {
				t.Fatalf("GET %s on a live shard = %q, %v", k, v, err)
			}
			continue
		}
		if d > 2*realTimeout+200*time.Millisecond {
			t.Fatalf("GET %s on the killed shard took %v", k, d)
		}
		wantShardError(t, "GET "+k, err, dead, procs[dead].addr)
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("GET %s: %v; want a refused dial or a broken connection", k, err)
		}
		last = err
	}
	if !errors.Is(last, syscall.ECONNREFUSED) {
		t.Fatalf("last failure %v, want a refused dial", last)
	}
	if st := c.Stats()[dead]; st.Errors == 0 || st.Ejected {
		t.Fatalf("killed shard stats %+v", st)
	}
}

// A hung shard (SIGSTOP): its commands return after ReadTimeout with a
// timeout wrapped in its ShardError, while the other shards answer at once,
// also in the same pipeline; after SIGCONT it serves again.
func TestRealRedisHungShard(t *testing.T) {
	procs, c := startRealShards(t, 3)
	ks := keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const hung = 1
	owners := byOwner(c, ks)
	procs[hung].signal(t, syscall.SIGSTOP)

	// Commands on the hung shard, in the background.
	type result struct {
		key string
		d   time.Duration
		err error
	}
	results := make(chan result, 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for _, k := range owners[hung][g*5 : g*5+5] {
				start := time.Now()
				err := c.Get(ctx, k).Err()
				results <- result{k, time.Since(start), err}
			}
		})
	}
	// Meanwhile the live shards answer at once.
	for _, i := range []int{0, 2} {
		for _, k := range owners[i][:50] {
			start := time.Now()
			v, err := c.Get(ctx, k).Result()
			if d := time.Since(start); err != nil || v != "v:"+k || d >= realTimeout {
				t.Fatalf("GET %s on live shard %d = %q, %v after %v", k, i, v, err, d)
			}
		}
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.d < realTimeout-10*time.Millisecond || r.d > realTimeout+700*time.Millisecond {
			t.Fatalf("GET %s on the hung shard returned after %v; ReadTimeout %v", r.key, r.d, realTimeout)
		}
		wantShardError(t, "GET "+r.key+" on the hung shard", r.err, hung, procs[hung].addr)
		if netErr := net.Error(nil); !errors.As(r.err, &netErr) || !netErr.Timeout() {
			t.Fatalf("GET %s on the hung shard: %v, want a timeout", r.key, r.err)
		}
	}
	if n != 20 {
		t.Fatalf("%d results from the hung shard, want 20", n)
	}

	// One pipeline over all shards: the live replies arrive, the hung
	// shard's commands time out, within about ReadTimeout.
	start := time.Now()
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range ks[:60] {
			p.Get(ctx, k)
		}
		return nil
	})
	if d := time.Since(start); d > realTimeout+700*time.Millisecond {
		t.Fatalf("pipeline took %v", d)
	}
	wantShardError(t, "pipeline", err, hung, procs[hung].addr)
	for j, cmd := range cmds {
		k := ks[j]
		v, err := cmd.(*goredis.StringCmd).Result()
		if c.GetShardInfo(k).Index == hung {
			var netErr net.Error
			wantShardError(t, "pipelined GET "+k, err, hung, procs[hung].addr)
			if !errors.As(err, &netErr) || !netErr.Timeout() {
				t.Fatalf("pipelined GET %s: %v, want a timeout", k, err)
			}
		} else if err != nil || v != "v:"+k {
			t.Fatalf("pipelined GET %s = %q, %v", k, v, err)
		}
	}

	procs[hung].signal(t, syscall.SIGCONT)
	k := owners[hung][0]
	poll(t, 10*time.Second, "the continued shard", func() error { return c.Get(ctx, k).Err() })
	for _, k := range owners[hung] {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s after SIGCONT = %q, %v", k, v, err)
		}
	}
}

// waitReplicaSynced waits until the replica at addr reports its link to
// the master up.
func waitReplicaSynced(t *testing.T, addr string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	poll(t, 20*time.Second, "replica sync", func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("master link not up")
		}
		return nil
	})
}

// A Sentinel-managed shard whose master is SIGKILLed: the replica is
// promoted and the same ShardedClient writes again through the shard; no
// key ever moves to the other shard.
func TestRealRedisSentinelFailoverShard(t *testing.T) {
	bin := realRedisBin(t)
	master := startRedisProc(t, bin, "")
	replica := startRedisProc(t, bin, "", "--replicaof", "127.0.0.1", strings.TrimPrefix(master.addr, "127.0.0.1:"))
	plain := startRedisProc(t, bin, "")
	waitReplicaSynced(t, replica.addr)
	const name = "shardfo"
	mport := strings.TrimPrefix(master.addr, "127.0.0.1:")
	sentinel := startRedisProc(t, bin, "port {port}\n"+
		"sentinel monitor "+name+" 127.0.0.1 "+mport+" 1\n"+
		"sentinel down-after-milliseconds "+name+" 500\n"+
		"sentinel failover-timeout "+name+" 2000\n", "--sentinel")
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.addr, MaxRetries: -1})
	defer sc.Close()
	poll(t, 30*time.Second, "sentinel discovers the replica", func() error {
		reps, err := sc.Replicas(ctx, name).Result()
		if err != nil {
			return err
		}
		if len(reps) != 1 || strings.Contains(reps[0]["flags"], "disconnected") || strings.Contains(reps[0]["flags"], "s_down") {
			return fmt.Errorf("replicas %v", reps)
		}
		return nil
	})

	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "fo", Failover: &goredis.FailoverOptions{
			MasterName: name, SentinelAddrs: []string{sentinel.addr},
			DialTimeout: realTimeout, ReadTimeout: realTimeout, WriteTimeout: realTimeout,
			DialerRetries: 1, MaxRetries: -1, PoolSize: 4,
		}},
		{Name: "plain", Addr: plain.addr, Options: &goredis.Options{MaxRetries: -1, DialTimeout: realTimeout, ReadTimeout: realTimeout}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	closeAndSettle(t, c)
	if addr := c.Shards()[0].Addr; addr != "sentinel:"+name {
		t.Fatalf("failover shard address %q", addr)
	}
	ks := keys(400)
	placed := make([]int, len(ks))
	var foKeys []string
	for j, k := range ks {
		placed[j] = c.GetShardInfo(k).Index
		if placed[j] == 0 {
			foKeys = append(foKeys, k)
		}
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(foKeys) == 0 || len(foKeys) == len(ks) {
		t.Fatalf("%d of %d keys on the failover shard", len(foKeys), len(ks))
	}
	direct := func(addr string) *goredis.Client {
		d := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	mc, rc, pc := direct(master.addr), direct(replica.addr), direct(plain.addr)
	// Every write reaches the replica before the master dies.
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	checkPlacement := func(when string) {
		t.Helper()
		for j, k := range ks {
			if got := c.GetShardInfo(k).Index; got != placed[j] {
				t.Fatalf("%s: %s on shard %d, first on %d", when, k, got, placed[j])
			}
		}
		for _, k := range foKeys {
			if n, err := pc.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Fatalf("%s: the plain shard holds the failover shard's key %s (%d, %v)", when, k, n, err)
			}
		}
	}
	checkPlacement("before the failover")

	master.kill()
	k := foKeys[0]
	failures := 0
	poll(t, 30*time.Second, "a write after the failover", func() error {
		err := c.Set(ctx, k, "after", 0).Err()
		if err != nil {
			failures++
			wantShardError(t, "SET during the failover", err, 0, "sentinel:"+name)
		}
		return err
	})
	t.Logf("%d failed writes during the failover", failures)
	if role, err := rc.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("ROLE of the replica = %v, %v; want master", role, err)
	}
	if v, err := rc.Get(ctx, k).Result(); err != nil || v != "after" {
		t.Fatalf("the promoted replica holds %q, %v", v, err)
	}
	checkPlacement("after the failover")
	for _, k := range foKeys[1:] {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s after the failover = %q, %v", k, v, err)
		}
		if err := c.Set(ctx, k, "after", 0).Err(); err != nil {
			t.Fatalf("SET %s after the failover: %v", k, err)
		}
	}
	checkPlacement("after writing every key")
	if st := c.Stats(); st[0].Ejected || st[1].Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}
