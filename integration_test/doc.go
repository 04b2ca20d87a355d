// Package integration holds the end-to-end tests of shardedcache: the sharded
// clients against in-process servers (miniredis), every result checked on the
// servers themselves. It has no code of its own.
package integration
