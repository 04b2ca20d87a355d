package redis_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// A process that opened a window and moved some keys dies; another opens
// the window again with ResumeResharding and runs the migration: every key
// ends on its new owner. BeginResharding in its place deletes the keys
// already moved, as stale copies.
func TestResumeResharding(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run("resume="+strconv.FormatBool(resume), func(t *testing.T) {
			ctx := context.Background()
			servers := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t), miniredis.RunT(t)}
			var all []shardedredis.ShardOptions
			for i, s := range servers {
				all = append(all, shardedredis.ShardOptions{Name: string(rune('a' + i)), Addr: s.Addr()})
			}
			old, next := all[:2], all
			first, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: old})
			if err != nil {
				t.Fatal(err)
			}
			const n = 200
			for i := range n {
				first.Set(ctx, "k"+strconv.Itoa(i), i, 0)
			}
			if err := first.BeginResharding(next); err != nil {
				t.Fatal(err)
			}
			for i := range n / 2 { // commands move their keys, then the process dies
				first.Get(ctx, "k"+strconv.Itoa(i))
			}
			moved := 0 // keys on their new owner alone (a key caught mid-move is on both)
			for _, k := range servers[2].Keys() {
				if strings.HasPrefix(k, "k") && !servers[0].Exists(k) && !servers[1].Exists(k) { // not the moves' own keys
					moved++
				}
			}
			_ = first.Close()
			if moved == 0 {
				t.Fatal("no key moved before the crash")
			}

			second, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: old})
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			begin := second.BeginResharding
			if resume {
				begin = second.ResumeResharding
			}
			if err := begin(next); err != nil {
				t.Fatal(err)
			}
			m, err := second.NewMigration(shardedredis.MigrateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx); err != nil {
				t.Fatal(err)
			}
			missing := 0
			for i := range n {
				if second.Get(ctx, "k"+strconv.Itoa(i)).Val() != strconv.Itoa(i) {
					missing++
				}
			}
			if want := map[bool]int{true: 0, false: moved}[resume]; missing != want {
				t.Errorf("%d keys missing after the migration, want %d (%d had moved before the crash)", missing, want, moved)
			}
		})
	}
}

// A process took the fleet from two shards to three, saved its
// migration's checkpoint, and died midway; another process resumes the
// window with ResumeResharding (BeginResharding would delete the keys
// already moved as stale copies) and runs the migration from the
// checkpoint, rebound to its own window.
func ExampleShardedClient_ResumeResharding() {
	all, stop := startShards("redis-a", "redis-b", "redis-c")
	defer stop()
	ctx := context.Background()
	old, next := all[:2], all

	first, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: old})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 100 {
		first.Set(ctx, fmt.Sprint("user:", i), i, 0)
	}
	if err := first.BeginResharding(next); err != nil {
		log.Fatal(err)
	}
	m, err := first.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 50 { // keys move as commands use them: the window is half done
		first.Get(ctx, fmt.Sprint("user:", i))
	}
	checkpoint := m.Checkpoint() // saved to a file by the real process
	_ = first.Close()            // the process dies

	second, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: old})
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	if err := second.ResumeResharding(next); err != nil {
		log.Fatal(err)
	}
	checkpoint.Window = second.Window().ID
	m, err = second.NewMigration(shardedredis.MigrateOptions{Resume: checkpoint})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		log.Fatal(err)
	}
	n, _ := second.DBSize(ctx).Result()
	fmt.Println(n, "keys, the window ended:", second.Window() == nil)
	// Output: 100 keys, the window ended: true
}
