package main

import (
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

func toClusterCmd() *cobra.Command {
	var dryRun bool
	var rate float64
	c := &cobra.Command{
		Use:   "to-cluster LIST CLUSTER-ADDR...",
		Short: "Move every key of a redis shard list into a Redis Cluster, with progress",
		Long: `to-cluster prints the cluster plan (PlanClusterMove: how the keys spread over
the cluster's masters, the key groups that share a Jedis key tag but would
span hash slots, and the keys the masters hold now, which the move deletes),
then, unless --dry-run, opens the move (BeginClusterMove), moves every key to
its slot's master with a progress bar, and ends the window.

The cluster is reached with the list's shared options (username, password,
timeouts). As with reshard, the applications' clients must follow the
change.`,
		Args: minArgs("LIST", "CLUSTER-ADDR"),
		RunE: func(c *cobra.Command, args []string) error {
			return withFleet(args[0], func(f *fleet) error {
				if f.rdb == nil {
					return configErrorf("to-cluster: %s is not a redis list", args[0])
				}
				shared := f.list.Redis.Options
				opt := &goredis.ClusterOptions{Addrs: args[1:], Username: shared.Username, Password: shared.Password,
					DialTimeout: shared.DialTimeout, ReadTimeout: shared.ReadTimeout, WriteTimeout: shared.WriteTimeout}
				plan, err := f.rdb.PlanClusterMove(c.Context(), opt, 0)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), plan)
				if dryRun {
					return nil
				}
				if err := f.rdb.BeginClusterMove(shardedredis.ClusterShard{Options: opt}); err != nil {
					return err
				}
				m, err := f.rdb.NewMigration(shardedredis.MigrateOptions{KeysPerSecond: rate})
				if err != nil {
					return err
				}
				err = runWithProgress(c.Context(), m, plan.Scanned, nil, c.ErrOrStderr())
				printProgress(c.OutOrStdout(), m.Progress())
				if err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), "\nevery key is in the cluster; the window is ended")
				return nil
			})
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan only")
	c.Flags().Float64Var(&rate, "rate", 0, "keys scanned per second at most (0: no limit)")
	return c
}
