package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// ShardedOptions.Options reach every shard, field by field: a field a
// shard sets wins, one it leaves at zero takes the shared value, for the
// shards of the list and those SetShards adds later; the password stays
// redacted everywhere the client shows its options.
func TestSharedOptions(t *testing.T) {
	const secret = "s3cret-pw"
	var servers []*miniredis.Miniredis
	for range 3 {
		m := miniredis.RunT(t)
		m.RequireAuth(secret)
		servers = append(servers, m)
	}
	shared := &goredis.Options{Password: secret, PoolSize: 7, ReadTimeout: 2 * time.Second, DB: 2}
	own := &goredis.Options{PoolSize: 3, DB: 0}
	c, err := NewShardedClient(&ShardedOptions{
		Shards:  []ShardOptions{{Name: "a", Addr: servers[0].Addr()}, {Name: "b", Addr: servers[1].Addr(), Options: own}},
		Options: shared,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if own.Password != "" || own.DB != 0 || shared.Addr != "" {
		t.Errorf("the caller's options were modified: %+v, %+v", own, shared)
	}
	ctx := context.Background()
	type got struct {
		addr       string
		pool       int
		readTO     time.Duration
		password   string
		maxRetries int
	}
	check := func(when string, want ...got) {
		t.Helper()
		for i, o := range c.ShardOptions() {
			g := got{c.Shards()[i].Addr, o.PoolSize, o.ReadTimeout, o.Password, o.MaxRetries}
			if i >= len(want) || g != want[i] {
				t.Errorf("%s: shard %d options %+v, want %+v", when, i, g, want)
			}
		}
		for i := range len(want) {
			key := keyOn(t, c, i, 0)
			if err := c.Set(ctx, key, i, 0).Err(); err != nil {
				t.Errorf("%s: SET on shard %d: %v", when, i, err)
			}
		}
		for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v", c, c, c), fmt.Sprintf("%+v", c.ShardOptions())} {
			if strings.Contains(s, secret) {
				t.Errorf("%s: the password is shown: %s", when, s)
			}
		}
	}
	// DB 0 of shard b is a zero value: it takes the shared DB 2. MaxRetries
	// shows 0 for this package's -1 (no retry), as go-redis stores it.
	check("new",
		got{servers[0].Addr() + "/2", 7, 2 * time.Second, redacted, 0},
		got{servers[1].Addr() + "/2", 3, 2 * time.Second, redacted, 0})
	if servers[0].DB(2).Keys() == nil || servers[1].DB(2).Keys() == nil {
		t.Errorf("keys not in DB 2: %v %v", servers[0].DB(2).Keys(), servers[1].DB(2).Keys())
	}
	if err := c.SetShards([]ShardOptions{
		{Name: "a", Addr: servers[0].Addr()},
		{Name: "b", Addr: servers[1].Addr(), Options: own},
		{Name: "c", Addr: servers[2].Addr(), Options: &goredis.Options{MaxRetries: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	check("after SetShards",
		got{servers[0].Addr() + "/2", 7, 2 * time.Second, redacted, 0},
		got{servers[1].Addr() + "/2", 3, 2 * time.Second, redacted, 0},
		got{servers[2].Addr() + "/2", 7, 2 * time.Second, redacted, 2})

	// A shard that BeginResharding adds gets them too.
	fourth := miniredis.RunT(t)
	fourth.RequireAuth(secret)
	if err := c.BeginResharding([]ShardOptions{
		{Name: "a", Addr: servers[0].Addr()},
		{Name: "b", Addr: servers[1].Addr(), Options: own},
		{Name: "c", Addr: servers[2].Addr(), Options: &goredis.Options{MaxRetries: 2}},
		{Name: "d", Addr: fourth.Addr()},
	}); err != nil {
		t.Fatal(err)
	}
	if o := c.ShardOptions()[3]; o.PoolSize != 7 || o.Password != redacted || o.DB != 2 || o.ReadTimeout != 2*time.Second {
		t.Errorf("shard added by BeginResharding: %+v", o)
	}
	if err := c.Set(ctx, keyOn(t, c, 3, 0), "x", 0).Err(); err != nil {
		t.Errorf("SET on the added shard: %v", err)
	}
	if err := c.AbandonResharding(); err != nil {
		t.Fatal(err)
	}

	_, err = NewShardedClient(&ShardedOptions{Shards: []ShardOptions{{Addr: servers[0].Addr()}}, Options: &goredis.Options{Addr: "10.0.0.1:6379"}})
	if want := `shardedcache: ShardedOptions.Options.Addr "10.0.0.1:6379" is set; give each shard its Addr`; err == nil || err.Error() != want {
		t.Errorf("shared Addr: %v, want %s", err, want)
	}
}

// A Sentinel shard takes the shared fields its redis.FailoverOptions has, a
// cluster shard those of its redis.ClusterOptions (no DB); their own win.
func TestSharedOptionsFailoverAndCluster(t *testing.T) {
	b := builder{shared: &goredis.Options{Password: "pw", Username: "u", DB: 3, PoolSize: 9, Protocol: 2}}
	fo := b.withShared(ShardOptions{Failover: &goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"h:1"}, PoolSize: 4}}).Failover
	if fo.Password != "pw" || fo.Username != "u" || fo.DB != 3 || fo.PoolSize != 4 || fo.Protocol != 2 || fo.MasterName != "m" {
		t.Errorf("failover options %+v", fo)
	}
	co := b.withShared(ShardOptions{Cluster: &ClusterShard{Options: &goredis.ClusterOptions{Addrs: []string{"h:1"}, Password: "own"}}}).Cluster.Options
	if co.Password != "own" || co.Username != "u" || co.PoolSize != 9 || co.Protocol != 2 {
		t.Errorf("cluster options %+v", co)
	}
}
