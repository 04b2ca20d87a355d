package integration_test

// The command script of the differential tests (differential_test.go,
// realredis_test.go): a seeded, randomized list of go-redis calls over a
// small keyspace, each with the keys it touches and how its reply is
// normalized before comparison.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// client is what the script runs on: a plain *goredis.Client or a
// *shardedredis.ShardedClient.
type client interface {
	goredis.Cmdable
	Do(ctx context.Context, args ...any) *goredis.Cmd
}

// op is one command of the script. run builds the go-redis call afresh on
// every invocation (go-redis mutates some query structs while building
// arguments), so the same op can run on both clients.
type op struct {
	keys []string // every key the command names, for the cross-shard check
	run  func(c client) goredis.Cmder
	// norm makes a reply whose order Redis leaves undefined comparable.
	norm func(v any) any
	// approx: durations (TTL, PTTL, EXPIRETIME) are compared with a
	// tolerance, since the two servers set and read them a moment apart.
	approx bool
	// after, when set, runs on each client after the command, unchecked.
	after func(c client)
	// solo: run reads first to decide what to send, so never in a
	// pipeline.
	solo bool
}

// families of keys: each family's commands mostly use its own keys, so values
// grow into something worth reading, and sometimes any key (WRONGTYPE).
var families = []string{"str", "hll", "hash", "list", "set", "zset", "lex", "geo", "stream"}

// familyKeys returns a family's keys: two plain ones that share a prefix
// and two with the key tag "t" (one shard under ring.Jedis{KeyTags: true}).
func familyKeys(f string) []string {
	return []string{f, f + ":1", "{t}:" + f, "{t}:" + f + ":1"}
}

// keyspace is every key the script can create.
func keyspace() []string {
	var out []string
	for _, f := range families {
		out = append(out, familyKeys(f)...)
	}
	return out
}

// multiShard names the commands that the sharded client splits by shard.
var multiShard = map[string]bool{"mget": true, "mset": true, "del": true, "unlink": true, "exists": true, "touch": true}

// containers are commands whose name includes their subcommand.
var containers = map[string]bool{"xgroup": true, "xinfo": true, "script": true, "object": true, "function": true}

// cmdName is the Redis command of cmd as sent: "zadd", "xgroup create".
func cmdName(cmd goredis.Cmder) string {
	args := cmd.Args()
	if len(args) == 0 {
		return fmt.Sprintf("(no command: %v)", cmd.Err())
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	if containers[name] && len(args) > 1 {
		name += " " + strings.ToLower(fmt.Sprint(args[1]))
	}
	return name
}

// cmdString renders a command's arguments for failure messages.
func cmdString(cmd goredis.Cmder) string {
	var b strings.Builder
	for i, a := range cmd.Args() {
		if i > 0 {
			b.WriteByte(' ')
		}
		s := fmt.Sprint(a)
		if i == 0 || s != "" && !strings.ContainsAny(s, " \"\n\\") {
			b.WriteString(s)
		} else {
			fmt.Fprintf(&b, "%q", s)
		}
	}
	return b.String()
}

// gen builds the script. Its choices depend only on the seed, never on
// replies, so the script is the same on every run with that seed.
type gen struct {
	r    *rand.Rand
	real bool  // add the commands that real Redis 7 has and miniredis lacks
	seq  int64 // stream IDs: seq-0 grows across the script
	now  time.Time
	next []op // commands that must follow the last one
}

// script returns n commands for seed. real adds commands that only real
// Redis implements (miniredis lacks them).
func script(seed int64, n int, real bool) []op {
	g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), real: real, seq: 100, now: time.Now()}
	var table []entry
	for _, e := range entries {
		if !e.realOnly || real {
			table = append(table, e)
		}
	}
	total := 0
	for _, e := range table {
		total += e.w
	}
	// Every script in every script cache first: EVAL caches its script on
	// the one server it runs on, so an EVALSHA that follows EVAL without
	// SCRIPT LOAD finds the script on the single server and not on the
	// other shards (Redis semantics, not a routing error).
	out := loadScripts()
	for len(out) < n {
		if len(g.next) > 0 {
			out = append(out, g.next[0])
			g.next = g.next[1:]
			continue
		}
		x := g.r.IntN(total)
		for _, e := range table {
			if x < e.w {
				out = append(out, e.f(g))
				break
			}
			x -= e.w
		}
	}
	return out
}

func (g *gen) intn(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, s []T) T { return s[g.r.IntN(len(s))] }

// key returns a key of family f, or now and then any key of the keyspace.
func (g *gen) key(f string) string {
	if g.chance(0.1) {
		return pick(g, allKeys)
	}
	return pick(g, familyKeys(f))
}

// keys returns n keys of family f; a third of the time all tagged ones, so
// that multi-key commands can run under ring.Jedis{KeyTags: true}.
func (g *gen) keys(f string, n int) []string {
	out := make([]string, n)
	tagged := g.chance(0.35)
	for i := range out {
		if tagged {
			out[i] = pick(g, familyKeys(f)[2:])
		} else {
			out[i] = g.key(f)
		}
	}
	return out
}

func (g *gen) val() string {
	switch g.r.IntN(4) {
	case 0:
		return fmt.Sprint(g.intn(-5, 30))
	case 1:
		return pick(g, []string{"", "hello", "a b", "1.5", "-0", "xyz\x00\xff"})
	default:
		return fmt.Sprintf("v%d", g.r.IntN(10))
	}
}

func (g *gen) member() string {
	if g.chance(0.3) {
		return fmt.Sprint(g.intn(1, 6)) // integers: intset encodings
	}
	return fmt.Sprintf("m%d", g.r.IntN(10))
}

func (g *gen) members(lo, hi int) []any {
	out := make([]any, g.intn(lo, hi))
	for i := range out {
		out[i] = g.member()
	}
	return out
}

func (g *gen) field() string { return fmt.Sprintf("f%d", g.r.IntN(8)) }

func (g *gen) fields(lo, hi int) []string {
	out := make([]string, g.intn(lo, hi))
	for i := range out {
		out[i] = g.field()
	}
	return out
}

func (g *gen) zmember() string { return string(rune('a' + g.r.IntN(9))) }

func (g *gen) score() float64 { return float64(g.intn(-4, 12)) / pick(g, []float64{1, 1, 2, 4}) }

func (g *gen) zs(lo, hi int) []goredis.Z {
	out := make([]goredis.Z, g.intn(lo, hi))
	for i := range out {
		out[i] = goredis.Z{Score: g.score(), Member: g.zmember()}
	}
	return out
}

// scoreBound is a ZRANGEBYSCORE bound; lexBound a ZRANGEBYLEX one.
func (g *gen) scoreBound() string {
	return pick(g, []string{"-inf", "+inf", "0", "(1", "2.5", "(5", "8", "-2"})
}

func (g *gen) lexBound() string {
	return pick(g, []string{"-", "+", "[a", "(c", "[e", "(g", "[i"})
}

func (g *gen) geoMember() string { return fmt.Sprintf("p%d", g.r.IntN(8)) }

func (g *gen) lonLat() (float64, float64) {
	return 13 + float64(g.r.IntN(5000))/10000, 38 + float64(g.r.IntN(3000))/10000
}

// streamID is a fresh ID above every ID the script used before.
func (g *gen) streamID() string {
	g.seq++
	return fmt.Sprintf("%d-%d", g.seq, g.r.IntN(2))
}

// oldID is an ID that the script may have used.
func (g *gen) oldID() string { return fmt.Sprintf("%d-%d", g.intn(100, int(g.seq)+1), g.r.IntN(2)) }

// streams returns the streams of an XREAD or XREADGROUP: one or two.
// miniredis (v2.40.0) frames its reply wrongly when one stream is named
// twice (the client reads garbage, and in a pipeline every later reply
// shifts), so on miniredis the two are different.
func (g *gen) streams() []string {
	ks := g.keys("stream", g.intn(1, 2))
	if !g.real && len(ks) == 2 && ks[0] == ks[1] {
		ks = ks[:1]
	}
	return ks
}

func (g *gen) group() string { return pick(g, []string{"g1", "g2"}) }

func (g *gen) consumer() string { return pick(g, []string{"c1", "c2", "c3"}) }

func (g *gen) ttl() time.Duration { return time.Duration(g.intn(1000, 5000)) * time.Second }

var allKeys = keyspace()

// Scripts for EVAL/EVALSHA, by number of keys.
var (
	scripts1 = []string{
		"return redis.call('GET', KEYS[1])",
		"return redis.call('INCRBY', KEYS[1], ARGV[1])",
		"redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('LLEN', KEYS[1])",
		"return redis.call('TYPE', KEYS[1]).ok",
		"return redis.call('ZADD', KEYS[1], ARGV[1], 'lua')",
		"return redis.call('HINCRBY', KEYS[1], 'f1', ARGV[1])",
	}
	scripts2 = []string{
		"return {redis.call('EXISTS', KEYS[1]), redis.call('EXISTS', KEYS[2])}",
		"local v = redis.call('GET', KEYS[1]) if v then redis.call('SET', KEYS[2], v) end return v",
		"return redis.call('SADD', KEYS[1], ARGV[1]) + redis.call('SCARD', KEYS[2])",
	}
	roScripts = []string{
		"return redis.call('GET', KEYS[1])",
		"return redis.call('TYPE', KEYS[1]).ok",
		"return redis.call('SET', KEYS[1], 'ro')", // refused: a write in a read-only script
	}
)

func sha(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

const luaLibrary = `#!lua name=difflib
redis.register_function('dget', function(keys, args) return redis.call('GET', keys[1]) end)
redis.register_function('dincr', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)
redis.register_function{function_name='dlen', callback=function(keys, args) return redis.call('STRLEN', keys[1]) + redis.call('EXISTS', keys[2]) end, flags={'no-writes'}}`

// allScripts are the scripts that the script cache holds.
func allScripts() []string {
	return append(append(slices.Clone(scripts1), scripts2...), roScripts...)
}

// loadScripts returns a SCRIPT LOAD of every script.
func loadScripts() []op {
	var out []op
	for _, s := range allScripts() {
		out = append(out, op{run: func(c client) goredis.Cmder { return c.ScriptLoad(ctx, s) }})
	}
	return out
}

// dropEmptySet deletes key when it is an empty set. miniredis (v2.40.0)
// leaves the destination of a SINTERSTORE/SUNIONSTORE/SDIFFSTORE with an
// empty result as an existing empty set, where Redis deletes it; after an
// empty SINTERSTORE whose first source is missing, the next SADD or SMOVE
// into that key panics inside miniredis (nil map) and ends the test
// process. Run on both clients, this is a no-op on real Redis.
func dropEmptySet(key string) func(c client) {
	return func(c client) {
		if c.Type(ctx, key).Val() == "set" && c.SCard(ctx, key).Val() == 0 {
			c.Del(ctx, key)
		}
	}
}

// sameScores runs a lex-range command (ZRANGEBYLEX, ZLEXCOUNT,
// ZREMRANGEBYLEX, ...) only on a sorted set whose members all have the same
// score; else it returns the ZRANGE WITHSCORES that showed otherwise. Redis
// leaves lex ranges over different scores unspecified, and with the
// skiplist encoding the answer follows the skiplist's random levels: it
// differs between two servers holding the same set.
func sameScores(key string, run func(c client) goredis.Cmder) func(c client) goredis.Cmder {
	return func(c client) goredis.Cmder {
		zs := c.ZRangeWithScores(ctx, key, 0, -1)
		if zs.Err() != nil {
			return zs
		}
		for _, z := range zs.Val() {
			if z.Score != zs.Val()[0].Score {
				return zs
			}
		}
		return run(c)
	}
}

// Normalizers.

func sortedStrings(v any) any {
	s := slices.Clone(v.([]string))
	slices.Sort(s)
	return s
}

// sortedAny sorts a []any of strings (a raw KEYS reply).
func sortedAny(v any) any {
	vs, ok := v.([]any)
	if !ok {
		return v
	}
	vs = slices.Clone(vs)
	slices.SortFunc(vs, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return vs
}

// sortedScan sorts the keys of a SCAN-family reply ([]any{keys, cursor});
// pairs sorts HSCAN/ZSCAN field-value pairs as units.
func sortedScan(pairs bool) func(v any) any {
	return func(v any) any {
		vs := v.([]any)
		ks := vs[0].([]string)
		if !pairs {
			return []any{sortedStrings(ks), vs[1]}
		}
		var ps []string
		for i := 0; i+1 < len(ks); i += 2 {
			ps = append(ps, ks[i]+"\x00"+ks[i+1])
		}
		slices.Sort(ps)
		return []any{ps, vs[1]}
	}
}

func sortedGroups(v any) any {
	gs := slices.Clone(v.([]goredis.XInfoGroup))
	slices.SortFunc(gs, func(a, b goredis.XInfoGroup) int { return strings.Compare(a.Name, b.Name) })
	return gs
}

func noIdle(v any) any {
	ps := slices.Clone(v.([]goredis.XPendingExt))
	for i := range ps {
		ps[i].Idle = 0
	}
	return ps
}

// value returns a command's reply value (several return values of Val as
// a []any).
func value(cmd goredis.Cmder) any {
	out := reflect.ValueOf(cmd).MethodByName("Val").Call(nil)
	if len(out) == 1 {
		return out[0].Interface()
	}
	vs := make([]any, len(out))
	for i, o := range out {
		vs[i] = o.Interface()
	}
	return vs
}

// entry is a kind of command in the script, with its weight.
type entry struct {
	w        int
	realOnly bool
	f        func(g *gen) op
}

func one(k string, run func(c client) goredis.Cmder) op {
	return op{keys: []string{k}, run: run}
}

func solo(k string, run func(c client) goredis.Cmder) op {
	return op{keys: []string{k}, run: run, solo: true}
}

// entries: weight 10 is an ordinary command; writes that build state weigh
// more, commands that clear a lot weigh less.
var entries = slices.Concat(stringsEntries, keysEntries, hashesEntries, listsEntries, setsEntries, zsetsEntries, geoEntries, streamsEntries, scriptingEntries)
