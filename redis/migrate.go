package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
)

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	// BatchSize is the COUNT of each SCAN, and the keys moved per three
	// round trips; 0 means 100.
	BatchSize int
	// Parallelism bounds the source shards scanned at once; 0 means 4.
	Parallelism int
	// KeysPerSecond limits the keys scanned per second over all shards
	// (the keys a SCAN page returns, whatever its COUNT); 0 means no limit.
	KeysPerSecond float64
	// Cursors resumes an earlier run: the SCAN cursor of each source shard
	// (by ShardProgress.Shard) to continue from, as Migration.Cursors
	// returned it. When Cursors is set, a shard missing from it is done.
	Cursors map[string]uint64
	// KeepWindow keeps the resharding window open when the migration
	// finishes; by default Run ends it (EndResharding).
	KeepWindow bool
}

// ShardProgress is the progress of one source shard.
type ShardProgress struct {
	Shard   string // the shard's name, else its address
	Scanned int64  // keys SCAN returned
	Moved   int64  // keys restored on their new owner and deleted here
	Skipped int64  // keys that stay here, or that the new owner already had
	Failed  int64  // keys whose batch failed (they stay here; run again)
	Cursor  uint64 // the SCAN cursor to resume from
	Done    bool   // the scan went round
}

// Migration moves, in the background of a resharding window, every key
// whose owner changed from its old shard to its new one.
type Migration struct {
	c        *ShardedClient
	opt      MigrateOptions
	limiter  *rate.Limiter
	chunk    int // keys moved per batch: BatchSize, at most a second's worth
	progress []*shardProgress
}

type shardProgress struct {
	shard                           string
	index                           int // in the window's shard list
	scanned, moved, skipped, failed atomic.Int64
	cursor                          atomic.Uint64
	done                            atomic.Bool
}

// ErrNoResharding is returned by NewMigration outside a resharding window.
var ErrNoResharding = errors.New("shardedcache: no resharding in progress; call BeginResharding first")

// NewMigration prepares the migration of the resharding in progress: every
// shard of the old list is a source, except those ejected (see Health):
// their keys move when they are used, should the shard return.
func (c *ShardedClient) NewMigration(opt MigrateOptions) (*Migration, error) {
	v := c.shards.Acquire()
	defer v.Release()
	prev := v.Previous()
	if prev == nil {
		return nil, ErrNoResharding
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 100
	}
	if opt.Parallelism <= 0 {
		opt.Parallelism = 4
	}
	m := &Migration{c: c, opt: opt, limiter: rate.NewLimiter(rate.Inf, 0), chunk: opt.BatchSize}
	if opt.KeysPerSecond > 0 {
		// A burst of at most a second's worth of keys, and batches no
		// larger than the burst.
		m.chunk = max(1, min(opt.BatchSize, int(opt.KeysPerSecond)))
		m.limiter = rate.NewLimiter(rate.Limit(opt.KeysPerSecond), m.chunk)
	}
	for i := range prev.Len() {
		idx := v.PreviousIndex(i)
		sh := v.Shard(idx)
		p := &shardProgress{shard: sh.Name, index: idx}
		if p.shard == "" {
			p.shard = sh.Addr
		}
		switch cur, ok := opt.Cursors[p.shard]; {
		case v.Ejected(idx):
			p.done.Store(true) // dead: its keys move as they are used, if it returns
		case ok:
			p.cursor.Store(cur)
		case opt.Cursors != nil:
			p.done.Store(true)
		}
		m.progress = append(m.progress, p)
	}
	return m, nil
}

// Run scans every source shard (Parallelism at a time) and moves each key
// whose new owner is another shard, BatchSize keys per SCAN page, under the
// same per-key locks as the client's commands, so that a key written by
// the application is never overwritten by its older copy. It returns when
// every shard is done, or ctx ends (ctx's error; run again, or with
// Cursors, to resume). Running it again after it finished moves nothing.
// Unless KeepWindow, a complete run ends the resharding window.
func (m *Migration) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(m.opt.Parallelism)
	for _, p := range m.progress {
		if !p.done.Load() {
			g.Go(func() error { return m.runShard(ctx, p) })
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if !m.opt.KeepWindow {
		return m.c.EndResharding()
	}
	return nil
}

func (m *Migration) runShard(ctx context.Context, p *shardProgress) error {
	for {
		v := m.c.shards.Acquire()
		next, err := m.scanPage(ctx, v, p)
		v.Release()
		if err != nil {
			return err
		}
		p.cursor.Store(next)
		if next == 0 {
			p.done.Store(true)
			return nil
		}
	}
}

// scanPage scans one page of source p and moves, BatchSize keys at a time
// (a server may return more keys than COUNT asks), those whose owner is
// another shard. It returns the next cursor.
func (m *Migration) scanPage(ctx context.Context, v *view, p *shardProgress) (uint64, error) {
	if !v.Moving() {
		return 0, ErrNoResharding
	}
	keys, next, err := v.Client(p.index).Scan(ctx, p.cursor.Load(), "", int64(m.opt.BatchSize)).Result()
	if err != nil {
		return 0, fmt.Errorf("shardedcache: migrate: %w", v.Err(p.index, err))
	}
	for batch := range slices.Chunk(keys, m.chunk) {
		if err := m.limiter.WaitN(ctx, len(batch)); err != nil {
			return 0, err
		}
		p.scanned.Add(int64(len(batch)))
		var moved []movedKey
		var gates []<-chan struct{}
		for _, k := range batch {
			// Only keys that the move takes from this shard: a stray copy
			// (left by an ejection or SetShards) is not the key's value.
			from, to, isMoved := v.Moved(k)
			if !isMoved || from != p.index {
				p.skipped.Add(1)
				continue
			}
			moved = append(moved, movedKey{key: k, from: from, to: to})
			if g := v.Gate(k); g != nil && !slices.Contains(gates, g) {
				gates = append(gates, g)
			}
		}
		if len(moved) == 0 {
			continue
		}
		if err := waitGates(ctx, gates); err != nil {
			return 0, err
		}
		var counts moveCounts
		err := m.c.settleWith(ctx, v, moved, nil, func() (err error) {
			counts, err = moveKeys(ctx, v, moved)
			return err
		})
		p.moved.Add(int64(counts.moved))
		p.skipped.Add(int64(counts.skipped))
		if err != nil {
			p.failed.Add(int64(len(moved) - counts.moved - counts.skipped))
			return 0, fmt.Errorf("shardedcache: migrate: %w", err)
		}
	}
	return next, nil
}

// Progress returns each source shard's progress; safe to call while Run
// runs.
func (m *Migration) Progress() []ShardProgress {
	out := make([]ShardProgress, len(m.progress))
	for i, p := range m.progress {
		out[i] = ShardProgress{Shard: p.shard, Scanned: p.scanned.Load(), Moved: p.moved.Load(),
			Skipped: p.skipped.Load(), Failed: p.failed.Load(), Cursor: p.cursor.Load(), Done: p.done.Load()}
	}
	return out
}

// Cursors returns the cursor of every source shard not yet done, for
// MigrateOptions.Cursors of a later run.
func (m *Migration) Cursors() map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range m.progress {
		if !p.done.Load() {
			out[p.shard] = p.cursor.Load()
		}
	}
	return out
}

// waitGates waits until every gate is open, or ctx ends.
func waitGates(ctx context.Context, gates []<-chan struct{}) error {
	for _, g := range gates {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
