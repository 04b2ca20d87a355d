// Package integration_test holds the end-to-end tests of shardedcache: the
// sharded clients against in-process servers (miniredis, minimemcached) and
// real redis-server, redis-sentinel and memcached processes, every result
// checked on the servers themselves. It has no code of its own.
package integration_test
