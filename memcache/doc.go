// Package memcache will be the gomemcache backend of shardedcache: a
// consistent-hash memcache.ServerSelector and a sharded client over several
// gomemcache clients. It holds no code yet; see the project's issue tracker.
package memcache
