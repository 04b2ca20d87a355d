package fleetstep

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/fleet"
)

func stable(epoch uint64) fleet.State {
	return fleet.State{Epoch: epoch, Step: fleet.Stable, Shards: []fleet.Shard{{Name: "a", Addr: "127.0.0.1:6379"}}}
}

// Apply runs a step only forward, hands it the state applied before, and
// records st only when the step succeeds; an invalid state is refused
// before the step.
func TestApplyForwardOnly(t *testing.T) {
	var a Applied
	var seen []uint64 // the prev epochs the steps were given
	step := func(err error) func(fleet.State) error {
		return func(prev fleet.State) error { seen = append(seen, prev.Epoch); return err }
	}
	errStep := errors.New("step failed")
	for _, c := range []struct {
		st      fleet.State
		err     error
		wantErr error
		epoch   uint64
	}{
		{stable(2), nil, nil, 2},
		{stable(2), nil, nil, 2},             // not newer: no step
		{stable(1), nil, nil, 2},             // older: no step
		{stable(5), errStep, errStep, 2},     // the step fails: nothing recorded
		{stable(5), nil, nil, 5},             // again, now it succeeds
		{fleet.State{Epoch: 9}, nil, nil, 5}, // invalid: refused (checked below)
	} {
		err := a.Apply(c.st, step(c.err))
		if c.st.Validate() != nil {
			if !errors.Is(err, fleet.ErrInvalidState) {
				t.Fatalf("Apply(%+v) = %v, want fleet.ErrInvalidState", c.st, err)
			}
		} else if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
			t.Fatalf("Apply(epoch %d) = %v, want %v", c.st.Epoch, err, c.wantErr)
		}
		if a.Epoch() != c.epoch {
			t.Fatalf("after Apply(epoch %d): Epoch() = %d, want %d", c.st.Epoch, a.Epoch(), c.epoch)
		}
	}
	if want := []uint64{0, 2, 2}; len(seen) != len(want) || seen[0] != 0 || seen[1] != 2 || seen[2] != 2 {
		t.Fatalf("the steps were given prev epochs %v, want %v", seen, want)
	}
}

// Wait returns at once when its condition holds, once a step makes it
// hold, ErrWaited when its bound runs out, and ctx's error when ctx ends.
func TestWait(t *testing.T) {
	defer goleak.VerifyNone(t)
	var a Applied
	ctx := context.Background()
	if err := a.Wait(ctx, time.Hour, func() bool { return true }); err != nil {
		t.Fatalf("Wait with its condition true: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Wait(ctx, time.Hour, func() bool { return a.Epoch() >= 3 }) }()
	for _, e := range []uint64{2, 3} {
		if err := a.Apply(stable(e), func(fleet.State) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait for epoch 3 after it was applied: %v", err)
	}
	if err := a.Wait(ctx, time.Millisecond, func() bool { return false }); !errors.Is(err, ErrWaited) {
		t.Fatalf("Wait past its bound: %v, want ErrWaited", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Wait(cctx, time.Hour, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with its context ended: %v, want context.Canceled", err)
	}
}
