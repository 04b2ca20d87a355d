package reshard_test

import (
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// TestAttackServerSideExactExpiry: a ServerSide migration from two
// redis-servers' DB 0 to four shards, two of them other DBs of the same
// servers (those keys move through the client, the others by MIGRATE),
// of 600 keys of six types, each with its own absolute expiry in
// milliseconds (PEXPIREAT) or none. Afterwards every key is on its new
// owner alone, of its type, with exactly the expiry it was given
// (PEXPIRETIME), or none (-1).
func TestAttackServerSideExactExpiry(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	p := []*fixtures.RedisProc{fixtures.StartRedisProc(t, bin, ""), fixtures.StartRedisProc(t, bin, "")}
	shard := func(name string, proc, db int) serverSideShard {
		return newServerSideShard(t, name, p[proc].Addr, db, goredis.Options{})
	}
	old := []serverSideShard{shard("a", 0, 0), shard("b", 1, 0)}
	next := append(old[:2:2], shard("c", 0, 1), shard("d", 1, 2))
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: serverSideOptions(old)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 600
	base := time.Now().Add(time.Hour).UnixMilli()
	types := []string{"string", "hash", "list", "set", "zset", "stream"}
	want := map[string]int64{} // key -> PEXPIRETIME; -1 none
	for i := range n {
		k := fmt.Sprintf("exp:%d", i)
		var err error
		switch types[i%len(types)] {
		case "string":
			err = c.Set(ctx, k, i, 0).Err()
		case "hash":
			err = c.HSet(ctx, k, "f", i).Err()
		case "list":
			err = c.RPush(ctx, k, i, i+1).Err()
		case "set":
			err = c.SAdd(ctx, k, i).Err()
		case "zset":
			err = c.ZAdd(ctx, k, goredis.Z{Score: float64(i), Member: "m"}).Err()
		case "stream":
			err = c.XAdd(ctx, &goredis.XAddArgs{Stream: k, Values: []any{"f", i}}).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		want[k] = -1
		if i%4 != 0 {
			want[k] = base + int64(i)*7
			if err := c.PExpireAt(ctx, k, time.UnixMilli(want[k])).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.BeginResharding(serverSideOptions(next)); err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{ServerSide: true, BatchSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	place := fixtures.PlacementOf(t, serverSideOptions(next))
	wrong, onNew := 0, [4]int64{}
	for i := range n {
		k := fmt.Sprintf("exp:%d", i)
		owner := place.GetShardInfo(k).Index
		onNew[owner]++
		for j, sh := range next {
			typ, err := sh.direct.Type(ctx, k).Result()
			at, err2 := sh.direct.Do(ctx, "pexpiretime", k).Int64()
			switch {
			case j == owner && (err != nil || err2 != nil || typ != types[i%len(types)] || at != want[k]):
				wrong++
				if wrong <= 10 {
					t.Errorf("%s on its owner %s: type %q (%v), PEXPIRETIME %d (%v); want %s, %d", k, sh.so.Name, typ, err, at, err2, types[i%len(types)], want[k])
				}
			case j != owner && typ != "none":
				t.Errorf("%s left on %s (%s)", k, sh.so.Name, typ)
			}
		}
	}
	var moved int64
	for _, pr := range m.Progress() {
		moved += pr.Moved
	}
	if onNew[2] == 0 || onNew[3] == 0 || moved != onNew[2]+onNew[3] {
		t.Errorf("moved %d keys; want the %d + %d keys of c (through the client) and d (MIGRATE)", moved, onNew[2], onNew[3])
	}
	if wrong > 0 {
		t.Errorf("%d of %d keys with a wrong type or expiry", wrong, n)
	}
}
