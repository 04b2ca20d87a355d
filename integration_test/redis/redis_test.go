package redis_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// goldenRows reads a routing file of the peers (tab-separated, "#"
// comments): each row's columns, the first (the key) unquoted.
func goldenRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		if cols[0], err = strconv.Unquote(cols[0]); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, cols)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// goldenRouting reads a Jedis routing file: key -> shard index (column col).
func goldenRouting(t *testing.T, path string, col int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, cols := range goldenRows(t, path) {
		out[cols[0]], _ = strconv.Atoi(cols[col])
	}
	return out
}

// Every key written through the client is on exactly the server that Jedis
// names for it.
func TestRedisPlacementMatchesJedis(t *testing.T) {
	for _, tc := range []struct {
		file string
		p    ring.Preset
	}{
		{"../../ring/testdata/routing_a_murmur_3shards.tsv", nil},
		{"../../ring/testdata/routing_e_keytag_3shards.tsv", ring.Jedis{KeyTags: true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			servers, c := fixtures.StartShards(t, 3, tc.p)
			want := goldenRouting(t, tc.file, 1)
			if err := fixtures.PipelineSet(c, want); err != nil {
				t.Fatal(err)
			}
			for key, shard := range want {
				if got := fixtures.Holders(servers, key); !slices.Equal(got, []int{shard}) {
					t.Fatalf("key %q is on servers %v, Jedis puts it on %d", key, got, shard)
				}
				if got := c.GetShardInfo(key).Index; got != shard {
					t.Fatalf("GetShardInfo(%q).Index = %d, want %d", key, got, shard)
				}
			}
			total := 0
			for _, s := range servers {
				total += len(s.Keys())
			}
			if total != len(want) {
				t.Fatalf("servers hold %d keys, wrote %d", total, len(want))
			}
		})
	}
}

// MGET, EXISTS, TOUCH, DEL and UNLINK across shards equal their per-key
// results.
func TestRedisMultiKeyEqualsPerKey(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	ks := fixtures.Keys(300)
	for i, k := range ks {
		if i%3 != 0 { // a third of the keys stay missing
			if err := c.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	vals, err := c.MGet(ctx, ks...).Result()
	if err != nil {
		t.Fatal(err)
	}
	present := int64(0)
	for i, k := range ks {
		v, err := c.Get(ctx, k).Result()
		switch {
		case err == goredis.Nil:
			if vals[i] != nil {
				t.Fatalf("MGET[%d] (%s) = %v, GET says missing", i, k, vals[i])
			}
		case err != nil:
			t.Fatal(err)
		default:
			present++
			if vals[i] != v {
				t.Fatalf("MGET[%d] (%s) = %v, GET = %q", i, k, vals[i], v)
			}
		}
	}
	if present != 200 {
		t.Fatalf("%d keys present, want 200", present)
	}
	for name, n := range map[string]*goredis.IntCmd{
		"EXISTS": c.Exists(ctx, ks...),
		"TOUCH":  c.Touch(ctx, ks...),
	} {
		if got, err := n.Result(); err != nil || got != present {
			t.Fatalf("%s = %d, %v; want %d", name, got, err, present)
		}
	}
	if got, err := c.Del(ctx, ks[:150]...).Result(); err != nil || got != 100 {
		t.Fatalf("DEL of 150 keys = %d, %v; want 100", got, err)
	}
	if got, err := c.Unlink(ctx, ks[150:]...).Result(); err != nil || got != 100 {
		t.Fatalf("UNLINK of 150 keys = %d, %v; want 100", got, err)
	}
	for i, s := range servers {
		if n := len(s.Keys()); n != 0 {
			t.Fatalf("server %d still holds %d keys", i, n)
		}
	}
}

func TestRedisMSetAndKeyspaceCommands(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	var pairs []any
	for i, k := range fixtures.Keys(90) {
		pairs = append(pairs, k, i)
	}
	if err := c.MSet(ctx, pairs...).Err(); err != nil {
		t.Fatal(err)
	}
	for i, k := range fixtures.Keys(90) {
		if got := fixtures.Holders(servers, k); !slices.Equal(got, []int{c.GetShardInfo(k).Index}) {
			t.Fatalf("%s on servers %v, ring says %d", k, got, c.GetShardInfo(k).Index)
		}
		if v, _ := servers[c.GetShardInfo(k).Index].Get(k); v != strconv.Itoa(i) {
			t.Fatalf("%s = %q, want %d", k, v, i)
		}
	}
	perServer := 0
	for _, s := range servers {
		if len(s.Keys()) == 0 {
			t.Fatal("a server got no key of 90")
		}
		perServer += len(s.Keys())
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 90 || perServer != 90 {
		t.Fatalf("DBSIZE = %d, %v; servers hold %d; want 90", n, err, perServer)
	}
	got, err := c.Keys(ctx, "key:*").Result()
	slices.Sort(got)
	want := fixtures.Keys(90)
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("KEYS = %d keys, %v; want the 90 written", len(got), err)
	}
	if s, err := c.Ping(ctx).Result(); err != nil || s != "PONG" {
		t.Fatalf("PING = %q, %v", s, err)
	}
	if s, err := c.FlushDB(ctx).Result(); err != nil || s != "OK" {
		t.Fatalf("FLUSHDB = %q, %v", s, err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FLUSHDB = %d, %v", n, err)
	}
}

// A pipeline keeps call order across shards, and each command its own reply
// and error.
func TestRedisPipelineOrderAndErrors(t *testing.T) {
	_, c := fixtures.StartShards(t, 3, nil)
	ks := fixtures.Keys(30)
	if err := c.LPush(ctx, ks[10], "x").Err(); err != nil { // a list: GET on it is WRONGTYPE
		t.Fatal(err)
	}
	var gets []*goredis.StringCmd
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range ks {
			if i != 10 {
				p.Set(ctx, k, "v"+k, 0)
			}
		}
		for _, k := range ks {
			gets = append(gets, p.Get(ctx, k))
		}
		p.MGet(ctx, ks[0], ks[1], ks[2], "missing")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("pipeline error = %v, want the WRONGTYPE of GET %s", err, ks[10])
	}
	if len(cmds) != 29+30+1 {
		t.Fatalf("%d commands returned, want 60", len(cmds))
	}
	for i, g := range gets {
		if cmds[29+i] != g {
			t.Fatalf("command %d is %v, want GET %s (call order)", 29+i, cmds[29+i], ks[i])
		}
		if i == 10 {
			if g.Err() == nil || !strings.HasPrefix(g.Err().Error(), "WRONGTYPE") {
				t.Fatalf("GET %s: %v, want WRONGTYPE", ks[i], g.Err())
			}
			continue
		}
		if v, err := g.Result(); err != nil || v != "v"+ks[i] {
			t.Fatalf("GET %s = %q, %v", ks[i], v, err)
		}
	}
	mget := cmds[len(cmds)-1].(*goredis.SliceCmd)
	if v := mget.Val(); !slices.Equal(v, []any{"v" + ks[0], "v" + ks[1], "v" + ks[2], nil}) {
		t.Fatalf("pipelined MGET = %v", v)
	}
}

// Commands and transactions over keys on different shards are refused
// before anything is sent; key tags make them possible.
func TestRedisCrossShardRefused(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	a, b := "key:0", "key:1"
	if c.GetShardInfo(a).Index == c.GetShardInfo(b).Index {
		t.Fatal("test keys must be on different shards")
	}
	c.Set(ctx, a, "1", 0)
	err := c.Rename(ctx, a, b).Err()
	var cross *shardedredis.CrossShardError
	if !errors.Is(err, shardedredis.ErrCrossShard) || !errors.As(err, &cross) || cross.Command != "rename" || len(cross.Shards) != 2 {
		t.Fatalf("RENAME across shards: %v", err)
	}
	if !servers[c.GetShardInfo(a).Index].Exists(a) || len(fixtures.Holders(servers, b)) != 0 {
		t.Fatal("the refused RENAME changed the servers")
	}
	_, err = c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, a, "2", 0)
		p.Set(ctx, b, "2", 0)
		return nil
	})
	if !errors.Is(err, shardedredis.ErrCrossShard) {
		t.Fatalf("transaction across shards: %v", err)
	}
	if v, _ := servers[c.GetShardInfo(a).Index].Get(a); v != "1" || len(fixtures.Holders(servers, b)) != 0 {
		t.Fatal("the refused transaction changed the servers")
	}
	err = c.Watch(ctx, func(*goredis.Tx) error { return nil }, a, b)
	if !errors.Is(err, shardedredis.ErrCrossShard) {
		t.Fatalf("WATCH across shards: %v", err)
	}

	// With key tags, keys that share a tag share a shard.
	servers, c = fixtures.StartShards(t, 3, ring.Jedis{KeyTags: true})
	a, b = "{user:1}:name", "{user:1}:copy"
	c.Set(ctx, a, "ada", 0)
	if err := c.Rename(ctx, a, b).Err(); err != nil {
		t.Fatal(err)
	}
	cmds, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Incr(ctx, "{user:1}:n")
		p.Get(ctx, b)
		return nil
	})
	if err != nil || cmds[1].(*goredis.StringCmd).Val() != "ada" {
		t.Fatalf("tagged transaction: %v, %v", cmds, err)
	}
	if got := fixtures.Holders(servers, b); !slices.Equal(got, []int{c.GetShardInfo("user:1").Index}) {
		t.Fatalf("tagged key on servers %v, want the tag's shard %d", got, c.GetShardInfo("user:1").Index)
	}
}

// A closed shard fails the commands for its keys with an error naming it;
// the other shards keep working, and the shard serves again once restarted.
func TestRedisClosedShard(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	ks := fixtures.Keys(60)
	for _, k := range ks {
		if err := c.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const dead = 1
	deadAddr := servers[dead].Addr()
	servers[dead].Close()
	for _, k := range ks {
		err := c.Get(ctx, k).Err()
		if c.GetShardInfo(k).Index != dead {
			if err != nil {
				t.Fatalf("GET %s on a live shard: %v", k, err)
			}
			continue
		}
		var se *shardedclient.ShardError
		if !errors.As(err, &se) || se.Index != dead || se.Addr != deadAddr {
			t.Fatalf("GET %s on the dead shard: %v, want a ShardError naming shard %d", k, err, dead)
		}
		if !strings.Contains(err.Error(), "shard 1 ("+deadAddr+")") {
			t.Fatalf("error %q does not name the shard", err)
		}
	}
	var se *shardedclient.ShardError
	if err := c.MGet(ctx, ks...).Err(); !errors.As(err, &se) || se.Index != dead {
		t.Fatalf("MGET over the dead shard: %v, want its ShardError", err)
	}
	if err := c.DBSize(ctx).Err(); !errors.As(err, &se) || se.Index != dead {
		t.Fatalf("DBSIZE with a dead shard: %v, want its ShardError", err)
	}
	if err := servers[dead].Restart(); err != nil {
		t.Fatal(err)
	}
	// go-redis's pool probes a failed address once a second before it dials
	// again; the same client serves the shard as soon as it does.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = c.Set(ctx, ks[fixtures.FirstOn(c, ks, dead)], "again", 0).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the restarted shard does not serve: %v", err)
	}
	for _, k := range ks {
		if err := c.Set(ctx, k, "again", 0).Err(); err != nil {
			t.Fatalf("SET %s after restart: %v", k, err)
		}
	}
	if v, _ := servers[dead].Get(ks[fixtures.FirstOn(c, ks, dead)]); v != "again" {
		t.Fatalf("restarted shard holds %q, want the new value", v)
	}
}

// distinctShards returns n keys "key:<i>" on n different shards.
func distinctShards(t *testing.T, c *shardedredis.ShardedClient, n int) []string {
	t.Helper()
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n && i < 1000; i++ {
		k := "key:" + strconv.Itoa(i)
		if s := c.GetShardInfo(k).Index; !seen[s] {
			seen[s] = true
			out = append(out, k)
		}
	}
	if len(out) < n {
		t.Fatalf("found keys on %d shards, want %d", len(out), n)
	}
	return out
}

// An MSET whose last key has no value gets the server's own error, as from
// one server, alone or in a pipeline: it is sent whole to one shard, which
// refuses it before writing anything.
func TestRedisMalformedSplitRefused(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	k := distinctShards(t, c, 2)
	const want = "ERR wrong number of arguments for MSET" // miniredis's words
	if err := c.MSet(ctx, k[0], "v", k[1]).Err(); err == nil || err.Error() != want {
		t.Fatalf("odd MSET: %v, want %s", err, want)
	}
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, k[0], "ok", 0)
		p.Do(ctx, "mset", k[0], "v", k[1])
		return nil
	})
	if err == nil || err.Error() != want || cmds[0].Err() != nil {
		t.Fatalf("pipeline with an odd MSET: %v / %v", err, cmds[0].Err())
	}
	if v, _ := servers[c.GetShardInfo(k[0]).Index].Get(k[0]); v != "ok" || len(fixtures.Holders(servers, k[1])) != 0 {
		t.Fatal("the refused MSET wrote to a server")
	}
}

// Keys of any type go-redis can send are placed by the bytes it sends.
func TestRedisNonStringKeysPlacedByWireBytes(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	for _, key := range []any{float32(0.1), 12345, int64(-7), 2.5, true, []byte("bytes-key"), uint16(9)} {
		if err := c.Do(ctx, "set", key, "v").Err(); err != nil {
			t.Fatalf("SET %v: %v", key, err)
		}
	}
	for _, wire := range []string{"0.10000000149011612", "12345", "-7", "2.5", "1", "bytes-key", "9"} {
		if got := fixtures.Holders(servers, wire); !slices.Equal(got, []int{c.GetShardInfo(wire).Index}) {
			t.Fatalf("key %q on servers %v, ring says %d", wire, got, c.GetShardInfo(wire).Index)
		}
	}
	if err := c.Do(ctx, "set", struct{}{}, "v").Err(); !errors.Is(err, shardedredis.ErrUnsupported) {
		t.Fatalf("struct key: %v, want ErrUnsupported", err)
	}
}

// Keyless all-shard commands run only when their replies merge into the
// go-redis result type; the others are refused before anything is sent.
func TestRedisKeylessFanOutTypes(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	sha, err := c.ScriptLoad(ctx, "return 7").Result()
	if err != nil || len(sha) != 40 {
		t.Fatalf("SCRIPT LOAD = %q, %v", sha, err)
	}
	for i, s := range c.Shards() {
		if ok, err := s.Client.ScriptExists(ctx, sha).Result(); err != nil || !ok[0] {
			t.Fatalf("script missing on shard %d: %v %v", i, ok, err)
		}
	}
	c.Set(ctx, "a", "1", 0)
	if err := c.SlowLogGet(ctx, 10).Err(); !errors.Is(err, shardedredis.ErrUnsupported) {
		t.Errorf("SLOWLOG GET: %v, want ErrUnsupported", err)
	}
	if key, err := c.Do(ctx, "randomkey").Result(); key != "a" || err != nil {
		t.Errorf("Do RANDOMKEY = %v, %v; want a", key, err)
	}
	if n := len(servers[0].Keys()) + len(servers[1].Keys()) + len(servers[2].Keys()); n != 1 {
		t.Fatalf("servers hold %d keys, want 1", n)
	}
}

// Inside Watch, the *redis.Tx refuses commands for other shards' keys.
func TestRedisWatchGuardsTheShard(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	k := distinctShards(t, c, 2)
	c.Set(ctx, k[0], "10", 0)
	c.Set(ctx, k[1], "20", 0)
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		v, err := tx.Get(ctx, k[0]).Int()
		if err != nil {
			return err
		}
		if err := tx.Get(ctx, k[1]).Err(); !errors.Is(err, shardedredis.ErrCrossShard) {
			return fmt.Errorf("GET of another shard's key in the Tx: %v", err)
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, k[0], v+1, 0)
			p.Set(ctx, k[1], "stolen", 0)
			return nil
		})
		if !errors.Is(err, shardedredis.ErrCrossShard) {
			return fmt.Errorf("cross-shard TxPipelined in the Tx: %v", err)
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Set(ctx, k[0], v+1, 0)
			return nil
		})
		return err
	}, k[0])
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := servers[c.GetShardInfo(k[0]).Index].Get(k[0]); v != "11" {
		t.Fatalf("%s = %q, want 11", k[0], v)
	}
	if got := fixtures.Holders(servers, k[1]); !slices.Equal(got, []int{c.GetShardInfo(k[1]).Index}) {
		t.Fatalf("%s on servers %v", k[1], got)
	}
	if v, _ := servers[c.GetShardInfo(k[1]).Index].Get(k[1]); v != "20" {
		t.Fatalf("%s = %q, the guard let a write through", k[1], v)
	}
}

// A SCAN loop with COUNT 5 over 30 keys on three shards sees every key once
// and ends; ScanIterator does the same; HSCAN pages through one hash on its
// shard.
func TestRedisScanWalksEveryShard(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	want := fixtures.Keys(30)
	for _, k := range want {
		c.Set(ctx, k, 1, 0)
	}
	for i, s := range servers {
		if len(s.Keys()) == 0 {
			t.Fatalf("server %d holds none of the 30 keys", i)
		}
	}
	seen := map[string]int{}
	var cursor uint64
	for calls := 0; ; calls++ {
		page, next, err := c.Scan(ctx, cursor, "key:*", 5).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			seen[k]++
		}
		if cursor = next; cursor == 0 {
			break
		}
		if calls > 100 {
			t.Fatal("SCAN does not end")
		}
	}
	if len(seen) != 30 {
		t.Fatalf("SCAN saw %d distinct keys, want 30", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("SCAN saw %s %d times", k, n)
		}
	}
	var iterated []string
	it := c.Scan(ctx, 0, "", 4).Iterator()
	for it.Next(ctx) {
		iterated = append(iterated, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(iterated)
	slices.Sort(want)
	if !slices.Equal(iterated, want) {
		t.Fatalf("ScanIterator saw %d keys, want the 30", len(iterated))
	}

	for i := range 50 {
		c.HSet(ctx, "hash", "f"+strconv.Itoa(i), i)
	}
	fields := map[string]bool{}
	cursor = 0
	for {
		page, next, err := c.HScan(ctx, "hash", cursor, "", 7).Result()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < len(page); j += 2 {
			fields[page[j]] = true
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(fields) != 50 || !slices.Equal(fixtures.Holders(servers, "hash"), []int{c.GetShardInfo("hash").Index}) {
		t.Fatalf("HSCAN saw %d fields, want 50", len(fields))
	}
}

// RANDOMKEY draws from every shard, each key as likely as any other.
func TestRedisRandomKeyDrawsEveryShard(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	if err := c.RandomKey(ctx).Err(); err != goredis.Nil {
		t.Fatalf("RANDOMKEY on empty shards: %v, want redis.Nil", err)
	}
	// One key on one shard only: RANDOMKEY must find it whatever shard is empty.
	c.Set(ctx, "key:0", 1, 0)
	for range 20 {
		if k, err := c.RandomKey(ctx).Result(); err != nil || k != "key:0" {
			t.Fatalf("RANDOMKEY = %q, %v; want key:0", k, err)
		}
	}
	for _, k := range fixtures.Keys(60) {
		c.Set(ctx, k, 1, 0)
	}
	hits := make([]int, len(servers))
	for range 600 {
		k, err := c.RandomKey(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		hits[c.GetShardInfo(k).Index]++
	}
	for i, s := range servers {
		if len(s.Keys()) > 0 && hits[i] == 0 {
			t.Fatalf("shard %d holds %d keys but RANDOMKEY never drew it (%v)", i, len(s.Keys()), hits)
		}
	}
}

// A service moving from go-redis's Ring keeps its keys where Ring put them:
// the same shard names with ring.GoRedisRing{}.
func TestRedisGoRedisRingPreset(t *testing.T) {
	names := []string{"shard-a", "shard-b", "shard-c"}
	var shards []shardedredis.ShardOptions
	var servers []*miniredis.Miniredis
	for _, n := range names {
		s := miniredis.RunT(t)
		servers = append(servers, s)
		shards = append(shards, shardedredis.ShardOptions{Name: n, Addr: s.Addr()})
	}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards, Placement: ring.GoRedisRing{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for _, cols := range goldenRows(t, "../../ring/testdata/presets/goredis_ring3.tsv") {
		key := cols[0]
		if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		want := slices.Index(names, cols[1])
		if got := fixtures.Holders(servers, key); !slices.Equal(got, []int{want}) {
			t.Fatalf("%q on servers %v, go-redis Ring puts it on %s", key, got, cols[1])
		}
		n++
	}
	if n != 3014 {
		t.Fatalf("checked %d keys, want 3014", n)
	}
}

// XGROUP/XREADGROUP and EVAL with one key touch only the owning shard.
func TestRedisStreamsAndScriptsOnTheOwningShard(t *testing.T) {
	servers, c := fixtures.StartShards(t, 3, nil)
	const stream = "events:42"
	owner := c.GetShardInfo(stream).Index
	if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, ID: "1-1", Values: []string{"a", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XGroupCreate(ctx, stream, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{stream, ">"}, Count: 10}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 || res[0].Messages[0].ID != "1-1" {
		t.Fatalf("XREADGROUP = %v, %v", res, err)
	}
	const key = "counter:7"
	n, err := c.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{key}, 5).Int()
	if err != nil || n != 5 {
		t.Fatalf("EVAL = %d, %v", n, err)
	}
	for i, s := range servers {
		if s.Exists(stream) != (i == owner) {
			t.Fatalf("stream on server %d = %v, owner %d", i, s.Exists(stream), owner)
		}
		if s.Exists(key) != (i == c.GetShardInfo(key).Index) {
			t.Fatalf("EVAL's key on server %d = %v", i, s.Exists(key))
		}
	}
}
