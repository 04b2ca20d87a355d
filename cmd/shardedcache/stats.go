package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func statsCmd() *cobra.Command {
	var watch time.Duration
	c := &cobra.Command{
		Use:   "stats LIST",
		Short: "Keys, memory, ops/s, hit rate and connected clients per shard",
		Long: `stats reads each shard's counters (Redis: DBSIZE and INFO; memcached:
stats) and prints keys, memory used, operations per second, hit rate since
the server started and connected clients. Redis gives its own ops/s
(instantaneous_ops_per_sec); memcached's is measured between two reads a
second apart. Memory and clients are the server's, shared by the DBs of one
Redis server. --watch INTERVAL prints them again every INTERVAL until
interrupted.`,
		Args: exactArgs("LIST"),
		RunE: func(c *cobra.Command, args []string) error {
			if watch < 0 {
				return configErrorf("--watch: %v is negative", watch)
			}
			return withFleet(args[0], func(f *fleet) error {
				return showStats(c.Context(), f, watch, c.OutOrStdout())
			})
		},
	}
	c.Flags().DurationVar(&watch, "watch", 0, "print again every interval (such as 2s) until interrupted")
	return c
}

func showStats(ctx context.Context, f *fleet, watch time.Duration, w io.Writer) error {
	prev, err := readStats(ctx, f)
	if err != nil {
		return err
	}
	at := time.Now()
	if f.mc != nil { // ops/s needs a second read
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	for {
		cur, err := readStats(ctx, f)
		if err != nil {
			return err
		}
		elapsed := time.Since(at).Seconds()
		for i := range cur {
			if cur[i].OpsPerSec < 0 {
				cur[i].OpsPerSec = float64(cur[i].ops-prev[i].ops) / elapsed
			}
		}
		printStats(w, f, cur)
		if watch == 0 {
			return nil
		}
		prev, at = cur, time.Now()
		if err := sleep(ctx, watch); err != nil {
			return nil // interrupted: the last table stands
		}
		fmt.Fprintln(w)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func readStats(ctx context.Context, f *fleet) ([]serverStats, error) {
	st := make([]serverStats, len(f.servers))
	for i, s := range f.servers {
		var err error
		if st[i], err = s.Stats(ctx); err != nil {
			return nil, fmt.Errorf("reading the stats of shard %v: %w", f.shards[i], err)
		}
	}
	return st, nil
}

func printStats(w io.Writer, f *fleet, st []serverStats) {
	fmt.Fprintln(w, time.Now().Format(time.TimeOnly))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SHARD\tKEYS\tMEMORY\tOPS/S\tHIT RATE\tCLIENTS\t")
	for i, s := range st {
		hit := "-"
		if n := s.Hits + s.Misses; n > 0 {
			hit = fmt.Sprintf("%.1f%%", 100*float64(s.Hits)/float64(n))
		}
		fmt.Fprintf(tw, "%v\t%d\t%s\t%.0f\t%s\t%d\t\n", f.shards[i], s.Keys, bytesText(s.Memory), s.OpsPerSec, hit, s.Clients)
	}
	_ = tw.Flush()
}

// bytesText is n in B, KiB, MiB or GiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, suffix[i])
}
