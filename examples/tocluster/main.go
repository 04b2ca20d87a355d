// Command tocluster moves a sharded cache into a Redis Cluster, warm and
// live: 100,000 keys on three sharded redis-servers, under read and write
// traffic, are moved into a three-master cluster (started here from the
// redis-server and redis-cli in PATH); the plan, a progress bar, the key
// groups that would be split, the move's keys/s and the live GETs' latency
// are printed, and every value and TTL is checked at the end, through a
// plain redis.ClusterClient.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"github.com/shardedcache/shardedcache/internal/rediscluster"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

const keys = 100_000

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tocluster:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	servers, err := rediscluster.StartServers(sctx, 3)
	if errors.Is(err, rediscluster.ErrNoBinaries) {
		return fmt.Errorf("this example starts its own servers: %w", err)
	} else if err != nil {
		return err
	}
	defer servers.Stop()
	cluster, err := rediscluster.Start(sctx, 3, 0, time.Second)
	if err != nil {
		return err
	}
	defer cluster.Stop()

	var shards []shardedredis.ShardOptions
	for i, addr := range servers.Addrs() {
		shards = append(shards, shardedredis.ShardOptions{Name: fmt.Sprintf("cache-%d", i), Addr: addr})
	}
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards, Placement: ring.Jedis{KeyTags: true}})
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := fill(ctx, rdb); err != nil {
		return err
	}

	opt := &goredis.ClusterOptions{Addrs: cluster.Addrs()}
	plan, err := rdb.PlanClusterMove(ctx, opt, 0)
	if err != nil {
		return err
	}
	fmt.Printf("plan:\n%s\n\n", plan)

	// Live traffic: writers own "live:<w>:<i>" keys and remember their last
	// value; readers GET the filled keys and time each GET.
	stop := make(chan struct{})
	var traffic sync.WaitGroup
	var mu sync.Mutex
	last := map[string]string{}
	var latencies []time.Duration
	var wrong atomic.Int64
	for w := range 2 {
		traffic.Go(func() {
			for round := 0; ; round++ {
				for i := range 200 {
					select {
					case <-stop:
						return
					default:
					}
					k, v := fmt.Sprintf("live:%d:%d", w, i), strconv.Itoa(round)
					if rdb.Set(ctx, k, v, 0).Err() == nil {
						mu.Lock()
						last[k] = v
						mu.Unlock()
					}
				}
			}
		})
	}
	for r := range 2 {
		traffic.Go(func() {
			for i := r; ; i += 7 {
				select {
				case <-stop:
					return
				default:
				}
				n := i % keys
				start := time.Now()
				got, err := rdb.Get(ctx, key(n)).Result()
				d := time.Since(start)
				if n%4 < 2 && (err != nil || got != strconv.Itoa(n)) {
					wrong.Add(1)
				}
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
			}
		})
	}

	if err := rdb.BeginClusterMove(shardedredis.ClusterShard{Options: opt}); err != nil {
		return err
	}
	m, err := rdb.NewMigration(shardedredis.MigrateOptions{BatchSize: 500, KeysPerSecond: 40_000})
	if err != nil {
		return err
	}
	bar := progressbar.Default(keys, "moving into the cluster")
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- m.Run(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	for running := true; running; {
		select {
		case err = <-done:
			running = false
		case <-tick.C:
		}
		var scanned int64
		for _, p := range m.Progress() {
			scanned += p.Scanned
		}
		_ = bar.Set64(min(scanned, keys))
	}
	tick.Stop()
	took := time.Since(began)
	close(stop)
	traffic.Wait()
	if err != nil {
		return fmt.Errorf("migration: %w", err)
	}
	var moved int64
	for _, p := range m.Progress() {
		moved += p.Moved + p.OnNewOwner
	}
	slices.Sort(latencies)
	pct := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	fmt.Printf("\nmoved %d keys in %v: %.0f keys/s (limit 40000)\n", moved, took.Round(time.Millisecond), float64(moved)/took.Seconds())
	fmt.Printf("live GETs during the move: %d, p50 %v, p99 %v, max %v; wrong answers: %d\n",
		len(latencies), pct(0.5), pct(0.99), latencies[len(latencies)-1], wrong.Load())

	if err := check(ctx, opt, last); err != nil {
		return err
	}
	fmt.Printf("every one of the %d keys and %d live keys has its value and TTL on the cluster\n", keys, len(last))
	if got, err := rdb.Get(ctx, key(4)).Result(); err != nil || got != "4" {
		return fmt.Errorf("the sharded client after the move: GET %s = %q, %v", key(4), got, err)
	}
	fmt.Println("the same ShardedClient now serves from the cluster; switch to redis.NewClusterClient at the next deploy")
	return nil
}

// key is the name of filled key n: users' keys with Jedis key tags, some
// of which ({}-edge tags) Redis Cluster hashes differently.
func key(n int) string {
	if n%1000 == 999 {
		return fmt.Sprintf("{}}user:%d", n) // Jedis tag "}", no Redis Cluster tag
	}
	return fmt.Sprintf("{user:%d}:%d", n/2, n)
}

// fill writes the keys: n mod 4 = 0 a string with a TTL of 1 h, 1 a string,
// 2 a hash, 3 a list.
func fill(ctx context.Context, rdb *shardedredis.ShardedClient) error {
	for from := 0; from < keys; from += 1000 {
		if _, err := rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for n := from; n < from+1000; n++ {
				switch n % 4 {
				case 0:
					p.Set(ctx, key(n), n, time.Hour)
				case 1:
					p.Set(ctx, key(n), n, 0)
				case 2:
					p.HSet(ctx, key(n), "n", n)
				default:
					p.RPush(ctx, key(n), n, n+1)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// check reads every key through a plain ClusterClient: value and TTL.
func check(ctx context.Context, opt *goredis.ClusterOptions, live map[string]string) error {
	o := *opt
	cc := goredis.NewClusterClient(&o)
	defer cc.Close()
	for from := 0; from < keys; from += 1000 {
		cmds, err := cc.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for n := from; n < from+1000; n++ {
				p.Dump(ctx, key(n)) // exists, whatever its type
				p.PTTL(ctx, key(n))
				switch n % 4 {
				case 0, 1:
					p.Get(ctx, key(n))
				case 2:
					p.HGet(ctx, key(n), "n")
				default:
					p.LIndex(ctx, key(n), 0)
				}
			}
			return nil
		})
		if err != nil && err != goredis.Nil {
			return err
		}
		for i, n := 0, from; n < from+1000; i, n = i+3, n+1 {
			ttl := cmds[i+1].(*goredis.DurationCmd).Val()
			val := cmds[i+2].(*goredis.StringCmd).Val()
			ttlOK := n%4 == 0 && ttl > 50*time.Minute && ttl <= time.Hour || n%4 != 0 && ttl == -1
			if val != strconv.Itoa(n) || !ttlOK {
				return fmt.Errorf("key %s: value %q, TTL %v after the move", key(n), val, ttl)
			}
		}
	}
	for k, v := range live {
		if got := cc.Get(ctx, k).Val(); got != v {
			return fmt.Errorf("live key %s = %q after the move, want %q", k, got, v)
		}
	}
	return nil
}
