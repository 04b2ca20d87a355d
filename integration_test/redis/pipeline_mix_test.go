package redis_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestPipelineMix sends the same random pipelines, each mixing
// keyless commands, multi-key commands split over shards, calls that break
// a command's arity, refused commands and plain ones, through a client over
// three servers and to one plain redis-server: every reply and error is
// the same (a refused command aside: an *UnsupportedError, sent nowhere),
// and so is every key's value afterwards.
func TestPipelineMix(t *testing.T) {
	t.Run("steady", func(t *testing.T) { pipelineMix(t, false) })
	t.Run("window", func(t *testing.T) { pipelineMix(t, true) })
}

// pipelineMix is TestPipelineMix; in a resharding window from two
// servers to three when window (no DBSIZE then: the old copies count).
func pipelineMix(t *testing.T, window bool) {
	procs := fixtures.SharedRedis(t, 4)
	var shards []shardedredis.ShardOptions
	for i, p := range procs[:3] {
		shards = append(shards, shardedredis.ShardOptions{Name: string(rune('a' + i)), Addr: p.Addr})
	}
	first := shards
	if window {
		first = shards[:2]
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: first})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	plain := goredis.NewClient(&goredis.Options{Addr: procs[3].Addr})
	defer plain.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	key := func() string { return "pm:" + strconv.Itoa(rng.IntN(12)) }
	keys := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = key()
		}
		return out
	}
	gen := func() (args []any, refused bool) {
		switch rng.IntN(16) {
		case 0:
			return []any{"set", key(), strconv.Itoa(rng.IntN(100))}, false
		case 1:
			return []any{"get", key()}, false
		case 2:
			return append([]any{"mget"}, keys(1+rng.IntN(5))...), false
		case 3:
			return append([]any{"del"}, keys(1+rng.IntN(4))...), false
		case 4:
			args := []any{"mset"}
			for range 1 + rng.IntN(4) {
				args = append(args, key(), "m"+strconv.Itoa(rng.IntN(100)))
			}
			return args, false
		case 5:
			return append([]any{"exists"}, keys(1+rng.IntN(5))...), false
		case 6:
			return []any{"ping"}, false
		case 7:
			return []any{"echo", "hi" + strconv.Itoa(rng.IntN(9))}, false
		case 8:
			return []any{"mget"}, false // arity
		case 9:
			return []any{"GET"}, false // arity, upper case
		case 10:
			return []any{"mset", key()}, false // arity
		case 11:
			return []any{"select", "0"}, true
		case 12:
			return []any{"incr", key()}, false
		case 13:
			if window {
				return []any{"strlen", key()}, false
			}
			return []any{"dbsize"}, false
		case 14:
			return append([]any{"touch"}, keys(1+rng.IntN(4))...), false
		default:
			return []any{"config"}, false // arity, no subcommand
		}
	}
	if window {
		// Every key on the old servers, then the window opens.
		for i := range 12 {
			k := "pm:" + strconv.Itoa(i)
			if err := c.Set(ctx, k, "s"+k, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := plain.Set(ctx, k, "s"+k, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.BeginResharding(shards); err != nil {
			t.Fatal(err)
		}
		defer c.AbandonResharding()
	}
	for round := range 30 {
		var sent [][]any
		var refused []bool
		for range 1 + rng.IntN(40) {
			a, r := gen()
			sent = append(sent, a)
			refused = append(refused, r)
		}
		got, _ := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, a := range sent {
				p.Do(ctx, a...)
			}
			return nil
		})
		want, _ := plain.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, a := range sent {
				if !refused[i] {
					p.Do(ctx, a...)
				}
			}
			return nil
		})
		w := 0
		for i, cmd := range got {
			if refused[i] {
				var u *shardedredis.UnsupportedError
				if !errors.As(cmd.Err(), &u) {
					t.Errorf("round %d cmd %d %v: %v, want an *UnsupportedError", round, i, sent[i], cmd.Err())
				}
				continue
			}
			g, wc := cmd.(*goredis.Cmd), want[w].(*goredis.Cmd)
			w++
			if gs, ws := fmt.Sprint(g.Val(), " ", g.Err()), fmt.Sprint(wc.Val(), " ", wc.Err()); gs != ws {
				t.Errorf("round %d cmd %d %v: sharded %s, plain %s", round, i, sent[i], gs, ws)
			}
		}
	}
	for i := range 12 {
		k := "pm:" + strconv.Itoa(i)
		g, ge := c.Get(ctx, k).Result()
		w, we := plain.Get(ctx, k).Result()
		if g != w || (ge == nil) != (we == nil) {
			t.Errorf("%s: sharded %q %v, plain %q %v", k, g, ge, w, we)
		}
	}
}
