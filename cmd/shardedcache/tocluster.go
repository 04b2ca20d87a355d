package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

func toClusterCmd() *cobra.Command {
	var opt reshardOptions
	var dryRun bool
	c := &cobra.Command{
		Use:   "to-cluster LIST CLUSTER-ADDR...",
		Short: "Move every key of a redis shard list into a Redis Cluster, with progress; resumable",
		Long: `to-cluster prints the cluster plan (PlanClusterMove: how the keys spread over
the cluster's masters, the key groups that share a Jedis key tag but would
span hash slots, and the keys the masters hold now), then, unless --dry-run,
opens the move (BeginClusterMove), moves every key to its slot's master with
a progress bar, and ends the window. The cluster is reached with the list's
shared options (username, password, timeouts).

It saves a checkpoint as reshard does (default LIST.to-cluster.checkpoint.json):
run the same command again to resume after a crash or an interrupt. A fresh
move is refused (exit 2) while the cluster's masters hold keys, which the
move deletes as stale copies, unless --drop-existing. As with reshard, the
applications' clients must follow the change.`,
		Args: minArgs("LIST", "CLUSTER-ADDR"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := opt.check(); err != nil {
				return err
			}
			if opt.checkpoint == "" {
				opt.checkpoint = args[0] + ".to-cluster.checkpoint.json"
			}
			return withFleet(args[0], func(f *fleet) error {
				if f.rdb == nil {
					return configErrorf("to-cluster: %s is not a redis list", args[0])
				}
				shared := f.list.Redis.Options
				copt := &goredis.ClusterOptions{Addrs: args[1:], Username: shared.Username, Password: shared.Password,
					DialTimeout: shared.DialTimeout, ReadTimeout: shared.ReadTimeout, WriteTimeout: shared.WriteTimeout}
				plan, err := f.rdb.PlanClusterMove(c.Context(), copt, 0)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), plan)
				fmt.Fprintln(c.OutOrStdout())
				if dryRun {
					return nil
				}
				// BeginClusterMove's list: one shard, the cluster, named
				// "cluster" and identified by its sorted seeds.
				seeds := slices.Sorted(slices.Values(args[1:]))
				ch := change{old: f,
					shards: []shardedredis.ShardOptions{{Name: "cluster", Cluster: &shardedredis.ClusterShard{Options: copt}}},
					refs:   []shardRef{{Name: "cluster", Addr: "cluster:" + strings.Join(seeds, ","), Weight: 1}},
					preflight: func(context.Context) error {
						for _, n := range plan.Nodes {
							if n.Existing > 0 && !opt.dropStale {
								return configErrorf("the cluster's master %s holds %d keys, which the move would delete as stale copies (another application's keys, or a move already begun whose checkpoint file is missing); pass --drop-existing to go ahead", n.Addr, n.Existing)
							}
						}
						return nil
					}}
				return ch.run(c.Context(), opt, plan.Scanned, c.OutOrStdout(), c.ErrOrStderr())
			})
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan only")
	c.Flags().StringVar(&opt.checkpoint, "checkpoint", "", "the checkpoint file (default LIST.to-cluster.checkpoint.json)")
	c.Flags().Float64Var(&opt.rate, "rate", 0, "keys scanned per second at most (0: no limit)")
	c.Flags().IntVar(&opt.batch, "batch", 0, "keys per SCAN page and per move (0: 200)")
	c.Flags().BoolVar(&opt.dropStale, "drop-existing", false, "go ahead when the cluster's masters hold keys: the move deletes them")
	return c
}
