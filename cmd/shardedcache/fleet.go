package main

import (
	"context"
	"fmt"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

// fleet is a shard list opened with its backend's sharded client, which
// places keys exactly as the applications' clients do, and a connection to
// each shard's server for the scans and fixes the client does not offer.
type fleet struct {
	list    *fleetList
	rdb     *shardedredis.ShardedClient // redis
	mc      *shardedmc.ShardedClient    // memcache
	ring    *ring.Ring
	shards  []shardRef
	servers []server // per shard, in list order
}

// shardRef names a shard in output: its index, name and identity address
// (address and "/DB" when DB is not 0).
type shardRef struct {
	Index  int
	Name   string
	Addr   string
	Weight int
}

// String gives `0 "a" (127.0.0.1:6379)`, or `0 (127.0.0.1:6379)` unnamed.
func (s shardRef) String() string {
	if s.Name == "" {
		return fmt.Sprintf("%d (%s)", s.Index, s.Addr)
	}
	return fmt.Sprintf("%d %q (%s)", s.Index, s.Name, s.Addr)
}

// label is the shard's name, else its address.
func (s shardRef) label() string {
	if s.Name != "" {
		return s.Name
	}
	return s.Addr
}

// copyOf is one server's copy of a key, as read for a fix: the bytes that
// tell two copies apart (Redis DUMP's payload; memcached's value and
// flags), its remaining time to live (0: none) and what a conditional
// delete compares (memcached's CAS; the payload for Redis).
type copyOf struct {
	Payload []byte
	Flags   uint32
	TTLms   int64
	CAS     uint64
}

// scanned is a key a shard's server holds and its size in bytes (0 when
// not asked for).
type scanned struct {
	Key  string
	Size int64
}

// server is one shard's server, as check, plan --scan and stats use it.
type server interface {
	// Scan calls fn with every key the server holds, a page at a time,
	// with sizes when sizes is true.
	Scan(ctx context.Context, sizes bool, fn func([]scanned) error) error
	// Count is the number of keys the server holds (DBSIZE, curr_items).
	Count(ctx context.Context) (int64, error)
	// Get reads key's copy; ok is false when the server has none.
	Get(ctx context.Context, key string) (c copyOf, ok bool, err error)
	// Add stores c under key only if the server has no copy (RESTORE
	// without REPLACE; memcached's add): stored is false when it has one.
	Add(ctx context.Context, key string, c copyOf) (stored bool, err error)
	// DeleteIf deletes key if its copy is still c: deleted is false when
	// it changed or went since it was read.
	DeleteIf(ctx context.Context, key string, c copyOf) (deleted bool, err error)
	// Stats reads the server's counters.
	Stats(ctx context.Context) (serverStats, error)
	Close() error
}

// serverStats is one server's line of stats.
type serverStats struct {
	Keys, Memory int64
	OpsPerSec    float64 // -1: unknown
	Hits, Misses int64
	Clients      int64
	ops          int64 // memcached: commands so far, for OpsPerSec between two reads
}

// openFleet builds the sharded client of l (no connection yet) and a
// server per shard.
func openFleet(l *fleetList) (*fleet, error) {
	f := &fleet{list: l}
	switch l.Backend {
	case "redis":
		rdb, err := shardedredis.NewShardedClient(l.Redis)
		if err != nil {
			return nil, configErrorf("%s: %v", l.Path, err)
		}
		f.rdb, f.ring = rdb, rdb.Ring()
		for i, s := range rdb.Shards() {
			f.shards = append(f.shards, shardRef{Index: i, Name: s.Name, Addr: s.Addr, Weight: max(s.Weight, 1)})
			f.servers = append(f.servers, &redisServer{c: s.Client}) // closed by rdb.Close
		}
	case "memcache":
		mc, err := shardedmc.NewShardedClient(l.Memcache)
		if err != nil {
			return nil, configErrorf("%s: %v", l.Path, err)
		}
		f.mc, f.ring = mc, mc.Ring()
		for i, s := range mc.Shards() {
			f.shards = append(f.shards, shardRef{Index: i, Name: s.Name, Addr: s.Addr, Weight: max(s.Weight, 1)})
			f.servers = append(f.servers, &mcServer{addr: l.Memcache.Shards[i].Addr, timeout: l.Memcache.Timeout})
		}
	}
	return f, nil
}

// Close closes the client and the servers' connections.
func (f *fleet) Close() {
	for _, s := range f.servers {
		_ = s.Close()
	}
	if f.rdb != nil {
		_ = f.rdb.Close()
	}
	if f.mc != nil {
		_ = f.mc.Close()
	}
}
