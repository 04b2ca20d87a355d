// Command reshard adds a fourth shard to three embedded Redis shards holding
// 100,000 keys, without a cold cache: it prints the exact plan, opens the
// resharding window, migrates in the background while a goroutine keeps
// reading and writing random keys, and checks at the end that every key is
// on its new owner with its last value and its TTL, and that the reader
// never missed a key that existed.
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

const numKeys = 100_000

func key(i int) string { return fmt.Sprintf("user:%d", i) }

// hasTTL: every fifth key expires in an hour.
func hasTTL(i int) bool { return i%5 == 0 }

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	var servers []*miniredis.Miniredis
	var shards []shardedredis.ShardOptions
	for i := range 4 {
		s, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer s.Close()
		servers = append(servers, s)
		shards = append(shards, shardedredis.ShardOptions{Name: fmt.Sprintf("redis-%c", 'a'+i), Addr: s.Addr()})
	}
	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards[:3]})
	if err != nil {
		return err
	}
	defer client.Close()

	// 100,000 keys on three shards.
	last := make([]atomic.Value, numKeys) // the last value written to each key
	if _, err := client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range numKeys {
			v := fmt.Sprintf("v%d", i)
			last[i].Store(v)
			ttl := time.Duration(0)
			if hasTTL(i) {
				ttl = time.Hour
			}
			p.Set(ctx, key(i), v, ttl)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Printf("%d keys on %d shards\n\n", numKeys, 3)

	// The exact plan: what share of the hash space changes owner.
	plan, err := client.PlanResharding(shards)
	if err != nil {
		return err
	}
	fmt.Print("Plan for adding redis-d: ", plan)

	// The window: keys are placed by the new ring from now on, and a key
	// not yet on its new owner is moved there before a command uses it.
	if err := client.BeginResharding(shards); err != nil {
		return err
	}

	// A reader and a writer on random keys while the migration runs.
	var reads, writes, misses atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var trafficErr atomic.Value
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			i := rng.IntN(numKeys)
			if rng.IntN(4) == 0 { // one write in four
				v := fmt.Sprintf("w%d", writes.Add(1))
				ttl := time.Duration(0)
				if hasTTL(i) {
					ttl = time.Hour
				}
				if err := client.Set(ctx, key(i), v, ttl).Err(); err != nil {
					trafficErr.Store(err)
					return
				}
				last[i].Store(v)
				continue
			}
			reads.Add(1)
			switch err := client.Get(ctx, key(i)).Err(); {
			case err == goredis.Nil:
				misses.Add(1)
			case err != nil:
				trafficErr.Store(err)
				return
			}
		}
	})

	m, err := client.NewMigration(shardedredis.MigrateOptions{BatchSize: 200})
	if err != nil {
		return err
	}
	bar := progressbar.NewOptions64(numKeys, progressbar.OptionSetDescription("migrating (keys scanned)"),
		progressbar.OptionSetWriter(os.Stdout), progressbar.OptionShowCount(), progressbar.OptionSetWidth(40),
		progressbar.OptionThrottle(50*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for err = nil; ; {
		var scanned int64
		for _, p := range m.Progress() {
			scanned += p.Scanned
		}
		_ = bar.Set64(scanned)
		select {
		case err = <-done:
		case <-tick.C:
			continue
		}
		break
	}
	_ = bar.Finish() // keys moved by the traffic itself were not left to scan
	fmt.Println()
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if e := trafficErr.Load(); e != nil {
		return e.(error)
	}

	fmt.Printf("%-28s %8s %8s %8s %8s %6s %6s %6s\n", "SOURCE", "SCANNED", "OWNED", "MOVED", "ON-NEW", "GONE", "STALE", "FAILED")
	for _, p := range m.Progress() {
		fmt.Printf("%-28s %8d %8d %8d %8d %6d %6d %6d\n", p.Shard, p.Scanned, p.Owned, p.Moved, p.OnNewOwner, p.Gone, p.Stale, p.Failed)
	}
	fmt.Printf("traffic during the migration: %d reads (%d misses), %d writes\n\n", reads.Load(), misses.Load(), writes.Load())

	// Every key on its new owner, with its last value and its TTL.
	var onNew int
	for i := range numKeys {
		owner := client.GetShardInfo(key(i)).Index
		for j, s := range servers {
			if s.Exists(key(i)) != (j == owner) {
				return fmt.Errorf("%s: on server %d = %v, but its owner is %d", key(i), j, s.Exists(key(i)), owner)
			}
		}
		if v, _ := servers[owner].Get(key(i)); v != last[i].Load().(string) {
			return fmt.Errorf("%s = %q, its last write was %q", key(i), v, last[i].Load())
		}
		if (servers[owner].TTL(key(i)) > 0) != hasTTL(i) {
			return fmt.Errorf("%s lost or gained its TTL", key(i))
		}
		if owner == 3 {
			onNew++
		}
	}
	if misses.Load() != 0 {
		return fmt.Errorf("the reader missed %d keys that existed", misses.Load())
	}
	fmt.Printf("OK: all %d keys on their owners with their last values and TTLs; %d (%.2f%%) now on redis-d, the plan said %.2f%%; no read missed.\n",
		numKeys, onNew, 100*float64(onNew)/numKeys, 100*plan.Moved)
	return nil
}
