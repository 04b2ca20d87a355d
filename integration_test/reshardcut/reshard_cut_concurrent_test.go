package reshardcut_test

// Attack: application commands (reads, writes, deletes, each moving its key
// first in the window) run while the migration is cut at random points and
// resumed. Each run's counts must add up; the moves the runs count must be
// exactly the keys whose old copy a migration DEL removed; with the keys
// moved by commands they must be every key that changes owner, each once.

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

type migTag struct{}

// delObserver watches the DELs a server answers: whose (the migration's, by its
// context's tag, or a command's), and which keys.
type delObserver struct {
	server int
	mu     *sync.Mutex
	dels   map[string][]string // key -> "mig@server" / "cmd@server" of each DEL that answered without error
	events *map[string][]string
}

func (o *delObserver) record(ctx context.Context, cmd goredis.Cmder) {
	who := "cmd"
	if r := ctx.Value(migTag{}); r != nil {
		who = "mig"
		if o.events != nil {
			o.mu.Lock()
			switch step, keys := fixtures.MoveStep(cmd); step {
			case "dump", "restore", "del", "abort", "settle":
				for _, k := range keys {
					(*o.events)[k] = append((*o.events)[k], fmt.Sprintf("run%v %s@%d: %v %v", r, step, o.server, cmd.Err(), firstVal(cmd)))
				}
			}
			o.mu.Unlock()
		}
	}
	step, keys := fixtures.MoveStep(cmd)
	if step != "del" || cmd.Err() != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range keys {
		o.dels[k] = append(o.dels[k], who+"@"+strconv.Itoa(o.server))
	}
}

// hook is o as a shard client's hook.
func (o *delObserver) hook() fixtures.SendHook {
	return fixtures.SendHook{After: func(ctx context.Context, cmds []goredis.Cmder) {
		for _, c := range cmds {
			o.record(ctx, c)
		}
	}}
}

// TestReshardConcurrentCutResume runs, for several seeds, a migration cut
// at random moments (timers, and in the rate limiter's wait) and resumed,
// while a goroutine reads, writes and deletes keys through the client.
func TestReshardConcurrentCutResume(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { concurrentCutResume(t, seed) })
	}
}

func concurrentCutResume(t *testing.T, seed int64) {
	variant := int(seed)
	w := fixtures.CutFixture(t, seed, variant, 1500)
	rng := rand.New(rand.NewSource(seed * 7919))
	var mu sync.Mutex
	dels := map[string][]string{}
	events := map[string][]string{}
	addrs := map[string]int{}
	for i, s := range w.Shards {
		addrs[s.Addr] = i
	}
	w.C.OnNewNode(func(node *goredis.Client) {
		node.AddHook((&delObserver{server: addrs[node.Options().Addr], mu: &mu, dels: dels, events: &events}).hook())
	})

	// The application: one goroutine, its own seeded choices.
	stop := make(chan struct{})
	appDone := make(chan struct{})
	var appErr error
	var deleted []string
	appRng := rand.New(rand.NewSource(seed))
	go func() {
		defer close(appDone)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			k := w.Keys[appRng.Intn(len(w.Keys))]
			v, ok := w.Want[k]
			var err error
			switch op := appRng.Intn(10); {
			case !ok:
				continue
			case op < 4:
				err = w.C.Get(ctx, k).Err()
				if err == goredis.Nil || (err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")) {
					err = nil
				}
			case op < 6:
				v.Kind, v.Str, v.TTL = "string", "app"+strconv.Itoa(n), 0
				err = w.C.Set(ctx, k, v.Str, 0).Err()
			case op < 7:
				err = w.C.Del(ctx, k).Err()
				delete(w.Want, k)
				deleted = append(deleted, k)
			case v.Kind == "hash":
				v.Hash["a"+strconv.Itoa(n)] = "x"
				err = w.C.HSet(ctx, k, "a"+strconv.Itoa(n), "x").Err()
			case v.Kind == "list":
				v.List = append(v.List, "a"+strconv.Itoa(n))
				err = w.C.RPush(ctx, k, "a"+strconv.Itoa(n)).Err()
			default:
				err = w.C.Exists(ctx, k).Err()
			}
			if err != nil {
				appErr = fmt.Errorf("op %d on %s: %w", n, k, err)
				return
			}
			time.Sleep(time.Duration(appRng.Intn(300)) * time.Microsecond)
		}
	}()

	var runs [][]shardedredis.ShardProgress
	var cp *shardedredis.Checkpoint
	for r := 0; ; r++ {
		opt := shardedredis.MigrateOptions{BatchSize: 5 + rng.Intn(40), Parallelism: 1 + rng.Intn(3), InFlight: 1 + rng.Intn(3), Resume: cp}
		if rng.Intn(2) == 0 {
			opt.KeysPerSecond = float64(2000 + rng.Intn(4000))
		}
		m, err := w.C.NewMigration(opt)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(context.WithValue(ctx, migTag{}, r+1))
		if r < 4 {
			time.AfterFunc(time.Duration(5+rng.Intn(60))*time.Millisecond, cancel)
		}
		err = m.Run(runCtx)
		cancel()
		runs = append(runs, m.Progress())
		fixtures.CheckRunCounts(t, "run "+strconv.Itoa(r+1), m.Progress())
		if err == nil {
			break
		}
		if err != context.Canceled {
			t.Fatalf("run %d: %v", r+1, err)
		}
		for _, p := range m.Progress() {
			if p.Failed != 0 {
				t.Errorf("run %d, %s failed %d after a cancel: %v", r+1, p.Shard, p.Failed, p.Failures)
			}
		}
		cp = m.Checkpoint()
		if r > 8 {
			t.Fatal("too many runs")
		}
	}
	close(stop)
	<-appDone
	if appErr != nil {
		t.Fatal(appErr)
	}
	var counted int64
	for _, progress := range runs {
		for _, p := range progress {
			counted += p.Moved + p.OnNewOwner
		}
	}
	migMoves, cmdMoves := 0, 0
	mu.Lock()
	for _, k := range w.Keys {
		var on []string
		for _, d := range dels[k] {
			if d == "mig@"+strconv.Itoa(w.From[k]) || d == "cmd@"+strconv.Itoa(w.From[k]) {
				on = append(on, d)
			}
		}
		if w.From[k] == w.To[k] {
			if len(on) > 0 && !slices.Contains(deleted, k) {
				t.Errorf("%s does not change owner, yet DELs %v on its owner", k, on)
			}
			continue
		}
		switch {
		case len(on) == 1 && strings.HasPrefix(on[0], "mig"):
			migMoves++
		case len(on) == 1:
			cmdMoves++
		default:
			t.Errorf("%s (changes owner %d -> %d): DELs on its old owner %v, want one; events %q", k, w.From[k], w.To[k], on, events[k])
		}
	}
	mu.Unlock()
	t.Logf("%d runs; %d keys change owner: %d moved by the runs (they count %d), %d by commands; %d deleted by the app",
		len(runs), w.Moving, migMoves, counted, cmdMoves, len(deleted))
	if counted != int64(migMoves) {
		t.Errorf("the runs count %d moves, their DELs removed %d old copies", counted, migMoves)
	}
	if migMoves+cmdMoves != w.Moving {
		t.Errorf("%d + %d keys moved, want the %d that change owner", migMoves, cmdMoves, w.Moving)
	}
	w.CheckFinal(t)
}

func firstVal(cmd goredis.Cmder) string {
	switch c := cmd.(type) {
	case *goredis.IntCmd:
		return strconv.FormatInt(c.Val(), 10)
	case *goredis.DurationCmd:
		return c.Val().String()
	}
	return ""
}
