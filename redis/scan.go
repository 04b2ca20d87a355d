package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// scanShardBits is the width of the shard index in a sharded SCAN cursor.
const scanShardBits = 16

// scan runs SCAN over every shard in turn. The sharded cursor holds the
// shard's index in its low 16 bits and that shard's own cursor above them,
// so cursor 0 starts at shard 0, a shard's last page leads to the next
// shard with cursor 0, and the last shard's last page returns 0. Each shard
// keeps Redis's SCAN guarantees, so a loop until cursor 0 (or ScanIterator)
// sees every key that exists, on its shard, throughout the scan; ejected
// shards are skipped. A scan that spans SetShards or resharding may miss
// keys that move meanwhile: start it again.
func scan(ctx context.Context, v *view, cmd *goredis.ScanCmd) error {
	args := slices.Clone(cmd.Args())
	s, _ := commands.Arg(args[1])
	cursor, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("shardedcache: scan: cursor %q is not a number", s)
	}
	n := v.Len()
	if n > 1<<scanShardBits {
		return fmt.Errorf("shardedcache: scan: %d shards; a sharded SCAN cursor holds at most %d", n, 1<<scanShardBits)
	}
	shard := int(cursor & (1<<scanShardBits - 1))
	args[1] = cursor >> scanShardBits
	if shard >= n {
		return fmt.Errorf("shardedcache: scan: cursor %d names shard %d of %d", cursor, shard, n)
	}
	for v.Ejected(shard) { // its keys are served by the others: skip it
		if shard++; shard == n {
			cmd.SetVal(nil, 0)
			return nil
		}
		args[1] = uint64(0)
	}
	sub := goredis.NewScanCmd(ctx, nil, args...)
	if err := v.Finish(ctx, shard, v.Client(shard).Process(ctx, sub)); err != nil {
		return err
	}
	page, next := sub.Val()
	switch {
	case next == 0 && shard+1 < n:
		next = uint64(shard + 1)
	case next == 0:
	case next > math.MaxUint64>>scanShardBits:
		return fmt.Errorf("shardedcache: scan: shard %d returned cursor %d, too large to combine with a shard index", shard, next)
	default:
		next = next<<scanShardBits | uint64(shard)
	}
	cmd.SetVal(page, next)
	return nil
}

// randomKey runs RANDOMKEY as one big Redis would: every shard reports its
// DBSIZE and a random key, and a shard is drawn with probability in
// proportion to its DBSIZE, so every key is equally likely. It returns
// redis.Nil when every shard is empty.
func randomKey(ctx context.Context, v *view, cmd *goredis.StringCmd) error {
	n := v.Len()
	sizes := make([]*goredis.IntCmd, n)
	keys := make([]*goredis.StringCmd, n)
	groups := make([][]goredis.Cmder, n)
	for i := range n {
		sizes[i] = goredis.NewIntCmd(ctx, "dbsize")
		keys[i] = goredis.NewStringCmd(ctx, "randomkey")
		if v.Ejected(i) { // owns no key: counts as empty
			sizes[i].SetVal(0)
			keys[i].SetErr(goredis.Nil)
			continue
		}
		groups[i] = []goredis.Cmder{sizes[i], keys[i]}
	}
	execGroups(ctx, v, groups)
	var total int64
	for i := range n {
		if err := sizes[i].Err(); err != nil {
			return err
		}
		if err := keys[i].Err(); err != nil && err != goredis.Nil {
			return err
		}
		total += sizes[i].Val()
	}
	if total == 0 {
		return goredis.Nil
	}
	pick := rand.Int64N(total)
	for i := range n {
		if pick -= sizes[i].Val(); pick < 0 && keys[i].Err() == nil {
			cmd.SetVal(keys[i].Val())
			return nil
		}
	}
	// The drawn shard emptied between DBSIZE and RANDOMKEY: take any key.
	for i := range n {
		if keys[i].Err() == nil {
			cmd.SetVal(keys[i].Val())
			return nil
		}
	}
	return goredis.Nil
}
