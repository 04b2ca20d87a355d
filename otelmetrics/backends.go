package otelmetrics

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// Redis exports the signals of a redis ShardedClient, with db.system.name
// "redis". Create it before the client, to chain its OnEvent into the
// options, then Observe the client:
//
//	m, err := otelmetrics.NewRedis(otel.GetMeterProvider())
//	opts.Health.OnEvent = m.OnEvent(opts.Health.OnEvent)
//	rdb, err := shardedredis.NewShardedClient(opts)
//	m.Observe(rdb)
//	mig, err := rdb.NewMigration(shardedredis.MigrateOptions{})
//	m.ObserveMigration(mig)
type Redis struct {
	*meters
	mig   *shardedredis.Migration // guarded by meters.mu
	cache *cacheMeters            // CacheStats (cache.go)
}

// NewRedis creates the instruments on a meter of mp and registers their
// callback; it returns the errors of the meter.
func NewRedis(mp metric.MeterProvider) (*Redis, error) {
	m, err := newMeters(mp, "redis")
	if err != nil {
		return nil, err
	}
	r := &Redis{meters: m}
	m.reshard = r.observeMigration
	if r.cache, err = newCacheMeters(mp, m); err != nil {
		_ = m.Close()
		return nil, err
	}
	return r, nil
}

// Observe exports c's Stats and CacheStats from now on, in place of the
// client observed before.
func (r *Redis) Observe(c *shardedredis.ShardedClient) {
	r.observeStats(c.Stats)
	r.cache.observeStats(c.CacheStats)
}

// ObserveMigration exports mig's Progress from now on, in place of the
// migration observed before: keys by outcome (shardedcache.reshard.keys),
// keys scanned and source shards done, per source shard.
func (r *Redis) ObserveMigration(mig *shardedredis.Migration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mig = mig
}

func (r *Redis) observeMigration(o metric.Observer) {
	if r.mig == nil {
		return
	}
	for _, p := range r.mig.Progress() {
		shard := []attribute.KeyValue{ShardNameKey.String(p.Name), ShardAddressKey.String(p.Addr)}
		r.outcomes(o, []outcome{{"owned", p.Owned}, {"moved", p.Moved}, {"on_new_owner", p.OnNewOwner},
			{"gone", p.Gone}, {"stale", p.Stale}, {"failed", p.Failed}}, shard...)
		attrs := metric.WithAttributes(append(shard, r.system)...)
		o.ObserveInt64(r.scanned, p.Scanned, attrs)
		o.ObserveInt64(r.done, boolInt(p.Done), attrs)
	}
}

// Memcache exports the signals of a memcache ShardedClient, with
// db.system.name "memcached": Stats, health events (OnEvent, as for Redis)
// and ReshardStats (shardedcache.reshard.keys, for the whole window, with no
// shard attributes).
type Memcache struct {
	*meters
	client *shardedmc.ShardedClient // guarded by meters.mu
}

// NewMemcache creates the instruments on a meter of mp and registers their
// callback; it returns the errors of the meter.
func NewMemcache(mp metric.MeterProvider) (*Memcache, error) {
	m, err := newMeters(mp, "memcached")
	if err != nil {
		return nil, err
	}
	mc := &Memcache{meters: m}
	m.reshard = mc.observeReshard
	return mc, nil
}

// Observe exports c's Stats and ReshardStats from now on, in place of the
// client observed before.
func (m *Memcache) Observe(c *shardedmc.ShardedClient) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.client, m.stats = c, c.Stats
}

func (m *Memcache) observeReshard(o metric.Observer) {
	if m.client == nil {
		return
	}
	st := m.client.ReshardStats()
	m.outcomes(o, []outcome{{"moved_with_ttl", st.MovedWithTTL}, {"moved_with_copy_expiration", st.MovedWithCopyExpiration},
		{"absent", st.Absent}, {"stale_deleted", st.StaleDeleted}, {"too_large", st.TooLarge}})
}
