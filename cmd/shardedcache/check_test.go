package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// openTestFleet opens the shard list at path, closed when t ends.
func openTestFleet(t *testing.T, path string) *fleet {
	t.Helper()
	l, err := loadList(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := openFleet(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// keyOwnedBy returns the first key prefix+i that f's ring gives to shard
// want and, when standIn >= 0, that the ring without want gives to standIn.
func keyOwnedBy(t *testing.T, f *fleet, prefix string, want, standIn int) string {
	t.Helper()
	ejected, err := f.ring.Eject(want)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		k := prefix + itoa(i)
		if f.ring.Locate(k) == want && (standIn < 0 || ejected.Locate(k) == standIn) {
			return k
		}
	}
	t.Fatalf("no key %s* owned by shard %d (stand-in %d)", prefix, want, standIn)
	return ""
}

// The three kinds of stray copies, seeded on real redis-servers: a
// leftover of a cold change (keys written under a 2-shard list, then a
// third shard joined), a stand-in's copy written while its owner was
// ejected (with and without the owner's own copy), a copy on the wrong DB
// of one server; and strays that agree or disagree with no owner's copy.
// check reports them (exit 1), check --fix settles all but the
// disagreement (exit 1), --winner settles that (exit 0), and every
// server's contents are then exactly the owners' keys.
func TestCheckFixRedis(t *testing.T) {
	needServers(t)
	flushRedis(t)
	r0, r1 := redisAddrs[0], redisAddrs[1]
	// a: r0 DB 0, b: r1 DB 0, c: r0 DB 1 (c is "the wrong DB" for a's keys).
	list := redisList(t, "three.yaml", r0, r1, r0+"/1")
	old := redisList(t, "two.yaml", r0, r1)
	f, before := openTestFleet(t, list), openTestFleet(t, old)
	db := []*goredis.Client{redisClient(t, r0, 0), redisClient(t, r1, 0), redisClient(t, r0, 1)}
	want := []map[string]string{{}, {}, {}} // each shard's keys after the fix
	set := func(shard int, k, v string, ttl time.Duration) {
		t.Helper()
		if err := db[shard].Set(ctx, k, v, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// A cold change: 40 keys placed by the 2-shard list, some with a TTL.
	var moved, coldStrays int
	for i := range 40 {
		k, v := "cold:"+itoa(i), "v"+itoa(i)
		ttl := time.Duration(0)
		if i%2 == 0 {
			ttl = time.Hour
		}
		set(before.ring.Locate(k), k, v, ttl)
		want[f.ring.Locate(k)][k] = v
		if f.ring.Locate(k) != before.ring.Locate(k) {
			moved++
			coldStrays++
		}
	}
	// Ejection: b was ejected, its stand-in a wrote; b kept its own copy
	// of one key and lost the other (restarted empty).
	kept, lost := keyOwnedBy(t, f, "ejected-kept:", 1, 0), keyOwnedBy(t, f, "ejected-lost:", 1, 0)
	set(1, kept, "owner's", 0)
	set(0, kept, "stand-in's", 0)
	set(0, lost, "stand-in's only", 0)
	want[1][kept], want[1][lost] = "owner's", "stand-in's only"
	moved++
	// The wrong DB: a's key on c (r0 DB 1), c's key on a with c's own copy.
	wrongDB, cKey := keyOwnedBy(t, f, "wrong-db:", 0, -1), keyOwnedBy(t, f, "c-key:", 2, -1)
	set(2, wrongDB, "on DB 1", 0)
	set(2, cKey, "c's", 0)
	set(0, cKey, "a's stray", 0)
	want[0][wrongDB], want[2][cKey] = "on DB 1", "c's"
	moved++
	// Two strays of c's key that agree, and two that disagree.
	agree, disagree := keyOwnedBy(t, f, "agree:", 2, -1), keyOwnedBy(t, f, "disagree:", 2, -1)
	set(0, agree, "same", 0)
	set(1, agree, "same", 0)
	set(0, disagree, "one", 0)
	set(1, disagree, "two", 0)
	want[2][agree], want[2][disagree] = "same", "two"
	moved++

	// The redis package's own keys (a resharding's fence and tokens) are
	// on no shard by the ring: check leaves them alone.
	set(0, "__shardedcache:fence", "kept", 0)
	set(1, "__shardedcache:fence", "kept", 0)
	want[0]["__shardedcache:fence"], want[1]["__shardedcache:fence"] = "kept", "kept"

	strays := coldStrays + 6
	r := cli(t, "check", list).wantCode(t, exitFindings)
	summary := "stray keys: 2 where the owner's copy wins, " + itoa(moved) + " to move to their owner, 1 with disagreeing copies, 0 gone since the scan"
	if !strings.Contains(r.stdout, "\n"+itoa(strays)+" "+summary) {
		t.Fatalf("check does not report %d %s:\n%s", strays, summary, r.stdout)
	}
	r = cli(t, "check", "--fix", list).wantCode(t, exitFindings)
	deleted := coldStrays + 2 + 1 + 1 + 2 // moved cold copies, the lost and wrong-DB sources, two owner-wins strays, two agreeing strays
	fixed := "fixed: " + itoa(moved) + " copies moved to the owner, " + itoa(deleted) + " stray copies deleted, 1 key left with disagreeing copies"
	if !strings.Contains(r.stdout, fixed) {
		t.Fatalf("check --fix does not say %q:\n%s", fixed, r.stdout)
	}
	r = cli(t, "check", "--fix", "--winner", "b", list).wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "fixed: 1 copy moved to the owner, 2 stray copies deleted\n") {
		t.Fatalf("check --fix --winner b:\n%s", r.stdout)
	}
	for i := range db {
		if got := keysOf(t, db[i]); !maps.Equal(got, want[i]) {
			t.Errorf("shard %d holds %v, want %v", i, got, want[i])
		}
	}
	for k := range want[2] {
		if !strings.HasPrefix(k, "cold:") {
			continue
		}
		ttl := db[2].PTTL(ctx, k).Val()
		if hasTTL := k[len(k)-1]%2 == 0; hasTTL && (ttl <= 59*time.Minute || ttl > time.Hour) || !hasTTL && ttl != -1 {
			t.Errorf("%s moved with TTL %v", k, ttl)
		}
	}
	cli(t, "check", list).wantCode(t, exitOK)
}

// The fix is atomic against writers: a copy written on the owner between
// the check and the fix stays (the add does not replace it), and a stray
// changed meanwhile is left, not deleted. Both backends.
func TestFixRacesWriters(t *testing.T) {
	needServers(t)
	t.Run("redis", func(t *testing.T) {
		flushRedis(t)
		f := openTestFleet(t, redisList(t, "two.yaml", redisAddrs[0], redisAddrs[1]))
		db := []*goredis.Client{redisClient(t, redisAddrs[0], 0), redisClient(t, redisAddrs[1], 0)}
		k1, k2 := keyOwnedBy(t, f, "x:", 1, -1), keyOwnedBy(t, f, "y:", 1, -1)
		db[0].Set(ctx, k1, "stray", 0)
		db[0].Set(ctx, k2, "stray", 0)
		fixRace(t, f, k1, k2,
			func(k, v string) { db[1].Set(ctx, k, v, 0) }, func(k, v string) { db[0].Set(ctx, k, v, 0) },
			func(shard int, k string) string { return db[shard].Get(ctx, k).Val() })
	})
	t.Run("memcache", func(t *testing.T) {
		f := openTestFleet(t, memcacheList(t, mcAddrs[:2]...))
		mc := []*gomemcache.Client{gomemcache.New(mcAddrs[0]), gomemcache.New(mcAddrs[1])}
		for _, c := range mc {
			if err := c.FlushAll(); err != nil {
				t.Fatal(err)
			}
		}
		k1, k2 := keyOwnedBy(t, f, "x:", 1, -1), keyOwnedBy(t, f, "y:", 1, -1)
		mc[0].Set(&gomemcache.Item{Key: k1, Value: []byte("stray")})
		mc[0].Set(&gomemcache.Item{Key: k2, Value: []byte("stray")})
		get := func(shard int, k string) string {
			it, err := mc[shard].Get(k)
			if err != nil {
				return ""
			}
			return string(it.Value)
		}
		fixRace(t, f, k1, k2,
			func(k, v string) { mc[1].Set(&gomemcache.Item{Key: k, Value: []byte(v)}) },
			func(k, v string) { mc[0].Set(&gomemcache.Item{Key: k, Value: []byte(v)}) }, get)
	})
}

// fixRace plans the fix of k1 and k2 (strays on shard 0, owned by shard 1,
// which has neither), then writes k1 on the owner and k2 on the stray's
// shard, then applies the plan: k1 keeps the owner's write and loses its
// stray; k2's changed stray stays and is not copied.
func fixRace(t *testing.T, f *fleet, k1, k2 string, setOwner, setStray func(k, v string), get func(shard int, k string) string) {
	t.Helper()
	var out strings.Builder
	strays, err := findStrays(ctx, f, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := planFixes(ctx, f, strays, -1); err != nil {
		t.Fatal(err)
	}
	if len(strays) != 2 || strays[0].Action != actMove || strays[1].Action != actMove {
		t.Fatalf("plan: %+v %+v", strays[0], strays[1])
	}
	setOwner(k1, "owner's new write")
	setStray(k2, "stray's new write")
	left, err := applyFixes(ctx, f, strays, &out)
	if err != nil {
		t.Fatal(err)
	}
	if left != 1 || !strings.Contains(out.String(), "fixed: 1 copy moved to the owner, 1 stray copy deleted, 1 copy left, changed since the check") {
		t.Errorf("left %d:\n%s", left, out.String())
	}
	for _, c := range []struct {
		shard  int
		k, val string
	}{{1, k1, "owner's new write"}, {0, k1, ""}, {1, k2, "stray"}, {0, k2, "stray's new write"}} {
		if got := get(c.shard, c.k); got != c.val {
			t.Errorf("shard %d: %s = %q, want %q", c.shard, c.k, got, c.val)
		}
	}
}

// memcacheList writes a memcache shard list over addrs.
func memcacheList(t *testing.T, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("backend: memcache\nshards:\n")
	for i, a := range addrs {
		b.WriteString("  - {name: " + string(rune('a'+i)) + ", addr: \"" + a + "\"}\n")
	}
	return writeFile(t, "mc.yaml", b.String())
}

// check and check --fix on memcached: lru_crawler metadump finds the
// strays; the owner's copy wins, a lone stray moves with its flags and
// TTL, disagreeing strays are left.
func TestCheckFixMemcache(t *testing.T) {
	needServers(t)
	list := memcacheList(t, mcAddrs...)
	f := openTestFleet(t, list)
	mc := make([]*gomemcache.Client, len(mcAddrs))
	for i, a := range mcAddrs {
		mc[i] = gomemcache.New(a)
		if err := mc[i].FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	set := func(shard int, k, v string, flags uint32, exp int32) {
		t.Helper()
		if err := mc[shard].Set(&gomemcache.Item{Key: k, Value: []byte(v), Flags: flags, Expiration: exp}); err != nil {
			t.Fatal(err)
		}
	}
	ownerWins, lone, disagree := keyOwnedBy(t, f, "wins:", 1, -1), keyOwnedBy(t, f, "lone:", 2, -1), keyOwnedBy(t, f, "dis:", 0, -1)
	set(1, ownerWins, "owner's", 0, 0)
	set(0, ownerWins, "stray", 0, 0)
	set(0, lone, "lone", 42, 3600)
	set(1, disagree, "one", 0, 0)
	set(2, disagree, "two", 0, 0)
	r := cli(t, "check", list).wantCode(t, exitFindings)
	if !strings.Contains(r.stdout, "\n3 stray keys: 1 where the owner's copy wins, 1 to move to their owner, 1 with disagreeing copies, 0 gone since the scan") {
		t.Fatalf("check:\n%s", r.stdout)
	}
	r = cli(t, "check", "--fix", list).wantCode(t, exitFindings)
	if !strings.Contains(r.stdout, "fixed: 1 copy moved to the owner, 2 stray copies deleted, 1 key left with disagreeing copies") {
		t.Fatalf("check --fix:\n%s", r.stdout)
	}
	want := []map[string]string{{}, {ownerWins: "owner's", disagree: "one"}, {lone: "lone", disagree: "two"}}
	for i, c := range mc {
		for _, k := range []string{ownerWins, lone, disagree} {
			it, err := c.Get(k)
			got, ok := "", err == nil
			if ok {
				got = string(it.Value)
			}
			if w, wok := want[i][k]; ok != wok || got != w {
				t.Errorf("server %d: %s = %q (%v), want %q (%v)", i, k, got, ok, w, wok)
			}
		}
	}
	c, ok, err := f.servers[2].Get(ctx, lone)
	if err != nil || !ok || c.Flags != 42 || c.TTLms <= 3500_000 || c.TTLms > 3600_000 {
		t.Errorf("the moved copy: %+v %v %v, want flags 42 and a TTL near 3600 s", c, ok, err)
	}
}

// stats reads each shard's counters; a list whose password the server
// refuses fails (exit 3) naming the shard, without printing the password.
func TestStats(t *testing.T) {
	needServers(t)
	flushRedis(t)
	list := redisList(t, "two.yaml", redisAddrs[0], redisAddrs[1])
	db := redisClient(t, redisAddrs[1], 0)
	for i := range 5 {
		db.Set(ctx, "k"+itoa(i), i, 0)
	}
	r := cli(t, "stats", list).wantCode(t, exitOK)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || !strings.Contains(lines[1], "SHARD  KEYS") ||
		!strings.Contains(lines[2], `0 "a" (`+redisAddrs[0]+`)     0`) || !strings.Contains(lines[3], `1 "b" (`+redisAddrs[1]+`)     5`) {
		t.Errorf("stats:\n%s", r.stdout)
	}
	r = cli(t, "stats", memcacheList(t, mcAddrs...)).wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `2 "c" (`+mcAddrs[2]+`)`) {
		t.Errorf("stats of memcached:\n%s", r.stdout)
	}
	watchStats(t, list)
	// The server wants another password (the default user of a server
	// without one takes any password).
	if err := redisClient(t, redisAddrs[0], 0).ConfigSet(ctx, "requirepass", "another").Err(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c := goredis.NewClient(&goredis.Options{Addr: redisAddrs[0], Password: "another"})
		defer c.Close()
		if err := c.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
			t.Error(err)
		}
	}()
	withPassword := writeFile(t, "pw.yaml", "options: {password_env: SHARDEDCACHE_TEST_PASSWORD}\nshards:\n  - {name: a, addr: \""+redisAddrs[0]+"\"}\n")
	r = cli(t, "stats", withPassword).wantCode(t, exitFailed)
	if !strings.Contains(r.stderr, `reading the stats of shard 0 "a"`) {
		t.Errorf("stats with a password the server refuses:\n%s", r.stderr)
	}
}

// watchStats runs stats --watch until it has printed two tables, then
// interrupts it: it ends with exit code 0.
func watchStats(t *testing.T, list string) {
	t.Helper()
	cmd := exec.Command(binary, "stats", "--watch", "100ms", list)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "SHARD  KEYS") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("stats --watch printed no second table in 10 s:\n%s", out.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stats --watch interrupted: %v\n%s", err, out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
