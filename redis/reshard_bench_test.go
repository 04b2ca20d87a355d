package redis

import (
	"context"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// twoShards returns a one-shard client and the options of that shard plus a
// second one, to reshard onto.
func twoShards(b *testing.B) (*ShardedClient, []ShardOptions) {
	b.Helper()
	opts := []ShardOptions{{Name: "a", Addr: miniredis.RunT(b).Addr()}, {Name: "b", Addr: miniredis.RunT(b).Addr()}}
	c, err := NewShardedClient(&ShardedOptions{Shards: opts[:1]})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, opts
}

func fill(b *testing.B, c *ShardedClient, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			p.Set(ctx, prefix+strconv.Itoa(i), i, 0)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMigrate moves the keys of one miniredis shard that a second
// shard takes over (about half of 20,000); keys/s is the migration rate.
func BenchmarkMigrate(b *testing.B) {
	ctx := context.Background()
	var moved int64
	for b.Loop() {
		b.StopTimer()
		c, opts := twoShards(b)
		fill(b, c, "key:", 20000)
		if err := c.BeginResharding(opts); err != nil {
			b.Fatal(err)
		}
		m, err := c.NewMigration(MigrateOptions{BatchSize: 500})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := m.Run(ctx); err != nil {
			b.Fatal(err)
		}
		for _, p := range m.Progress() {
			moved += p.Moved
		}
	}
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkGetInWindow is a GET during the resharding window of a key whose
// owner changed: "moved" when it already is on its new owner (one extra
// round trip to find the old owner empty), "fallback" when it is still on
// the old owner and the GET moves it first.
func BenchmarkGetInWindow(b *testing.B) {
	ctx := context.Background()
	c, opts := twoShards(b)
	const n = 50000
	fill(b, c, "key:", n)
	if err := c.BeginResharding(opts); err != nil {
		b.Fatal(err)
	}
	var movedKeys []string
	for i := range n {
		k := "key:" + strconv.Itoa(i)
		if c.GetShardInfo(k).Index == 1 {
			movedKeys = append(movedKeys, k)
		}
	}
	b.Run("fallback", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == len(movedKeys) {
				b.Fatalf("more iterations than the %d keys to move; raise n", len(movedKeys))
			}
			if err := c.Get(ctx, movedKeys[i]).Err(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("moved", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := c.Get(ctx, movedKeys[i%len(movedKeys)]).Err(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
