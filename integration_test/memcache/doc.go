// Package memcache holds no code: its tests (package memcache_test) run the
// memcache client on minimemcached and real memcached processes: placement,
// GetMulti, dead and hung shards, CAS tokens across ejections and windows,
// resharding windows with their reference model, binary keys, and the wire
// fuzz test.
package memcache
