package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/time/rate"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// mcSweep is the migration of a memcache resharding window, which the
// memcache package leaves to the keys' use (memcached cannot list its
// keys): it lists every old shard's keys with lru_crawler metadump and
// reads, through the client in the window, those whose owner changes, in
// batches: each read moves its keys (memcache.BeginResharding). A key
// already moved is no longer on its old owner and is not read again, so a
// sweep cut short is resumed by running it again.
type mcSweep struct {
	old, next *fleet
	limit     *rate.Limiter // nil: none

	mu       sync.Mutex
	progress []shardedredis.ShardProgress
}

// mcBatch is the number of keys read by one GetMulti.
const mcBatch = 100

func newMCSweep(old, next *fleet, keysPerSecond float64) *mcSweep {
	s := &mcSweep{old: old, next: next, progress: make([]shardedredis.ShardProgress, len(old.shards))}
	for i, sh := range old.shards {
		s.progress[i] = shardedredis.ShardProgress{ID: sh.Addr, Shard: "shard " + sh.String(), Name: sh.Name, Addr: sh.Addr}
	}
	if keysPerSecond > 0 {
		s.limit = rate.NewLimiter(rate.Limit(keysPerSecond), mcBatch)
	}
	return s
}

// Progress is each old shard's counts: Scanned, Owned (stay), Moved,
// Gone (expired or deleted since the dump) and Failed.
func (s *mcSweep) Progress() []shardedredis.ShardProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shardedredis.ShardProgress(nil), s.progress...)
}

func (s *mcSweep) add(i int, fn func(p *shardedredis.ShardProgress)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.progress[i])
}

// Run sweeps the old shards one after the other. It returns ctx's error,
// or the first read that failed (the sweep goes on past it).
func (s *mcSweep) Run(ctx context.Context) error {
	var firstErr error
	for i, srv := range s.old.servers {
		err := srv.Scan(ctx, false, func(page []scanned) error {
			var batch []string
			for _, k := range page {
				from, _, moved := ringOwners(s.old, s.next, k.Key)
				switch {
				case from != i: // a stray: check settles it
				case moved:
					batch = append(batch, k.Key)
				default:
					s.add(i, func(p *shardedredis.ShardProgress) { p.Scanned++; p.Owned++ })
				}
			}
			for len(batch) > 0 {
				n := min(len(batch), mcBatch)
				if err := s.move(ctx, i, batch[:n]); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					firstErr = cmp.Or(firstErr, err)
				}
				batch = batch[n:]
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return firstErr
}

// move reads keys through the client in the window, which moves them.
func (s *mcSweep) move(ctx context.Context, i int, keys []string) error {
	if s.limit != nil {
		if err := s.limit.WaitN(ctx, len(keys)); err != nil {
			return err
		}
	}
	hits, err := s.old.mc.GetMultiContext(ctx, keys)
	s.add(i, func(p *shardedredis.ShardProgress) {
		p.Scanned += int64(len(keys))
		if err != nil {
			p.Failed += int64(len(keys) - len(hits))
		} else {
			p.Gone += int64(len(keys) - len(hits))
		}
		p.Moved += int64(len(hits))
	})
	return err
}

// reshardMemcache opens the window, sweeps it with a progress bar and
// ends it once every key moved.
func reshardMemcache(ctx context.Context, old, next *fleet, opt reshardOptions, stdout, stderr io.Writer) error {
	if opt.serverSide || opt.checkpoint != "" || opt.batch != 0 {
		return configErrorf("reshard: --server-side, --checkpoint and --batch are for redis lists; a memcache reshard is resumed by running it again")
	}
	total, err := keyCount(ctx, old)
	if err != nil {
		return err
	}
	if err := old.mc.BeginResharding(next.list.Memcache.Shards, shardedmc.ReshardOptions{}); err != nil {
		return err
	}
	sweep := newMCSweep(old, next, opt.rate)
	runErr := runWithProgress(ctx, sweep, total, nil, stderr)
	printProgress(stdout, sweep.Progress())
	if runErr != nil {
		// The window is left to die with this process: the keys not moved
		// are on their old owners, which the next run sweeps.
		return fmt.Errorf("%w\nrun the same command again to move the keys left on their old owners", runErr)
	}
	if err := old.mc.EndResharding(); err != nil {
		return err
	}
	st := old.mc.ReshardStats()
	fmt.Fprintf(stdout, "\nevery key moved (%d values, %d dropped as too large for their new owner); the window is ended\n",
		st.MovedWithTTL+st.MovedWithCopyExpiration, st.TooLarge)
	return nil
}
