package otelmetrics

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// cacheMeters are the instruments of the redis shards' client-side caches
// (ShardedClient.CacheStats), per shard:
//
//	shardedcache.cache.hits     counter        {hit}    reads served from the shard's cache
//	shardedcache.cache.misses   counter        {miss}   cacheable reads sent to the shard
//	shardedcache.cache.entries  updowncounter  {entry}  entries in the shard's cache now
//	shardedcache.cache.size     updowncounter  By       their estimated size now
//
// A shard that does not cache reports zeros.
type cacheMeters struct {
	hits, misses  metric.Int64ObservableCounter
	entries, size metric.Int64ObservableUpDownCounter
	reg           metric.Registration
	mu            sync.Mutex
	stats         func() []shardedredis.ShardCacheStats // nil until Observe
	attrsOf       func(name, addr string) metric.MeasurementOption
}

func newCacheMeters(mp metric.MeterProvider, m *meters) (*cacheMeters, error) {
	meter := mp.Meter(instrumentationName)
	c := &cacheMeters{attrsOf: m.shard}
	var errs [4]error
	c.hits, errs[0] = meter.Int64ObservableCounter("shardedcache.cache.hits",
		metric.WithUnit("{hit}"), metric.WithDescription("Reads served from the shard's client-side cache."))
	c.misses, errs[1] = meter.Int64ObservableCounter("shardedcache.cache.misses",
		metric.WithUnit("{miss}"), metric.WithDescription("Cacheable reads sent to the shard."))
	c.entries, errs[2] = meter.Int64ObservableUpDownCounter("shardedcache.cache.entries",
		metric.WithUnit("{entry}"), metric.WithDescription("Entries in the shard's client-side cache."))
	c.size, errs[3] = meter.Int64ObservableUpDownCounter("shardedcache.cache.size",
		metric.WithUnit("By"), metric.WithDescription("Estimated size of the shard's client-side cache."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	var err error
	c.reg, err = meter.RegisterCallback(c.observe, c.hits, c.misses, c.entries, c.size)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cacheMeters) observe(_ context.Context, o metric.Observer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		return nil
	}
	for _, st := range c.stats() {
		attrs := c.attrsOf(st.Name, st.Addr)
		o.ObserveInt64(c.hits, int64(st.Hits), attrs)
		o.ObserveInt64(c.misses, int64(st.Misses), attrs)
		o.ObserveInt64(c.entries, int64(st.Entries), attrs)
		o.ObserveInt64(c.size, st.MemoryUsageBytes, attrs)
	}
	return nil
}

func (c *cacheMeters) observeStats(stats func() []shardedredis.ShardCacheStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats = stats
}

// Close unregisters the instruments' callbacks: the metrics are no longer
// observed.
func (r *Redis) Close() error { return errors.Join(r.meters.Close(), r.cache.reg.Unregister()) }
