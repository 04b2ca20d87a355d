package shardcore_test

// What counts against a shard: Health.Classify's three classes, and the
// caller's cancel or deadline, which never count, whatever error the client
// made of them. Finish names the shard in every error that is not the
// server's answer.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/internal/shardcore"
)

// Errors of the classifier below.
var (
	errAnswer = errors.New("WRONGTYPE (test)")               // the server's answer
	errLocal  = errors.New("connection pool timeout (test)") // the caller's full pool
	errReadTO = errors.New("read tcp: i/o timeout (test)")   // a read timeout
)

// classifyTest is a Health.Classify: errAnswer is Answered, errLocal Local,
// anything else Failed.
func classifyTest(err error) shardcore.Class {
	switch {
	case errors.Is(err, errAnswer):
		return shardcore.Answered
	case errors.Is(err, errLocal):
		return shardcore.Local
	}
	return shardcore.Failed
}

// passedDeadline is a context whose deadline has passed but which has not
// noted it yet (Err is nil), as a client sees it when its socket deadline,
// set from the context's, fires before the context's own timer.
type passedDeadline struct{ context.Context }

func (passedDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// callerContexts are the contexts of a caller that ended the call, by
// kind, with the cause each gives.
func callerContexts(t *testing.T) map[string]struct {
	ctx   context.Context
	cause error
} {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel2)
	return map[string]struct {
		ctx   context.Context
		cause error
	}{
		"canceled":        {canceled, context.Canceled},
		"expired":         {expired, context.DeadlineExceeded},
		"deadline passed": {passedDeadline{context.Background()}, context.DeadlineExceeded},
	}
}

// Finish on each class of error under a live context and under each ending
// of the caller: the error the caller gets (unchanged, or a ShardError
// naming the shard, wrapping the error and, when the caller ended a call
// that failed, the caller's cause) and the counters.
func TestFinishClassesAndCallerContexts(t *testing.T) {
	type want struct {
		named            bool
		caused           bool // the caller's cause is wrapped too
		requests, errors uint64
	}
	cases := []struct {
		err    error
		live   want // under context.Background()
		caller want // under every context of callerContexts
	}{
		{nil, want{false, false, 1, 0}, want{false, false, 1, 0}},
		{errAnswer, want{false, false, 1, 0}, want{false, false, 1, 0}},
		{fmt.Errorf("get: %w", errLocal), want{true, false, 1, 0}, want{true, false, 1, 0}},
		{errDown, want{true, false, 1, 1}, want{true, true, 1, 0}},
		{errReadTO, want{true, false, 1, 1}, want{true, true, 1, 0}},
		{context.DeadlineExceeded, want{true, false, 1, 1}, want{true, true, 1, 0}},
		{fmt.Errorf("dial: %w", context.Canceled), want{true, true, 1, 0}, want{true, true, 1, 0}},
	}
	ctxs := callerContexts(t)
	ctxs["live"] = struct {
		ctx   context.Context
		cause error
	}{context.Background(), context.Canceled} // the cause of a cancellation error
	for name, cc := range ctxs {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%v", name, tc.err), func(t *testing.T) {
				w := tc.caller
				if name == "live" {
					w = tc.live
				}
				s := newSharded(t, shardcore.Health[*testClient]{Classify: classifyTest}, newClients("a", "b"))
				v := s.Acquire()
				got := v.Finish(cc.ctx, 1, tc.err)
				v.Release()
				wantErr := tc.err
				if w.caused && !errors.Is(tc.err, cc.cause) {
					wantErr = fmt.Errorf("%w (%w)", cc.cause, tc.err)
				}
				var se *shardcore.ShardError
				switch {
				case !w.named && got != tc.err:
					t.Fatalf("Finish = %v, want %v unchanged", got, tc.err)
				case w.named && (!errors.As(got, &se) || se.Index != 1 || se.Name != "b" || se.Addr != shardAddr(1) ||
					se.Err.Error() != wantErr.Error() || !errors.Is(got, tc.err) || w.caused && !errors.Is(got, cc.cause)):
					t.Fatalf("Finish = %v, want a ShardError naming shard 1 and wrapping %v", got, wantErr)
				}
				st := s.Stats()[1]
				if st.Requests != w.requests || st.Errors != w.errors || st.Ejected {
					t.Fatalf("stats %+v, want %d requests, %d errors", st, w.requests, w.errors)
				}
			})
		}
	}
}

// Wrap names the shard as Finish does, and reports nothing.
func TestWrapReportsNothing(t *testing.T) {
	s := newSharded(t, shardcore.Health[*testClient]{Classify: classifyTest}, newClients("a", "b"))
	expired := callerContexts(t)["expired"].ctx
	v := s.Acquire()
	got := []error{v.Wrap(context.Background(), 0, errDown), v.Wrap(expired, 0, errReadTO), v.Wrap(expired, 0, errAnswer)}
	v.Release()
	want := []string{
		`shardedcache: shard 0 "a" (10.0.0.1:6379): ` + errDown.Error(),
		`shardedcache: shard 0 "a" (10.0.0.1:6379): context deadline exceeded (` + errReadTO.Error() + ")",
		errAnswer.Error(),
	}
	for j := range got {
		if got[j].Error() != want[j] {
			t.Errorf("Wrap %d = %q, want %q", j, got[j], want[j])
		}
	}
	if st := s.Stats()[0]; st.Requests != 0 {
		t.Fatalf("stats %+v after Wrap alone", st)
	}
}

// A Health without Classify counts every non-nil error, except the
// caller's: an expired context's error is named but not counted.
func TestFinishDefaultClassify(t *testing.T) {
	s := newSharded(t, shardcore.Health[*testClient]{}, newClients("a", "b"))
	expired := callerContexts(t)["expired"].ctx
	v := s.Acquire()
	errs := []error{
		v.Finish(context.Background(), 0, errAnswer),
		v.Finish(expired, 0, expired.Err()),
		v.Finish(context.Background(), 0, nil),
	}
	v.Release()
	if se := (*shardcore.ShardError)(nil); !errors.As(errs[0], &se) || se.Err != errAnswer ||
		!errors.As(errs[1], &se) || !errors.Is(errs[1], context.DeadlineExceeded) || errs[2] != nil {
		t.Fatalf("Finish = %v", errs)
	}
	if st := s.Stats()[0]; st.Requests != 3 || st.Errors != 1 {
		t.Fatalf("stats %+v, want 3 requests, 1 error", st)
	}
}

// Runs of failures: an Answered error ends one; a Local error and the
// caller's ending leave it as it is (they say nothing of the shard), so
// that FailureLimit counts the shard's own consecutive failures.
func TestReportConsecutiveFailures(t *testing.T) {
	expired := callerContexts(t)["expired"].ctx
	bg := context.Background()
	type step struct {
		ctx context.Context
		err error
	}
	cases := []struct {
		name    string
		steps   []step
		ejected bool
	}{
		{"failure, answer, failure", []step{{bg, errDown}, {bg, errAnswer}, {bg, errDown}}, false},
		{"failure, success, failure", []step{{bg, errDown}, {bg, nil}, {bg, errDown}}, false},
		{"failure, local, failure", []step{{bg, errDown}, {bg, errLocal}, {bg, errDown}}, true},
		{"failure, caller's deadline, failure", []step{{bg, errDown}, {expired, errDown}, {bg, errDown}}, true},
		{"caller's deadline twice", []step{{expired, errReadTO}, {expired, context.DeadlineExceeded}}, false},
		{"local twice", []step{{bg, errLocal}, {bg, errLocal}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 2,
				RetryTimeout: time.Hour, Classify: classifyTest}, newClients("a", "b", "c"))
			for _, st := range tc.steps {
				v := s.Acquire()
				v.Report(st.ctx, 1, st.err)
				v.Release()
			}
			if st := s.Stats()[1]; st.Ejected != tc.ejected || st.Requests != uint64(len(tc.steps)) {
				t.Fatalf("stats %+v, want ejected %v after %d requests", st, tc.ejected, len(tc.steps))
			}
		})
	}
}

// A probe's every error is the shard's failure, even one that Classify
// calls an answer: the probe's context is the library's own.
func TestProbeErrorsAlwaysCount(t *testing.T) {
	clients := newClients("a", "b")
	var log eventLog
	s := newSharded(t, shardcore.Health[*testClient]{ProbeInterval: time.Millisecond, OnEvent: log.add,
		Probe: func(ctx context.Context, c *testClient) error {
			if c.name == "b" {
				return errAnswer
			}
			return nil
		},
		Classify: func(error) shardcore.Class { return shardcore.Answered }}, clients)
	waitUntil(t, 5*time.Second, "a failed probe of b", func() bool { return s.Stats()[1].Errors > 0 })
	for _, e := range log.all() {
		if e.Kind != shardcore.EventFailure || e.Shard != 1 || e.Err != errAnswer {
			t.Fatalf("event %+v, want failures of shard 1 only", e)
		}
	}
	if st := s.Stats()[0]; st.Errors != 0 {
		t.Fatalf("shard a stats %+v", st)
	}
}

// Property: under random mixes of shard failures (a shard down) and
// callers that cancel or let their deadline pass, before or during a call,
// the counters move exactly as a model that counts only the shard's own
// failures says: requests by one per call, errors by one per failure of a
// live call, ejection at the FailureLimit-th consecutive one.
func TestHealthCountsOnlyShardFailuresProperty(t *testing.T) {
	const limit = 3
	var ejections, spared int // over all seeds: the property was put to the test
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			clients := newClients("a", "b", "c", "d")
			s := newSharded(t, shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: limit,
				RetryTimeout: time.Hour, Classify: classifyTest}, clients)
			callers := callerContexts(t)
			kinds := []string{"live", "canceled", "expired", "deadline passed"}
			model := make([]shardcore.ShardStats, len(clients))
			consecutive := make([]int, len(clients))
			for i, c := range clients {
				model[i].Name, model[i].Addr = c.name, shardAddr(i)
			}
			ks := testKeys(64)
			for step := range 400 {
				if rng.IntN(10) == 0 { // a shard goes down, or comes back
					c := clients[rng.IntN(len(clients))]
					c.down.Store(!c.down.Load())
					continue
				}
				kind := kinds[rng.IntN(len(kinds))]
				ctx := callers[kind].ctx
				if kind == "live" {
					ctx = context.Background()
				}
				v := s.Acquire()
				i := v.Locate(ks[rng.IntN(len(ks))])
				// The client fails as go-redis does: the caller's ending
				// first (a canceled or expired context), else its shard's.
				err := ctx.Err()
				if err == nil {
					err = v.Client(i).do()
				}
				if err == nil && rng.IntN(4) == 0 {
					err = errAnswer
				}
				got := v.Finish(ctx, i, err)
				v.Release()
				if (err == nil || err == errAnswer) != (got == err) {
					t.Fatalf("step %d: Finish(%v) = %v", step, err, got)
				}
				m := &model[i]
				m.Requests++
				switch {
				case err == nil || err == errAnswer:
					consecutive[i] = 0
				case kind != "live":
					spared++ // a down shard, or a context the caller ended
				default:
					m.Errors++
					if consecutive[i]++; consecutive[i] >= limit && !m.Ejected && live(model) > 1 {
						m.Ejected, m.Ejections = true, m.Ejections+1
						ejections++
					}
				}
				if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(model) {
					t.Fatalf("step %d (%s call on shard %d: %v):\nStats %+v\nmodel %+v", step, kind, i, err, got, model)
				}
			}
		})
	}
	if ejections == 0 || spared == 0 {
		t.Fatalf("%d ejections, %d calls ended by the caller: the seeds test nothing", ejections, spared)
	}
}

// live counts the shards of stats that are not ejected.
func live(stats []shardcore.ShardStats) int {
	n := 0
	for _, st := range stats {
		if !st.Ejected {
			n++
		}
	}
	return n
}
