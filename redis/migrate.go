package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/shardedcache/shardedcache/internal/shardcore"
)

// MigrateOptions configure NewMigration.
type MigrateOptions struct {
	// BatchSize is the COUNT of each SCAN, and the keys moved per three
	// round trips; 0 means 200.
	BatchSize int
	// Parallelism bounds the source shards scanned at once; 0 means 4.
	Parallelism int
	// InFlight bounds the pages of one source shard that move at once,
	// each a batch of three round trips, while the next pages are scanned;
	// 0 means 2. 1 moves one page at a time.
	//
	// Larger batches and more of them in flight move more keys per second
	// until the servers are busy, and lengthen the queues that live
	// commands wait in: on the 2-core machine of docs/speed.md, the defaults moved ~84,000 keys/s with a live GET p99 ~21
	// times the idle one, both cores busy. KeysPerSecond bounds the load
	// whatever the sizes.
	InFlight int
	// KeysPerSecond limits the keys scanned per second over all shards
	// (the keys a SCAN page returns, whatever its COUNT); 0 means no limit.
	KeysPerSecond float64
	// Resume continues an earlier run of the same window from its
	// checkpoint (Migration.Checkpoint); nil starts from the beginning.
	Resume *Checkpoint
	// KeepWindow keeps the resharding window open when the migration
	// finishes; by default Run ends it (EndResharding).
	KeepWindow bool
	// ServerSide moves each batch with Redis's own MIGRATE (its KEYS form,
	// without COPY or REPLACE): the old owner sends the keys, with their
	// TTLs, straight to the new owner and deletes them, in one transaction
	// per batch that also tells a key gone from one moved (see
	// serverSide.move). The keys then cross the network once rather than
	// twice, and this client sends an EXISTS per key and one MIGRATE per
	// new owner rather than four commands per key (DUMP, PTTL, RESTORE, and
	// the key in a DEL); the servers do the same work (figures in
	// docs/speed.md). The counts and the rule that the new owner's
	// copy wins are those of the default path.
	//
	// Every old owner must reach every new owner at the address and DB this
	// client uses for it, with its Username and Password (MIGRATE's AUTH2);
	// NewMigration refuses, with an error matching ErrServerSide that names
	// the shard, a new owner that MIGRATE cannot reach (a Redis Cluster or
	// Sentinel shard, a Unix socket, TLS or a credentials provider) and an
	// old owner that does not list MIGRATE in COMMAND INFO (miniredis).
	// MIGRATE's timeout is 2 s: the longest an old owner, which serves
	// nothing else meanwhile, waits on a new owner that stopped answering.
	// MIGRATEs run at once unless two servers would wait on each other (see
	// serverSide.enter). A batch whose reply is lost (big values against a
	// short ReadTimeout, a slow link) is settled once its old owner answers
	// again, however long its MIGRATE takes: Run waits while the old
	// owner's PINGs time out, until ctx ends (see awaitAnswer). Keys
	// moving between two DBs of one server, and keys that a command moves
	// in the window, move through the client, as without ServerSide.
	ServerSide bool
}

// Checkpoint is where a migration stands, to resume it (MigrateOptions.Resume)
// after a cancel or a crash. It belongs to one resharding window: another
// window refuses it.
type Checkpoint struct {
	// Window is the ID of the resharding window (Window.ID).
	Window string
	// Shards holds every source shard, by its identity (ShardProgress.ID).
	Shards map[string]ShardCheckpoint
}

// ShardCheckpoint is where the scan of one source shard stands.
type ShardCheckpoint struct {
	Cursor uint64   // the SCAN cursor to continue from
	Retry  []string // keys before Cursor that failed to move: moved first on resume
	Done   bool     // the scan went round and every key moved
	// Swept is true once the scan went round: only Retry is left, and
	// Cursor (0) does not start it again.
	Swept bool
}

// ShardProgress is the progress of one source shard in one run. Every key
// it counts as scanned is counted once in Owned, Moved, OnNewOwner, Gone,
// Stale or Failed; a key that the run's context ended before it moved is
// counted in none (nor as scanned): the run that resumes it counts it.
type ShardProgress struct {
	ID         string // the shard's identity, the key of Checkpoint.Shards
	Shard      string // the shard, as `shard 1 "b" (10.0.0.2:6379)`
	Name, Addr string // the shard's name and address (Shard.Name, Shard.Addr)
	Scanned    int64  // keys SCAN returned (and retried keys), less those left to a resumed run
	Owned      int64  // keys this shard owns under the new ring: they stay
	Moved      int64  // keys restored on their new owner and deleted here
	OnNewOwner int64  // keys already on their new owner (moved by a command in this window): the copy here was deleted
	Gone       int64  // keys deleted, expired or moved by a command between the SCAN and the move
	Stale      int64  // copies this shard did not own before the move either: deleted
	Failed     int64  // keys that could not be moved, or wait for an ejected shard (see Failures); they stay here
	Cursor     uint64 // the SCAN cursor to resume from
	Done       bool   // the scan went round with no key failed
	// Failures are the first 100 keys that failed, each naming the key and
	// both shards.
	Failures []*KeyMoveError
}

// maxFailures bounds ShardProgress.Failures.
const maxFailures = 100

// Migration moves, in the background of a resharding window, every key
// whose owner changed from its old shard to its new one.
type Migration struct {
	c        *ShardedClient
	opt      MigrateOptions
	window   *shardcore.Window
	limiter  *rate.Limiter
	chunk    int // keys moved per batch: BatchSize, at most a second's worth
	progress []*shardProgress
	running  chan struct{} // one slot, held by Run: one run at a time
	server   *serverSide   // ServerSide: the shards' MIGRATE targets and servers, the transactions' barrier
	// dead holds the new owners that stopped answering in a run (shard
	// ID -> error): they are sent no more keys (see moveOn).
	dead sync.Map
}

type shardProgress struct {
	id, label, name, addr                               string
	index                                               int // in the window's shard list
	ejected                                             bool
	scanned, owned, moved, onOwner, gone, stale, failed atomic.Int64
	cursor                                              atomic.Uint64
	swept                                               atomic.Bool // the scan went round: only the retry list is left
	done                                                atomic.Bool // swept, and the retry list is empty

	mu       sync.Mutex
	failures []*KeyMoveError // the first maxFailures
	retry    []string        // every key that failed since the last resume, once
	listed   map[string]bool // the keys of retry
	retrying []string        // the keys of retry that Run is moving again (takeRetry)
}

// ErrNoResharding is returned by NewMigration outside a resharding window.
var ErrNoResharding = errors.New("shardedcache: no resharding in progress; call BeginResharding first")

// ErrCheckpoint is matched (errors.Is) by the error of NewMigration for a
// checkpoint that does not fit the window in progress.
var ErrCheckpoint = errors.New("shardedcache: the checkpoint does not belong to this resharding window")

// NewMigration prepares the migration of the resharding in progress: every
// shard of the old list is a source. It returns ErrNoResharding outside a
// window, and an error matching ErrCheckpoint when opt.Resume is the
// checkpoint of another window or misses one of its source shards.
func (c *ShardedClient) NewMigration(opt MigrateOptions) (*Migration, error) {
	if err := c.errIfClosed(); err != nil {
		return nil, err
	}
	v := c.shards.Acquire()
	defer v.Release()
	prev, w := v.Previous(), c.shards.Window()
	if prev == nil || w == nil {
		return nil, ErrNoResharding
	}
	if opt.Resume != nil && opt.Resume.Window != w.ID {
		return nil, fmt.Errorf("%w: it is window %q's, this is %q", ErrCheckpoint, opt.Resume.Window, w.ID)
	}
	var server *serverSide
	if opt.ServerSide && c.fleet.on.Load() {
		return nil, fmt.Errorf("%w: a fleet's resharding moves keys by its own protocol (move marks, settled after a lost reply), which MIGRATE cannot follow", ErrServerSide)
	}
	if opt.ServerSide {
		var err error
		if server, err = newServerSide(v); err != nil {
			return nil, err
		}
		if server.moves = c.fleet.moves.Load(); server.moves == nil || server.moves.prev != v.Previous() {
			return nil, ErrNoResharding
		}
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 200
	}
	if opt.InFlight <= 0 {
		opt.InFlight = 2
	}
	if opt.Parallelism <= 0 {
		opt.Parallelism = 4
	}
	m := &Migration{c: c, opt: opt, window: w, limiter: rate.NewLimiter(rate.Inf, 0), chunk: opt.BatchSize, running: make(chan struct{}, 1),
		server: server}
	if opt.KeysPerSecond > 0 {
		// A burst of at most a second's worth of keys, and batches no
		// larger than the burst.
		m.chunk = max(1, min(opt.BatchSize, int(opt.KeysPerSecond)))
		m.limiter = rate.NewLimiter(rate.Limit(opt.KeysPerSecond), m.chunk)
	}
	for i := range prev.Len() {
		idx := v.PreviousIndex(i)
		sh := v.Shard(idx)
		p := &shardProgress{id: v.ID(idx), label: v.Label(idx), name: sh.Name, addr: sh.Addr, index: idx}
		p.setRetry(nil)
		if opt.Resume != nil {
			cp, ok := opt.Resume.Shards[p.id]
			if !ok {
				return nil, fmt.Errorf("%w: it has no entry for source %s (%s)", ErrCheckpoint, p.label, p.id)
			}
			p.cursor.Store(cp.Cursor)
			p.swept.Store(cp.Swept || cp.Done)
			p.done.Store(cp.Done)
			p.setRetry(distinct(cp.Retry))
		}
		m.progress = append(m.progress, p)
	}
	return m, nil
}

// MigrationError is the result of a Run that went round every source shard
// it could reach but left keys behind: the keys that failed (each a
// *KeyMoveError) and the source shards it could not scan (each a
// *shardedclient.ShardError, an ejected shard included). The window stays
// open; Run again (with the checkpoint) retries them.
type MigrationError struct {
	Keys   []*KeyMoveError
	Shards []error
}

func (e *MigrationError) Error() string {
	msg := fmt.Sprintf("shardedcache: migration incomplete: %d key(s) failed, %d source shard(s) not scanned", len(e.Keys), len(e.Shards))
	if len(e.Shards) > 0 {
		msg += "; " + e.Shards[0].Error()
	}
	if len(e.Keys) > 0 {
		msg += "; " + e.Keys[0].Error()
	}
	return msg
}

func (e *MigrationError) Unwrap() []error {
	out := slices.Clone(e.Shards)
	for _, k := range e.Keys {
		out = append(out, k)
	}
	return out
}

// Run first waits until the commands begun before BeginResharding have
// ended (one may still write a key on its old owner), then scans every
// source shard (Parallelism at a time) and moves each key whose new owner
// is another shard, BatchSize keys per SCAN page, under the
// same per-key locks as the client's commands, so that a key written by
// the application is never overwritten by its older copy; it deletes the
// stale copies it finds (keys the shard owned neither before nor after the
// move). A key that fails to move stays on its old owner and does not stop
// the others. Run returns ctx's error if ctx ends (resume with Checkpoint),
// (the keys it was moving then are left for the resumed run, not counted
// as failed), a *MigrationError naming the keys and shards it could not
// move or scan (an ejected source shard is not scanned), ErrNoResharding
// once its window has ended (a Migration belongs to the window it was made
// in), or nil once every key of every source has moved. Then the window is
// migrated: unless KeepWindow, Run ends it. Running it again after it
// finished moves nothing; calls of Run on one Migration run one at a time
// (one that waits for another returns ctx's error if ctx ends first).
func (m *Migration) Run(ctx context.Context) error {
	select {
	case m.running <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err() // another run holds it
	}
	defer func() { <-m.running }()
	m.dead.Clear() // a new owner that failed the last run is tried again
	// A write begun before BeginResharding may still land on a key's old
	// owner: wait for it, or a scan that has passed the key would leave it
	// behind.
	v := m.c.shards.Acquire()
	err := v.WaitBarriers(ctx)
	v.Release()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.opt.Parallelism)
	var mu sync.Mutex
	var shardErrs []error
	for _, p := range m.progress {
		if p.done.Load() {
			continue
		}
		g.Go(func() error {
			err := m.runShard(gctx, p)
			if err != nil && !isContextErr(err) && !errors.Is(err, ErrNoResharding) {
				mu.Lock()
				shardErrs = append(shardErrs, err)
				mu.Unlock()
				return nil // the other shards go on
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if cause := ctx.Err(); cause != nil && isContextErr(err) {
			return cause // not a shard's error that wraps it
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // keys it cut short are left: the window stays open
	}
	var failed []*KeyMoveError
	for _, p := range m.progress {
		failed = append(failed, p.failuresCopy()...)
	}
	if len(failed) > 0 || len(shardErrs) > 0 {
		return &MigrationError{Keys: failed, Shards: shardErrs}
	}
	if m.server != nil { // its moves are settled once its new owners have drained
		if err := m.server.moves.drainAll(ctx); err != nil {
			return &MigrationError{Shards: []error{err}}
		}
	}
	m.window.MarkMigrated()
	if !m.opt.KeepWindow {
		return m.c.EndResharding()
	}
	return nil
}

// runShard moves the keys of source p that failed before (its retry list),
// then, unless its scan went round already, scans on from its cursor
// (scanShard).
func (m *Migration) runShard(ctx context.Context, p *shardProgress) error {
	if retry := p.takeRetry(); len(retry) > 0 {
		err := m.onView(p, func(v *view) error { return m.moveFrom(ctx, v, p, retry) })
		p.endRetry(err != nil)
		if err != nil {
			return err
		}
	}
	if p.swept.Load() {
		p.done.Store(len(p.retryCopy()) == 0)
		return nil
	}
	return m.scanShard(ctx, p)
}

// onView runs f on the current view, acquired for it, unless the window
// has ended (ErrNoResharding) or source p is ejected (an error naming it).
func (m *Migration) onView(p *shardProgress, f func(*view) error) error {
	v := m.c.shards.Acquire()
	defer v.Release()
	switch {
	case !v.Moving() || v.Window() != m.window: // ended, or another window since
		return ErrNoResharding
	case v.Ejected(p.index):
		return v.Err(p.index, errors.New("ejected: its keys were not moved; run the migration again once it is back"))
	}
	return f(v)
}

// page is one SCAN page of a source: its keys, and the cursor after it.
type page struct {
	seq  int // 0 for the first page of this run, then 1, 2, ...
	keys []string
	next uint64
}

// scanShard scans source p from its cursor round to the end and moves the
// keys of each page (moveFrom): one goroutine reads the pages ahead while
// up to InFlight pages move at once. p's cursor passes a page only once
// that page and every page before it have moved, so that a checkpoint
// never skips a key; a key of a later page that moved before the run
// stopped is simply not found again on resume.
func (m *Migration) scanShard(ctx context.Context, p *shardProgress) error {
	g, gctx := errgroup.WithContext(ctx)
	pages := make(chan page, m.opt.InFlight)
	g.Go(func() error {
		defer close(pages)
		cursor := p.cursor.Load()
		for seq := 0; ; seq++ {
			pg := page{seq: seq}
			err := m.onView(p, func(v *view) error {
				var err error
				if pg.keys, pg.next, err = v.Client(p.index).Scan(gctx, cursor, "", int64(m.opt.BatchSize)).Result(); err != nil {
					return v.Err(p.index, fmt.Errorf("migration: SCAN: %w", err))
				}
				return nil
			})
			if err != nil {
				return err
			}
			select {
			case pages <- pg:
			case <-gctx.Done():
				return gctx.Err()
			}
			if pg.next == 0 {
				return nil
			}
			cursor = pg.next
		}
	})
	var mu sync.Mutex
	moved := map[int]uint64{} // seq -> next cursor, of pages moved ahead of an earlier one
	nextSeq, finished := 0, false
	commit := func(pg page) {
		mu.Lock()
		defer mu.Unlock()
		moved[pg.seq] = pg.next
		for {
			next, ok := moved[nextSeq]
			if !ok {
				return
			}
			delete(moved, nextSeq)
			nextSeq++
			p.cursor.Store(next)
			finished = next == 0
		}
	}
	for range m.opt.InFlight {
		g.Go(func() error {
			for pg := range pages {
				if err := m.onView(p, func(v *view) error { return m.moveFrom(gctx, v, p, pg.keys) }); err != nil {
					return err
				}
				commit(pg)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if finished {
		p.swept.Store(true)
		p.done.Store(len(p.retryCopy()) == 0)
	}
	return nil
}

// moveFrom deletes the stale copies among keys, found on source p, and
// moves, BatchSize keys at a time (a server may return more keys than
// COUNT asks), those whose owner is another shard; the keys that fail go to
// p's retry list. A batch is counted once it is done: the keys that ctx's
// end left unmoved are not counted as scanned, since the run that resumes
// finds them again, and moveFrom then returns ctx's error, so that their
// page is not passed (scanShard) and a retry puts its keys back on the
// list (endRetry).
func (m *Migration) moveFrom(ctx context.Context, v *view, p *shardProgress, keys []string) error {
	for batch := range slices.Chunk(keys, m.chunk) {
		if err := m.limiter.WaitN(ctx, len(batch)); err != nil {
			// The wait would outlast ctx's deadline (batches never exceed
			// the burst): ctx's end, seen early.
			return cmp.Or(ctx.Err(), context.DeadlineExceeded)
		}
		var pending shardcore.Pending
		var stale []string
		var c batchCounts
		var unsettled []*KeyMoveError
		for _, k := range batch {
			from, to, settled := v.Settled(k)
			switch {
			case isInternal(k): // the protocol's own state (fence, move marks) stays, uncounted
			case !settled:
				// An ejection changes where it was or where it goes: judged
				// now, it could be kept or moved where the ejected shard's
				// return hides it. It waits on the retry list.
				c.leaving++
				unsettled = append(unsettled, &KeyMoveError{Key: k, From: v.Label(p.index), To: v.Label(v.AllLiveOwner(k)),
					Err: errUnsettled})
			case to == p.index:
				c.owned++
			case from == p.index:
				c.leaving++
				v.Track(&pending, k)
			default:
				// Owned here neither before nor after the move: a stale copy,
				// which nothing writes (commands go to the owners).
				stale = append(stale, k)
			}
		}
		if len(stale) > 0 {
			n, err := v.Client(p.index).Unlink(ctx, stale...).Result()
			if err != nil {
				p.count(c)
				return v.Err(p.index, fmt.Errorf("migration: removing stale copies: %w", err))
			}
			// Those not found were gone already (or listed twice: SCAN
			// may return a key more than once).
			c.stale, c.staleGone = int(n), len(stale)-int(n)
		}
		// A key that leaves but is not pending has been moved already, by a
		// command since the SCAN: gone from here.
		c.gone = c.leaving - len(unsettled) - len(pending.Moving())
		err := v.Prepare(ctx, &pending, func(ctx context.Context, v *view, keys []shardcore.MovingKey) error {
			if m.server != nil {
				c.moves = m.server.move(ctx, v, keys, &m.dead, func(ctx context.Context, v *view, ks []shardcore.MovingKey) moveCounts {
					return m.c.moveOn(ctx, v, ks, &m.dead)
				})
			} else {
				c.moves = m.c.moveOn(ctx, v, keys, &m.dead)
			}
			return nil
		})
		c.moves.failed = append(c.moves.failed, unsettled...)
		if left := p.count(c); err == nil && left > 0 {
			err = cmp.Or(ctx.Err(), context.Canceled)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errUnsettled is the failure of a key that a migration leaves until the
// ejected shards that place it are back (see View.Settled); it matches
// ErrEjected.
var errUnsettled = fmt.Errorf("%w: one places this key before or after the move, so it waits until they are back; run the migration again then", ErrEjected)

// batchCounts are the outcomes of one batch of moveFrom.
type batchCounts struct {
	owned, leaving, stale, gone int
	staleGone                   int        // stale copies UNLINK did not find
	moves                       moveCounts // of the keys that were pending, when they were tried
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// count adds one batch to p and returns the number of its keys left for
// the run that resumes: the leaving keys that were never tried (ctx ended
// while they waited, or before) and those that ctx's end cut short. They
// are counted in nothing, not even as scanned, and are not put on the
// retry list: their page is scanned again, or, in a retry, endRetry puts
// them back. The other failed keys go on the retry list and count as
// failed. Scanned is added first, so that a snapshot (Progress) never
// shows more outcomes than keys scanned.
func (p *shardProgress) count(c batchCounts) (left int) {
	m := c.moves
	left = c.leaving - c.gone - (m.moved + m.onOwner + m.gone + len(m.failed))
	for _, f := range m.failed {
		if isContextErr(f.Err) {
			left++
		}
	}
	p.scanned.Add(int64(c.owned + c.stale + c.staleGone + c.leaving - left))
	p.owned.Add(int64(c.owned))
	p.stale.Add(int64(c.stale))
	p.moved.Add(int64(m.moved))
	p.onOwner.Add(int64(m.onOwner))
	p.gone.Add(int64(c.gone + c.staleGone + m.gone))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range m.failed {
		switch {
		case isContextErr(f.Err):
		case p.listed[f.Key]:
			// Failed earlier in this run (its retry, then the page that
			// had it scanned again after a cut): counted then.
			p.scanned.Add(-1)
		default:
			p.retry = append(p.retry, f.Key)
			p.listed[f.Key] = true
			p.failed.Add(1)
			if len(p.failures) < maxFailures {
				p.failures = append(p.failures, f)
			}
		}
	}
	return left
}

// setRetry makes keys p's retry list; p.mu is held, or p not yet shared.
func (p *shardProgress) setRetry(keys []string) {
	p.retry, p.listed = keys, make(map[string]bool, len(keys))
	for _, k := range keys {
		p.listed[k] = true
	}
}

func (p *shardProgress) failuresCopy() []*KeyMoveError {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.failures)
}

// retryCopy returns the keys still to retry: those being moved again
// (takeRetry) and those that failed since, so that a checkpoint taken
// while they move again still names them.
func (p *shardProgress) retryCopy() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return distinct(slices.Concat(p.retrying, p.retry)) // a key retried that failed again is on both
}

// distinct returns keys sorted, each once, in a new slice: a key listed
// twice in one batch would be moved, then found on its new owner, and
// counted twice.
func distinct(keys []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(keys)))
}

// takeRetry empties p's retry list and its failures, and returns the keys
// to retry: a run starts afresh for them. They stay in p's checkpoint
// (retryCopy) until endRetry.
func (p *shardProgress) takeRetry() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := p.retry
	p.retrying, p.failures = keys, nil
	p.setRetry(nil)
	// They are counted again as they are retried.
	p.scanned.Add(-p.failed.Swap(0))
	return keys
}

// endRetry ends the retry that takeRetry began: the keys that failed again
// are on the retry list already; when the retry stopped early (stopped),
// every key of it goes back on the list.
func (p *shardProgress) endRetry(stopped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stopped {
		// Less those that failed again, listed already.
		p.setRetry(distinct(slices.Concat(p.retry, p.retrying)))
	}
	p.retrying = nil
}

// Progress returns each source shard's progress; safe to call while Run
// runs.
func (m *Migration) Progress() []ShardProgress {
	out := make([]ShardProgress, len(m.progress))
	for i, p := range m.progress {
		// Under p.mu, which takeRetry holds while it takes failures back
		// out of Scanned; Scanned last: a batch adds it before its
		// outcomes (count), so that the outcomes read here never exceed it.
		p.mu.Lock()
		out[i] = ShardProgress{ID: p.id, Shard: p.label, Name: p.name, Addr: p.addr, Owned: p.owned.Load(),
			Moved: p.moved.Load(), OnNewOwner: p.onOwner.Load(), Gone: p.gone.Load(), Stale: p.stale.Load(),
			Failed: p.failed.Load(), Cursor: p.cursor.Load(), Done: p.done.Load(), Failures: slices.Clone(p.failures)}
		out[i].Scanned = p.scanned.Load()
		p.mu.Unlock()
	}
	return out
}

// Checkpoint returns where every source shard stands, for
// MigrateOptions.Resume of a later Migration in the same window. A finished
// migration's checkpoint has every shard Done.
func (m *Migration) Checkpoint() *Checkpoint {
	cp := &Checkpoint{Window: m.window.ID, Shards: make(map[string]ShardCheckpoint, len(m.progress))}
	for _, p := range m.progress {
		cp.Shards[p.id] = ShardCheckpoint{Cursor: p.cursor.Load(), Retry: p.retryCopy(), Done: p.done.Load(), Swept: p.swept.Load()}
	}
	return cp
}
