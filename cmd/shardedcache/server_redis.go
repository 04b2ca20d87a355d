package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// redisServer is a Redis shard: one DB of one server, through the sharded
// client's own client for it.
type redisServer struct{ c *goredis.Client }

// scanCount is the COUNT of each SCAN.
const scanCount = 1000

// internalPrefix starts the keys the redis package keeps on the servers
// for the moves of a resharding window (fences, move marks, tokens: see
// package fleet, "Where the truth is"). They belong to no shard by the
// ring, so Scan leaves them out, as the package's KEYS and SCAN do.
const internalPrefix = "__shardedcache:"

func (s *redisServer) Scan(ctx context.Context, sizes bool, fn func([]scanned) error) error {
	for cursor, first := uint64(0), true; first || cursor != 0; first = false {
		keys, next, err := s.c.Scan(ctx, cursor, "", scanCount).Result()
		if err != nil {
			return err
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, internalPrefix) })
		page := make([]scanned, len(keys))
		var usage []*goredis.IntCmd
		if sizes && len(keys) > 0 {
			cmds, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range keys {
					p.MemoryUsage(ctx, k)
				}
				return nil
			})
			if err != nil && !errors.Is(err, goredis.Nil) {
				return err
			}
			for _, c := range cmds {
				usage = append(usage, c.(*goredis.IntCmd))
			}
		}
		for i, k := range keys {
			page[i].Key = k
			if usage != nil {
				page[i].Size = usage[i].Val() // 0 for a key gone since the SCAN
			}
		}
		if err := fn(page); err != nil {
			return err
		}
		cursor = next
	}
	return nil
}

func (s *redisServer) Count(ctx context.Context) (int64, error) { return s.c.DBSize(ctx).Result() }

// getScript reads a key's DUMP and PTTL in one step.
var getScript = goredis.NewScript(`local d = redis.call('DUMP', KEYS[1])
if not d then return false end
return {d, redis.call('PTTL', KEYS[1])}`)

func (s *redisServer) Get(ctx context.Context, key string) (copyOf, bool, error) {
	v, err := getScript.Run(ctx, s.c, []string{key}).Slice()
	if errors.Is(err, goredis.Nil) {
		return copyOf{}, false, nil
	}
	if err != nil || len(v) != 2 {
		return copyOf{}, false, err
	}
	payload, _ := v[0].(string)
	ttl, _ := v[1].(int64)
	return copyOf{Payload: []byte(payload), TTLms: max(ttl, 0)}, true, nil
}

// Add restores c without REPLACE: a copy written on the server since the
// check is never overwritten (BUSYKEY).
func (s *redisServer) Add(ctx context.Context, key string, c copyOf) (bool, error) {
	err := s.c.Restore(ctx, key, time.Duration(c.TTLms)*time.Millisecond, string(c.Payload)).Err()
	if err != nil && strings.HasPrefix(err.Error(), "BUSYKEY") {
		return false, nil
	}
	return err == nil, err
}

// deleteIfScript deletes KEYS[1] if its DUMP is still ARGV[1].
var deleteIfScript = goredis.NewScript(`if redis.call('DUMP', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

func (s *redisServer) DeleteIf(ctx context.Context, key string, c copyOf) (bool, error) {
	n, err := deleteIfScript.Run(ctx, s.c, []string{key}, c.Payload).Int()
	return n == 1, err
}

func (s *redisServer) Stats(ctx context.Context) (serverStats, error) {
	info, err := s.c.Info(ctx, "memory", "stats", "clients").Result()
	if err != nil {
		return serverStats{}, err
	}
	keys, err := s.c.DBSize(ctx).Result()
	if err != nil {
		return serverStats{}, err
	}
	f := infoFields(info)
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	ops, _ := strconv.ParseFloat(f["instantaneous_ops_per_sec"], 64)
	return serverStats{Keys: keys, Memory: num("used_memory"), OpsPerSec: ops,
		Hits: num("keyspace_hits"), Misses: num("keyspace_misses"), Clients: num("connected_clients")}, nil
}

// infoFields parses INFO's "name:value" lines.
func infoFields(info string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

func (s *redisServer) Close() error { return nil } // the sharded client's own client
