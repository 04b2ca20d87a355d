package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

func reshardCmd() *cobra.Command {
	var opt reshardOptions
	var fo fleetOptions
	c := &cobra.Command{
		Use:   "reshard OLD NEW",
		Short: "Move every key from the OLD shard list to the NEW one, with progress; resumable",
		Long: `reshard prints the plan, opens a resharding window from OLD to NEW
(BeginResharding), moves every key whose owner changes with a Migration,
showing keys scanned, keys/s and the time left, and ends the window.

It saves the migration's checkpoint every second, and when it stops (Ctrl-C,
a failure), to --checkpoint (default NEW.checkpoint.json). Run the same
command again to resume from it after a crash or an interrupt: the window is
opened again without removing the keys already moved (ResumeResharding) and
the scan continues where it stood. The file is removed once every key moved.

This process moves the keys; the applications' clients must follow the same
change (stopped, or switched to NEW at the same time) so that none writes a
key to its old owner meanwhile, unless they are a fleet's members (--etcd,
below).

For a memcache list, keys move as they are read in the window
(memcache.BeginResharding): reshard lists every old shard's keys
(lru_crawler metadump) and reads those whose owner changes, in batches, then
ends the window. A key moved is gone from its old owner, so a run cut short
is resumed by running it again (no checkpoint file; --rate applies).

With --etcd and --prefix, reshard drives the change of a fleet whose
processes joined it (JoinFleet with package fleet/etcdstore's store, under
that prefix), redis or memcache: fleet.Reshard takes the store's driver
lock and stores each step, which every member follows, while this process
removes stale copies, fences the old owners (redis) and runs the migration,
with the same progress bar. The store's list must be OLD's shards; the
change's state in the store is its checkpoint (no file): after a crash, a
kill or a Ctrl-C, which leaves the fleet paused safely at its step, run the
same command again and it resumes the change (fleet.Resume). A fleet's
shards are named and share the list's options (username, password): the
store holds no credentials.`,
		Args: exactArgs("OLD", "NEW"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := opt.check(); err != nil {
				return err
			}
			if fo.on() {
				if err := fo.check(opt); err != nil {
					return err
				}
			}
			return withFleet(args[0], func(old *fleet) error {
				return withFleet(args[1], func(next *fleet) error {
					if old.list.Backend != next.list.Backend {
						return configErrorf("%s is a %s list, %s a %s list", args[0], old.list.Backend, args[1], next.list.Backend)
					}
					diff, err := planDiff(old, next)
					if err != nil {
						return err
					}
					printPlan(c.OutOrStdout(), old, next, diff, nil)
					fmt.Fprintln(c.OutOrStdout())
					if fo.on() {
						return reshardFleet(c.Context(), old, next, opt, fo, c.OutOrStdout(), c.ErrOrStderr())
					}
					if old.mc != nil {
						return reshardMemcache(c.Context(), old, next, opt, c.OutOrStdout(), c.ErrOrStderr())
					}
					if opt.checkpoint == "" {
						opt.checkpoint = args[1] + ".checkpoint.json"
					}
					total, err := keyCount(c.Context(), old)
					if err != nil {
						return err
					}
					ch := change{old: old, shards: next.list.Redis.Shards, refs: next.shards,
						preflight: func(ctx context.Context) error { return preflight(ctx, old, next, opt.dropStale) }}
					return ch.run(c.Context(), opt, total, c.OutOrStdout(), c.ErrOrStderr())
				})
			})
		},
	}
	c.Flags().StringVar(&opt.checkpoint, "checkpoint", "", "the checkpoint file (default NEW.checkpoint.json; redis)")
	c.Flags().Float64Var(&opt.rate, "rate", 0, "keys scanned per second at most, over all shards (0: no limit)")
	c.Flags().BoolVar(&opt.serverSide, "server-side", false, "move keys with Redis's MIGRATE, server to server")
	c.Flags().IntVar(&opt.batch, "batch", 0, "keys per SCAN page and per move (0: 200)")
	c.Flags().BoolVar(&opt.dropStale, "drop-stale", false, "go ahead when NEW's shards hold keys that NEW places there and OLD does not: they are deleted as stale")
	c.Flags().StringSliceVar(&fo.etcd, "etcd", nil, "drive the change of a fleet whose store is in this etcd: its endpoints, comma-separated (host:port or http://host:port)")
	c.Flags().StringVar(&fo.prefix, "prefix", "", "the fleet's key prefix in etcd, as its members give it to etcdstore.New (with --etcd)")
	c.Flags().DurationVar(&fo.lockTTL, "lock-ttl", 0, "the lease of the fleet's driver lock: after a crash, another run takes over once it ran out (with --etcd; 0: 10s)")
	return c
}

// check refuses negative numbers, naming the flag.
func (o reshardOptions) check() error {
	switch {
	case o.rate < 0:
		return configErrorf("--rate: %v is negative", o.rate)
	case o.batch < 0:
		return configErrorf("--batch: %d is negative", o.batch)
	}
	return nil
}

type reshardOptions struct {
	checkpoint string
	rate       float64
	serverSide bool
	batch      int
	dropStale  bool
}

// checkpointFile is what reshard and to-cluster save: the two lists' shards, so that a
// checkpoint of another change is refused, and the migration's checkpoint.
type checkpointFile struct {
	Old, New   []shardRef
	Checkpoint *shardedredis.Checkpoint
}

// change is a change of a redis fleet's shard list, which reshard and
// to-cluster run: from old's list to shards (refs names them in the
// checkpoint file). preflight runs before a fresh window opens.
type change struct {
	old       *fleet
	shards    []shardedredis.ShardOptions
	refs      []shardRef
	preflight func(ctx context.Context) error
}

// run opens the window (or resumes it from the checkpoint file), migrates
// with a progress bar of total keys, saving the checkpoint, and ends the
// window.
func (ch change) run(ctx context.Context, opt reshardOptions, total int64, stdout, stderr io.Writer) error {
	m, err := ch.begin(ctx, opt)
	if err != nil {
		return err
	}
	save := func() error { return saveCheckpoint(opt.checkpoint, ch, m.Checkpoint()) }
	if err := save(); err != nil { // before any key moves
		return err
	}
	runErr := runWithProgress(ctx, m, total, save, stderr)
	printProgress(stdout, m.Progress())
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = errors.New("interrupted")
		}
		if err := save(); err != nil {
			return errors.Join(runErr, err)
		}
		return fmt.Errorf("%w\nthe checkpoint is saved in %s: run the same command again to resume", runErr, opt.checkpoint)
	}
	fmt.Fprintf(stdout, "\nevery key moved; the window is ended\n")
	return os.Remove(opt.checkpoint)
}

// begin opens the window and returns its migration: a fresh one, or,
// when the checkpoint file exists, one that resumes it. (A change
// coordinated across the application processes will open the window
// through the fleet's store instead, fleet.Reshard with the client's
// FleetBackend, whose progress feeds the same bar.)
func (ch change) begin(ctx context.Context, opt reshardOptions) (*shardedredis.Migration, error) {
	mo := shardedredis.MigrateOptions{BatchSize: opt.batch, KeysPerSecond: opt.rate, ServerSide: opt.serverSide}
	cf, err := loadCheckpoint(opt.checkpoint)
	if err != nil {
		return nil, err
	}
	rdb := ch.old.rdb
	if cf == nil {
		if err := ch.preflight(ctx); err != nil {
			return nil, err
		}
		if err := rdb.BeginResharding(ch.shards); err != nil {
			return nil, err
		}
		return rdb.NewMigration(mo)
	}
	if !slices.Equal(cf.Old, ch.old.shards) || !slices.Equal(cf.New, ch.refs) || cf.Checkpoint == nil {
		return nil, configErrorf("%s is the checkpoint of another change (its lists' shards differ from these); remove it only if that change was finished or abandoned", opt.checkpoint)
	}
	if err := rdb.ResumeResharding(ch.shards); err != nil {
		return nil, err
	}
	cf.Checkpoint.Window = rdb.Window().ID
	mo.Resume = cf.Checkpoint
	return rdb.NewMigration(mo)
}

// keyCount is the number of keys f's shards hold, for the progress bar.
func keyCount(ctx context.Context, f *fleet) (int64, error) {
	var total int64
	for i, s := range f.servers {
		n, err := s.Count(ctx)
		if err != nil {
			return 0, fmt.Errorf("counting the keys of shard %v: %w", f.shards[i], err)
		}
		total += n
	}
	return total, nil
}

// preflight refuses to open a window while NEW's shards hold keys that
// NEW places there and OLD does not, unless dropStale: BeginResharding
// deletes them as stale copies, which is right for leftovers of an
// earlier cold change and wrong when the change has already run (a second
// run of the same reshard, a lost checkpoint file).
func preflight(ctx context.Context, old, next *fleet, dropStale bool) error {
	if dropStale {
		return nil
	}
	var n int64
	var sample string
	for j, s := range next.servers {
		err := s.Scan(ctx, false, func(page []scanned) error {
			for _, k := range page {
				if _, to, moved := ringOwners(old, next, k.Key); moved && to == j {
					n++
					sample = k.Key
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("scanning shard %v: %w", next.shards[j], err)
		}
	}
	if n > 0 {
		return configErrorf("NEW's shards already hold %d keys that NEW places there and OLD does not (%q, ...): the change may have run already, or a checkpoint file is missing; check the lists, and pass --drop-stale to delete them as stale copies and go ahead", n, sample)
	}
	return nil
}

// loadCheckpoint reads the checkpoint file at path; nil when there is none.
func loadCheckpoint(path string) (*checkpointFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, configErrorf("--checkpoint: %v", err)
	}
	var cf checkpointFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return nil, configErrorf("--checkpoint %s: %v", path, err)
	}
	return &cf, nil
}

// saveCheckpoint writes the checkpoint file atomically: a temporary file,
// synced, renamed over it.
func saveCheckpoint(path string, ch change, cp *shardedredis.Checkpoint) error {
	b, err := json.MarshalIndent(checkpointFile{Old: ch.old.shards, New: ch.refs, Checkpoint: cp}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is none
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// progressMigration is what runWithProgress runs: a redis.Migration.
type progressMigration interface {
	Run(ctx context.Context) error
	Progress() []shardedredis.ShardProgress
}

// runWithProgress runs m, showing keys scanned of total on a progress bar
// (keys/s, time left) on w, and calls save every second while it runs.
func runWithProgress(ctx context.Context, m progressMigration, total int64, save func() error, w io.Writer) error {
	bar := progressbar.NewOptions64(max(total, 1), progressbar.OptionSetDescription("moving keys"),
		progressbar.OptionSetWriter(w), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("keys"), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSave := time.Now()
	for {
		var scanned int64
		for _, p := range m.Progress() {
			scanned += p.Scanned
		}
		_ = bar.Set64(min(scanned, max(total, 1)))
		select {
		case err := <-done:
			_ = bar.Finish()
			return err
		case <-tick.C:
		}
		if save != nil && time.Since(lastSave) >= time.Second {
			if err := save(); err != nil {
				fmt.Fprintf(w, "\nsaving the checkpoint: %v\n", err)
			}
			lastSave = time.Now()
		}
	}
}

// printProgress prints each source shard's counts.
func printProgress(w io.Writer, ps []shardedredis.ShardProgress) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tSCANNED\tSTAYED\tMOVED\tON NEW OWNER\tGONE\tSTALE\tFAILED\t")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.Shard, p.Scanned, p.Owned, p.Moved, p.OnNewOwner, p.Gone, p.Stale, p.Failed)
	}
	_ = tw.Flush()
}
