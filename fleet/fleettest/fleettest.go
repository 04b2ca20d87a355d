// Package fleettest is the conformance suite of fleet.Store: every store
// (fleet.MemStore, the etcd store of module
// github.com/shardedcache/shardedcache/fleet/etcdstore, any other) runs
// TestStore from its own tests and must pass it.
//
// The suite checks the contract the resharding protocol relies on:
//
//   - Load of an empty store gives the zero State and Revision 0.
//   - Swap is a compare-and-swap: it stores only over the revision it is
//     given (0: nothing stored), fails with fleet.ErrConflict otherwise
//     (stale, future and concurrent revisions: of several swappers from
//     one revision exactly one wins), refuses an invalid State with
//     fleet.ErrInvalidState and stores nothing then; stored States come
//     back exactly, unaffected by later changes to the caller's slices.
//   - Watch delivers the States stored after its revision in order
//     (merged or not, never an older one after a newer one, always ending
//     with the newest), closes its channel when its context ends, and
//     leaves no goroutine behind.
//   - Lock excludes a second holder until Unlock, keeps the lock after the
//     context it was taken with ends, closes Lost at Unlock, returns
//     ctx.Err() when the wait ends with its context, and a waiter that gave
//     up does not hold up the next holder.
//   - Register puts a member under a lease whose ValidUntil is the TTL
//     from the call's start at the earliest and from its end at the
//     latest; Members lists exactly the live members and the epoch each
//     reported last; the lease is renewed past its TTL; Close removes the
//     member, closes Lost, zeroes ValidUntil and makes Report fail with
//     fleet.ErrLeaseLost; registering an ID again moves it to the new
//     lease; a bad ID or TTL is refused.
//
// Every subtest gets a store of its own from newStore, which must register
// the store's clean-up with t.Cleanup; after that clean-up the suite checks
// with goleak that the store left no goroutine running.
package fleettest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/fleet"
)

// Timeouts of the suite. opTimeout bounds one call that should succeed;
// waitTimeout is how long a call that must block is given to show that it
// does (a store that wrongly lets it through fails within it); lockTTL is
// the lease of the locks taken, long enough that a waiter left behind by a
// store would block the next Lock past opTimeout.
const (
	opTimeout   = 10 * time.Second
	waitTimeout = 300 * time.Millisecond
	lockTTL     = 30 * time.Second
)

// TestStore runs the conformance suite on the stores newStore makes, one
// per subtest. newStore must return an empty store and register its
// clean-up (closing clients) with t.Cleanup.
func TestStore(t *testing.T, newStore func(t *testing.T) fleet.Store) {
	run := func(name string, test func(t *testing.T, s fleet.Store)) {
		t.Run(name, func(t *testing.T) {
			// Registered before newStore's clean-up, so it runs after it.
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
			test(t, newStore(t))
		})
	}
	run("LoadEmpty", testLoadEmpty)
	run("SwapAndLoad", testSwapAndLoad)
	run("SwapConflict", testSwapConflict)
	run("ConcurrentSwap", testConcurrentSwap)
	run("SwapInvalid", testSwapInvalid)
	run("Watch", testWatch)
	run("WatchFromZero", testWatchFromZero)
	run("WatchEndsWithContext", testWatchEndsWithContext)
	run("Lock", testLock)
	run("LockContext", testLockContext)
	run("Members", testMembers)
	run("MemberRenewed", testMemberRenewed)
	run("MemberRegisteredAgain", testMemberRegisteredAgain)
	run("RegisterInvalid", testRegisterInvalid)
}

// stableState is a valid Stable state at epoch (>= 1) with two shards,
// one of them with a DB and a weight.
func stableState(epoch uint64) fleet.State {
	return fleet.State{
		Epoch: epoch,
		Step:  fleet.Stable,
		Shards: []fleet.Shard{
			{Name: "a", Addr: "10.0.0.1:6379"},
			{Name: "b", Addr: "10.0.0.2:6379", DB: 2, Weight: 3},
		},
	}
}

// movingState is a valid Moving state at epoch, with every field set.
func movingState(epoch uint64) fleet.State {
	st := stableState(epoch)
	st.Step, st.Change = fleet.Moving, "0123456789abcdef"
	st.Target = append(st.Shards[:2:2], fleet.Shard{Name: "c", Addr: "10.0.0.3:6380", Weight: 1})
	return st
}

func opContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// swap stores next over rev and returns the new revision, which must be
// larger than rev.
func swap(t *testing.T, s fleet.Store, rev fleet.Revision, next fleet.State) fleet.Revision {
	t.Helper()
	got, err := s.Swap(opContext(t), rev, next)
	if err != nil {
		t.Fatalf("Swap(rev %d, epoch %d): %v", rev, next.Epoch, err)
	}
	if got <= rev {
		t.Fatalf("Swap(rev %d, epoch %d) = revision %d, want > %d", rev, next.Epoch, got, rev)
	}
	return got
}

// wantStored checks that s holds want at rev.
func wantStored(t *testing.T, s fleet.Store, want fleet.State, rev fleet.Revision) {
	t.Helper()
	got, gotRev, err := s.Load(opContext(t))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if gotRev != rev || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v at revision %d, want %+v at revision %d", got, gotRev, want, rev)
	}
}

// wantConflict checks that Swap(rev, next) fails with fleet.ErrConflict.
func wantConflict(t *testing.T, s fleet.Store, rev fleet.Revision, next fleet.State) {
	t.Helper()
	if got, err := s.Swap(opContext(t), rev, next); !errors.Is(err, fleet.ErrConflict) {
		t.Fatalf("Swap(stale rev %d) = %d, %v; want an error matching fleet.ErrConflict", rev, got, err)
	}
}

func testLoadEmpty(t *testing.T, s fleet.Store) {
	wantStored(t, s, fleet.State{}, 0)
}

func testSwapAndLoad(t *testing.T, s fleet.Store) {
	first := stableState(1)
	r1 := swap(t, s, 0, first)
	first.Shards[0].Name = "changed by the caller after Swap"
	wantStored(t, s, stableState(1), r1)

	r2 := swap(t, s, r1, movingState(2))
	wantStored(t, s, movingState(2), r2)
	loaded, _, err := s.Load(opContext(t))
	if err != nil {
		t.Fatal(err)
	}
	loaded.Target[2].Addr = "changed by the caller after Load"
	wantStored(t, s, movingState(2), r2)
}

func testSwapConflict(t *testing.T, s fleet.Store) {
	r1 := swap(t, s, 0, stableState(1))
	wantConflict(t, s, 0, stableState(5)) // something is stored now
	r2 := swap(t, s, r1, stableState(2))
	wantConflict(t, s, r1, stableState(5)) // stale
	wantConflict(t, s, r2+1000, stableState(5))
	wantConflict(t, s, -1, stableState(5))
	wantStored(t, s, stableState(2), r2)
}

// testConcurrentSwap lets several swappers race from one revision, twice:
// from 0 (nothing stored) and from a stored revision. Exactly one wins, the
// others get ErrConflict, and the winner's state is stored.
func testConcurrentSwap(t *testing.T, s fleet.Store) {
	const swappers = 4
	rev := fleet.Revision(0)
	for round := range 2 {
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			revs    [swappers]fleet.Revision
			errs    [swappers]error
			ctx     = opContext(t)
			initial = rev
		)
		for i := range swappers {
			wg.Go(func() {
				<-start
				revs[i], errs[i] = s.Swap(ctx, initial, stableState(uint64(10*round+i+1)))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: swappers %d and %d both won from revision %d", round, winner, i, initial)
			case err == nil:
				winner, rev = i, revs[i]
			case !errors.Is(err, fleet.ErrConflict):
				t.Fatalf("round %d: swapper %d: %v, want an error matching fleet.ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no swapper won from revision %d: %v", round, initial, errs)
		}
		if rev <= initial {
			t.Fatalf("round %d: winner's revision %d, want > %d", round, rev, initial)
		}
		wantStored(t, s, stableState(uint64(10*round+winner+1)), rev)
	}
}

func testSwapInvalid(t *testing.T, s fleet.Store) {
	invalid := stableState(1)
	invalid.Shards[1].Name = invalid.Shards[0].Name
	for _, bad := range []fleet.State{{}, invalid} {
		if got, err := s.Swap(opContext(t), 0, bad); !errors.Is(err, fleet.ErrInvalidState) {
			t.Fatalf("Swap(0, %+v) = %d, %v; want an error matching fleet.ErrInvalidState", bad, got, err)
		}
	}
	wantStored(t, s, fleet.State{}, 0)
	r1 := swap(t, s, 0, stableState(1))
	if got, err := s.Swap(opContext(t), r1, invalid); !errors.Is(err, fleet.ErrInvalidState) {
		t.Fatalf("Swap(%d, %+v) = %d, %v; want an error matching fleet.ErrInvalidState", r1, invalid, got, err)
	}
	wantStored(t, s, stableState(1), r1)
}

// history records what a test stored, by revision.
type history map[fleet.Revision]fleet.State

// receiveUntil reads ch until it delivers last, checking that the updates
// have no error, come in increasing revisions after from, and carry what
// h says was stored at their revision.
func (h history) receiveUntil(t *testing.T, ch <-chan fleet.Update, from, last fleet.Revision) {
	t.Helper()
	timeout := time.After(opTimeout)
	for {
		select {
		case u, ok := <-ch:
			stored, known := h[u.Revision]
			switch {
			case !ok:
				t.Fatalf("watch closed after revision %d, want it open until revision %d", from, last)
			case u.Err != nil:
				t.Fatalf("watch ended with an error after revision %d: %v", from, u.Err)
			case u.Revision <= from:
				t.Fatalf("watch delivered revision %d after revision %d", u.Revision, from)
			case !known:
				t.Fatalf("watch delivered %+v at revision %d, where nothing was stored", u.State, u.Revision)
			case !reflect.DeepEqual(u.State, stored):
				t.Fatalf("watch delivered %+v at revision %d, where %+v was stored", u.State, u.Revision, stored)
			}
			if u.Revision == last {
				return
			}
			from = u.Revision
		case <-timeout:
			t.Fatalf("watch did not deliver revision %d within %v (last delivered: %d)", last, opTimeout, from)
		}
	}
}

// wantClosed checks that ch closes once its context ended, delivering at
// most what was stored before (none of which is checked here).
func wantClosed(t *testing.T, ch <-chan fleet.Update) {
	t.Helper()
	timeout := time.After(opTimeout)
	for {
		select {
		case u, ok := <-ch:
			if !ok {
				return
			}
			if u.Err != nil {
				t.Fatalf("watch delivered an error after its context ended: %v", u.Err)
			}
		case <-timeout:
			t.Fatalf("watch channel still open %v after its context ended", opTimeout)
		}
	}
}

// testWatch watches from a stored revision while states are stored one
// after the other, then stops the watch, twice: the second time only the
// goroutines that the first watch left (client-wide ones a store starts
// once) are allowed to remain.
func testWatch(t *testing.T, s fleet.Store) {
	h := history{}
	rev := fleet.Revision(0)
	store := func(st fleet.State) {
		rev = swap(t, s, rev, st)
		h[rev] = st
	}
	store(stableState(1))
	var ignore goleak.Option
	for round := range 2 {
		ctx, cancel := context.WithCancel(opContext(t))
		from := rev
		ch := s.Watch(ctx, from)
		for i := range 3 {
			epoch := uint64(10*round + i + 2)
			if i%2 == 0 {
				store(stableState(epoch))
			} else {
				store(movingState(epoch))
			}
		}
		h.receiveUntil(t, ch, from, rev)
		// One more, stored while the watch is idle.
		from = rev
		store(stableState(uint64(10*round + 9)))
		h.receiveUntil(t, ch, from, rev)
		cancel()
		wantClosed(t, ch)
		if round == 0 {
			ignore = goleak.IgnoreCurrent()
		} else {
			goleak.VerifyNone(t, ignore)
		}
	}
}

// testWatchFromZero watches from revision 0 a store that already holds
// states, and one that holds nothing.
func testWatchFromZero(t *testing.T, s fleet.Store) {
	ctx := opContext(t)
	h := history{}
	empty := s.Watch(ctx, 0)
	r1 := swap(t, s, 0, stableState(1))
	h[r1] = stableState(1)
	r2 := swap(t, s, r1, movingState(2))
	h[r2] = movingState(2)
	h.receiveUntil(t, empty, 0, r2)
	h.receiveUntil(t, s.Watch(ctx, 0), 0, r2)
}

// testWatchEndsWithContext checks that a watch closes when its context
// ends: idle, with an update it could not hand over, and when the context
// ended before Watch was called.
func testWatchEndsWithContext(t *testing.T, s fleet.Store) {
	rev := swap(t, s, 0, stableState(1))
	fullCtx, cancelFull := context.WithCancel(opContext(t))
	full := s.Watch(fullCtx, 0) // never read until it is cancelled
	for epoch := range uint64(3) {
		rev = swap(t, s, rev, stableState(epoch+2))
	}
	idleCtx, cancelIdle := context.WithCancel(opContext(t))
	idle := s.Watch(idleCtx, rev)
	ended, cancelEnded := context.WithCancel(opContext(t))
	cancelEnded()
	wantClosed(t, s.Watch(ended, 0))

	select {
	case u := <-idle:
		t.Fatalf("watch from the newest revision %d delivered %+v", rev, u)
	case <-time.After(waitTimeout):
	}
	cancelIdle()
	wantClosed(t, idle)
	cancelFull()
	wantClosed(t, full)
}

func lock(t *testing.T, ctx context.Context, s fleet.Store) fleet.Lease {
	t.Helper()
	l, err := s.Lock(ctx, lockTTL)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed on a lock just taken")
	default:
	}
	return l
}

func unlock(t *testing.T, l fleet.Lease) {
	t.Helper()
	if err := l.Unlock(opContext(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost still open after Unlock returned")
	}
}

// wantLockBlocked checks that Lock waits while the lock is held, and
// returns ctx.Err() once its context ends.
func wantLockBlocked(t *testing.T, s fleet.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	l, err := s.Lock(ctx, lockTTL)
	if err == nil {
		l.Unlock(opContext(t))
		t.Fatal("a second Lock got the lock while it was held")
	}
	if !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Fatalf("Lock waiting past its deadline = %v, want ctx.Err() (%v)", err, ctx.Err())
	}
}

// testLock takes the lock, shows that others wait for it, hands it over
// through Unlock, twice: the second time only the goroutines that the first
// round left (client-wide ones a store starts once) may remain.
func testLock(t *testing.T, s fleet.Store) {
	var ignore goleak.Option
	for round := range 2 {
		// The lock outlives the context it was taken with.
		takeCtx, cancelTake := context.WithCancel(opContext(t))
		first := lock(t, takeCtx, s)
		cancelTake()
		wantLockBlocked(t, s)

		type result struct {
			l   fleet.Lease
			err error
		}
		next := make(chan result, 1)
		nextCtx := opContext(t)
		go func() {
			l, err := s.Lock(nextCtx, lockTTL)
			next <- result{l, err}
		}()
		select {
		case r := <-next:
			t.Fatalf("a waiting Lock returned (%v) while the lock was held", r.err)
		case <-time.After(waitTimeout):
		}
		select {
		case <-first.Lost():
			t.Fatal("Lost closed while the lock was held")
		default:
		}
		unlock(t, first)
		r := <-next
		if r.err != nil {
			t.Fatalf("the waiting Lock after Unlock: %v", r.err)
		}
		unlock(t, r.l)
		if round == 0 {
			ignore = goleak.IgnoreCurrent()
		} else {
			goleak.VerifyNone(t, ignore)
		}
	}
}

// testLockContext checks that waiters whose context ended leave nothing
// behind: once the holder unlocks, the lock is free at once (a store that
// left a waiter's claim until its lease expires fails: lockTTL is longer
// than opTimeout).
func testLockContext(t *testing.T, s fleet.Store) {
	first := lock(t, opContext(t), s)
	for range 2 {
		wantLockBlocked(t, s)
	}
	unlock(t, first)
	unlock(t, lock(t, opContext(t), s))
}
