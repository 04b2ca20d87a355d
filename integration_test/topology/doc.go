// Package topology holds no code: its tests (package topology_test) change
// the shard list (SetShards) and check what follows on real redis-servers:
// functions, configuration and hooks on new shards, one server under two
// names or spelled two ways, SCAN cursors after a reorder, keyspace commands
// with a shard ejected.
package topology
