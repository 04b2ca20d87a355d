// Command memcache shows the memcache backend end to end with no memcached
// installed: it starts three in-process memcached servers (minimemcached),
// writes 10,000 keys through a ShardedClient, asks each server how many it
// holds, then adds a fourth shard and counts what moved, next to what
// gomemcache's default ServerList (crc32 % N) moves for the same change.
//
//	go run ./examples/memcache
package main

import (
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/daangn/minimemcached"
	"github.com/rs/zerolog"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

const numKeys = 10_000

var shardNames = []string{"cache-a", "cache-b", "cache-c", "cache-d"}

func main() {
	log.SetFlags(0)
	log.SetPrefix("memcache example: ")
	zerolog.SetGlobalLevel(zerolog.WarnLevel) // minimemcached logs every Close at info level
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run does the work; it returns instead of exiting so that the deferred
// Close calls always run.
func run() (err error) {
	// 1. Four in-process memcached servers: three now, one for later.
	addrs := make([]string, len(shardNames))
	for i, name := range shardNames {
		srv, err := minimemcached.Run(&minimemcached.Config{Port: 0}) // a free port
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		defer srv.Close()
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", srv.Port())
	}

	// 2. A sharded client over the first three. Naming the shards ties each
	// one's place on the ring to its name, not to its position or address.
	client3, err := newClient(addrs[:3])
	if err != nil {
		return err
	}
	defer closeInto(&err, client3)

	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	start := time.Now()
	for _, k := range keys {
		if err := client3.Set(&gomemcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	fmt.Printf("%d keys written through the ShardedClient over 3 shards in %v\n\n", numKeys, time.Since(start).Round(time.Millisecond))

	// 3. Ask each server, with a plain one-server client, what it holds.
	held, err := countOnServers(addrs[:3], keys)
	if err != nil {
		return err
	}
	shares, err := client3.Ring().Shares()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\taddress\tkeys held\tring share\t")
	for i := range 3 {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f%%\t\n", shardNames[i], addrs[i], held[i], 100*shares[i])
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	// 4. Add a fourth shard. ring.Compare says exactly what share moves
	// before anything is done; the 4-shard client then finds every key
	// except those that cache-d now owns.
	client4, err := newClient(addrs)
	if err != nil {
		return err
	}
	defer closeInto(&err, client4)
	diff, err := ring.Compare(client3.Ring(), client4.Ring())
	if err != nil {
		return err
	}
	found, err := client4.GetMulti(keys)
	if err != nil {
		return err
	}
	moved, toNew := 0, 0
	for _, k := range keys {
		if found[k] == nil {
			moved++
			if client4.GetShardInfo(k).Name == "cache-d" {
				toNew++
			}
		}
	}
	fmt.Printf("\nadding a 4th shard (cache-d) to the ring:\n")
	fmt.Printf("  ring.Compare:  %.2f%% of the hash space moves:", 100*diff.Moved)
	for _, m := range diff.Moves {
		fmt.Printf(" %s->%s %.2f%%", shardNames[m.From], shardNames[m.To], 100*m.Share)
	}
	fmt.Println()
	fmt.Printf("  counted:       %d of %d keys (%.2f%%) no longer found, %d of them now cache-d's\n",
		moved, numKeys, 100*float64(moved)/numKeys, toNew)
	if toNew != moved {
		return fmt.Errorf("%d missing keys are not cache-d's", moved-toNew)
	}

	// 5. The same change with gomemcache's default selector: write through
	// memcache.New(3 servers), read through memcache.New(4 servers).
	if err := client4.FlushAll(); err != nil {
		return err
	}
	moduloMoved, err := moduloMove(addrs, keys)
	if err != nil {
		return err
	}
	exact, err := compareModulo(addrs)
	if err != nil {
		return err
	}
	fmt.Printf("\nthe same change with gomemcache's ServerList (crc32 %% N):\n")
	fmt.Printf("  ring.Compare:  %.2f%% of the hash space moves (ring.Gomemcache{})\n", 100*exact)
	fmt.Printf("  counted:       %d of %d keys (%.2f%%) no longer found\n", moduloMoved, numKeys, 100*float64(moduloMoved)/numKeys)
	return nil
}

func newClient(addrs []string) (*memcache.ShardedClient, error) {
	shards := make([]memcache.ShardOptions, len(addrs))
	for i, a := range addrs {
		shards[i] = memcache.ShardOptions{Name: shardNames[i], Addr: a, MaxIdleConns: 4}
	}
	return memcache.NewShardedClient(&memcache.ShardedOptions{Shards: shards})
}

// closeInto closes c and, if err is nil, sets it to Close's error.
func closeInto(err *error, c interface{ Close() error }) {
	if cerr := c.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close: %w", cerr)
	}
}

// countOnServers returns, per server, how many of keys it holds, asking it
// directly.
func countOnServers(addrs, keys []string) ([]int, error) {
	counts := make([]int, len(addrs))
	for i, a := range addrs {
		direct := gomemcache.New(a)
		for chunk := range slices.Chunk(keys, 500) {
			items, err := direct.GetMulti(chunk)
			if err != nil {
				direct.Close()
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			counts[i] += len(items)
		}
		if err := direct.Close(); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// moduloMove writes keys through gomemcache's memcache.New over the first
// three servers and counts those that memcache.New over all four no longer
// finds.
func moduloMove(addrs, keys []string) (moved int, err error) {
	three, four := gomemcache.New(addrs[:3]...), gomemcache.New(addrs...)
	defer closeInto(&err, three)
	defer closeInto(&err, four)
	for _, k := range keys {
		if err := three.Set(&gomemcache.Item{Key: k, Value: []byte("v-" + k)}); err != nil {
			return 0, fmt.Errorf("set %s: %w", k, err)
		}
	}
	for chunk := range slices.Chunk(keys, 500) {
		items, err := four.GetMulti(chunk)
		if err != nil {
			return 0, err
		}
		moved += len(chunk) - len(items)
	}
	return moved, nil
}

// compareModulo is the exact share that moves from crc32 % 3 to crc32 % 4.
func compareModulo(addrs []string) (float64, error) {
	nodes := make([]ring.Node, len(addrs))
	for i, a := range addrs {
		nodes[i] = ring.Node{Addr: a}
	}
	r3, err := ring.New(nodes[:3], ring.Gomemcache{})
	if err != nil {
		return 0, err
	}
	r4, err := ring.New(nodes, ring.Gomemcache{})
	if err != nil {
		return 0, err
	}
	d, err := ring.Compare(r3, r4)
	return d.Moved, err
}
