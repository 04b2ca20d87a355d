package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func checkCmd() *cobra.Command {
	var fix bool
	var winner string
	var sample int
	c := &cobra.Command{
		Use:   "check LIST",
		Short: "Find keys held by a shard that does not own them; --fix settles them",
		Long: `check scans every shard (Redis: SCAN; memcached: lru_crawler metadump) and
reports each key held by a shard that does not own it under the list's ring
(a stray: a leftover of a cold change of the list, a stand-in's copy written
while its owner was ejected, a copy on the wrong DB), as counts per shard and
a sample of keys with what --fix would do.

--fix prints that plan, then settles each stray key, every step atomic
against live writers:
  - the owner holds a copy: the owner's copy wins, the strays are deleted;
  - the owner holds none and the strays hold one value (one stray, or
    several with the same value): it is added to the owner (Redis RESTORE
    without REPLACE; memcached "ms ... ME", an add), keeping its time to
    live, then the strays are deleted;
  - strays that disagree and no owner's copy: reported and left, unless
    --winner names the shard whose copy wins.
A stray is deleted only if unchanged since it was read (Redis: a script
compares its DUMP; memcached: "md" with its CAS token), and an add never
overwrites a copy written on the owner in between: such a key is settled
the owner's way, or left and reported.

Exit code 1 when strays were found (without --fix) or some were left.`,
		Args: exactArgs("LIST"),
		RunE: func(c *cobra.Command, args []string) error {
			if sample < 0 {
				return configErrorf("--sample: %d is negative", sample)
			}
			return withFleet(args[0], func(f *fleet) error {
				w := -1
				if winner != "" {
					if w = f.shardByName(winner); w < 0 {
						return configErrorf("--winner: no shard named or at %q in %s", winner, args[0])
					}
				}
				strays, err := findStrays(c.Context(), f, c.OutOrStdout())
				if err != nil {
					return err
				}
				if len(strays) == 0 {
					fmt.Fprintln(c.OutOrStdout(), "no stray keys")
					return nil
				}
				if err := planFixes(c.Context(), f, strays, w); err != nil {
					return err
				}
				printStrays(c.OutOrStdout(), f, strays, sample)
				if !fix {
					return errFindings
				}
				left, err := applyFixes(c.Context(), f, strays, c.OutOrStdout())
				if err != nil {
					return err
				}
				if left > 0 {
					return errFindings
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&fix, "fix", false, "settle the stray keys (the plan is printed first)")
	c.Flags().StringVar(&winner, "winner", "", "the shard (name or address) whose copy wins when strays disagree and the owner has none")
	c.Flags().IntVar(&sample, "sample", 10, "stray keys to list")
	return c
}

// shardByName returns the index of the shard named s (or at address s),
// or -1.
func (f *fleet) shardByName(s string) int {
	for _, sh := range f.shards {
		if sh.Name == s || sh.Addr == s {
			return sh.Index
		}
	}
	return -1
}

// stray is a key held by shards that do not own it.
type stray struct {
	Key     string
	Owner   int
	Holders []int // the shards that hold it and do not own it, ascending
	// Filled by planFixes:
	OwnerHas bool
	Copies   []copyOf // the holders' copies, as read (ok[i] false: gone since the scan)
	Present  []bool
	Action   action
	From     int // the holder whose copy moves (actMove)
}

type action int

const (
	actDelete   action = iota // the owner's copy wins: delete the strays
	actMove                   // move the one value to the owner, delete the strays
	actConflict               // strays disagree: left
	actGone                   // every stray went since the scan
)

func (a action) String() string {
	return [...]string{"delete the strays (the owner's copy wins)", "move to the owner", "left: the strays disagree (--winner)", "gone since the scan"}[a]
}

// findStrays scans every shard, prints the counts per shard and returns
// the stray keys in key order.
func findStrays(ctx context.Context, f *fleet, w io.Writer) ([]*stray, error) {
	byKey := map[string]*stray{}
	held := make([]int64, len(f.shards))
	total := make([]int64, len(f.shards))
	for i, s := range f.servers {
		err := s.Scan(ctx, false, func(page []scanned) error {
			for _, k := range page {
				total[i]++
				if o := f.ring.Locate(k.Key); o != i {
					held[i]++
					st := byKey[k.Key]
					if st == nil {
						st = &stray{Key: k.Key, Owner: o}
						byKey[k.Key] = st
					}
					if !slices.Contains(st.Holders, i) { // SCAN may return a key twice
						st.Holders = append(st.Holders, i)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("scanning shard %v: %w", f.shards[i], err)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tKEYS\tSTRAYS\t")
	for i, s := range f.shards {
		fmt.Fprintf(tw, "%v\t%d\t%d\t\n", s, total[i], held[i])
	}
	_ = tw.Flush()
	strays := make([]*stray, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		slices.Sort(byKey[k].Holders)
		strays = append(strays, byKey[k])
	}
	return strays, nil
}

// fixParallelism is the number of stray keys read or settled at once.
const fixParallelism = 16

// eachStray runs fn for every stray, fixParallelism at a time; the first
// error stops the others and is returned.
func eachStray(ctx context.Context, strays []*stray, fn func(ctx context.Context, st *stray) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fixParallelism)
	for _, st := range strays {
		g.Go(func() error { return fn(ctx, st) })
	}
	return g.Wait()
}

// planFixes reads the owner's and the holders' copies of each stray and
// decides its action; winner (-1: none) settles disagreeing strays.
func planFixes(ctx context.Context, f *fleet, strays []*stray, winner int) error {
	return eachStray(ctx, strays, func(ctx context.Context, st *stray) error {
		_, has, err := f.servers[st.Owner].Get(ctx, st.Key)
		if err != nil {
			return fmt.Errorf("reading %q on its owner %v: %w", st.Key, f.shards[st.Owner], err)
		}
		st.OwnerHas = has
		st.Copies = make([]copyOf, len(st.Holders))
		st.Present = make([]bool, len(st.Holders))
		var values []int // holders with a copy
		for i, h := range st.Holders {
			if st.Copies[i], st.Present[i], err = f.servers[h].Get(ctx, st.Key); err != nil {
				return fmt.Errorf("reading %q on %v: %w", st.Key, f.shards[h], err)
			}
			if st.Present[i] {
				values = append(values, i)
			}
		}
		switch {
		case len(values) == 0:
			st.Action = actGone
		case has:
			st.Action = actDelete
		case sameValue(st.Copies, values):
			st.Action, st.From = actMove, values[0]
		case winner >= 0 && slices.Contains(st.Holders, winner) && st.Present[slices.Index(st.Holders, winner)]:
			st.Action, st.From = actMove, slices.Index(st.Holders, winner)
		default:
			st.Action = actConflict
		}
		return nil
	})
}

// sameValue reports whether the copies at idx hold one value (and flags).
func sameValue(copies []copyOf, idx []int) bool {
	for _, i := range idx[1:] {
		if !bytes.Equal(copies[i].Payload, copies[idx[0]].Payload) || copies[i].Flags != copies[idx[0]].Flags {
			return false
		}
	}
	return true
}

// printStrays prints the plan: counts by action and a sample of keys.
func printStrays(w io.Writer, f *fleet, strays []*stray, sample int) {
	counts := map[action]int{}
	for _, st := range strays {
		counts[st.Action]++
	}
	fmt.Fprintf(w, "\n%s: %d where the owner's copy wins, %d to move to their owner, %d with disagreeing copies, %d gone since the scan\n",
		count(len(strays), "stray key", "stray keys"), counts[actDelete], counts[actMove], counts[actConflict], counts[actGone])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHELD BY\tOWNER\tOWNER HAS IT\tFIX\t")
	for _, st := range strays[:min(sample, len(strays))] {
		holders := make([]string, len(st.Holders))
		for i, h := range st.Holders {
			holders[i] = f.shards[h].label()
		}
		fix := st.Action.String()
		if st.Action == actMove {
			fix = fmt.Sprintf("move %s's copy to the owner", f.shards[st.Holders[st.From]].label())
		}
		fmt.Fprintf(tw, "%q\t%v\t%s\t%t\t%s\t\n", st.Key, holders, f.shards[st.Owner].label(), st.OwnerHas, fix)
	}
	_ = tw.Flush()
	if len(strays) > sample {
		fmt.Fprintf(w, "... and %d more\n", len(strays)-sample)
	}
}

// applyFixes settles each stray as planned and returns how many copies
// or keys were left.
func applyFixes(ctx context.Context, f *fleet, strays []*stray, w io.Writer) (int, error) {
	var moved, deleted, changed atomic.Int64
	err := eachStray(ctx, strays, func(ctx context.Context, st *stray) error {
		if st.Action == actConflict {
			return nil
		}
		if st.Action == actMove {
			stored, err := f.servers[st.Owner].Add(ctx, st.Key, st.Copies[st.From])
			if err != nil {
				return fmt.Errorf("adding %q to its owner %v: %w", st.Key, f.shards[st.Owner], err)
			}
			if stored {
				moved.Add(1)
			} // else the owner got a copy since the check: it wins
		}
		for i, h := range st.Holders {
			if !st.Present[i] {
				continue
			}
			ok, err := f.servers[h].DeleteIf(ctx, st.Key, st.Copies[i])
			if err != nil {
				return fmt.Errorf("deleting %q on %v: %w", st.Key, f.shards[h], err)
			}
			if ok {
				deleted.Add(1)
			} else {
				changed.Add(1)
			}
		}
		return nil
	})
	left := 0
	for _, st := range strays {
		if st.Action == actConflict {
			left++
		}
	}
	fmt.Fprintf(w, "\nfixed: %s moved to the owner, %s deleted", count(int(moved.Load()), "copy", "copies"), count(int(deleted.Load()), "stray copy", "stray copies"))
	if n := int(changed.Load()); n > 0 {
		fmt.Fprintf(w, ", %s left, changed since the check (run check again)", count(n, "copy", "copies"))
	}
	if left > 0 {
		fmt.Fprintf(w, ", %s left with disagreeing copies (name the copy that wins with --winner)", count(left, "key", "keys"))
	}
	fmt.Fprintln(w)
	return left + int(changed.Load()), err
}

// count is n and the noun's singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
