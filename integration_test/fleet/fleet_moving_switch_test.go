package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// sentSet is a SET a member's shard client sent: its key, the server, and
// the fleet epoch its connections are named with.
type sentSet struct {
	key, addr string
	epoch     uint64
}

// setRecorder is a go-redis hook on every shard client of a member: it
// records each SET (alone or in a pipeline) with its client's epoch, and
// calls config, then holds the command for delay, before each CONFIG
// command: a switch that copies the CONFIG SET parameters to a joining
// shard takes that long.
type setRecorder struct {
	addr, name string
	delay      time.Duration
	sent       func(sentSet)
	config     func(addr string)
}

func (h setRecorder) record(cmd goredis.Cmder) {
	if cmd.Name() != "set" {
		return
	}
	_, rest, _ := strings.Cut(h.name, "shardedcache-fleet:")
	e, _, _ := strings.Cut(rest, ":")
	epoch, _ := strconv.ParseUint(e, 10, 64)
	h.sent(sentSet{fmt.Sprint(cmd.Args()[1]), h.addr, epoch})
}

func (h setRecorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h setRecorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "config" {
			h.config(h.addr)
			time.Sleep(h.delay)
		}
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h setRecorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestFleetMovingSwitchFencesSources: a member applying Moving never routes
// by the old list with connections that the sources' fence accepts. Its
// writers start to SET moving keys while it applies the step (as a process
// that resumes from a pause does), which takes 300 ms (the CONFIG SET
// parameter set through it is copied to the joining shard, held by the
// hook), while the driver migrates. No SET of a moving key may reach its
// source on a connection of the Moving epoch or later (the fence lets
// those through: the key may have moved already), and every key ends with
// its last acknowledged value or a later attempt. Once with sources that
// stay in the new list (2 -> 3 shards), once with sources that leave it
// (2 -> the third alone).
func TestFleetMovingSwitchFencesSources(t *testing.T) {
	for _, c := range []struct {
		name   string
		target func([]fleet.Shard) []fleet.Shard
	}{
		{"sources stay", func(l []fleet.Shard) []fleet.Shard { return l }},
		{"sources leave", func(l []fleet.Shard) []fleet.Shard { return l[2:] }},
	} {
		t.Run(c.name, func(t *testing.T) { testMovingSwitch(t, c.target) })
	}
}

func testMovingSwitch(t *testing.T, targetOf func([]fleet.Shard) []fleet.Shard) {
	shards, list := fixtures.FleetServers(t, 3)
	target := targetOf(list)
	var mu sync.Mutex
	var sent []sentSet
	p, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := make(chan struct{}) // closed when the switch to the joining shard begins
	var once sync.Once
	p.OnNewNode(func(c *goredis.Client) {
		o := c.Options()
		c.AddHook(setRecorder{addr: o.Addr, name: o.ClientName, delay: 300 * time.Millisecond, sent: func(s sentSet) {
			mu.Lock()
			sent = append(sent, s)
			mu.Unlock()
		}, config: func(addr string) {
			if addr == list[2].Addr {
				once.Do(func() { close(start) })
			}
		}})
	})
	store := &fleet.MemStore{}
	m, err := p.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := p.ConfigSet(ctx, "lazyfree-lazy-user-del", "no").Err(); err != nil {
		t.Fatal(err)
	}

	const writers, keysPer = 4, 50
	type keyState struct{ acked, attempted atomic.Int64 }
	states := map[string]*keyState{}
	for w := range writers {
		for i := range keysPer {
			states[fmt.Sprintf("ms:%d:%d", w, i)] = &keyState{}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for k, ks := range states { // every key on its source first
		if err := p.Set(ctx, k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
		ks.attempted.Store(1)
		ks.acked.Store(1)
	}
	for w := range writers {
		wg.Go(func() {
			select {
			case <-start:
			case <-stop:
				return
			}
			for n := int64(2); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("ms:%d:%d", w, n%keysPer)
				st := states[k]
				st.attempted.Store(n)
				if err := p.Set(ctx, k, n, 0).Err(); err != nil {
					failures.Add(1)
					continue
				}
				st.acked.Store(n)
			}
		})
	}
	driver, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer driver.Close()
	if _, err := fleet.Reshard(ctx, store, driver.FleetBackend(shardedredis.MigrateOptions{}), target, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Window() != nil || len(p.Shards()) != len(target) {
		if time.Now().After(deadline) {
			t.Fatal("the member did not apply the change's end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	st, _, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moving := st.Epoch - 1 // Stable(target) follows Moving
	// A moving key's source is its owner under the old list; the driver,
	// over the target now, names its owner under the new one.
	old, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var wrong []string
	mu.Lock()
	for _, s := range sent {
		from := old.GetShard(s.key).Options().Addr
		to := driver.GetShard(s.key).Options().Addr
		if from != to && s.addr == from && s.epoch >= moving {
			wrong = append(wrong, fmt.Sprintf("%s on its source %s at epoch %d", s.key, s.addr, s.epoch))
		}
	}
	total := len(sent)
	mu.Unlock()
	var lost []string
	for k, ks := range states {
		got, err := driver.Get(ctx, k).Int64()
		if errors.Is(err, goredis.Nil) {
			got, err = 0, nil
		}
		if err != nil || got < ks.acked.Load() || got > ks.attempted.Load() {
			lost = append(lost, fmt.Sprintf("%s = %d (%v), acknowledged %d", k, got, err, ks.acked.Load()))
		}
	}
	t.Logf("%d SETs sent (%d failed), Moving epoch %d", total, failures.Load(), moving)
	if len(wrong) > 0 || len(lost) > 0 {
		t.Fatalf("%d SETs of moving keys sent to their source through its fence, e.g. %v; %d keys lost their last write, e.g. %v",
			len(wrong), wrong[:min(3, len(wrong))], len(lost), lost[:min(3, len(lost))])
	}
}
