package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DriverOptions configure Reshard and Resume.
type DriverOptions struct {
	// LockTTL is the lease of the driver lock (Store.Lock): if this
	// process stops renewing it for that long (a crash, a pause), another
	// driver may take over with Resume. 0 means 10 s, a negative one is
	// an error.
	LockTTL time.Duration
	// Progress, when not nil, receives the migration's progress.
	Progress func(Progress)
}

// ChangeInProgressError is returned by Reshard when a resharding to
// another list is in progress: finish it first (Resume).
type ChangeInProgressError struct {
	Change string // its ID
	Step   Step
	Target []Shard
}

func (e *ChangeInProgressError) Error() string {
	return fmt.Sprintf("fleet: resharding %s to %d shards is in progress (step %s); resume it first", e.Change, len(e.Target), e.Step)
}

// Reshard drives the fleet in store from its shard list to target, with
// backend (this process's sharded client) doing the work on the servers:
// it takes the driver lock, stores Preparing, removes stale copies
// (Backend.DropStale), fences the sources (Backend.Fence), stores Moving,
// runs the migration (Backend.Migrate), and stores Stable(target). Every
// process of the fleet (Join) follows each step; with a fenced backend
// none needs to be waited for, since the servers refuse the connections of
// a process that is behind (see the package documentation). With an
// Unfenced backend, the work of the Preparing and of the Moving step
// starts only once every member registered in the store has reported the
// step's epoch or its lease has run out (Store.Members, every 50 ms).
//
// It returns the final state. A resharding to the same target already in
// progress is resumed; one to another target is a *ChangeInProgressError;
// a target equal to the current list changes nothing. A target that is a
// Redis Cluster shard alone (Shard.Cluster) moves the fleet into that
// cluster by the same steps (see the package documentation, "The move
// into a Redis Cluster"); a fleet on a cluster cannot be resharded
// (ErrInvalidState: keys never leave a cluster). If ctx ends or the
// lock's lease is lost, it stops where it is and returns the error: the
// fleet stays at that step, safe, and Resume (here or in another process)
// continues it.
func Reshard(ctx context.Context, store Store, backend Backend, target []Shard, opt DriverOptions) (State, error) {
	if err := checkList("target", target); err != nil {
		return State{}, fmt.Errorf("fleet: Reshard: %w: %v", ErrInvalidState, err)
	}
	return drive(ctx, store, backend, target, opt)
}

// Resume drives the resharding in progress in store to its end, as
// Reshard does from the step where it stands; without one it returns the
// current state.
func Resume(ctx context.Context, store Store, backend Backend, opt DriverOptions) (State, error) {
	return drive(ctx, store, backend, nil, opt)
}

func drive(ctx context.Context, store Store, backend Backend, target []Shard, opt DriverOptions) (State, error) {
	if isNil(store) || isNil(backend) {
		return State{}, fmt.Errorf("fleet: nil store (%v) or backend (%v)", isNil(store), isNil(backend))
	}
	if err := nonNegative("Reshard", "DriverOptions.LockTTL", opt.LockTTL); err != nil {
		return State{}, err
	}
	if opt.LockTTL == 0 {
		opt.LockTTL = 10 * time.Second
	}
	lease, err := store.Lock(ctx, opt.LockTTL)
	if err != nil {
		return State{}, fmt.Errorf("fleet: taking the driver lock: %w", err)
	}
	defer func() { _ = lease.Unlock(context.Background()) }()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lease.Lost():
			cancel(errors.New("fleet: the driver lock's lease was lost"))
		case <-ctx.Done():
		}
	}()
	stop := func(err error) error {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		return err
	}

	st, rev, err := store.Load(ctx)
	switch {
	case err != nil:
		return State{}, stop(fmt.Errorf("fleet: loading the state: %w", err))
	case rev == 0:
		return State{}, ErrNoState
	}
	if target != nil {
		switch {
		case st.Step == Stable && slices.Equal(st.Shards, target):
			return st, nil
		case st.Step == Stable:
			next := st.next(target, newChangeID())
			if err := next.Validate(); err != nil { // out of a Redis Cluster
				return st, fmt.Errorf("fleet: Reshard: %w", err)
			}
			if tc, ok := backend.(TargetChecker); ok {
				if err := tc.CheckTarget(ctx, next); err != nil {
					return st, stop(fmt.Errorf("fleet: Reshard: the target cannot be resharded to, nothing is stored: %w", err))
				}
			}
			if rev, err = store.Swap(ctx, rev, next); err != nil {
				return st, stop(fmt.Errorf("fleet: storing %s: %w", next.Step, err))
			}
			st = next
		case !slices.Equal(st.Target, target):
			return st, &ChangeInProgressError{Change: st.Change, Step: st.Step, Target: st.Target}
		}
	}
	for st.Step != Stable {
		// This process follows its own steps at once (Apply of an epoch
		// already applied does nothing).
		if err := backend.Apply(ctx, st); err != nil {
			return st, stop(fmt.Errorf("fleet: applying epoch %d (%s): %w", st.Epoch, st.Step, err))
		}
		if _, ok := backend.(Unfenced); ok {
			if err := waitMembers(ctx, store, st.Epoch); err != nil {
				return st, stop(err)
			}
		}
		switch st.Step {
		case Preparing:
			if err := backend.DropStale(ctx, st); err != nil {
				return st, stop(fmt.Errorf("fleet: removing stale copies: %w", err))
			}
			if err := backend.Fence(ctx, st); err != nil {
				return st, stop(fmt.Errorf("fleet: fencing the sources: %w", err))
			}
		case Moving:
			if err := backend.Migrate(ctx, st, opt.Progress); err != nil {
				return st, stop(fmt.Errorf("fleet: migration: %w", err))
			}
		}
		next := st.next(nil, "")
		if rev, err = store.Swap(ctx, rev, next); err != nil {
			return st, stop(fmt.Errorf("fleet: storing %s: %w", next.Step, err))
		}
		st = next
	}
	if err := backend.Apply(ctx, st); err != nil {
		return st, stop(fmt.Errorf("fleet: applying epoch %d (%s): %w", st.Epoch, st.Step, err))
	}
	return st, nil
}

// memberPoll is how often waitMembers lists the members.
const memberPoll = 50 * time.Millisecond

// waitMembers waits until every member registered in store has reported
// epoch or a later one (a member whose lease ran out is no longer listed),
// until ctx ends.
func waitMembers(ctx context.Context, store Store, epoch uint64) error {
	for {
		members, err := store.Members(ctx)
		if err != nil {
			return fmt.Errorf("fleet: listing the members: %w", err)
		}
		var behind []string
		for id, e := range members {
			if e < epoch {
				behind = append(behind, fmt.Sprintf("%s at %d", id, e))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			slices.Sort(behind)
			return fmt.Errorf("fleet: waiting for the members to apply epoch %d (behind: %s): %w", epoch, strings.Join(behind, ", "), ctx.Err())
		case <-time.After(memberPoll):
		}
	}
}

func newChangeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// nonNegative returns an error naming option and its value d when d is
// negative (0 means the option's default).
func nonNegative(fn, option string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("fleet: %s: %s %v, want 0 (the default) or more", fn, option, d)
	}
	return nil
}
