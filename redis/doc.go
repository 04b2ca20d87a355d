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
// Every command is classified by Redis's own command table (key
// specifications and request/response policies of Redis 7.0's COMMAND INFO,
// and of Redis's command specs for every later command go-redis sends,
// module commands included), following Redis's rule for clients of a
// sharded deployment: a command whose keys are all on one shard runs there;
// MGET, MSET, DEL, UNLINK, EXISTS and TOUCH are split by shard and merged;
// any other command whose keys span shards fails with a *CrossShardError
// (errors.Is(err, ErrCrossShard)) before anything is sent; a keyless
// command runs on every shard (replies merged by its response policy), on
// any one shard, or fails with an *UnsupportedError (errors.Is(err,
// ErrUnsupported)) saying what to use instead. Each command method's doc
// says where its command runs. The reference, command by command (SCAN's
// cursors, RANDOMKEY, ejected shards, stale copies, wrong arity, pipelines,
// transactions and Watch, pub/sub, a client of one shard), is written once,
// in the repository's docs/redis.md, section "Where a command runs":
// https://github.com/shardedcache/shardedcache/blob/main/docs/redis.md#where-a-command-runs
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
// the others; its error is then a *shardedclient.MultiShardError naming
// each shard that failed with its error (a server's reply, such as
// FUNCTION LOAD's "already exists" on the one shard that had the library,
// or a *shardedclient.ShardError), so the other shards are known to have
// applied it. When every shard gave the same reply, nothing was applied
// and that reply is returned as one server's. A *CrossShardError and an
// *EjectedError name their shards as shardedclient.ShardRef values
// (Index, Name, Addr). After Close, every call returns redis.ErrClosed.
//
// Every method of redis.Cmdable (go-redis v9.23) is in the table (see
// redis/internal/commands for its sources).
//
// # Server state
//
// A shard is its address and DB (ShardOptions.Addr). What a shard-list
// change (SetShards, BeginResharding) does to what the servers hold:
//
//   - keys: SetShards is cold, a shard that joins serves the keys it has;
//     BeginResharding moves every key to its new owner.
//   - options: a shard whose options change (password, pool, timeouts, ...)
//     gets a new client, with every hook; the old one is closed once its
//     commands have ended. A change of DB is a change of shard (a move).
//   - function libraries: FUNCTION LOAD, DELETE, FLUSH and RESTORE run on
//     every shard (once per server). Once one has run through the client, a
//     shard that joins gets, before it serves a command, an exact copy of
//     the libraries of the first live shard in use that answers (FUNCTION
//     DUMP there, FUNCTION RESTORE with FLUSH on it: libraries it had of
//     its own are replaced), so FCALL works on it and a later FUNCTION LOAD
//     fails ("already exists") or succeeds alike everywhere. If no shard in
//     use answers, the change is refused with a *shardedclient.ShardError.
//   - CONFIG SET made through the client: every parameter is applied again,
//     with its last value, to a shard that joins, before it serves a
//     command (keyspace notifications, for instance, then cover it). A
//     parameter the new server refuses refuses the change, naming the
//     parameter (never its value).
//   - the script cache: not copied (Redis has no SCRIPT DUMP). EVALSHA on a
//     shard that joined fails with NOSCRIPT; go-redis's Script.Run then
//     sends EVAL. Run SCRIPT LOAD through the client again if you rely on
//     EVALSHA.
//   - subscriptions follow their channels (see Subscribe).
//
// What is set on a shard's own client (ForEachShard, GetShard) or outside
// the client is not followed, nor is state a server loses when it restarts
// (CONFIG SET not rewritten, functions not persisted): a shard that rejoins
// after ejection is not brought in step again.
//
// # Observability
//
// AddHook adds a go-redis hook to every shard's client, now and later.
// OnNewNode, with the name and signature of go-redis's Ring.OnNewNode and
// ClusterClient.OnNewNode, hands every shard's client, now and later, to
// per-node instrumentation. redisotel's InstrumentTracing and
// InstrumentMetrics accept a *redis.Client, Ring or ClusterClient only (a
// type switch: "redisotel: *redis.ShardedClient not supported"), so
// instrument each shard's client, whose spans and metrics then carry its
// server.address and server.port:
//
//	rdb.OnNewNode(func(c *goredis.Client) { _ = redisotel.InstrumentTracing(c) })
//
// OnNewShardNode also gives the shard, to name it on every span and metric
// (redisotel.WithAttributes); package otelmetrics exports this client's own
// Stats, health events and migration progress as OpenTelemetry metrics.
//
// go-redis's Prometheus collector (redisprometheus.NewCollector) reads one
// client's pool: in OnNewNode, register one per shard client, labelled by
// its address and DB (prometheus.WrapRegistererWith). fn runs again for a
// shard whose options change, with a new client at the same address and
// DB: unregister the old client's collector first (keep them by label), as
// that of a shard that leaves. PoolStats sums the pools of every shard.
//
// # Autopipelining
//
// A shard whose go-redis options have AutoPipelineOptions (ShardOptions.
// Options, or ShardedOptions.Options for every shard; off by default)
// autopipelines: once ShardedOptions.AutoPipelineFrom (4) of the client's
// commands are on the shard at once, what the client sends there (a
// command, each shard's part of MGET, MSET, DEL, EXISTS, TOUCH, UNLINK and
// the other split commands, each shard's group of a pipeline) joins the
// batches of go-redis's engine for that shard (the shard client's
// AutoPipeline and AsyncAutoPipeline), shared with other goroutines'
// commands: one round trip for many. Below that count a command takes the
// plain path, so a lone caller pays nothing (the engine costs it 2.6 times
// a plain GET's latency on the Speed benchmark's machine). Blocking
// commands, connection state, transactions (TxPipelined, Watch), pub/sub
// and the resharding window's moves keep their plain paths, and a
// pipeline's group that holds a blocking command runs as a plain pipeline,
// in order. On a shard that also caches (see Client-side caching below), a
// read that go-redis caches (GET, MGET, HGET, ...) keeps the plain path
// too, where go-redis answers it from the cache: go-redis's engine consults
// the cache for a batch of one command only.
//
// Routing, refusals, merging, errors naming the shard, health, resharding
// barriers and moves are the same, since they happen before a command reaches
// the engine or after its reply. A batch that fails fails each of its
// commands with the shard's *shardedclient.ShardError, each counted as a
// failure of the shard, as concurrent commands on a plain client are. go-redis
// runs a batch under context.Background(): a caller's deadline does not cut
// its batch short (the shard's ReadTimeout and WriteTimeout bound it), a
// caller whose deadline passed meanwhile gets its deadline (not counted
// against the shard), and hooks see the batch (a redisotel span per batch,
// with no parent). PoolStats includes the engines' pipeline pools; Close
// closes the engines with their clients.
//
// It pays at many concurrent callers: on the Speed benchmark's machine
// (4 redis-servers, 64 goroutines) GET and SET ran 2.8 and 3.0 times as
// many operations per second as go-redis Ring, at 0.43 and 0.37 of Ring's
// CPU per operation and a lower p99 (see docs/speed.md). The client's
// own AutoPipeline is go-redis's engine over the whole client: its batches
// are the client's pipelines, so it coalesces across shards too, but a
// batch waits for its slowest shard.
//
// # Client-side caching
//
// go-redis's server-assisted client-side cache (RESP3, CLIENT TRACKING)
// works through every shard: set Protocol 3 and ClientSideCacheConfig in
// ShardedOptions.Options (every shard) or in a shard's Options (that shard
// only). Each shard gets a go-redis LocalCache of its own (its options'
// ClientSideCache: a cache given there is used as is, but one cache for
// several shards is refused), and serves its cacheable reads (GET, MGET,
// HGET, ... go-redis's list) from memory until its server invalidates
// them. The cost: the cache's memory (MaxEntries, MaxMemoryBytes; 10,000
// entries per shard by default), one CLIENT TRACKING per connection and a
// drainer goroutine per shard client; RESP3 connections; DB 0 only
// (go-redis disables caching on another DB). Sentinel and Cluster shards do
// not cache (go-redis caches on its standalone client only). CacheStats
// gives each shard's hits, misses, entries and size (package otelmetrics
// exports them).
//
// Read-your-writes: once a command that writes a key has returned, no read
// of that key through this client (or another ShardedClient of the process)
// returns the value the write replaced.
// The keys a command writes are those of Redis's key specifications
// flagged RW, OW or RM (and a module's "write" commands, SORT's STORE, the
// declared keys of EVAL and FCALL): single-key commands, split MSET and
// DEL, pipelines, transactions, Watch, scripts, GetShard's and Shards'
// clients alike, since the sharded client drops them from the shard's
// cache after the server answered, before the command returns; FLUSHDB
// and FLUSHALL empty the caches of the shards they ran on. go-redis alone
// applies its own invalidations asynchronously, so it returns the replaced
// value until they arrive. A script that writes keys it does not declare is
// outside the guarantee.
//
// Writes made elsewhere (another process, another client) are seen once
// go-redis applies their invalidation: within its DrainInterval (5 ms by
// default) on an idle connection, bounded by MaxStaleness when set;
// docs/caching.md gives measured figures, and what go-redis's
// ClientSideCacheCoalesceMisses (misses fetched on a connection held for
// them) and autopipelining change at many goroutines.
//
// Under change: a key moved in a resharding window (by a command, the
// migration, or the servers' MIGRATE) is dropped from both owners' caches
// before it can be read; a shard that rejoins after an ejection starts with
// an empty cache (its invalidations were lost with its connections); a
// shard that SetShards adds or changes gets a new client and cache, and one
// that stays keeps a cache that answers for its own server, as its reads
// would. Caching changes no routing: a read returns what the shard that
// owns the key holds, as an uncached read would.
//
// # Failures and resharding
//
// ShardedOptions.Health chooses what a failing shard does to its keys (they
// fail, or the shard is ejected and they move); ShardOptions.Failover makes a
// shard a Sentinel-managed group. SetShards changes the shard list at run
// time; BeginResharding, NewMigration and Migration.Run move keys to a new
// shard list without a cold cache.
//
// # A fleet that moves into Redis Cluster
//
// Processes that share the shards join one fleet (JoinFleet) and move
// into a Redis Cluster together: one of them (or the command-line tool)
// drives the move with fleet.Reshard and this client's FleetBackend, the
// target being the cluster alone,
//
//	target := []fleet.Shard{{Name: "cluster", Addr: "10.0.0.1:7000,10.0.0.2:7000", Cluster: true}}
//	_, err := fleet.Reshard(ctx, store, rdb.FleetBackend(redis.MigrateOptions{}), target, fleet.DriverOptions{})
//
// and every member follows its steps (package fleet, "The move into a
// Redis Cluster"): the cluster is emptied of stale copies and the old
// servers fenced; each key moves off its old server before its first
// command, by the fleet's atomic move, whose restoring script runs on the
// master of the key's hash slot with that slot's token records; a
// migration moves the rest; then every command goes to the cluster. The
// cluster client of each process takes ShardedOptions.Options (username,
// password, TLS, timeouts, pool) for its nodes, as the fleet's store holds
// no credentials. No acknowledged write is lost and no read is stale,
// whichever processes crash or pause; the cluster must hold no other data,
// migrate no slot and fail no master over while the move runs. One process
// alone (BeginClusterMove) runs the same moves without a store or fence.
package redis
