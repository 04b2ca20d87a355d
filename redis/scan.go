package redis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// scan runs SCAN over every shard in turn. The sharded cursor encodes the
// shard and that shard's own cursor as shardCursor*N + shard (N shards), so
// cursor 0 starts at shard 0, a shard's last page leads to shard+1 with
// cursor 0, and the last shard's last page returns 0. Each shard keeps
// Redis's SCAN guarantees, so a loop until cursor 0 (or ScanIterator) sees
// every key that exists throughout the scan at least once, and a key that
// stays on one shard is reported by that shard only.
func (c *ShardedClient) scan(ctx context.Context, cmd *goredis.ScanCmd) error {
	args := slices.Clone(cmd.Args())
	s, _ := commands.Arg(args[1])
	cursor, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("shardedcache: scan: cursor %q is not a number", s)
	}
	n := uint64(c.shards.Len())
	shard := int(cursor % n)
	args[1] = cursor / n
	sub := goredis.NewScanCmd(ctx, nil, args...)
	if err := c.wrapErr(shard, c.shards.Shard(shard).Client.Process(ctx, sub)); err != nil {
		return err
	}
	page, next := sub.Val()
	switch {
	case next == 0 && uint64(shard)+1 < n:
		next = uint64(shard) + 1
	case next == 0:
	case next > (math.MaxUint64-uint64(shard))/n:
		return fmt.Errorf("shardedcache: scan: shard %d returned cursor %d, too large to combine with %d shards", shard, next, n)
	default:
		next = next*n + uint64(shard)
	}
	cmd.SetVal(page, next)
	return nil
}
