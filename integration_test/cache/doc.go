// Package cache holds no code: its tests (package cache_test) check
// go-redis's client-side cache through the shards, on real redis-servers:
// reading one's own writes, staleness without the invalidation hook, stats,
// keys moved by resharding, a reference model, other clients' writes,
// OpenTelemetry metrics, and a shard ejected and rejoining.
package cache
