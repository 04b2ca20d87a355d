package shardcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardedcache/shardedcache/ring"
)

// Mode is what happens to the keys of a shard that keeps failing.
type Mode uint8

const (
	// FailureMode (the default, memcached's "failure"): nothing moves. A
	// dead shard's keys fail (or miss) until it returns; the other shards
	// are untouched.
	FailureMode Mode = iota
	// EjectMode (twemproxy's auto_eject_hosts, memcached's "failover"): after
	// FailureLimit consecutive failures the shard is ejected and its keys
	// go where the ring's preset sends them (ring.Ring.Eject: the Jedis ring
	// gives each to the next node clockwise); after RetryTimeout it is
	// probed and rejoins. Keys written elsewhere meanwhile are not copied
	// back: once it rejoins, the shard serves its old values again (stale
	// reads) unless OnRejoin clears it.
	EjectMode
)

// Defaults of Health, twemproxy's.
const (
	DefaultFailureLimit = 2
	DefaultRetryTimeout = 30 * time.Second
	DefaultProbeTimeout = time.Second
)

// Health is the policy for failing shards.
type Health[C comparable] struct {
	Mode Mode
	// FailureLimit is the number of consecutive failures of the shard
	// (calls whose error is the shard's failure, see View.Report, or failed
	// probes) that eject it in EjectMode; 0 means DefaultFailureLimit.
	FailureLimit int
	// RetryTimeout is how long an ejected shard stays out before it is
	// probed (with Probe, when set) and rejoins; 0 means DefaultRetryTimeout.
	RetryTimeout time.Duration
	// ProbeInterval, when > 0, probes every live shard at that interval with
	// Probe, so that a dead shard is found without waiting for traffic.
	ProbeInterval time.Duration
	// Probe checks a shard (redis: PING; memcache: a version or no-op
	// command). Required with ProbeInterval; when set, an ejected shard
	// rejoins only after a successful probe.
	Probe func(ctx context.Context, client C) error
	// ProbeTimeout bounds one probe; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// OnRejoin, when set, runs before an ejected shard rejoins (memcache:
	// flush the stale values it kept); an error keeps it ejected for
	// another RetryTimeout.
	OnRejoin func(ctx context.Context, client C) error
	// OnEvent, when set, is called for every failure, ejection and rejoin,
	// from the goroutine that saw it: it must not block.
	OnEvent func(Event)
	// Classify tells what the error of a call on a shard says about the
	// shard (see Class). The backends default it to their client's errors;
	// nil classifies every non-nil error as Failed. Whatever it says, the
	// caller's cancel or deadline is never the shard's failure (see
	// View.Report).
	Classify func(err error) Class
}

// Class is what the error of a call on a shard says about the shard.
type Class uint8

const (
	// Answered: the call reached the server and has its answer: success, a
	// miss, an error reply. The shard works; the caller gets the error as
	// it is.
	Answered Class = iota
	// Local: the call failed on the client's side of the shard, through no
	// fault of the server: a pool full of the caller's own calls, a closed
	// client. The error names the shard; its health does not count it.
	Local
	// Failed: the shard failed: a refused or reset connection, a dial, read
	// or write timeout of the shard's own settings, a pool that gave up
	// dialing. The error names the shard; its health counts it, unless the
	// caller's context ended first.
	Failed
)

func (c Class) String() string {
	switch c {
	case Answered:
		return "answered"
	case Local:
		return "local"
	}
	return "failed"
}

// classifyAll is the Classify of a Health that sets none, and of probes.
func classifyAll(err error) Class {
	if err == nil {
		return Answered
	}
	return Failed
}

func (h *Health[C]) normalize() error {
	switch {
	case h.Mode > EjectMode:
		return fmt.Errorf("shardedclient: unknown mode %d", h.Mode)
	case h.FailureLimit < 0:
		return fmt.Errorf("shardedclient: failure limit %d is negative", h.FailureLimit)
	case h.RetryTimeout < 0 || h.ProbeInterval < 0 || h.ProbeTimeout < 0:
		return errors.New("shardedclient: negative retry timeout, probe interval or probe timeout")
	case h.ProbeInterval > 0 && h.Probe == nil:
		return errors.New("shardedclient: a probe interval needs a Probe")
	}
	if h.FailureLimit == 0 {
		h.FailureLimit = DefaultFailureLimit
	}
	if h.RetryTimeout == 0 {
		h.RetryTimeout = DefaultRetryTimeout
	}
	if h.ProbeTimeout == 0 {
		h.ProbeTimeout = DefaultProbeTimeout
	}
	if h.Classify == nil {
		h.Classify = classifyAll
	}
	return nil
}

// EventKind says what happened to a shard.
type EventKind uint8

const (
	// EventFailure: a command or probe failed by the shard's failure.
	EventFailure EventKind = iota
	// EventEjected: the shard was ejected (EjectMode).
	EventEjected
	// EventRejoined: the shard rejoined after its retry timeout.
	EventRejoined
)

func (k EventKind) String() string {
	switch k {
	case EventEjected:
		return "ejected"
	case EventRejoined:
		return "rejoined"
	}
	return "failure"
}

// Event reports a change of a shard's health.
type Event struct {
	Kind  EventKind
	Shard int    // index in the shard list at the time
	Name  string // the shard's name, possibly empty
	Addr  string // the shard's address, possibly empty
	Err   error  // the failure (EventFailure, EventEjected)
	Time  time.Time
}

// ShardStats are one shard's counters since it joined the shard list.
type ShardStats struct {
	Name, Addr string
	Requests   uint64 // commands and probes reported
	Errors     uint64 // of which failed by the shard's failure (see View.Report)
	Ejections  uint64 // times ejected
	Ejected    bool   // ejected now
}

// shardHealth is the health record of one shard; SetShards carries it over
// to a new view when the shard keeps its identity.
type shardHealth struct {
	requests, errors, ejections atomic.Uint64
	consecutive                 atomic.Int64
	ejected                     atomic.Bool

	mu    sync.Mutex
	timer *time.Timer // the pending retry of an ejected shard
}

func (h *shardHealth) stopTimer() {
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.mu.Unlock()
}

// Classify returns what err, the error of a call on a shard, says about
// the shard: Health.Classify's answer, and Answered for nil.
func (v *View[C]) Classify(err error) Class {
	if err == nil {
		return Answered
	}
	return v.parent.health.Classify(err)
}

// Report records the outcome of a call on shard i made under ctx, whose
// error (nil for success) is err as the shard's client returned it. An
// Answered error (see Classify) is a success and ends a run of consecutive
// failures. A Failed one is the shard's failure, unless the caller ended
// the call: ctx is canceled or past its deadline (whatever error the client
// made of that, such as a read timeout cut short by the deadline), or err
// is a cancellation. The caller's ending and Local errors count as a
// request only, neither success nor failure. In EjectMode, the
// FailureLimit-th consecutive failure ejects the shard, unless it is the
// last live one. A client that takes no context runs its calls under
// context.Background(): their outcome is their own, whatever the caller's
// context did meanwhile.
func (v *View[C]) Report(ctx context.Context, i int, err error) {
	c, _ := v.judge(ctx, err)
	v.record(i, err, c)
}

// Wrap returns err, the error of a call on shard i made under ctx, as the
// caller sees it: nil or an Answered error unchanged, any other in a
// *ShardError naming the shard. When the caller ended the call (see
// Report), the ShardError wraps the caller's cause too, so that
// errors.Is(err, context.DeadlineExceeded) holds even when the client made
// a read timeout of the deadline, and the error says which shard the call
// was waiting on.
func (v *View[C]) Wrap(ctx context.Context, i int, err error) error {
	c, ended := v.judge(ctx, err)
	return v.wrap(i, err, c, ended)
}

// Finish reports a call on shard i made under ctx (Report) and returns its
// error as the caller sees it (Wrap).
func (v *View[C]) Finish(ctx context.Context, i int, err error) error {
	c, ended := v.judge(ctx, err)
	v.record(i, err, c)
	return v.wrap(i, err, c, ended)
}

// judge returns the class of err, the error of a call made under ctx, for
// the shard's health, and the caller's cause when the caller ended the call
// (which makes a failure Local): ctx's end, or Close, which closes the
// shards' connections under the calls in flight (see Backend.ClosedErr).
func (v *View[C]) judge(ctx context.Context, err error) (Class, error) {
	c := v.Classify(err)
	if c != Failed {
		return c, nil
	}
	if ended := callerEnded(ctx, err); ended != nil {
		return Local, ended
	}
	if s := v.parent; s.closing.Load() {
		return Local, s.backend.ClosedErr
	}
	return Failed, nil
}

// callerEnded returns the cause by which the caller ended a call made under
// ctx that failed with err: ctx's error; else context.DeadlineExceeded once
// ctx's deadline has passed, even if ctx has not noted it yet (a client may
// see its socket deadline, the earlier of its own timeout and ctx's, pass a
// moment before ctx's timer fires); else context.Canceled when err is a
// cancellation. It returns nil when the caller did not end the call.
func callerEnded(ctx context.Context, err error) error {
	if cause := ctx.Err(); cause != nil {
		return cause
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return nil
}

// wrap returns err, of class c (see judge), as the caller sees it.
func (v *View[C]) wrap(i int, err error, c Class, ended error) error {
	switch {
	case c == Answered:
		return err
	case ended != nil && !errors.Is(err, ended):
		err = fmt.Errorf("%w (%w)", ended, err)
	}
	return v.Err(i, err)
}

// record counts the outcome of a call or probe on shard i: err, of class c.
func (v *View[C]) record(i int, err error, c Class) {
	h := v.health[i]
	h.requests.Add(1)
	switch c {
	case Answered:
		if h.consecutive.Load() != 0 { // a load leaves the cache line shared: the common case writes nothing
			h.consecutive.Store(0)
		}
		return
	case Local:
		return
	}
	h.errors.Add(1)
	n := h.consecutive.Add(1)
	s := v.parent
	s.event(v, EventFailure, i, err)
	if s.health.Mode == EjectMode && n >= int64(s.health.FailureLimit) && !h.ejected.Load() {
		s.ejectSoon(h, err)
	}
}

func (s *Sharded[C]) event(v *View[C], kind EventKind, i int, err error) {
	if s.health.OnEvent != nil {
		sh := v.shards[i]
		s.health.OnEvent(Event{Kind: kind, Shard: i, Name: sh.Name, Addr: sh.Addr, Err: err, Time: time.Now()})
	}
}

// ejectSoon ejects the shard of health record h (see eject) before it
// returns, unless a shard-list change is preparing its new view: that
// holds s.mu through its round trips to the shards (see preparing), and
// its own prepare step may be what reports the failure (a joining shard
// that refuses it). Then the ejection runs on a goroutine of its own once
// s.mu is free, and the failing call does not wait for it.
func (s *Sharded[C]) ejectSoon(h *shardHealth, cause error) {
	if s.changing.Load() {
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.eject(h, cause)
		}()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eject(h, cause)
}

// preparing runs a shard-list change's prepare step on v, its new view,
// with s.mu held (see ejectSoon).
func (s *Sharded[C]) preparing(prepare func(*View[C]) error, v *View[C]) error {
	s.changing.Store(true)
	defer s.changing.Store(false)
	return prepare(v)
}

// eject takes the shard of health record h out of the live ring and
// schedules its retry; s.mu is held. A shard no longer in the list (a
// joining shard whose list change failed) is left alone.
func (s *Sharded[C]) eject(h *shardHealth, cause error) {
	cur := s.view.Load()
	i := cur.indexOfHealth(h)
	if s.closed || i < 0 || h.ejected.Load() {
		return
	}
	live, err := cur.changeLive(i, (*ring.Ring).Eject)
	if err != nil {
		return // the last live shard stays: its keys fail instead
	}
	// The view first: once Stats says ejected, no lookup still finds the
	// shard.
	s.liveEpoch.Add(1)
	s.swap(cur.with(live), false)
	h.ejected.Store(true)
	h.ejections.Add(1)
	s.event(cur, EventEjected, i, cause)
	s.scheduleRetry(h)
}

// scheduleRetry arms h's retry timer; s.mu is held.
func (s *Sharded[C]) scheduleRetry(h *shardHealth) {
	h.mu.Lock()
	h.timer = time.AfterFunc(s.health.RetryTimeout, func() {
		// Count the retry as under way unless Close came first, so that
		// Close waits for it (Add happens under s.mu, before Close's Wait).
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		s.retry(h)
	})
	h.mu.Unlock()
}

// retry probes an ejected shard and lets it rejoin, or waits another
// RetryTimeout.
func (s *Sharded[C]) retry(h *shardHealth) {
	cur := s.view.Load()
	i := cur.indexOfHealth(h)
	if i < 0 || !h.ejected.Load() {
		return
	}
	client := cur.shards[i].Client
	err := s.probe(client, s.health.Probe)
	if err == nil {
		err = s.probe(client, s.health.OnRejoin)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	cur = s.view.Load()
	if i = cur.indexOfHealth(h); i < 0 {
		return
	}
	if err != nil {
		s.event(cur, EventFailure, i, err)
		s.scheduleRetry(h)
		return
	}
	live, rerr := cur.changeLive(i, (*ring.Ring).Rejoin)
	if rerr != nil {
		s.scheduleRetry(h)
		return
	}
	// The view first: once Stats says live again, lookups find the shard.
	s.liveEpoch.Add(1)
	s.swap(cur.with(live), false)
	h.ejected.Store(false)
	h.consecutive.Store(0)
	s.event(cur, EventRejoined, i, nil)
}

// probe runs f (a probe or the rejoin hook) on client within ProbeTimeout;
// a nil f succeeds.
func (s *Sharded[C]) probe(client C, f func(context.Context, C) error) error {
	if f == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.health.ProbeTimeout)
	defer cancel()
	return f(ctx, client)
}

// probeLoop probes every live shard each ProbeInterval until Close.
func (s *Sharded[C]) probeLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.health.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		v := s.Acquire()
		for i := range v.shards {
			if !v.health[i].ejected.Load() {
				// Every error of a probe is the shard's: its context is ours.
				err := s.probe(v.shards[i].Client, s.health.Probe)
				v.record(i, err, classifyAll(err))
			}
		}
		v.Release()
	}
}

// with returns a view of v's shards with another live ring.
func (v *View[C]) with(live *ring.Ring) *View[C] {
	return v.next(func(n *View[C]) { n.live = live })
}

// changeLive applies an ejection or a rejoin of shard i to v's live ring.
// A shard that a move is removing is not on it (it owns no key there) and
// leaves it unchanged. The ring the move started from does not change
// either (see BeginWindow): it says where keys were with every shard live.
func (v *View[C]) changeLive(i int, change func(*ring.Ring, ...int) (*ring.Ring, error)) (*ring.Ring, error) {
	if i >= v.live.Len() {
		return v.live, nil
	}
	return change(v.live, i)
}

func (v *View[C]) indexOfHealth(h *shardHealth) int {
	for i, x := range v.health {
		if x == h {
			return i
		}
	}
	return -1
}

// Stats returns every shard's counters, in shard order.
func (s *Sharded[C]) Stats() []ShardStats {
	v := s.view.Load()
	out := make([]ShardStats, len(v.shards))
	for i, h := range v.health {
		out[i] = ShardStats{Name: v.shards[i].Name, Addr: v.shards[i].Addr,
			Requests: h.requests.Load(), Errors: h.errors.Load(), Ejections: h.ejections.Load(), Ejected: h.ejected.Load()}
	}
	return out
}
