// Command quickstart shows shardedcache end to end with no Redis installed:
// it starts three in-process Redis servers (miniredis), spreads 10,000 keys
// over them with a ShardedClient, compares each server's key count with the
// ring's exact share, works out what adding a fourth shard would move, and
// reads a few keys back.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

const numKeys = 10_000

var shardNames = []string{"redis-a", "redis-b", "redis-c"}

func main() {
	log.SetFlags(0)
	log.SetPrefix("quickstart: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run does the work; it returns instead of exiting so that the deferred
// Close calls always run.
func run() (err error) {
	ctx := context.Background()

	// 1. Start one in-process Redis server per shard.
	shards := make([]shardedredis.ShardOptions, len(shardNames))
	for i, name := range shardNames {
		srv, err := miniredis.Run()
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		defer srv.Close()
		shards[i] = shardedredis.ShardOptions{Name: name, Addr: srv.Addr()}
	}

	// 2. Build the sharded client. Naming the shards ties each one's place
	// on the ring to its name rather than to its position in the list.
	client, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()

	// 3. Write user:0 .. user:9999 in one pipeline: the client groups the
	// commands by shard and sends one pipeline to each server in parallel.
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	start := time.Now()
	_, err = client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i, k := range keys {
			pipe.Set(ctx, k, "v"+strconv.Itoa(i), 0)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write keys: %w", err)
	}
	fmt.Printf("Wrote %d keys over %d shards in %v.\n\n", numKeys, len(shards), time.Since(start).Round(time.Millisecond))

	// 4. Ask each server how many keys it really holds (DBSIZE on the
	// shard's own client) and set that beside the ring's exact share of the
	// hash space, which is what a uniform key set should approach.
	r3 := client.Ring()
	shares, err := r3.Shares()
	if err != nil {
		return err
	}
	expect := make([]int64, r3.Len()) // keys per shard by the ring's own placement
	for _, k := range keys {
		expect[r3.Locate(k)]++
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "SHARD\tADDRESS\t%6s\t%7s\t%12s\n", "KEYS", "KEYS %", "RING SHARE %")
	total := int64(0)
	for i, sh := range client.Shards() {
		n, err := sh.Client.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("dbsize on %s: %w", sh.Name, err)
		}
		if n != expect[i] {
			return fmt.Errorf("%s holds %d keys, but the ring places %d there", sh.Name, n, expect[i])
		}
		total += n
		fmt.Fprintf(tw, "%s\t%s\t%6d\t%7.2f\t%12.2f\n", sh.Name, sh.Addr, n, pct(int(n), numKeys), 100*shares[i])
	}
	fmt.Fprintf(tw, "total\t\t%6d\t%7.2f\t%12.2f\n", total, pct(int(total), numKeys), 100*sum(shares))
	if err := tw.Flush(); err != nil {
		return err
	}
	// DBSIZE through the sharded client runs on every shard and sums.
	all, err := client.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("dbsize: %w", err)
	}
	if total != numKeys || all != numKeys {
		return fmt.Errorf("servers hold %d keys (client.DBSize says %d), want %d", total, all, numKeys)
	}
	fmt.Printf("client.DBSize (summed over all shards): %d\n\n", all)

	// 5. What would a fourth shard move? Ring.Add builds a new ring in which
	// the existing shards keep their virtual nodes, so a key either stays
	// put or moves to the new shard. Compare measures the moved share
	// exactly, from the two rings' arcs; the loop checks it on our keys.
	r4, err := r3.Add(ring.Node{Name: "redis-d"})
	if err != nil {
		return err
	}
	d, err := ring.Compare(r3, r4)
	if err != nil {
		return err
	}
	newShard := r4.Len() - 1
	toNew, elsewhere, modulo := 0, 0, 0
	for _, k := range keys {
		if from, to := r3.Locate(k), r4.Locate(k); from != to {
			if to == newShard {
				toNew++
			} else {
				elsewhere++
			}
		}
		// Placement by hash modulo the shard count, for comparison.
		h := ring.Murmur64A([]byte(k), ring.JedisMurmurSeed)
		if h%3 != h%4 {
			modulo++
		}
	}
	fmt.Println(`Adding a fourth shard "redis-d" (a ring computation only; no server is added):`)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  hash space that changes owner (exact)\t%7.2f%%\n", 100*d.Moved)
	fmt.Fprintf(tw, "  keys that move, all to redis-d\t%7.2f%%\t(%d of %d)\n", pct(toNew, numKeys), toNew, numKeys)
	fmt.Fprintf(tw, "  keys that move between old shards\t%7.2f%%\t(%d)\n", pct(elsewhere, numKeys), elsewhere)
	fmt.Fprintf(tw, "  keys that would move with hash %% 3 -> %% 4\t%7.2f%%\t(%d of %d)\n", pct(modulo, numKeys), modulo, numKeys)
	if err := tw.Flush(); err != nil {
		return err
	}
	if elsewhere > 0 {
		return fmt.Errorf("%d keys moved between existing shards; only moves to the new shard are expected", elsewhere)
	}
	fmt.Println()

	// 6. Read sample keys back, once through the sharded client and once
	// straight from the owning shard's own go-redis client.
	fmt.Println("Reading keys back:")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tSHARD\tclient.Get\tGetShard(key).Get")
	for _, i := range []int{0, 1, 42, 4711, numKeys - 1} {
		k, want := keys[i], "v"+strconv.Itoa(i)
		viaClient, err := client.Get(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("get %s: %w", k, err)
		}
		viaShard, err := client.GetShard(k).Get(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("get %s from its shard: %w", k, err)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", k, client.GetShardInfo(k).Name, viaClient, viaShard)
		if viaClient != want || viaShard != want {
			_ = tw.Flush()
			return fmt.Errorf("%s: client.Get gave %q, its shard gave %q, want %q", k, viaClient, viaShard, want)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Printf("\nOK: %d keys on %d shards, every sample read back matches; a fourth shard would move %.1f%% of keys (modulo placement: %.1f%%).\n",
		numKeys, len(shards), pct(toNew, numKeys), pct(modulo, numKeys))
	return nil
}

func pct(n, of int) float64 { return 100 * float64(n) / float64(of) }

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}
