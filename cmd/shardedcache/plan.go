package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shardedcache/shardedcache/ring"
)

func planCmd() *cobra.Command {
	var scan bool
	c := &cobra.Command{
		Use:   "plan OLD NEW",
		Short: "The exact share of the key space that moves between each pair of shards",
		Long: `plan compares the ring of the OLD shard list with that of the NEW one
(ring.Compare: exact, over the key hash's whole range) and prints the share
that moves from each shard to each other. A shard is the same shard in both
lists when it has the same address and DB, whatever its name.

With --scan it also counts, on the OLD list's servers, the keys and bytes
that would move (Redis: SCAN and MEMORY USAGE; memcached: lru_crawler
metadump), and the stray keys already on a shard that does not own them
(see check), which a reshard also settles.`,
		Args: exactArgs("OLD", "NEW"),
		RunE: func(c *cobra.Command, args []string) error {
			return withFleet(args[0], func(old *fleet) error {
				return withFleet(args[1], func(next *fleet) error {
					if old.list.Backend != next.list.Backend {
						return configErrorf("%s is a %s list, %s a %s list", args[0], old.list.Backend, args[1], next.list.Backend)
					}
					diff, err := planDiff(old, next)
					if err != nil {
						return err
					}
					var counts map[[2]int]*moveCount
					if scan {
						if counts, err = scanMoves(c.Context(), old, next); err != nil {
							return err
						}
					}
					printPlan(c.OutOrStdout(), old, next, diff, counts)
					return nil
				})
			})
		},
	}
	c.Flags().BoolVar(&scan, "scan", false, "count the keys and bytes that would move, on the OLD list's servers")
	return c
}

// planDiff is the backend client's own plan (its shard identities).
func planDiff(old, next *fleet) (ring.Diff, error) {
	if old.rdb != nil {
		return old.rdb.PlanResharding(next.list.Redis.Shards)
	}
	return old.mc.PlanResharding(next.list.Memcache.Shards)
}

// ringOwners is key's owner under old's ring and next's, and whether it
// moves (ring.Owners).
func ringOwners(old, next *fleet, key string) (from, to int, moved bool) {
	return ring.Owners(old.ring, next.ring, key)
}

// moveCount is what a scan found for one (from, to) pair: to is -1 for
// keys that stay, from -1 for stray keys.
type moveCount struct{ Keys, Bytes int64 }

// strayPair is the key of scanMoves' count of stray keys.
var strayPair = [2]int{-1, -1}

// scanMoves scans every shard of old and counts each key by its owners
// in old and next: moving pairs, keys that stay ({from, -1}) and strays.
func scanMoves(ctx context.Context, old, next *fleet) (map[[2]int]*moveCount, error) {
	counts := map[[2]int]*moveCount{}
	add := func(k [2]int, size int64) {
		if counts[k] == nil {
			counts[k] = &moveCount{}
		}
		counts[k].Keys++
		counts[k].Bytes += size
	}
	for i, s := range old.servers {
		err := s.Scan(ctx, true, func(page []scanned) error {
			for _, k := range page {
				from, to, moved := ringOwners(old, next, k.Key)
				switch {
				case from != i:
					add(strayPair, k.Size)
				case moved:
					add([2]int{from, to}, k.Size)
				default:
					add([2]int{from, -1}, k.Size)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("scanning shard %v: %w", old.shards[i], err)
		}
	}
	return counts, nil
}

func printPlan(w io.Writer, old, next *fleet, diff ring.Diff, counts map[[2]int]*moveCount) {
	fmt.Fprintf(w, "%.4f%% of the key space moves\n\n", diff.Moved*100)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "FROM\tTO\tSHARE\t"
	if counts != nil {
		head += "KEYS\tBYTES\t"
	}
	fmt.Fprintln(tw, head)
	for _, m := range diff.Moves {
		fmt.Fprintf(tw, "%v\t%v\t%.4f%%\t", old.shards[m.From], next.shards[m.To], m.Share*100)
		if counts != nil {
			n := counts[[2]int{m.From, m.To}]
			if n == nil {
				n = &moveCount{}
			}
			fmt.Fprintf(tw, "%d\t%d\t", n.Keys, n.Bytes)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	if counts == nil {
		return
	}
	var moving, staying moveCount
	for k, n := range counts {
		switch {
		case k == strayPair:
		case k[1] == -1:
			staying.Keys, staying.Bytes = staying.Keys+n.Keys, staying.Bytes+n.Bytes
		default:
			moving.Keys, moving.Bytes = moving.Keys+n.Keys, moving.Bytes+n.Bytes
		}
	}
	fmt.Fprintf(w, "\nscanned: %d keys move (%d bytes), %d stay (%d bytes)", moving.Keys, moving.Bytes, staying.Keys, staying.Bytes)
	if n := counts[strayPair]; n != nil {
		fmt.Fprintf(w, "; %s on shards that do not own them (see check)", count(int(n.Keys), "stray copy", "stray copies"))
	}
	fmt.Fprintln(w)
}
