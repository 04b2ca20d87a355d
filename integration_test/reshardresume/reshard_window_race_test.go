package reshardresume_test

// EndResharding and AbandonResharding racing with Run, at
// timed moments, and a new BeginResharding after a cut.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestReshardEndAbandonDuringRun: while Run runs, EndResharding (must refuse
// with ErrMigrationIncomplete until Run has moved everything) and, for half
// the seeds, AbandonResharding at a random moment. Run must return nil only
// once every key that changes owner is on its new owner alone.
func TestReshardEndAbandonDuringRun(t *testing.T) {
	for seed := int64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			w := fixtures.CutFixture(t, seed, int(seed), 800)
			rng := rand.New(rand.NewSource(seed))
			abandon := seed%2 == 0
			m, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 5 + rng.Intn(20), Parallelism: 1 + rng.Intn(3), InFlight: 1 + rng.Intn(3)})
			if err != nil {
				t.Fatal(err)
			}
			runErr := make(chan error, 1)
			go func() { runErr <- m.Run(ctx) }()
			at := time.Duration(rng.Intn(40)) * time.Millisecond
			time.Sleep(at)
			endErr := w.C.EndResharding()
			var abandonErr error
			if abandon {
				abandonErr = w.C.AbandonResharding()
			}
			err = <-runErr
			t.Logf("at %v: EndResharding %v; abandon %v (%v); Run %v", at, endErr, abandon, abandonErr, err)
			if endErr != nil && !errors.Is(endErr, shardedredis.ErrMigrationIncomplete) {
				t.Errorf("EndResharding during Run: %v", endErr)
			}
			on := fixtures.KeyHolders(t, w.Direct, w.Keys)
			left := 0
			for _, k := range w.Keys {
				if len(on[k]) != 1 || on[k][0] != w.To[k] {
					left++
				}
			}
			if endErr == nil && left > 0 {
				t.Errorf("EndResharding returned nil during Run, with %d keys not on their new owner alone", left)
			}
			if err == nil && left > 0 {
				t.Errorf("Run returned nil with %d keys not on their new owner alone", left)
			}
			if err == nil && !abandon {
				w.CheckFinal(t)
			}
			if !abandon && err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestReshardBeginAfterCut: a run is cut, the window abandoned and a new one
// begun (same target): the old checkpoint must be refused (ErrCheckpoint),
// and a new migration must move every key that is still on an old owner.
func TestReshardBeginAfterCut(t *testing.T) {
	w := fixtures.CutFixture(t, 5, 0, 600)
	m, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 7, InFlight: 3, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := &fixtures.CutAt{Name: "restore", Nth: 5}
	w.C.AddHook(h.Hook())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.Arm(cancel)
	if err := m.Run(runCtx); err != context.Canceled {
		t.Fatalf("run 1: %v", err)
	}
	h.Arm(nil)
	cp := m.Checkpoint()
	if err := w.C.AbandonResharding(); err != nil {
		t.Fatal(err)
	}
	// The keys not moved are on their old owners, unreachable: a new window
	// from the old list does not bring them back, so begin from the new
	// list to the new list again is a no-op; here we only check refusals.
	if err := w.C.BeginResharding(w.Next[:len(w.Next)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.C.NewMigration(shardedredis.MigrateOptions{Resume: cp}); !errors.Is(err, shardedredis.ErrCheckpoint) {
		t.Errorf("the old window's checkpoint in a new window: %v, want ErrCheckpoint", err)
	}
	m2, err := w.C.NewMigration(shardedredis.MigrateOptions{BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(ctx); err != nil {
		t.Errorf("window 2's migration: %v", err)
	}
	if w.C.Window() != nil {
		t.Error("window 2 still open")
	}
}
