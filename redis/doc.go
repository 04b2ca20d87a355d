// Package redis is the go-redis backend of shardedcache: ShardedClient spreads
// keys over several Redis servers on a consistent-hash ring (Jedis's
// ShardedJedis placement by default) and offers go-redis's own command
// methods, with their exact signatures and result types.
//
// *ShardedClient satisfies redis.UniversalClient, so code written against
// redis.UniversalClient or redis.Cmdable switches by changing its
// constructor (methods of *redis.Client outside those interfaces, such as
// Conn, Options, WithTimeout or Wait, have no sharded counterpart):
//
//	rdb, err := redis.NewShardedClient(&redis.ShardedOptions{
//		Shards: []redis.ShardOptions{{Addr: "10.0.0.1:6379"}, {Addr: "10.0.0.2:6379"}},
//	})
//	rdb.Set(ctx, "user:42", "ada", 0) // runs on the shard that owns "user:42"
//
// # Where a command runs
//
// Every command is classified by Redis's own command table (COMMAND INFO of
// Redis 7: key specifications and request/response policies):
//
//   - a command whose keys are all on one shard runs on that shard;
//   - a multi-key command that Redis marks multi_shard (MGET, MSET, DEL,
//     UNLINK, EXISTS, TOUCH) is split by shard, the parts run in parallel, and
//     the replies are merged: values in argument order, counts summed;
//   - any other command whose keys span shards fails with a *CrossShardError
//     (errors.Is(err, ErrCrossShard)) before anything is sent; key tags
//     (ring.WithKeyTags) put related keys on one shard;
//   - a keyless command that Redis runs on all shards (PING, DBSIZE,
//     FLUSHDB, FLUSHALL, KEYS, SCRIPT LOAD, CONFIG SET) runs on every live
//     shard and the replies are merged by its response policy (DBSIZE
//     summed, PING and FLUSHDB succeed when every shard does, KEYS
//     concatenated); SCAN walks the shards one after the other (the cursor
//     holds the shard), RANDOMKEY draws a shard by its DBSIZE;
//   - PUBLISH and SPUBLISH go to the shard of the channel; Subscribe and
//     SSubscribe subscribe on each channel's shard, PSubscribe on every
//     shard, and one *redis.PubSub delivers every message;
//   - other keyless commands (INFO, CONFIG GET, ECHO, CLIENT ...), commands
//     whose keys cannot be known from their arguments, and fan-outs whose
//     replies cannot be merged into the go-redis result type fail with an
//     *UnsupportedError (errors.Is(err, ErrUnsupported)) before anything is
//     sent; ForEachShard runs anything on every shard;
//   - pipelines run one pipeline per shard, in parallel, with results in call
//     order; TxPipeline and Watch run on one shard, and the *redis.Tx of
//     Watch refuses commands for other shards' keys.
//
// A transport failure of one shard (refused connection, timeout, failed TLS
// handshake) is returned as a *shardedclient.ShardError that names the shard
// and wraps the cause, and so is the server's refusal to set up a
// connection: authentication (wrong password, unknown ACL user, NOAUTH),
// SELECT of a DB out of range, CLIENT SETNAME; redis.IsAuthError and
// errors.As see through the ShardError to the reply. Both count as the
// shard's failures in Stats and its health. Redis's replies to the command
// itself (WRONGTYPE, ...) and redis.Nil are returned as go-redis returns
// them. A command that reached several shards fails as a whole when
// any shard fails: no partial reply is returned as if complete. A split
// write (MSET, DEL, FLUSHDB) that fails on one shard may have been applied on
// the others; the error names the shard that failed.
//
// The command table is Redis 7.0.15's; commands that Redis added later are
// refused with an *UnsupportedError until the table covers them.
//
// # Failures and resharding
//
// ShardedOptions.Health chooses what a failing shard does to its keys (they
// fail, or the shard is ejected and they move); ShardOptions.Failover makes a
// shard a Sentinel-managed group. SetShards changes the shard list at run
// time; BeginResharding, NewMigration and Migration.Run move keys to a new
// shard list without a cold cache.
package redis
