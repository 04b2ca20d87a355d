// Package deadline holds no code: its tests (package deadline_test) check
// what counts as a shard failure, on real redis-servers and memcached: the
// caller's deadline or cancel never does, a killed or hung shard does,
// within one attempt of its own timeouts; with property tests of the health
// counters.
package deadline
