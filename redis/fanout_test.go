package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// answerHook answers every command on the shard client it is added to
// without sending it, with answer(cmd) as the command's error (nil: a
// reply was set).
type answerHook func(cmd goredis.Cmder) error

func (h answerHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h answerHook) ProcessHook(goredis.ProcessHook) goredis.ProcessHook {
	return func(_ context.Context, cmd goredis.Cmder) error {
		err := h(cmd)
		cmd.SetErr(err)
		return err
	}
}

func (h answerHook) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(_ context.Context, cmds []goredis.Cmder) error {
		var first error
		for _, cmd := range cmds {
			if err := h(cmd); err != nil {
				cmd.SetErr(err)
				first = cmp.Or(first, err)
			}
		}
		return first
	}
}

// A split MGET's values come back in key order, each from its key's shard,
// whether it runs alone or in a pipeline; a part that fails, or answers
// with a value too few, fails the whole command and leaves no partial
// reply.
func TestSplitMGetMergesByKey(t *testing.T) {
	ctx := context.Background()
	c := unreachableShards(t, 4)
	// Shard i answers an MGET part with "<i>:<key>" per key; a DEL part
	// with its number of keys; bad[i] changes that.
	bad := make([]string, 4)
	for i, sh := range c.Shards() {
		sh.Client.AddHook(answerHook(func(cmd goredis.Cmder) error {
			args := cmd.Args()[1:]
			switch bad[i] {
			case "fail":
				return fmt.Errorf("shard %d refused", i)
			case "short":
				args = args[1:]
			}
			switch cmd.Name() {
			case "mget":
				vals := make([]any, len(args))
				for j, k := range args {
					vals[j] = strconv.Itoa(i) + ":" + k.(string)
				}
				cmd.(*goredis.Cmd).SetVal(vals)
			case "del":
				cmd.(*goredis.Cmd).SetVal(int64(len(args)))
			}
			return nil
		}))
	}
	keys := make([]string, 50)
	want := make([]any, len(keys))
	shards := map[int]bool{}
	for j := range keys {
		keys[j] = "k" + strconv.Itoa(j)
		i := c.GetShardInfo(keys[j]).Index
		want[j], shards[i] = strconv.Itoa(i)+":"+keys[j], true
	}
	if len(shards) != 4 {
		t.Fatalf("the keys are on %d shards, want 4", len(shards))
	}
	alone := func() ([]any, error) { return c.MGet(ctx, keys...).Result() }
	piped := func() ([]any, error) {
		var cmd *goredis.SliceCmd
		_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.Get(ctx, "other")
			cmd = p.MGet(ctx, keys...)
			return nil
		})
		return cmd.Result()
	}
	for name, mget := range map[string]func() ([]any, error){"alone": alone, "in a pipeline": piped} {
		clear(bad)
		got, err := mget()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: MGET = %v, %v; want %v", name, got, err, want)
		}
		n, err := c.Del(ctx, keys...).Result()
		if err != nil || n != int64(len(keys)) {
			t.Fatalf("%s: DEL = %d, %v; want %d (the parts' counts summed)", name, n, err, len(keys))
		}
		bad[2] = "fail"
		got, err = mget()
		var multi *shardedclient.MultiShardError
		if !errors.As(err, &multi) || len(multi.Shards) != 1 || multi.Shards[0].Index != 2 || got != nil {
			t.Fatalf("%s: shard 2 failing: MGET = %v, %v; want no values and a *MultiShardError naming shard 2 alone", name, got, err)
		}
		bad[2] = "short"
		got, err = mget()
		if err == nil || err.Error() != "shardedcache: mget: unexpected reply []interface {} from shard 2" || got != nil {
			t.Fatalf("%s: shard 2 one value short: MGET = %v, %v; want no values and the unexpected-reply error", name, got, err)
		}
	}
}
