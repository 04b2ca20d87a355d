// Package reshard holds no code: its tests (package reshard_test) reshard
// Redis fleets on real redis-servers: migrations (client-side and
// server-side MIGRATE), their safety against leftovers and ejected shards,
// races with live commands, counts, hung destinations, and the reference
// model of commands during resharding.
package reshard
