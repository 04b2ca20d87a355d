// Package integration holds no code: its subpackages hold the end-to-end
// tests of shardedcache, the sharded clients against in-process servers
// (miniredis, minimemcached) and real redis-server, redis-sentinel,
// memcached and Redis Cluster processes, every result checked on the
// servers themselves. One package per area, so that they run in parallel,
// each well within go test's default timeout:
//
//	cache         go-redis's client-side cache through the shards
//	cluster       a Redis Cluster: the move into it, its slots
//	deadline      what counts as a shard failure (caller deadlines, hung and killed shards)
//	differential  the same random script against one server and the sharded client
//	fleet         several processes' clients of one fleet, attacked
//	memcache      the memcache client, its failures, windows and resharding
//	pubsub        pub/sub across shards and shard changes
//	redis         the Redis client's core commands, failures, autopipelining, wire fuzzing
//	reshard       resharding migrations: safety, races, counts, the reference model
//	reshardcut    migrations cut at each of their commands, then run again
//	reshardresume migrations stopped, then resumed or rerun
//	speed         the side-by-side benchmarks (go test -bench)
//	topology      shard-list changes and server-wide state
//	goredissuite  go-redis's own specs against the sharded client
//
// What the tests share lives in internal/fixtures, and only there: the
// servers (started through internal/serverproc so that they die with the
// test binary, however it ends), the clients over them, the reference
// models, the differential script and the helpers that read the servers.
// Each package's TestMain is fixtures.Main; the real servers a package
// shares (fixtures.SharedRedis, fixtures.SharedCluster) start once per
// package and stop at its end. A test that needs a real server skips when
// the binary is missing, and fails instead under CI=true.
package integration
