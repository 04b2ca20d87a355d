// Package pubsub holds no code: its tests (package pubsub_test) check
// pub/sub across shards, on miniredis and real redis-servers: subscriptions
// that follow shard-list changes, ejection and rejoin, and resharding;
// errors of dead shards; a property test of random shard changes.
package pubsub
