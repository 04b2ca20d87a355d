package reshardresume_test

// resume from checkpoints taken while Run runs (not only the
// last one), with InFlight and Parallelism > 1, runs cut by timers, RESTOREs
// refused at random, and new keys written meanwhile so that the sources'
// tables grow while they are scanned (SCAN may then return a key twice).

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardResumeFromMidRunCheckpoints runs midRunResume for 16 seeds
// (40 under SHARDEDCACHE_LONG=1).
func TestReshardResumeFromMidRunCheckpoints(t *testing.T) {
	for seed := int64(1); seed <= int64(fixtures.Scaled(16, 40)); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { midRunResume(t, seed) })
	}
	t.Logf("SCAN returned %d keys twice in one run, over every seed", totalDups.Load())
}

var totalDups atomic.Int64

func midRunResume(t *testing.T, seed int64) {
	variant := int(seed) * 2 // 0, 2 and 1: sources keep keys in variants 0 and 2
	w := fixtures.CutFixture(t, seed, variant, 1500)
	rng := rand.New(rand.NewSource(seed))

	// RESTOREs refused at random while refusing is set.
	var refusing atomic.Bool
	var hmu sync.Mutex
	hrng := rand.New(rand.NewSource(seed * 31))
	var refusals atomic.Int64
	// SCAN replies, to count keys that come back twice in one run.
	var smu sync.Mutex
	seen := map[string]map[string]int{} // addr -> key -> times in this run
	dups := 0
	w.C.AddHook(fixtures.SendHook{
		Before: func(_ context.Context, cmds []goredis.Cmder) error {
			if !refusing.Load() || !slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return fixtures.IsStep(c, "restore") }) {
				return nil
			}
			hmu.Lock()
			refuse := hrng.Intn(6) == 0
			hmu.Unlock()
			if refuse {
				refusals.Add(1)
				return errors.New("injected: RESTORE refused")
			}
			return nil
		},
	})
	addrs := map[string]int{}
	for i, s := range w.Shards {
		addrs[s.Addr] = i
	}
	fixtures.OnScanReplies(w.C, func(addr string, sc *goredis.ScanCmd) {
		keys, _ := sc.Val()
		smu.Lock()
		defer smu.Unlock()
		if seen[addr] == nil {
			seen[addr] = map[string]int{}
		}
		for _, k := range keys {
			if seen[addr][k]++; seen[addr][k] == 2 {
				dups++
			}
		}
	})

	// Many more keys on every server (written in the window, so on their
	// new owners, sources included), which the application deletes while
	// the runs scan: the sources' tables shrink (rehash) under their SCAN,
	// which may then return a key twice. It writes new keys as well.
	var fill []string
	if _, err := w.C.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range 12000 {
			k := fmt.Sprintf("zown:%d:%d", seed, i)
			fill = append(fill, k)
			p.Set(ctx, k, "o", 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rand.New(rand.NewSource(seed)).Shuffle(len(fill), func(i, j int) { fill[i], fill[j] = fill[j], fill[i] })
	stop := make(chan struct{})
	appDone := make(chan struct{})
	var appErr error
	go func() {
		defer close(appDone)
		next := 0
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if next < len(fill) {
				end := min(len(fill), next+150)
				if err := w.C.Del(ctx, fill[next:end]...).Err(); err != nil {
					appErr = err
					return
				}
				next = end
			}
			k := fmt.Sprintf("zfill:%d:%d", seed, i)
			if err := w.C.Set(ctx, k, "x", 0).Err(); err != nil {
				appErr = err
				return
			}
			fill = append(fill, k)
			if next >= len(fill) {
				time.Sleep(500 * time.Microsecond)
			}
		}
	}()

	var cp *shardedredis.Checkpoint
	var moved, stale int64
	defer func() {
		smu.Lock()
		totalDups.Add(int64(dups))
		smu.Unlock()
	}()
	var runs int
	fromMid := 0
	for r := 0; ; r++ {
		if r > 14 {
			t.Fatal("too many runs")
		}
		runs++
		last := r >= 6
		refusing.Store(!last && rng.Intn(3) > 0)
		smu.Lock()
		clear(seen)
		smu.Unlock()
		opt := shardedredis.MigrateOptions{BatchSize: 3 + rng.Intn(30), Parallelism: 1 + rng.Intn(3), InFlight: 1 + rng.Intn(4), Resume: cp}
		m, err := w.C.NewMigration(opt)
		if err != nil {
			t.Fatal(err)
		}
		// Checkpoints taken while it runs.
		var mids []*shardedredis.Checkpoint
		var cpmu sync.Mutex
		pollDone := make(chan struct{})
		pollStop := make(chan struct{})
		go func() {
			defer close(pollDone)
			for {
				select {
				case <-pollStop:
					return
				case <-time.After(300 * time.Microsecond):
				}
				c := m.Checkpoint()
				cpmu.Lock()
				mids = append(mids, c)
				cpmu.Unlock()
			}
		}()
		runCtx, cancel := context.WithCancel(ctx)
		if !last {
			time.AfterFunc(time.Duration(3+rng.Intn(150))*time.Millisecond, cancel)
		}
		err = m.Run(runCtx)
		cancel()
		close(pollStop)
		<-pollDone
		prog := m.Progress()
		c := fixtures.CheckRunCounts(t, "run "+strconv.Itoa(r+1), prog)
		moved, stale = moved+c.Moved, stale+c.Stale
		var merr *shardedredis.MigrationError
		switch {
		case err == nil:
			if w.C.Window() != nil {
				t.Errorf("run %d returned nil, the window is open", r+1)
			}
		case errors.Is(err, context.Canceled) && err == context.Canceled:
			if w.C.Window() == nil {
				t.Fatalf("run %d was cut, yet the window ended", r+1)
			}
		case errors.As(err, &merr):
			if w.C.Window() == nil {
				t.Fatalf("run %d: %v, yet the window ended", r+1, err)
			}
		default:
			t.Fatalf("run %d: %v (%T)", r+1, err, err)
		}
		final := m.Checkpoint()
		w.CheckSwept(t, r+1, prog, final)
		smu.Lock()
		t.Logf("run %d (%+v): %v; %d mid-run checkpoints; SCAN returned %d keys twice so far; moved %d", r+1,
			struct{ B, P, I int }{opt.BatchSize, opt.Parallelism, opt.InFlight}, errShort(err), len(mids), dups, c.Moved)
		smu.Unlock()
		if err == nil {
			break
		}
		// Resume from the last checkpoint, or from one taken while it ran.
		cp = final
		if len(mids) > 0 && rng.Intn(2) == 0 {
			cp = mids[rng.Intn(len(mids))]
			fromMid++
		}
	}
	close(stop)
	<-appDone
	if appErr != nil {
		t.Fatal(appErr)
	}
	t.Logf("%d runs, %d resumed from a mid-run checkpoint, %d RESTORE pipelines refused, %d keys returned twice by SCAN, %d fill keys",
		runs, fromMid, refusals.Load(), dups, len(fill))
	if moved != int64(w.Moving) {
		t.Errorf("the runs moved %d keys, want the %d that change owner", moved, w.Moving)
	}
	if stale != int64(w.Stale) { // each once, even when SCAN returned it twice
		t.Errorf("the runs count %d stale copies, want the %d there were (SCAN returned %d keys twice)", stale, w.Stale, dups)
	}
	// The fill keys: on their owner, then removed for CheckFinal.
	for i := 0; i < len(fill); i += 500 {
		if err := w.C.Del(ctx, fill[i:min(len(fill), i+500)]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	w.CheckFinal(t)
}

func errShort(err error) string {
	if err == nil {
		return "nil"
	}
	s := err.Error()
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	return s
}
