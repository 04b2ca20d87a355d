// Package redis holds no code: its tests (package redis_test) check the
// Redis client's core on miniredis and real redis-servers: placement,
// multi-key commands split and merged or refused, pipelines, keyless
// fan-out, WATCH, SCAN; dead, hung and killed shards, a Sentinel failover,
// TLS and connection-setup errors; autopipelining; server-wide commands sent
// once per server; and the wire fuzz test.
package redis
