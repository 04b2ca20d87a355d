package topology_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Issue 11.7: two shards on one server and DB are refused, by
// NewShardedClient and by SetShards (which then changes nothing), with an
// error naming both; two DBs of one server are two shards, and the
// keyspace-wide commands count, list and scan each key once, while the
// commands on the whole server (FLUSHALL, FUNCTION LOAD and DELETE) run
// once on it.
func TestTopologyTwoNamesOneServer(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	fixtures.ResetServerState(t, procs)
	r1, r2 := procs[0].Addr, procs[1].Addr
	same := []shardedredis.ShardOptions{fixtures.TopoShard("s1", r1, 0), fixtures.TopoShard("s2", r1, 0), fixtures.TopoShard("s3", r2, 0)}
	want := fmt.Sprintf(`shardedclient: shards 0 ("s1") and 1 ("s2") are the same server (%s)`, r1)
	if _, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: same}); err == nil || err.Error() != want {
		t.Fatalf("NewShardedClient over {s1: R1}, {s2: R1}, {s3: R2}: %v, want %q", err, want)
	}
	sameDB := []shardedredis.ShardOptions{fixtures.TopoShard("s1", r1, 5), fixtures.TopoShard("s2", r1, 5), fixtures.TopoShard("s3", r2, 0)}
	wantDB := fmt.Sprintf(`shardedclient: shards 0 ("s1") and 1 ("s2") are the same server (%s/5)`, r1)
	if _, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: sameDB}); err == nil || err.Error() != wantDB {
		t.Fatalf("NewShardedClient over two shards on DB 5 of R1: %v, want %q", err, wantDB)
	}

	two := []shardedredis.ShardOptions{fixtures.TopoShard("s1", r1, 0), fixtures.TopoShard("s2", r1, 1), fixtures.TopoShard("s3", r2, 0)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: two})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	if got := []string{c.Shards()[0].Addr, c.Shards()[1].Addr, c.Shards()[2].Addr}; !slices.Equal(got, []string{r1, r1 + "/1", r2}) {
		t.Fatalf("shard addresses %q", got)
	}
	if err := c.SetShards(same); err == nil || err.Error() != want {
		t.Fatalf("SetShards over {s1: R1}, {s2: R1}, {s3: R2}: %v, want %q", err, want)
	}
	if got := c.Shards()[1].Addr; got != r1+"/1" {
		t.Fatalf("a refused SetShards changed shard 1 to %q", got)
	}

	ks := fixtures.Keys(300)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	held := []int64{}
	for _, d := range []struct {
		addr string
		db   int
	}{{r1, 0}, {r1, 1}, {r2, 0}} {
		n, err := fixtures.DirectClient(t, d.addr, d.db).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, n)
	}
	if held[0] == 0 || held[1] == 0 || held[2] == 0 || held[0]+held[1]+held[2] != 300 {
		t.Fatalf("DB 0 and 1 of R1 and R2 hold %v keys", held)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 300 {
		t.Fatalf("DBSIZE = %d, %v; want 300", n, err)
	}
	if got, err := c.Keys(ctx, "*").Result(); err != nil || len(got) != 300 || !sameSet(got, ks) {
		t.Fatalf("KEYS * gave %d keys, %v; want the 300", len(got), err)
	}
	var scanned []string
	iter := c.Scan(ctx, 0, "*", 50).Iterator()
	for iter.Next(ctx) {
		scanned = append(scanned, iter.Val())
	}
	if err := iter.Err(); err != nil || len(scanned) != 300 || !sameSet(scanned, ks) {
		t.Fatalf("SCAN gave %d keys, %v; want the 300 once each", len(scanned), err)
	}

	const lib = "#!lua name=twodb\nredis.register_function('twodb', function(keys, args) return 1 end)"
	if name, err := c.FunctionLoad(ctx, lib).Result(); err != nil || name != "twodb" {
		t.Fatalf("FUNCTION LOAD over two DBs of one server = %q, %v; want twodb", name, err)
	}
	for _, addr := range []string{r1, r2} {
		if libs, err := fixtures.DirectClient(t, addr, 0).FunctionList(ctx, goredis.FunctionListQuery{}).Result(); err != nil || len(libs) != 1 || libs[0].Name != "twodb" {
			t.Fatalf("FUNCTION LIST on %s = %v, %v", addr, libs, err)
		}
	}
	if s, err := c.FunctionDelete(ctx, "twodb").Result(); err != nil || s != "OK" {
		t.Fatalf("FUNCTION DELETE = %q, %v", s, err)
	}
	if s, err := c.FlushAll(ctx).Result(); err != nil || s != "OK" {
		t.Fatalf("FLUSHALL = %q, %v", s, err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FLUSHALL = %d, %v", n, err)
	}
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Issue 18.1: a change of a shard's options takes effect. "a" moves from DB
// 2 to DB 3 of its server (a new shard: BeginResharding moves its keys,
// SetShards is cold) and "b"'s password changes: each gets a new client,
// the old one is closed once its commands end, ShardOptions shows the new
// options (the password as "xxxxx"), and unchanged shards keep their
// clients.
func TestTopologyOptionsChangeTakesEffect(t *testing.T) {
	procs := fixtures.SharedRedis(t, 1)
	bin := fixtures.RealRedisBin(t)
	pw := fixtures.StartRedisProc(t, bin, "", "--requirepass", "old-secret")
	ra := procs[0].Addr
	a, b := fixtures.TopoShard("a", ra, 2), fixtures.TopoShard("b", pw.Addr, 0)
	b.Options.Password = "old-secret"
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	ks := fixtures.Keys(200)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onA := int64(len(fixtures.ByOwner(c, ks)[0]))
	db := func(n int) *goredis.Client { return fixtures.DirectClient(t, ra, n) }
	size := func(n int) int64 {
		t.Helper()
		got, err := db(n).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if size(2) != onA || onA == 0 {
		t.Fatalf("DB 2 holds %d keys, want a's %d", size(2), onA)
	}
	closed := func(what string, old *goredis.Client) {
		t.Helper()
		fixtures.Poll(t, 5*time.Second, what+": the old client is closed", func() error {
			if err := old.Ping(ctx).Err(); !errors.Is(err, goredis.ErrClosed) {
				return fmt.Errorf("PING on it: %v", err)
			}
			return nil
		})
	}

	// The same list, unchanged: every client kept.
	before := []*goredis.Client{c.Shards()[0].Client, c.Shards()[1].Client}
	if err := c.SetShards([]shardedredis.ShardOptions{a, b}); err != nil {
		t.Fatal(err)
	}
	if c.Shards()[0].Client != before[0] || c.Shards()[1].Client != before[1] {
		t.Fatal("SetShards with the same options replaced a client")
	}

	// b's password changes on the server, then in the shard's options.
	if err := directClientPW(t, pw.Addr, "old-secret").ConfigSet(ctx, "requirepass", "new-secret").Err(); err != nil {
		t.Fatal(err)
	}
	b.Options.Password = "new-secret"
	a.Options.DB = 3
	oldA, oldB := before[0], before[1]
	if err := c.BeginResharding([]shardedredis.ShardOptions{a, b}); err != nil {
		t.Fatal(err)
	}
	if got := c.Shards()[0].Addr; got != ra+"/3" {
		t.Fatalf("a's address in the window %q, want %s/3", got, ra)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if size(2) != 0 || size(3) != onA {
		t.Fatalf("after resharding a to DB 3: DB 2 holds %d keys, DB 3 %d; want 0 and %d", size(2), size(3), onA)
	}
	opts := c.ShardOptions()
	if len(opts) != 2 || opts[0].DB != 3 || opts[1].Password != "xxxxx" || c.Shards()[1].Client.Options().Password != "new-secret" {
		t.Fatalf("ShardOptions after the change: DB %d, password %q", opts[0].DB, opts[1].Password)
	}
	closed("a's DB change (resharding)", oldA)
	closed("b's password change (resharding)", oldB)
	for _, k := range ks {
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s after the change = %q, %v", k, v, err)
		}
	}
	if st := c.Stats(); st[1].Errors != 0 {
		t.Fatalf("b failed %d times after its password changed", st[1].Errors)
	}

	// SetShards: a back to DB 2 is cold (DB 2 is empty), and its old client
	// is closed.
	a.Options.DB = 2
	oldA = c.Shards()[0].Client
	if err := c.SetShards([]shardedredis.ShardOptions{a, b}); err != nil {
		t.Fatal(err)
	}
	closed("a's DB change (SetShards)", oldA)
	if err := c.Set(ctx, "after", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	k := fixtures.ByOwner(c, ks)[0][0]
	if err := c.Get(ctx, k).Err(); err != goredis.Nil {
		t.Fatalf("GET %s on a's new DB 2 = %v, want redis.Nil (a cold change)", k, err)
	}
	if err := c.Set(ctx, k, "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := db(2).Get(ctx, k).Result(); err != nil || v != "new" {
		t.Fatalf("DB 2 holds %s = %q, %v; want the SET through the client", k, v, err)
	}
}

// directClientPW is DirectClient with a password, on DB 0.
func directClientPW(t testing.TB, addr, password string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// One server written two ways ("localhost:<port>" and "127.0.0.1:<port>") is
// one server: refused, naming both shards, as the memcache backend does.
func TestTopologySameServerSpelledTwoWays(t *testing.T) {
	procs := fixtures.SharedRedis(t, 1)
	_, port, _ := net.SplitHostPort(procs[0].Addr)
	_, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{
		{Name: "s1", Addr: "127.0.0.1:" + port}, {Name: "s2", Addr: "localhost:" + port}}})
	want := `shardedcache: shards 0 ("s1", 127.0.0.1:` + port + `) and 1 ("s2", localhost:` + port + `) are the same server (127.0.0.1:` + port + `/)`
	if err == nil || err.Error() != want {
		t.Fatalf("NewShardedClient = %v, want %q", err, want)
	}
}

// A sharded SCAN cursor names its shard by position: once SetShards has
// reordered the list (no key moves), a cursor of the old list is refused
// with ErrScanListChanged rather than continue on whatever shard now has
// that position (which skipped the keys of the shard it replaced), and a
// scan begun again sees every key. ScanIterator stops with the same error.
func TestScanCursorRefusedAfterReorder(t *testing.T) {
	procs := fixtures.SharedRedis(t, 3)
	list := []shardedredis.ShardOptions{fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0), fixtures.TopoShard("c", procs[2].Addr, 0)}
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: list})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := fixtures.Keys(600)
	for _, k := range ks {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := c.Scan(ctx, 0, "", 10).Result()
	if err != nil || cursor == 0 {
		t.Fatalf("first page: cursor %d, %v", cursor, err)
	}
	it := c.Scan(ctx, 0, "", 10).Iterator()
	if !it.Next(ctx) {
		t.Fatalf("ScanIterator: no key: %v", it.Err())
	}
	if err := c.SetShards([]shardedredis.ShardOptions{list[2], list[1], list[0]}); err != nil {
		t.Fatal(err)
	}
	if !checksCollide(t, c, cursor) {
		if _, _, err := c.Scan(ctx, cursor, "", 10).Result(); !errors.Is(err, shardedredis.ErrScanListChanged) {
			t.Errorf("SCAN %d after the reorder: %v, want ErrScanListChanged", cursor, err)
		}
		for it.Next(ctx) {
		}
		if !errors.Is(it.Err(), shardedredis.ErrScanListChanged) {
			t.Errorf("ScanIterator across the reorder: %v, want ErrScanListChanged", it.Err())
		}
	}
	seen := map[string]bool{}
	for it := c.Scan(ctx, 0, "", 10).Iterator(); it.Next(ctx); {
		seen[it.Val()] = true
	}
	if len(seen) != len(ks) {
		t.Errorf("a scan begun after the reorder saw %d keys, want %d", len(seen), len(ks))
	}
}

// The SCAN cursor's check covers how the list places keys, not only which
// shards it has: a resharding that only re-weights a shard moves keys
// between shards a scan has passed and shards it has not, so a cursor made
// before it is refused with ErrScanListChanged, in the window and after it.
func TestScanCursorRefusedAfterReweight(t *testing.T) {
	procs := fixtures.SharedRedis(t, 2)
	a, b := fixtures.TopoShard("a", procs[0].Addr, 0), fixtures.TopoShard("b", procs[1].Addr, 0)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, k := range fixtures.Keys(400) {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := c.Scan(ctx, 0, "", 50).Result()
	if err != nil || cursor == 0 {
		t.Fatalf("first page: cursor %d, %v", cursor, err)
	}
	heavy := a
	heavy.Weight = 4
	if err := c.BeginResharding([]shardedredis.ShardOptions{heavy, b}); err != nil {
		t.Fatal(err)
	}
	if !checksCollide(t, c, cursor) {
		if _, _, err := c.Scan(ctx, cursor, "", 50).Result(); !errors.Is(err, shardedredis.ErrScanListChanged) {
			t.Errorf("SCAN %d in the window: %v, want ErrScanListChanged", cursor, err)
		}
	}
	_, inWindow, err := c.Scan(ctx, 0, "", 50).Result()
	if err != nil || inWindow == 0 {
		t.Fatalf("first page in the window: cursor %d, %v", inWindow, err)
	}
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.EndResharding(); err != nil {
		t.Fatal(err)
	}
	for _, cur := range []uint64{cursor, inWindow} {
		if checksCollide(t, c, cur) {
			continue
		}
		if _, _, err := c.Scan(ctx, cur, "", 50).Result(); !errors.Is(err, shardedredis.ErrScanListChanged) {
			t.Errorf("SCAN %d after the window: %v, want ErrScanListChanged", cur, err)
		}
	}
}

// checksCollide reports whether cursor, made on an earlier shard list,
// holds the same check of its list as the cursors of c's list now (bits
// 12 to 23 of a cursor, see redis/scan.go): a cursor holds 12 bits of its
// list's fingerprint, so two lists pass for one once in 4,095, by design,
// and the refusal cannot be asserted then (the lists' addresses are free
// ports, so their fingerprints vary between runs).
func checksCollide(t *testing.T, c *shardedredis.ShardedClient, cursor uint64) bool {
	t.Helper()
	_, now, err := c.Scan(ctx, 0, "", 1).Result()
	if err != nil || now == 0 {
		t.Fatalf("a first page on the list now: cursor %d, %v", now, err)
	}
	const check = 1<<12 - 1
	if cursor>>12&check == now>>12&check {
		t.Logf("cursor %d and the list now share their list check %d (once in 4,095): its refusal is not asserted", cursor, cursor>>12&check)
		return true
	}
	return false
}
