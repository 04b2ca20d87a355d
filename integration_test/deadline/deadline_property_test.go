package deadline_test

// Property, on real servers of both backends: under random mixes of shard
// kills, restarts, hangs (SIGSTOP) and resumptions, and callers that cancel,
// let their deadline pass, or wait, the health counters move exactly as a
// model that counts only the shard's own failures says, after every step.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/serverproc"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// serverState is what a chaos step left a shard's server in.
type serverState uint8

const (
	alive   serverState = iota
	killed              // SIGKILL: connections refused
	stopped             // SIGSTOP: connections accepted, nothing answered
)

// chaosServer is the real server of one shard, which the property test
// kills and restarts on the same port, stops and continues.
type chaosServer struct {
	addr                        string
	state                       serverState
	kill, restart, hang, resume func()
}

// step moves the server to another state: an alive one is killed or
// stopped, a killed one restarted, a stopped one continued.
func (s *chaosServer) step(rng *rand.Rand) {
	switch {
	case s.state == killed:
		s.restart()
		s.state = alive
	case s.state == stopped:
		s.resume()
		s.state = alive
	case rng.IntN(2) == 0:
		s.kill()
		s.state = killed
	default:
		s.hang()
		s.state = stopped
	}
}

// Kinds of call: under context.Background(), an expired or canceled
// context, or a 50 ms deadline (shorter than the shards' timeouts).
var callKinds = []string{"live", "expired", "canceled", "deadline"}

// healthBackend is one backend under the property test.
type healthBackend struct {
	servers []*chaosServer
	get     func(ctx context.Context, key string) error
	owner   func(key string) int
	stats   func() []shardedclient.ShardStats
	// outcome checks err, the error of a call of kind on shard i, whose
	// server is in state, and returns whether the shard's health counts the
	// call as a request and how (its class).
	outcome func(t *testing.T, kind string, i int, state serverState, err error) (bool, shardedclient.Class)
}

// propertyLimit is the FailureLimit of the property test's eject mode.
const propertyLimit = 3

// propertyHealth is the policy under test: eject mode, no rejoin in the
// test's time.
func propertyHealth[C comparable]() shardedclient.Health[C] {
	return shardedclient.Health[C]{Mode: shardedclient.EjectMode, FailureLimit: propertyLimit, RetryTimeout: time.Hour}
}

// exercised counts, over a property test's seeds, the steps that put the
// property to the test.
type exercised struct {
	failures  int // calls counted as the shard's failure
	spared    int // calls on a failing shard that did not count
	ejections int
}

// runHealthProperty runs steps random steps on b and checks the counters
// against the model after each.
func runHealthProperty(t *testing.T, b healthBackend, rng *rand.Rand, steps int, ex *exercised) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	model := b.stats()
	consecutive := make([]int, len(model))
	for step := range steps {
		if rng.IntN(8) == 0 {
			b.servers[rng.IntN(len(b.servers))].step(rng)
			continue
		}
		key := fmt.Sprintf("prop:%d", rng.IntN(200))
		kind := callKinds[rng.IntN(len(callKinds))]
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // "deadline"
		switch kind {
		case "live":
			ctx = context.Background()
		case "expired":
			ctx = expired
		case "canceled":
			ctx = canceled
		}
		i := b.owner(key)
		state := b.servers[i].state
		err := b.get(ctx, key)
		cancel()
		reported, class := b.outcome(t, kind, i, state, err)
		m := &model[i]
		if reported {
			m.Requests++
		}
		switch {
		case !reported || class == shardedclient.Local:
			if state != alive {
				ex.spared++ // a call on a failing shard that the caller ended
			}
		case class == shardedclient.Answered:
			consecutive[i] = 0
		default:
			m.Errors++
			ex.failures++
			if consecutive[i]++; consecutive[i] >= propertyLimit && !m.Ejected && live(model) > 1 {
				m.Ejected, m.Ejections = true, m.Ejections+1
				ex.ejections++
			}
		}
		// A memcache call abandoned by its deadline runs on: wait for its
		// outcome. Nothing else is pending.
		var got []shardedclient.ShardStats
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if got = b.stats(); fmt.Sprint(got) == fmt.Sprint(model) {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(model) {
			t.Fatalf("step %d, a %s call on shard %d (%v): %v\nStats %+v\nmodel %+v", step, kind, i, state, err, got, model)
		}
	}
}

// live counts the shards of stats that are not ejected.
func live(stats []shardedclient.ShardStats) int {
	n := 0
	for _, st := range stats {
		if !st.Ejected {
			n++
		}
	}
	return n
}

// propertySeeds runs the property on a fresh backend per seed and checks
// that the seeds put it to the test.
func propertySeeds(t *testing.T, newBackend func(t *testing.T) healthBackend) {
	var ex exercised
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runHealthProperty(t, newBackend(t), rand.New(rand.NewPCG(seed, 5)), 120, &ex)
		})
	}
	if ex.failures == 0 || ex.spared == 0 || ex.ejections == 0 {
		t.Fatalf("the seeds put the property to no test: %+v", ex)
	}
}

// restartRedisProc starts p's server again on its port, once p was killed,
// and waits until it answers.
func restartRedisProc(t *testing.T, p *fixtures.RedisProc) *fixtures.RedisProc {
	t.Helper()
	np := &fixtures.RedisProc{Addr: p.Addr, Dir: p.Dir, Cmd: serverproc.Command(p.Cmd.Path, p.Cmd.Args[1:]...), Exited: make(chan struct{})}
	if err := np.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = np.Cmd.Wait()
		close(np.Exited)
	}()
	t.Cleanup(np.Kill)
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	fixtures.Poll(t, 10*time.Second, "the restarted redis-server answers", func() error { return c.Ping(ctx).Err() })
	return np
}

// wantFailure fails unless err is shard i's ShardError for a server in
// state (killed: a refused or broken connection; stopped: a timeout), and
// not the caller's deadline.
func wantFailure(t *testing.T, err error, i int, addr string, state serverState) {
	t.Helper()
	fixtures.WantShardError(t, "a call on a failing shard", err, i, addr)
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || state == killed && !fixtures.DeadConn(err) ||
		state == stopped && (!errors.As(err, &ne) || !ne.Timeout()) {
		t.Fatalf("a call on a %v shard: %v", state, err)
	}
}

func (s serverState) String() string { return [...]string{"alive", "killed", "stopped"}[s] }

// Redis: a done context is the caller's (a request, not a failure); a 50 ms
// deadline is the caller's when it ends the call first, as it does on a
// hung shard (read timeout 300 ms); a killed or hung shard is the shard's
// failure; an alive one answers.
func TestRealRedisHealthCountsOnlyShardFailuresProperty(t *testing.T) {
	propertySeeds(t, func(t *testing.T) healthBackend {
		procs, c := fixtures.StartDeadlineShards(t, 3, propertyHealth[*goredis.Client](), 1000, 1000, 1000)
		b := healthBackend{
			get:   func(ctx context.Context, key string) error { return c.Get(ctx, key).Err() },
			owner: func(key string) int { return c.GetShardInfo(key).Index },
			stats: c.Stats,
		}
		for j := range procs {
			b.servers = append(b.servers, &chaosServer{addr: procs[j].Addr,
				kill:    func() { procs[j].Kill() },
				restart: func() { procs[j] = restartRedisProc(t, procs[j]) },
				hang:    func() { procs[j].Signal(t, syscall.SIGSTOP) },
				resume:  func() { procs[j].Signal(t, syscall.SIGCONT) },
			})
		}
		b.outcome = func(t *testing.T, kind string, i int, state serverState, err error) (bool, shardedclient.Class) {
			switch {
			case kind == "expired" || kind == "canceled":
				cause := map[string]error{"expired": context.DeadlineExceeded, "canceled": context.Canceled}[kind]
				fixtures.WantCallerEnded(t, kind+" GET", err, i, procs[i].Addr, cause)
				return true, shardedclient.Local
			case kind == "deadline" && (state == stopped || errors.Is(err, context.DeadlineExceeded)):
				fixtures.WantCallerEnded(t, "GET past its deadline", err, i, procs[i].Addr, context.DeadlineExceeded)
				return true, shardedclient.Local
			case state == alive:
				if err != nil && err != goredis.Nil {
					t.Fatalf("GET on an alive shard: %v", err)
				}
				return true, shardedclient.Answered
			}
			wantFailure(t, err, i, procs[i].Addr, state)
			return true, shardedclient.Failed
		}
		return b
	})
}

// Memcache: a done context sends nothing and counts nothing; any other call
// runs to its own outcome (gomemcache takes no context), which counts even
// when the caller's deadline returned first: a killed shard's refusal, a
// hung shard's socket timeout.
func TestMemcacheRealHealthCountsOnlyShardFailuresProperty(t *testing.T) {
	propertySeeds(t, func(t *testing.T) healthBackend {
		servers, c := fixtures.StartDeadlineMemcached(t, 3, propertyHealth[*gomemcache.Client]())
		b := healthBackend{
			get:   func(ctx context.Context, key string) error { _, err := c.GetContext(ctx, key); return err },
			owner: func(key string) int { return c.GetShardInfo(key).Index },
			stats: c.Stats,
		}
		path := fixtures.MemcachedPath(t)
		for j := range servers {
			b.servers = append(b.servers, &chaosServer{addr: servers[j].Addr,
				kill: func() { servers[j].Stop() },
				restart: func() {
					_, port, _ := net.SplitHostPort(servers[j].Addr)
					s, err := fixtures.RunMemcached(path, "tcp", servers[j].Addr, "-l", "127.0.0.1", "-p", port, "-U", "0")
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(s.Stop)
					servers[j] = s
				},
				hang: func() {
					if err := servers[j].Proc.Signal(syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
					fixtures.WaitState(t, servers[j].Proc.Pid, 'T')
				},
				resume: func() {
					if err := servers[j].Proc.Signal(syscall.SIGCONT); err != nil {
						t.Fatal(err)
					}
				},
			})
		}
		b.outcome = func(t *testing.T, kind string, i int, state serverState, err error) (bool, shardedclient.Class) {
			switch {
			case kind == "expired" && err != context.DeadlineExceeded, kind == "canceled" && err != context.Canceled:
				t.Fatalf("%s GetContext: %v, want the context's error alone", kind, err)
			case kind == "expired" || kind == "canceled":
				return false, shardedclient.Answered
			case kind == "deadline" && errors.Is(err, context.DeadlineExceeded):
				fixtures.WantCallerEnded(t, "GetContext past its deadline", err, i, servers[i].Addr, context.DeadlineExceeded)
			case state == alive && err != nil && err != gomemcache.ErrCacheMiss:
				t.Fatalf("GetContext on an alive shard: %v", err)
			case state != alive:
				wantFailure(t, err, i, servers[i].Addr, state)
			}
			if state == alive {
				return true, shardedclient.Answered
			}
			return true, shardedclient.Failed // the request's own outcome
		}
		return b
	})
}
