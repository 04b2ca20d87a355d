package redis_test

import (
	"context"
	"strconv"
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
			moved := len(servers[2].Keys())
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
