package otelmetrics_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardedcache/shardedcache/otelmetrics"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// The client's own signals as OpenTelemetry metrics: per-shard requests,
// errors and health from Observe, health events through OnEvent, and a
// migration's progress from ObserveMigration. Here two shards become three,
// and each metric's values are summed over its shards.
func ExampleNewRedis() {
	var shards []shardedredis.ShardOptions
	for _, name := range []string{"redis-a", "redis-b", "redis-c"} {
		s := miniredis.NewMiniRedis()
		if err := s.Start(); err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		shards = append(shards, shardedredis.ShardOptions{Name: name, Addr: s.Addr()})
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)) // in a program: otel.GetMeterProvider()
	opts := &shardedredis.ShardedOptions{Shards: shards[:2]}

	m, err := otelmetrics.NewRedis(provider) // otelmetrics.NewMemcache for memcache
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	opts.Health.OnEvent = m.OnEvent(opts.Health.OnEvent) // chains yours
	rdb, err := shardedredis.NewShardedClient(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	m.Observe(rdb)

	ctx := context.Background()
	for i := range 100 {
		if err := rdb.Set(ctx, fmt.Sprintf("user:%d", i), i, 0).Err(); err != nil {
			log.Fatal(err)
		}
	}
	if err := rdb.BeginResharding(shards); err != nil {
		log.Fatal(err)
	}
	mig, err := rdb.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	m.ObserveMigration(mig) // a Migration's Progress; memcache: ReshardStats, from Observe
	if err := mig.Run(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if sum, ok := metric.Data.(metricdata.Sum[int64]); ok {
				var total int64
				for _, dp := range sum.DataPoints {
					total += dp.Value
				}
				if metric.Name == "shardedcache.shard.requests" {
					fmt.Println(metric.Name, total >= 100) // the SETs, and the window's own commands
					continue
				}
				fmt.Println(metric.Name, total)
			}
		}
	}
	// Output:
	// shardedcache.shard.requests true
	// shardedcache.shard.errors 0
	// shardedcache.shard.ejections 0
	// shardedcache.reshard.keys 100
	// shardedcache.reshard.scanned 100
	// shardedcache.shard.ejected 0
	// shardedcache.reshard.done 2
	// shardedcache.cache.hits 0
	// shardedcache.cache.misses 0
	// shardedcache.cache.entries 0
	// shardedcache.cache.size 0
}
