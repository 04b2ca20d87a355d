// Package otelmetrics exports what shardedcache's clients know of their
// shards as OpenTelemetry metrics: requests, errors and ejections per shard
// (Stats), health events (Health.OnEvent), and the progress of resharding
// (redis: Migration.Progress; memcache: ReshardStats), for both backends.
//
// It is optional: only the programs that import it link OpenTelemetry. The
// backends (packages redis and memcache) do not import it, nor OpenTelemetry,
// so a program that uses them alone builds none of it, and with Go's module
// graph pruning its go.mod does not list OpenTelemetry's modules.
//
// Every instrument is asynchronous: the counters are read when a reader
// collects, from the same state that Stats, Migration.Progress and
// ReshardStats return, so commands pay nothing for the metrics. Health
// events are counted by the function OnEvent returns, which chains the
// OnEvent the options had.
//
// # Names
//
// OpenTelemetry's semantic conventions for database clients define metrics
// per operation (db.client.operation.duration, which redisotel records per
// shard) and per connection pool (db.client.connection.*), none of which
// counts what this package exports; its metrics are therefore named under
// shardedcache.*, with the conventions' units and their attribute
// db.system.name ("redis", "memcached"). A shard is named by
// shardedcache.shard.name (ShardOptions.Name, possibly empty) and
// shardedcache.shard.address (Shard.Addr, its identity).
//
//	shardedcache.shard.requests   counter        {request}  commands and probes reported (ShardStats.Requests)
//	shardedcache.shard.errors     counter        {error}    of which failed by the shard's failure (ShardStats.Errors)
//	shardedcache.shard.ejections  counter        {ejection} times ejected (ShardStats.Ejections)
//	shardedcache.shard.ejected    updowncounter  {shard}    1 while the shard is ejected, else 0
//	shardedcache.shard.events     counter        {event}    health events, by shardedcache.event.kind: failure, ejected, rejoined
//	shardedcache.reshard.keys     counter        {key}      keys of a resharding, by shardedcache.reshard.outcome
//	shardedcache.reshard.scanned  counter        {key}      redis: keys a migration's SCAN returned, per source shard
//	shardedcache.reshard.done     updowncounter  {shard}    redis: source shards whose scan went round with no key failed
//	shardedcache.cache.hits       counter        {hit}      redis: reads served from the shard's client-side cache (CacheStats)
//	shardedcache.cache.misses     counter        {miss}     redis: cacheable reads sent to the shard
//	shardedcache.cache.entries    updowncounter  {entry}    redis: entries in the shard's client-side cache now
//	shardedcache.cache.size       updowncounter  By         redis: their estimated size now
//
// The outcomes of shardedcache.reshard.keys are, for redis, per source shard
// of the observed Migration (ShardProgress): owned, moved, on_new_owner,
// gone, stale, failed; for memcache, for the current or last window
// (ReshardStats): moved_with_ttl, moved_with_copy_expiration, absent,
// stale_deleted, too_large. Both count from the start of the migration or
// window: a new one starts them again from zero, which backends read as a
// counter reset. The shard counters count from the shard's joining the
// shard list, as Stats does.
package otelmetrics

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// The attributes of this package's metrics, besides db.system.name. Use
// ShardNameKey on redisotel's spans and metrics too (redis.OnNewShardNode),
// so that a shard has one name across signals.
const (
	ShardNameKey    = attribute.Key("shardedcache.shard.name")
	ShardAddressKey = attribute.Key("shardedcache.shard.address")
	EventKindKey    = attribute.Key("shardedcache.event.kind")
	OutcomeKey      = attribute.Key("shardedcache.reshard.outcome")
)

// dbSystemNameKey is the semantic conventions' db.system.name.
const dbSystemNameKey = attribute.Key("db.system.name")

// instrumentationName names this package's meter.
const instrumentationName = "github.com/shardedcache/shardedcache/otelmetrics"

// meters are the instruments and the state they observe, common to both
// backends; reshard observes the backend's resharding progress, under mu.
type meters struct {
	system attribute.KeyValue

	requests, errs, ejections, events, reshardKeys, scanned metric.Int64ObservableCounter
	ejected, done                                           metric.Int64ObservableUpDownCounter
	reg                                                     metric.Registration

	mu      sync.Mutex
	stats   func() []shardedclient.ShardStats // nil until Observe
	counts  map[eventKey]int64
	reshard func(metric.Observer)
}

// eventKey counts the events of one kind on one shard.
type eventKey struct {
	name, addr string
	kind       shardedclient.EventKind
}

func newMeters(mp metric.MeterProvider, system string) (*meters, error) {
	m := &meters{system: dbSystemNameKey.String(system), counts: map[eventKey]int64{}, reshard: func(metric.Observer) {}}
	meter := mp.Meter(instrumentationName)
	var err error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		var c metric.Int64ObservableCounter
		if err == nil {
			c, err = meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
		return c
	}
	m.requests = counter("shardedcache.shard.requests", "{request}", "Commands and probes run on the shard.")
	m.errs = counter("shardedcache.shard.errors", "{error}", "Commands and probes failed by the shard's failure.")
	m.ejections = counter("shardedcache.shard.ejections", "{ejection}", "Times the shard was ejected.")
	m.events = counter("shardedcache.shard.events", "{event}", "Health events of the shard.")
	m.reshardKeys = counter("shardedcache.reshard.keys", "{key}", "Keys of a resharding, by outcome.")
	m.scanned = counter("shardedcache.reshard.scanned", "{key}", "Keys a migration's SCAN returned.")
	if err != nil {
		return nil, err
	}
	if m.ejected, err = meter.Int64ObservableUpDownCounter("shardedcache.shard.ejected",
		metric.WithUnit("{shard}"), metric.WithDescription("1 while the shard is ejected.")); err != nil {
		return nil, err
	}
	if m.done, err = meter.Int64ObservableUpDownCounter("shardedcache.reshard.done",
		metric.WithUnit("{shard}"), metric.WithDescription("Source shards whose migration is done.")); err != nil {
		return nil, err
	}
	m.reg, err = meter.RegisterCallback(m.observe,
		m.requests, m.errs, m.ejections, m.events, m.reshardKeys, m.scanned, m.ejected, m.done)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// OnEvent returns a Health.OnEvent that counts every event for
// shardedcache.shard.events, then calls next (the OnEvent the options had;
// nil for none):
//
//	opts.Health.OnEvent = m.OnEvent(opts.Health.OnEvent)
func (m *meters) OnEvent(next func(shardedclient.Event)) func(shardedclient.Event) {
	return func(e shardedclient.Event) {
		m.mu.Lock()
		m.counts[eventKey{e.Name, e.Addr, e.Kind}]++
		m.mu.Unlock()
		if next != nil {
			next(e)
		}
	}
}

// Close unregisters the instruments' callback: the metrics are no longer
// observed.
func (m *meters) Close() error { return m.reg.Unregister() }

// shard returns the attributes of a shard.
func (m *meters) shard(name, addr string) metric.MeasurementOption {
	return metric.WithAttributes(m.system, ShardNameKey.String(name), ShardAddressKey.String(addr))
}

func (m *meters) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stats != nil {
		for _, st := range m.stats() {
			attrs := m.shard(st.Name, st.Addr)
			o.ObserveInt64(m.requests, int64(st.Requests), attrs)
			o.ObserveInt64(m.errs, int64(st.Errors), attrs)
			o.ObserveInt64(m.ejections, int64(st.Ejections), attrs)
			o.ObserveInt64(m.ejected, boolInt(st.Ejected), attrs)
		}
	}
	for k, n := range m.counts {
		o.ObserveInt64(m.events, n, metric.WithAttributes(m.system,
			ShardNameKey.String(k.name), ShardAddressKey.String(k.addr), EventKindKey.String(k.kind.String())))
	}
	m.reshard(o)
	return nil
}

// observeStats sets the Stats that the callback observes.
func (m *meters) observeStats(stats func() []shardedclient.ShardStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats = stats
}

// outcomes observes the keys of a resharding, by outcome, with attrs.
func (m *meters) outcomes(o metric.Observer, counts []outcome, attrs ...attribute.KeyValue) {
	for _, c := range counts {
		o.ObserveInt64(m.reshardKeys, c.n, metric.WithAttributes(append(attrs, m.system, OutcomeKey.String(c.name))...))
	}
}

// outcome is one count of shardedcache.reshard.keys.
type outcome struct {
	name string
	n    int64
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
