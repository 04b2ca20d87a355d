// Package integration holds no code: its external test package,
// integration_test (every file of this folder but this one), holds the
// end-to-end tests of shardedcache: the sharded clients against in-process
// servers (miniredis, minimemcached) and real redis-server, redis-sentinel
// and memcached processes, every result checked on the servers themselves.
package integration
