package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// recorder is a Backend that records its calls, and fails the call named
// in failAt once.
type recorder struct {
	mu     sync.Mutex
	calls  []string
	failAt string
}

func (r *recorder) record(call string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	if call == r.failAt {
		r.failAt = ""
		return errors.New("injected failure at " + call)
	}
	return nil
}

func (r *recorder) Apply(_ context.Context, st State) error {
	return r.record(fmt.Sprintf("apply %d %s", st.Epoch, st.Step))
}
func (r *recorder) DropStale(_ context.Context, st State) error {
	return r.record(fmt.Sprintf("dropstale %d", st.Epoch))
}
func (r *recorder) Fence(_ context.Context, st State) error {
	return r.record(fmt.Sprintf("fence %d at %d", st.Epoch, st.MovingEpoch()))
}
func (r *recorder) Migrate(_ context.Context, st State, progress func(Progress)) error {
	if progress != nil {
		progress(Progress{Scanned: 10, Moved: 3, Sources: 2, Done: 2})
	}
	return r.record(fmt.Sprintf("migrate %d", st.Epoch))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

var (
	listL = []Shard{{Name: "a", Addr: "10.0.0.1:6379"}, {Name: "b", Addr: "10.0.0.2:6379"}}
	listT = []Shard{{Name: "a", Addr: "10.0.0.1:6379"}, {Name: "b", Addr: "10.0.0.2:6379"}, {Name: "c", Addr: "10.0.0.3:6379", Weight: 2}}
)

func TestReshardSteps(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	if _, err := Reshard(ctx, store, &recorder{}, listT, DriverOptions{}); !errors.Is(err, ErrNoState) {
		t.Fatalf("Reshard of an empty store: %v, want ErrNoState", err)
	}
	if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
		t.Fatal(err)
	}
	b := &recorder{}
	var progress []Progress
	final, err := Reshard(ctx, store, b, listT, DriverOptions{Progress: func(p Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"apply 2 preparing", "dropstale 2", "fence 2 at 3", "apply 3 moving", "migrate 3", "apply 4 stable"}
	if got := b.take(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if final.Epoch != 4 || final.Step != Stable || !slices.Equal(final.Shards, listT) || final.Change != "" || final.Target != nil {
		t.Errorf("final state %+v", final)
	}
	if len(progress) != 1 || progress[0] != (Progress{Scanned: 10, Moved: 3, Sources: 2, Done: 2}) {
		t.Errorf("progress %+v", progress)
	}
	// The same target again changes nothing.
	if again, err := Reshard(ctx, store, b, listT, DriverOptions{}); err != nil || again.Epoch != 4 || len(b.take()) != 0 {
		t.Errorf("Reshard to the current list: %+v, %v", again, err)
	}
}

func TestReshardResumeAfterFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	for _, failAt := range []string{"dropstale 2", "fence 2 at 3", "apply 3 moving", "migrate 3"} {
		t.Run(failAt, func(t *testing.T) {
			store := &MemStore{}
			if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
				t.Fatal(err)
			}
			b := &recorder{failAt: failAt}
			if _, err := Reshard(ctx, store, b, listT, DriverOptions{}); err == nil {
				t.Fatalf("Reshard with a failure at %s: %v", failAt, err)
			}
			mid, _, _ := store.Load(ctx)
			// Another target is refused while the change is in progress.
			var busy *ChangeInProgressError
			if _, err := Reshard(ctx, store, b, listL[:1], DriverOptions{}); !errors.As(err, &busy) || busy.Change != mid.Change {
				t.Fatalf("Reshard to another list mid-change: %v", err)
			}
			b.take()
			final, err := Resume(ctx, store, b, DriverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if final.Step != Stable || !slices.Equal(final.Shards, listT) || final.Epoch != 4 {
				t.Errorf("final %+v", final)
			}
			calls := b.take()
			if calls[len(calls)-1] != "apply 4 stable" || !slices.Contains(calls, "migrate 3") {
				t.Errorf("resume calls %q", calls)
			}
			if mid.Step == Preparing && !slices.Contains(calls, "fence 2 at 3") {
				t.Errorf("resumed from Preparing without fencing: %q", calls)
			}
		})
	}
}

func TestDriverLockExcludes(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
		t.Fatal(err)
	}
	lease, err := store.Lock(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Reshard(short, store, &recorder{}, listT, DriverOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Reshard while another driver holds the lock: %v", err)
	}
	if st, _, _ := store.Load(ctx); st.Epoch != 1 {
		t.Errorf("the state moved to %+v while another driver held the lock", st)
	}
	_ = lease.Unlock(ctx)
}

func TestReshardBadTarget(t *testing.T) {
	for _, target := range [][]Shard{nil, {{Name: "", Addr: "x:1"}}, {{Name: "a", Addr: "x:1"}, {Name: "a", Addr: "x:2"}}, {{Name: "a", Addr: "x:1", Weight: -1}}} {
		if _, err := Reshard(context.Background(), &MemStore{}, &recorder{}, target, DriverOptions{}); !errors.Is(err, ErrInvalidState) {
			t.Errorf("Reshard(%v): %v, want ErrInvalidState", target, err)
		}
	}
}

func TestMemberFollows(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	if _, err := Join(ctx, store, &recorder{}, MemberOptions{}); !errors.Is(err, ErrNoState) {
		t.Fatalf("Join of an empty store without Initial: %v", err)
	}
	b := &recorder{}
	m, err := Join(ctx, store, b, MemberOptions{Initial: listL})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := b.take(); !slices.Equal(got, []string{"apply 1 stable"}) {
		t.Errorf("Join applied %q", got)
	}
	// A second member with another Initial takes the stored list.
	b2 := &recorder{}
	m2, err := Join(ctx, store, b2, MemberOptions{Initial: listT})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if st := m2.State(); !slices.Equal(st.Shards, listL) {
		t.Errorf("second member on %v, want the stored list", st.Shards)
	}
	if _, err := Reshard(ctx, store, &recorder{}, listT, DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, mm := range []*Member{m, m2} {
		if err := mm.WaitEpoch(wctx, 4); err != nil {
			t.Fatal(err)
		}
		if st := mm.State(); st.Epoch != 4 || !slices.Equal(st.Shards, listT) || mm.Err() != nil {
			t.Errorf("member at %+v (%v)", st, mm.Err())
		}
	}
	// Every applied epoch is newer than the one before (states may be
	// merged, never repeated or reordered).
	calls := b.take()
	if calls[len(calls)-1] != "apply 4 stable" {
		t.Errorf("member applied %q", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] <= calls[i-1] {
			t.Errorf("member applied %q: not in epoch order", calls)
		}
	}
}

func TestStateValidate(t *testing.T) {
	good := State{Epoch: 2, Step: Moving, Change: "c", Shards: listL, Target: listT}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]State{
		"epoch 0":          {Step: Stable, Shards: listL},
		"unknown step":     {Epoch: 1, Step: "sideways", Shards: listL},
		"stable target":    {Epoch: 1, Step: Stable, Shards: listL, Target: listT},
		"moving no change": {Epoch: 1, Step: Moving, Shards: listL, Target: listT},
		"moving no target": {Epoch: 1, Step: Moving, Change: "c", Shards: listL},
		"empty address":    {Epoch: 1, Step: Stable, Shards: []Shard{{Name: "a"}}},
		"negative DB":      {Epoch: 1, Step: Stable, Shards: []Shard{{Name: "a", Addr: "x:1", DB: -1}}},
	} {
		if err := st.Validate(); !errors.Is(err, ErrInvalidState) {
			t.Errorf("%s: %v, want ErrInvalidState", name, err)
		}
	}
}

func TestStateValidateCluster(t *testing.T) {
	cluster := []Shard{{Name: "cluster", Addr: "10.0.0.1:7000, 10.0.0.2:7000", Cluster: true}}
	if got := cluster[0].Seeds(); !slices.Equal(got, []string{"10.0.0.1:7000", "10.0.0.2:7000"}) {
		t.Errorf("Seeds() = %q", got)
	}
	if got := listL[0].Seeds(); got != nil {
		t.Errorf("Seeds() of a server = %q, want nil", got)
	}
	for _, st := range []State{
		{Epoch: 2, Step: Preparing, Change: "c", Shards: listL, Target: cluster},
		{Epoch: 3, Step: Moving, Change: "c", Shards: listL, Target: cluster},
		{Epoch: 4, Step: Stable, Shards: cluster},
	} {
		if err := st.Validate(); err != nil {
			t.Errorf("%+v: %v", st, err)
		}
	}
	for want, st := range map[string]State{
		`fleet: invalid state: target[1] ("cluster"): a Redis Cluster shard in a list of 2 shards (a cluster is the whole list)`: {
			Epoch: 2, Step: Preparing, Change: "c", Shards: listL, Target: append([]Shard{{Name: "x", Addr: "x:1"}}, cluster...)},
		`fleet: invalid state: shards[0] ("cluster"): a Redis Cluster shard with DB 1 (a cluster has DB 0 only)`: {
			Epoch: 1, Step: Stable, Shards: []Shard{{Name: "cluster", Addr: "10.0.0.1:7000", DB: 1, Cluster: true}}},
		`fleet: invalid state: shards[0] ("cluster"): an empty seed address in "10.0.0.1:7000,"`: {
			Epoch: 1, Step: Stable, Shards: []Shard{{Name: "cluster", Addr: "10.0.0.1:7000,", Cluster: true}}},
		`fleet: invalid state: step "preparing" from a Redis Cluster shard ("cluster"): keys never leave a cluster`: {
			Epoch: 5, Step: Preparing, Change: "c", Shards: cluster, Target: listT},
	} {
		if err := st.Validate(); !errors.Is(err, ErrInvalidState) || err.Error() != want {
			t.Errorf("Validate() = %v, want %s", err, want)
		}
	}
}

// A fleet moves into a Redis Cluster by the steps of any resharding, and
// is not resharded out of it.
func TestReshardIntoCluster(t *testing.T) {
	ctx := context.Background()
	store := &MemStore{}
	if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
		t.Fatal(err)
	}
	cluster := []Shard{{Name: "cluster", Addr: "10.0.0.1:7000,10.0.0.2:7000", Cluster: true}}
	b := &recorder{}
	st, err := Reshard(ctx, store, b, cluster, DriverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != 4 || st.Step != Stable || !slices.Equal(st.Shards, cluster) {
		t.Errorf("final state %+v", st)
	}
	want := []string{"apply 2 preparing", "dropstale 2", "fence 2 at 3", "apply 3 moving", "migrate 3", "apply 4 stable"}
	if got := b.take(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	_, err = Reshard(ctx, store, b, listT, DriverOptions{})
	const msg = `fleet: Reshard: fleet: invalid state: step "preparing" from a Redis Cluster shard ("cluster"): keys never leave a cluster`
	if !errors.Is(err, ErrInvalidState) || err.Error() != msg {
		t.Errorf("Reshard out of the cluster: %v, want %s", err, msg)
	}
	if st, _, _ := store.Load(ctx); st.Epoch != 4 || !slices.Equal(st.Shards, cluster) || len(b.take()) != 0 {
		t.Errorf("after the refusal: %+v", st)
	}
}

// checking is a recorder that checks targets (TargetChecker).
type checking struct{ recorder }

func (c *checking) CheckTarget(_ context.Context, st State) error {
	return c.record(fmt.Sprintf("check %d %s", st.Epoch, st.Step))
}

// A backend's CheckTarget runs on the Preparing state before it is
// stored: when it fails, Reshard stores nothing and applies nothing, and
// the fleet stays Stable on its list; when it passes, the change runs.
func TestReshardChecksTarget(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	store := &MemStore{}
	if _, err := store.Swap(ctx, 0, State{Epoch: 1, Step: Stable, Shards: listL}); err != nil {
		t.Fatal(err)
	}
	b := &checking{recorder{failAt: "check 2 preparing"}}
	st, err := Reshard(ctx, store, b, listT, DriverOptions{})
	if err == nil || !strings.Contains(err.Error(), "injected failure at check 2 preparing") || st.Epoch != 1 || st.Step != Stable {
		t.Fatalf("Reshard with a failing check: %+v, %v; want the check's error, Stable epoch 1", st, err)
	}
	if got, want := b.take(), []string{"check 2 preparing"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if stored, _, _ := store.Load(ctx); stored.Epoch != 1 || stored.Step != Stable {
		t.Errorf("stored %+v; want nothing new", stored)
	}
	if _, err := Reshard(ctx, store, b, listT, DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"check 2 preparing", "apply 2 preparing", "dropstale 2", "fence 2 at 3", "apply 3 moving", "migrate 3", "apply 4 stable"}
	if got := b.take(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// A typed nil store (a (*MemStore)(nil) given as a Store) is refused as a
// nil one, by Join and by Reshard, not dereferenced.
func TestTypedNilStore(t *testing.T) {
	var store *MemStore
	if _, err := Join(context.Background(), store, &recorder{}, MemberOptions{Initial: listL}); err == nil || err.Error() != "fleet: Join: nil store (true) or backend (false)" {
		t.Errorf("Join with a typed nil store: %v", err)
	}
	if _, err := Reshard(context.Background(), store, &recorder{}, listT, DriverOptions{}); err == nil || err.Error() != "fleet: nil store (true) or backend (false)" {
		t.Errorf("Reshard with a typed nil store: %v", err)
	}
}
