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
// and two with the key tag "t" (one shard under ring.WithKeyTags).
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
// that multi-key commands can run under ring.WithKeyTags.
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
var entries = []entry{
	// Strings.
	{30, false, func(g *gen) op {
		k, v := g.key("str"), g.val()
		var a goredis.SetArgs
		switch g.r.IntN(9) {
		case 0:
			a.TTL = g.ttl()
		case 1:
			a.TTL = g.ttl() + 500*time.Millisecond // PX
		case 2:
			a.Mode = "NX"
		case 3:
			a.Mode = "XX"
		case 4:
			a.KeepTTL = true
		case 5:
			a.Get = true
		case 6:
			a.Mode, a.Get = "NX", true
		case 7:
			a.ExpireAt = g.now.Add(g.ttl())
		}
		return one(k, func(c client) goredis.Cmder { return c.SetArgs(ctx, k, v, a) })
	}},
	{10, false, func(g *gen) op {
		k, v := g.key("str"), g.val()
		return one(k, func(c client) goredis.Cmder { return c.Do(ctx, "setnx", k, v) })
	}},
	{10, false, func(g *gen) op {
		k, v, d := g.key("str"), g.val(), g.ttl()
		return one(k, func(c client) goredis.Cmder { return c.SetEx(ctx, k, v, d) })
	}},
	{10, false, func(g *gen) op {
		k, v, d := g.key("str"), g.val(), g.ttl().Milliseconds()+7
		return one(k, func(c client) goredis.Cmder { return c.Do(ctx, "psetex", k, d, v) })
	}},
	{15, false, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.Get(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, v := g.key("str"), g.val()
		return one(k, func(c client) goredis.Cmder { return c.GetSet(ctx, k, v) })
	}},
	{5, false, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.GetDel(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("str")
		d := pick(g, []time.Duration{0, -1, g.ttl(), g.ttl() + 250*time.Millisecond})
		return one(k, func(c client) goredis.Cmder { return c.GetEx(ctx, k, d) })
	}},
	{15, false, func(g *gen) op {
		ks := g.keys("str", g.intn(1, 5))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.MGet(ctx, ks...) }}
	}},
	{15, false, func(g *gen) op {
		ks := g.keys("str", g.intn(1, 4))
		var kv []any
		m, flat := map[string]any{}, []string{}
		for _, k := range ks {
			v := g.val()
			kv = append(kv, k, v)
			m[k] = v
			flat = append(flat, k, v)
		}
		form := g.r.IntN(4)
		if len(m) < len(ks) {
			form = 0 // a repeated key: a map would keep one value
		}
		return op{keys: ks, run: func(c client) goredis.Cmder {
			switch form { // go-redis flattens each form into the same arguments
			case 1:
				return c.MSet(ctx, m)
			case 2:
				return c.MSet(ctx, flat)
			}
			return c.MSet(ctx, kv...)
		}}
	}},
	// The split commands sent raw (Do): the merged reply goes into a *Cmd.
	{10, false, func(g *gen) op {
		name := pick(g, []string{"mget", "mset", "del", "unlink", "exists", "touch"})
		f := pick(g, families)
		if name == "mget" || name == "mset" {
			f = "str"
		}
		ks := g.keys(f, g.intn(1, 4))
		args := []any{name}
		for _, k := range ks {
			args = append(args, k)
			if name == "mset" {
				args = append(args, g.val())
			}
		}
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, args...) }}
	}},
	{4, false, func(g *gen) op {
		args := pick(g, [][]any{{"keys", "*"}, {"keys", "{t}:*"}, {"dbsize"}, {"ping"}, {"ping", "hi"}})
		return op{run: func(c client) goredis.Cmder { return c.Do(ctx, args...) }, norm: sortedAny}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("str", g.intn(1, 3))
		var kv []any
		for _, k := range ks {
			kv = append(kv, k, g.val())
		}
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.MSetNX(ctx, kv...) }}
	}},
	{10, false, func(g *gen) op {
		k, off, v := g.key("str"), int64(g.intn(0, 12)), g.val()
		return one(k, func(c client) goredis.Cmder { return c.SetRange(ctx, k, off, v) })
	}},
	{10, false, func(g *gen) op {
		k, s, e := g.key("str"), int64(g.intn(-6, 6)), int64(g.intn(-3, 12))
		return one(k, func(c client) goredis.Cmder { return c.GetRange(ctx, k, s, e) })
	}},
	{10, false, func(g *gen) op {
		k, v := g.key("str"), g.val()
		return one(k, func(c client) goredis.Cmder { return c.Append(ctx, k, v) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.StrLen(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.Incr(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, n := g.key("str"), int64(g.intn(-5, 5))
		return one(k, func(c client) goredis.Cmder { return c.IncrBy(ctx, k, n) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.Decr(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, n := g.key("str"), int64(g.intn(-5, 5))
		return one(k, func(c client) goredis.Cmder { return c.DecrBy(ctx, k, n) })
	}},
	{10, false, func(g *gen) op {
		k, f := g.key("str"), pick(g, []float64{1.5, -0.25, 3, 0.1})
		return one(k, func(c client) goredis.Cmder { return c.IncrByFloat(ctx, k, f) })
	}},
	// Bitmaps (on the str keys).
	{15, false, func(g *gen) op {
		k, off, b := g.key("str"), int64(g.intn(0, 70)), g.r.IntN(2)
		return one(k, func(c client) goredis.Cmder { return c.SetBit(ctx, k, off, b) })
	}},
	{10, false, func(g *gen) op {
		k, off := g.key("str"), int64(g.intn(0, 80))
		return one(k, func(c client) goredis.Cmder { return c.GetBit(ctx, k, off) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("str")
		var bc *goredis.BitCount
		if g.chance(0.5) {
			bc = &goredis.BitCount{Start: int64(g.intn(-3, 3)), End: int64(g.intn(-2, 8))}
		}
		return one(k, func(c client) goredis.Cmder {
			if bc == nil {
				return c.BitCount(ctx, k, nil)
			}
			b := *bc
			return c.BitCount(ctx, k, &b)
		})
	}},
	{10, false, func(g *gen) op {
		k, bit := g.key("str"), int64(g.r.IntN(2))
		pos := []int64{int64(g.intn(-2, 4)), int64(g.intn(-1, 9))}[:g.r.IntN(3)]
		return one(k, func(c client) goredis.Cmder { return c.BitPos(ctx, k, bit, pos...) })
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("str", g.intn(2, 4))
		dst, src := ks[0], ks[1:]
		kind := g.r.IntN(4)
		if kind == 3 { // NOT: one source
			ks = ks[:2]
		}
		return op{keys: ks, run: func(c client) goredis.Cmder {
			switch kind {
			case 0:
				return c.BitOpAnd(ctx, dst, src...)
			case 1:
				return c.BitOpOr(ctx, dst, src...)
			case 2:
				return c.BitOpXor(ctx, dst, src...)
			}
			return c.BitOpNot(ctx, dst, src[0])
		}}
	}},
	{10, true, func(g *gen) op {
		k, off := g.key("str"), g.intn(0, 40)
		return one(k, func(c client) goredis.Cmder {
			return c.BitField(ctx, k, "incrby", "u4", off, 3, "get", "i8", 0)
		})
	}},
	{10, true, func(g *gen) op {
		k := g.key("str")
		return one(k, func(c client) goredis.Cmder { return c.BitFieldRO(ctx, k, "u8", 8, "i4", 2) })
	}},
	{10, true, func(g *gen) op {
		ks := g.keys("str", 2)
		withLen := g.chance(0.5)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			return c.LCS(ctx, &goredis.LCSQuery{Key1: ks[0], Key2: ks[1], Len: withLen})
		}}
	}},

	// HyperLogLog.
	{20, false, func(g *gen) op {
		k := g.key("hll")
		els := make([]any, g.intn(1, 4))
		for i := range els {
			els[i] = fmt.Sprintf("e%d", g.r.IntN(40))
		}
		return one(k, func(c client) goredis.Cmder { return c.PFAdd(ctx, k, els...) })
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("hll", g.intn(1, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.PFCount(ctx, ks...) }}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("hll", g.intn(2, 4))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.PFMerge(ctx, ks[0], ks[1:]...) }}
	}},

	// Keys and expiry, on any family.
	{10, false, func(g *gen) op {
		ks := g.keys(pick(g, families), g.intn(1, 5))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Exists(ctx, ks...) }}
	}},
	{5, false, func(g *gen) op {
		ks := g.keys(pick(g, families), g.intn(1, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Del(ctx, ks...) }}
	}},
	{5, false, func(g *gen) op {
		ks := g.keys(pick(g, families), g.intn(1, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Unlink(ctx, ks...) }}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys(pick(g, families), g.intn(1, 5))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Touch(ctx, ks...) }}
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.Type(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, d, mode := g.key(pick(g, families)), g.ttl(), g.r.IntN(6)
		if g.chance(0.04) {
			d = 0 // deletes the key
		}
		return one(k, func(c client) goredis.Cmder {
			switch mode {
			case 1:
				return c.ExpireNX(ctx, k, d)
			case 2:
				return c.ExpireXX(ctx, k, d)
			case 3:
				return c.ExpireGT(ctx, k, d)
			case 4:
				return c.ExpireLT(ctx, k, d)
			}
			return c.Expire(ctx, k, d)
		})
	}},
	{10, false, func(g *gen) op {
		k, d := g.key(pick(g, families)), g.ttl()+123*time.Millisecond
		return one(k, func(c client) goredis.Cmder { return c.PExpire(ctx, k, d) })
	}},
	{10, false, func(g *gen) op {
		k, at := g.key(pick(g, families)), g.now.Add(g.ttl())
		if g.chance(0.05) {
			at = time.Unix(1000, 0) // in the past: deletes the key
		}
		return one(k, func(c client) goredis.Cmder { return c.ExpireAt(ctx, k, at) })
	}},
	{10, false, func(g *gen) op {
		k, at := g.key(pick(g, families)), g.now.Add(g.ttl()+321*time.Millisecond)
		return one(k, func(c client) goredis.Cmder { return c.PExpireAt(ctx, k, at) })
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		o := one(k, func(c client) goredis.Cmder { return c.TTL(ctx, k) })
		o.approx = true
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		o := one(k, func(c client) goredis.Cmder { return c.PTTL(ctx, k) })
		o.approx = true
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		o := one(k, func(c client) goredis.Cmder { return c.ExpireTime(ctx, k) })
		o.approx = true
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		o := one(k, func(c client) goredis.Cmder { return c.PExpireTime(ctx, k) })
		o.approx = true
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.Persist(ctx, k) })
	}},
	{8, false, func(g *gen) op {
		ks := g.keys(pick(g, families), 2)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Rename(ctx, ks[0], ks[1]) }}
	}},
	{8, false, func(g *gen) op {
		ks := g.keys(pick(g, families), 2)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.RenameNX(ctx, ks[0], ks[1]) }}
	}},
	{10, false, func(g *gen) op {
		ks, replace := g.keys(pick(g, families), 2), g.chance(0.5)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Copy(ctx, ks[0], ks[1], 0, replace) }}
	}},
	{10, false, func(g *gen) op {
		// DUMP's payload of a hashtable-encoded set follows the server's
		// hash seed, and a stream's holds the delivery times of its
		// consumer groups: for those the TYPE is compared instead.
		k := g.key(pick(g, []string{"str", "str", "hll", "list", "hash", "zset"}))
		return solo(k, func(c client) goredis.Cmder {
			if t := c.Type(ctx, k); t.Err() != nil || t.Val() == "set" || t.Val() == "stream" {
				return t
			}
			return c.Dump(ctx, k)
		})
	}},
	{5, false, func(g *gen) op {
		p := pick(g, []string{"*", "str*", "{t}:*", "*:1", "h?sh*", "*[lz]*"})
		return op{run: func(c client) goredis.Cmder { return c.Keys(ctx, p) }, norm: sortedStrings}
	}},
	{5, false, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.DBSize(ctx) }}
	}},
	{3, false, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.Ping(ctx) }}
	}},
	{1, false, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.FlushDB(ctx) }}
	}},
	{1, false, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.FlushAll(ctx) }}
	}},
	{10, true, func(g *gen) op {
		k := g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.ObjectEncoding(ctx, k) })
	}},
	{10, true, func(g *gen) op {
		k := g.key(pick(g, []string{"list", "set", "zset"}))
		s := goredis.Sort{Alpha: g.chance(0.7), Order: pick(g, []string{"ASC", "DESC"})}
		if g.chance(0.3) {
			s.Offset, s.Count = int64(g.intn(0, 2)), int64(g.intn(1, 4))
		}
		return one(k, func(c client) goredis.Cmder { s := s; return c.Sort(ctx, k, &s) })
	}},
	{5, true, func(g *gen) op {
		k := g.key(pick(g, []string{"list", "set", "zset"}))
		s := goredis.Sort{Alpha: true}
		return one(k, func(c client) goredis.Cmder { s := s; return c.SortRO(ctx, k, &s) })
	}},
	{5, true, func(g *gen) op {
		ks := g.keys(pick(g, []string{"list", "set", "zset"}), 2)
		s := goredis.Sort{Alpha: true, Order: "DESC"}
		return op{keys: ks, run: func(c client) goredis.Cmder { s := s; return c.SortStore(ctx, ks[0], ks[1], &s) }}
	}},

	// Hashes.
	{30, false, func(g *gen) op {
		k := g.key("hash")
		var fv []any
		for _, f := range g.fields(1, 3) {
			fv = append(fv, f, g.val())
		}
		return one(k, func(c client) goredis.Cmder { return c.HSet(ctx, k, fv...) })
	}},
	{10, false, func(g *gen) op {
		k, f, v := g.key("hash"), g.field(), g.val()
		return one(k, func(c client) goredis.Cmder { return c.HSetNX(ctx, k, f, v) })
	}},
	{10, false, func(g *gen) op {
		k, f := g.key("hash"), g.field()
		return one(k, func(c client) goredis.Cmder { return c.HGet(ctx, k, f) })
	}},
	{10, false, func(g *gen) op {
		k, fs := g.key("hash"), g.fields(1, 4)
		return one(k, func(c client) goredis.Cmder { return c.HMGet(ctx, k, fs...) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		var fv []any
		for _, f := range g.fields(1, 3) {
			fv = append(fv, f, g.val())
		}
		return one(k, func(c client) goredis.Cmder { return c.HMSet(ctx, k, fv...) })
	}},
	{8, false, func(g *gen) op {
		k, fs := g.key("hash"), g.fields(1, 3)
		return one(k, func(c client) goredis.Cmder { return c.HDel(ctx, k, fs...) })
	}},
	{10, false, func(g *gen) op {
		k, f := g.key("hash"), g.field()
		return one(k, func(c client) goredis.Cmder { return c.HExists(ctx, k, f) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		return one(k, func(c client) goredis.Cmder { return c.HLen(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		o := one(k, func(c client) goredis.Cmder { return c.HKeys(ctx, k) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		o := one(k, func(c client) goredis.Cmder { return c.HVals(ctx, k) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		return one(k, func(c client) goredis.Cmder { return c.HGetAll(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, f, n := g.key("hash"), g.field(), int64(g.intn(-3, 5))
		return one(k, func(c client) goredis.Cmder { return c.HIncrBy(ctx, k, f, n) })
	}},
	{10, false, func(g *gen) op {
		k, f, n := g.key("hash"), g.field(), pick(g, []float64{0.5, -1.25, 2})
		return one(k, func(c client) goredis.Cmder { return c.HIncrByFloat(ctx, k, f, n) })
	}},
	{10, false, func(g *gen) op {
		k, f := g.key("hash"), g.field()
		return one(k, func(c client) goredis.Cmder { return c.HStrLen(ctx, k, f) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("hash")
		o := one(k, func(c client) goredis.Cmder { return c.HRandField(ctx, k, 100) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("hash"), pick(g, []string{"", "f1*", "f[2-5]"})
		o := one(k, func(c client) goredis.Cmder { return c.HScan(ctx, k, 0, m, 1000) })
		o.norm = sortedScan(true)
		return o
	}},

	// Lists.
	{25, false, func(g *gen) op {
		k, vs := g.key("list"), g.members(1, 3)
		return one(k, func(c client) goredis.Cmder { return c.LPush(ctx, k, vs...) })
	}},
	{25, false, func(g *gen) op {
		k, vs := g.key("list"), g.members(1, 3)
		return one(k, func(c client) goredis.Cmder { return c.RPush(ctx, k, vs...) })
	}},
	{10, false, func(g *gen) op {
		k, vs := g.key("list"), g.members(1, 2)
		return one(k, func(c client) goredis.Cmder { return c.LPushX(ctx, k, vs...) })
	}},
	{10, false, func(g *gen) op {
		k, vs := g.key("list"), g.members(1, 2)
		return one(k, func(c client) goredis.Cmder { return c.RPushX(ctx, k, vs...) })
	}},
	{10, false, func(g *gen) op {
		k, n := g.key("list"), g.intn(0, 2)
		return one(k, func(c client) goredis.Cmder {
			if n == 0 {
				return c.LPop(ctx, k)
			}
			return c.LPopCount(ctx, k, n)
		})
	}},
	{10, false, func(g *gen) op {
		k, n := g.key("list"), g.intn(0, 2)
		return one(k, func(c client) goredis.Cmder {
			if n == 0 {
				return c.RPop(ctx, k)
			}
			return c.RPopCount(ctx, k, n)
		})
	}},
	{10, false, func(g *gen) op {
		k := g.key("list")
		return one(k, func(c client) goredis.Cmder { return c.LLen(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, s, e := g.key("list"), int64(g.intn(-5, 3)), int64(g.intn(-3, 6))
		return one(k, func(c client) goredis.Cmder { return c.LRange(ctx, k, s, e) })
	}},
	{10, false, func(g *gen) op {
		k, i := g.key("list"), int64(g.intn(-4, 4))
		return one(k, func(c client) goredis.Cmder { return c.LIndex(ctx, k, i) })
	}},
	{10, false, func(g *gen) op {
		k, i, v := g.key("list"), int64(g.intn(-3, 3)), g.member()
		return one(k, func(c client) goredis.Cmder { return c.LSet(ctx, k, i, v) })
	}},
	{10, false, func(g *gen) op {
		k, where, pivot, v := g.key("list"), pick(g, []string{"BEFORE", "AFTER"}), g.member(), g.member()
		return one(k, func(c client) goredis.Cmder { return c.LInsert(ctx, k, where, pivot, v) })
	}},
	{10, false, func(g *gen) op {
		k, n, v := g.key("list"), int64(g.intn(-2, 2)), g.member()
		return one(k, func(c client) goredis.Cmder { return c.LRem(ctx, k, n, v) })
	}},
	{6, false, func(g *gen) op {
		k, s, e := g.key("list"), int64(g.intn(0, 2)), int64(pick(g, []int{-1, -2, 5, 8}))
		return one(k, func(c client) goredis.Cmder { return c.LTrim(ctx, k, s, e) })
	}},
	{10, false, func(g *gen) op {
		k, v := g.key("list"), g.member()
		a, count := goredis.LPosArgs{Rank: int64(pick(g, []int{0, 1, 2, -1}))}, g.intn(-1, 3)
		return one(k, func(c client) goredis.Cmder {
			if count < 0 {
				return c.LPos(ctx, k, v, a)
			}
			return c.LPosCount(ctx, k, v, int64(count), a)
		})
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("list", 2)
		from, to := pick(g, []string{"LEFT", "RIGHT"}), pick(g, []string{"LEFT", "RIGHT"})
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.LMove(ctx, ks[0], ks[1], from, to) }}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("list", 2)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.RPopLPush(ctx, ks[0], ks[1]) }}
	}},
	{10, false, func(g *gen) op {
		ks, dir, n := g.keys("list", g.intn(1, 3)), pick(g, []string{"left", "right"}), int64(g.intn(1, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.LMPop(ctx, dir, n, ks...) }}
	}},
	// Blocking pops, with a 10 ms timeout (typed methods round to 1 s).
	{3, false, func(g *gen) op {
		ks := g.keys("list", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, blockArgs("blpop", ks)...) }}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("list", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, blockArgs("brpop", ks)...) }}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("list", 2)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			return c.Do(ctx, "blmove", ks[0], ks[1], "RIGHT", "LEFT", "0.01")
		}}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("list", 2)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, "brpoplpush", ks[0], ks[1], "0.01") }}
	}},
	{3, true, func(g *gen) op {
		ks := g.keys("list", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder {
			args := []any{"blmpop", "0.01", len(ks)}
			for _, k := range ks {
				args = append(args, k)
			}
			return c.Do(ctx, append(args, "RIGHT", "COUNT", 2)...)
		}}
	}},

	// Sets.
	{30, false, func(g *gen) op {
		k, ms := g.key("set"), g.members(1, 4)
		return one(k, func(c client) goredis.Cmder { return c.SAdd(ctx, k, ms...) })
	}},
	{10, false, func(g *gen) op {
		k, ms := g.key("set"), g.members(1, 3)
		return one(k, func(c client) goredis.Cmder { return c.SRem(ctx, k, ms...) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("set")
		return one(k, func(c client) goredis.Cmder { return c.SCard(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("set"), g.member()
		return one(k, func(c client) goredis.Cmder { return c.SIsMember(ctx, k, m) })
	}},
	{10, false, func(g *gen) op {
		k, ms := g.key("set"), g.members(1, 4)
		return one(k, func(c client) goredis.Cmder { return c.SMIsMember(ctx, k, ms...) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("set")
		o := one(k, func(c client) goredis.Cmder { return c.SMembers(ctx, k) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("set", g.intn(1, 3))
		return op{keys: ks, norm: sortedStrings, run: func(c client) goredis.Cmder { return c.SInter(ctx, ks...) }}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("set", g.intn(1, 3))
		return op{keys: ks, norm: sortedStrings, run: func(c client) goredis.Cmder { return c.SUnion(ctx, ks...) }}
	}},
	{10, false, func(g *gen) op {
		ks := g.keys("set", g.intn(1, 3))
		return op{keys: ks, norm: sortedStrings, run: func(c client) goredis.Cmder { return c.SDiff(ctx, ks...) }}
	}},
	{8, false, func(g *gen) op {
		ks := g.keys("set", g.intn(2, 4))
		return op{keys: ks, after: dropEmptySet(ks[0]), run: func(c client) goredis.Cmder { return c.SInterStore(ctx, ks[0], ks[1:]...) }}
	}},
	{8, false, func(g *gen) op {
		ks := g.keys("set", g.intn(2, 4))
		return op{keys: ks, after: dropEmptySet(ks[0]), run: func(c client) goredis.Cmder { return c.SUnionStore(ctx, ks[0], ks[1:]...) }}
	}},
	{8, false, func(g *gen) op {
		ks := g.keys("set", g.intn(2, 4))
		return op{keys: ks, after: dropEmptySet(ks[0]), run: func(c client) goredis.Cmder { return c.SDiffStore(ctx, ks[0], ks[1:]...) }}
	}},
	{10, false, func(g *gen) op {
		ks, m := g.keys("set", 2), g.member()
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.SMove(ctx, ks[0], ks[1], m) }}
	}},
	{10, false, func(g *gen) op {
		ks, limit := g.keys("set", g.intn(1, 3)), int64(g.intn(0, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.SInterCard(ctx, limit, ks...) }}
	}},
	{3, false, func(g *gen) op {
		k := g.key("set")
		o := one(k, func(c client) goredis.Cmder { return c.SPopN(ctx, k, 100) }) // all: no randomness
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key("set")
		o := one(k, func(c client) goredis.Cmder { return c.SRandMemberN(ctx, k, 100) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("set"), pick(g, []string{"", "m*", "[1-3]"})
		o := one(k, func(c client) goredis.Cmder { return c.SScan(ctx, k, 0, m, 1000) })
		o.norm = sortedScan(false)
		return o
	}},

	// Sorted sets.
	{30, false, func(g *gen) op {
		k, zs, mode := g.key("zset"), g.zs(1, 3), g.r.IntN(7)
		return one(k, func(c client) goredis.Cmder {
			switch mode {
			case 1:
				return c.ZAddNX(ctx, k, zs...)
			case 2:
				return c.ZAddXX(ctx, k, zs...)
			case 3:
				return c.ZAddGT(ctx, k, zs...)
			case 4:
				return c.ZAddLT(ctx, k, zs...)
			case 5:
				return c.ZAddArgs(ctx, k, goredis.ZAddArgs{Ch: true, Members: zs})
			case 6:
				return c.ZAddArgsIncr(ctx, k, goredis.ZAddArgs{Members: zs[:1]})
			}
			return c.ZAdd(ctx, k, zs...)
		})
	}},
	{20, false, func(g *gen) op {
		// The lex family: every member with score 0.
		k, zs := g.key("lex"), g.zs(1, 3)
		for i := range zs {
			zs[i].Score = 0
		}
		return one(k, func(c client) goredis.Cmder { return c.ZAdd(ctx, k, zs...) })
	}},
	{10, false, func(g *gen) op {
		k, n, m := g.key("zset"), g.score(), g.zmember()
		return one(k, func(c client) goredis.Cmder { return c.ZIncrBy(ctx, k, n, m) })
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("zset"), g.zmember()
		return one(k, func(c client) goredis.Cmder { return c.ZScore(ctx, k, m) })
	}},
	{10, false, func(g *gen) op {
		k, ms := g.key("zset"), []string{g.zmember(), g.zmember(), g.zmember()}[:g.intn(1, 3)]
		return one(k, func(c client) goredis.Cmder { return c.ZMScore(ctx, k, ms...) })
	}},
	{10, false, func(g *gen) op {
		k := g.key("zset")
		return one(k, func(c client) goredis.Cmder { return c.ZCard(ctx, k) })
	}},
	{10, false, func(g *gen) op {
		k, lo, hi := g.key("zset"), g.scoreBound(), g.scoreBound()
		return one(k, func(c client) goredis.Cmder { return c.ZCount(ctx, k, lo, hi) })
	}},
	{10, false, func(g *gen) op {
		k, lo, hi := g.key("lex"), g.lexBound(), g.lexBound()
		return solo(k, sameScores(k, func(c client) goredis.Cmder { return c.ZLexCount(ctx, k, lo, hi) }))
	}},
	{15, false, func(g *gen) op {
		k := g.key("zset")
		a := goredis.ZRangeArgs{Key: k, Start: g.intn(-4, 2), Stop: g.intn(-2, 6), Rev: g.chance(0.3)}
		switch g.r.IntN(3) {
		case 1:
			a.ByScore, a.Start, a.Stop = true, g.scoreBound(), g.scoreBound()
		case 2:
			k = g.key("lex")
			a.Key, a.ByLex, a.Start, a.Stop = k, true, g.lexBound(), g.lexBound()
		}
		if a.ByScore || a.ByLex {
			if g.chance(0.4) {
				a.Offset, a.Count = int64(g.intn(0, 2)), int64(g.intn(1, 3))
			}
		}
		withScores := !a.ByLex && g.chance(0.5)
		run := func(c client) goredis.Cmder {
			if withScores {
				return c.ZRangeArgsWithScores(ctx, a)
			}
			return c.ZRangeArgs(ctx, a)
		}
		if a.ByLex {
			return solo(k, sameScores(k, run))
		}
		return one(k, run)
	}},
	{10, false, func(g *gen) op {
		k, by, ws := g.key("zset"), g.rangeBy(g.scoreBound), g.chance(0.5)
		return one(k, func(c client) goredis.Cmder {
			b := by
			if ws {
				return c.ZRangeByScoreWithScores(ctx, k, &b)
			}
			return c.ZRangeByScore(ctx, k, &b)
		})
	}},
	{10, false, func(g *gen) op {
		k, by := g.key("lex"), g.rangeBy(g.lexBound)
		return solo(k, sameScores(k, func(c client) goredis.Cmder { b := by; return c.ZRangeByLex(ctx, k, &b) }))
	}},
	{10, false, func(g *gen) op {
		k, s, e, ws := g.key("zset"), int64(g.intn(-4, 2)), int64(g.intn(-2, 6)), g.chance(0.5)
		return one(k, func(c client) goredis.Cmder {
			if ws {
				return c.ZRevRangeWithScores(ctx, k, s, e)
			}
			return c.ZRevRange(ctx, k, s, e)
		})
	}},
	{10, false, func(g *gen) op {
		k, by, ws := g.key("zset"), g.rangeBy(g.scoreBound), g.chance(0.5)
		return one(k, func(c client) goredis.Cmder {
			b := by
			if ws {
				return c.ZRevRangeByScoreWithScores(ctx, k, &b)
			}
			return c.ZRevRangeByScore(ctx, k, &b)
		})
	}},
	{10, false, func(g *gen) op {
		k, by := g.key("lex"), g.rangeBy(g.lexBound)
		return solo(k, sameScores(k, func(c client) goredis.Cmder { b := by; return c.ZRevRangeByLex(ctx, k, &b) }))
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("zset"), g.zmember()
		return one(k, func(c client) goredis.Cmder { return c.ZRank(ctx, k, m) })
	}},
	{10, false, func(g *gen) op {
		k, m := g.key("zset"), g.zmember()
		return one(k, func(c client) goredis.Cmder { return c.ZRevRank(ctx, k, m) })
	}},
	{10, false, func(g *gen) op {
		k, ms := g.key("zset"), []any{g.zmember(), g.zmember()}[:g.intn(1, 2)]
		return one(k, func(c client) goredis.Cmder { return c.ZRem(ctx, k, ms...) })
	}},
	{5, false, func(g *gen) op {
		k, s, e := g.key("zset"), int64(g.intn(-3, 2)), int64(g.intn(-3, 2))
		return one(k, func(c client) goredis.Cmder { return c.ZRemRangeByRank(ctx, k, s, e) })
	}},
	{5, false, func(g *gen) op {
		k, lo, hi := g.key("zset"), g.scoreBound(), g.scoreBound()
		return one(k, func(c client) goredis.Cmder { return c.ZRemRangeByScore(ctx, k, lo, hi) })
	}},
	{5, false, func(g *gen) op {
		k, lo, hi := g.key("lex"), g.lexBound(), g.lexBound()
		return solo(k, sameScores(k, func(c client) goredis.Cmder { return c.ZRemRangeByLex(ctx, k, lo, hi) }))
	}},
	{8, false, func(g *gen) op {
		k, n := g.key("zset"), int64(g.intn(1, 2))
		return one(k, func(c client) goredis.Cmder { return c.ZPopMin(ctx, k, n) })
	}},
	{8, false, func(g *gen) op {
		k, n := g.key("zset"), int64(g.intn(1, 2))
		return one(k, func(c client) goredis.Cmder { return c.ZPopMax(ctx, k, n) })
	}},
	{10, false, func(g *gen) op {
		ks, st := g.keys("zset", g.intn(2, 4)), g.zstore()
		return op{keys: ks, run: func(c client) goredis.Cmder {
			s := st
			s.Keys = ks[1:]
			s.Weights = s.Weights[:min(len(s.Weights), len(ks)-1)]
			return c.ZUnionStore(ctx, ks[0], &s)
		}}
	}},
	{10, false, func(g *gen) op {
		ks, st := g.keys("zset", g.intn(2, 4)), g.zstore()
		return op{keys: ks, run: func(c client) goredis.Cmder {
			s := st
			s.Keys = ks[1:]
			s.Weights = s.Weights[:min(len(s.Weights), len(ks)-1)]
			return c.ZInterStore(ctx, ks[0], &s)
		}}
	}},
	{10, false, func(g *gen) op {
		ks, st, ws := g.keys("zset", g.intn(1, 3)), g.zstore(), g.chance(0.5)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			s := st
			s.Keys = ks
			s.Weights = s.Weights[:min(len(s.Weights), len(ks))]
			if ws {
				return c.ZUnionWithScores(ctx, s)
			}
			return c.ZUnion(ctx, s)
		}}
	}},
	{10, false, func(g *gen) op {
		ks, st, ws := g.keys("zset", g.intn(1, 3)), g.zstore(), g.chance(0.5)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			s := st
			s.Keys = ks
			s.Weights = s.Weights[:min(len(s.Weights), len(ks))]
			if ws {
				return c.ZInterWithScores(ctx, &s)
			}
			return c.ZInter(ctx, &s)
		}}
	}},
	{10, false, func(g *gen) op {
		ks, order, n := g.keys("zset", g.intn(1, 3)), pick(g, []string{"min", "max"}), int64(g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.ZMPop(ctx, order, n, ks...) }}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("zset", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, blockArgs("bzpopmin", ks)...) }}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("zset", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Do(ctx, blockArgs("bzpopmax", ks)...) }}
	}},
	{3, false, func(g *gen) op {
		ks := g.keys("zset", g.intn(1, 2))
		return op{keys: ks, run: func(c client) goredis.Cmder {
			args := []any{"bzmpop", "0.01", len(ks)}
			for _, k := range ks {
				args = append(args, k)
			}
			return c.Do(ctx, append(args, "MIN")...)
		}}
	}},
	{10, false, func(g *gen) op {
		k := g.key("zset")
		o := one(k, func(c client) goredis.Cmder { return c.ZRandMember(ctx, k, 100) })
		o.norm = sortedStrings
		return o
	}},
	{10, false, func(g *gen) op {
		k := g.key("zset")
		o := one(k, func(c client) goredis.Cmder { return c.ZScan(ctx, k, 0, "", 1000) })
		o.norm = sortedScan(true)
		return o
	}},
	{10, true, func(g *gen) op {
		ks, ws := g.keys("zset", g.intn(1, 3)), g.chance(0.5)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			if ws {
				return c.ZDiffWithScores(ctx, ks...)
			}
			return c.ZDiff(ctx, ks...)
		}}
	}},
	{8, true, func(g *gen) op {
		ks := g.keys("zset", g.intn(2, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.ZDiffStore(ctx, ks[0], ks[1:]...) }}
	}},
	{8, true, func(g *gen) op {
		ks := g.keys("zset", 2)
		a := goredis.ZRangeArgs{Key: ks[1], Start: g.intn(0, 2), Stop: g.intn(-1, 4)}
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.ZRangeStore(ctx, ks[0], a) }}
	}},
	{10, true, func(g *gen) op {
		ks, limit := g.keys("zset", g.intn(1, 3)), int64(g.intn(0, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.ZInterCard(ctx, limit, ks...) }}
	}},

	// Geo.
	{25, false, func(g *gen) op {
		k := g.key("geo")
		locs := make([]goredis.GeoLocation, g.intn(1, 3))
		for i := range locs {
			lon, lat := g.lonLat()
			locs[i] = goredis.GeoLocation{Name: g.geoMember(), Longitude: lon, Latitude: lat}
		}
		return one(k, func(c client) goredis.Cmder {
			ls := make([]*goredis.GeoLocation, len(locs))
			for i := range locs {
				l := locs[i]
				ls[i] = &l
			}
			return c.GeoAdd(ctx, k, ls...)
		})
	}},
	{10, false, func(g *gen) op {
		k, a, b, unit := g.key("geo"), g.geoMember(), g.geoMember(), pick(g, []string{"m", "km"})
		return one(k, func(c client) goredis.Cmder { return c.GeoDist(ctx, k, a, b, unit) })
	}},
	{10, false, func(g *gen) op {
		k, ms := g.key("geo"), []string{g.geoMember(), g.geoMember(), g.geoMember()}[:g.intn(1, 3)]
		return one(k, func(c client) goredis.Cmder { return c.GeoPos(ctx, k, ms...) })
	}},
	{10, false, func(g *gen) op {
		k, q, loc := g.key("geo"), g.geoSearch(), g.chance(0.5)
		return one(k, func(c client) goredis.Cmder {
			if loc {
				return c.GeoSearchLocation(ctx, k, &goredis.GeoSearchLocationQuery{GeoSearchQuery: q, WithCoord: true, WithDist: true})
			}
			q := q
			return c.GeoSearch(ctx, k, &q)
		})
	}},
	{10, false, func(g *gen) op {
		k, q := g.key("geo"), g.geoRadius()
		lon, lat := g.lonLat()
		return one(k, func(c client) goredis.Cmder { q := q; return c.GeoRadius(ctx, k, lon, lat, &q) })
	}},
	{8, false, func(g *gen) op {
		ks, q := g.keys("geo", 2), g.geoRadius()
		q.WithCoord, q.WithDist = false, false
		if g.chance(0.5) {
			q.Store = ks[1]
		} else {
			q.StoreDist = ks[1]
		}
		lon, lat := g.lonLat()
		return op{keys: ks, run: func(c client) goredis.Cmder { q := q; return c.GeoRadiusStore(ctx, ks[0], lon, lat, &q) }}
	}},
	{10, false, func(g *gen) op {
		k, m, q := g.key("geo"), g.geoMember(), g.geoRadius()
		return one(k, func(c client) goredis.Cmder { q := q; return c.GeoRadiusByMember(ctx, k, m, &q) })
	}},
	{8, false, func(g *gen) op {
		ks, m, q := g.keys("geo", 2), g.geoMember(), g.geoRadius()
		q.WithCoord, q.WithDist = false, false
		if g.chance(0.5) {
			q.Store = ks[1]
		} else {
			q.StoreDist = ks[1]
		}
		return op{keys: ks, run: func(c client) goredis.Cmder { q := q; return c.GeoRadiusByMemberStore(ctx, ks[0], m, &q) }}
	}},
	{10, true, func(g *gen) op {
		k, ms := g.key("geo"), []string{g.geoMember(), g.geoMember()}
		return one(k, func(c client) goredis.Cmder { return c.GeoHash(ctx, k, ms...) })
	}},
	{8, true, func(g *gen) op {
		ks, q := g.keys("geo", 2), g.geoSearch()
		return op{keys: ks, run: func(c client) goredis.Cmder {
			return c.GeoSearchStore(ctx, ks[1], ks[0], &goredis.GeoSearchStoreQuery{GeoSearchQuery: q})
		}}
	}},

	// Streams, with explicit IDs.
	{30, false, func(g *gen) op {
		k := g.key("stream")
		a := goredis.XAddArgs{Stream: k, ID: g.streamID(), Values: []string{g.field(), g.val()}}
		switch g.r.IntN(6) {
		case 0:
			a.MaxLen = int64(g.intn(2, 6))
		case 1:
			a.NoMkStream = true
		case 2:
			if g.chance(0.2) {
				a.ID = "1-1" // below the top of a stream that has entries
			}
		}
		return one(k, func(c client) goredis.Cmder { a := a; return c.XAdd(ctx, &a) })
	}},
	{10, false, func(g *gen) op {
		k, real := g.key("stream"), g.real
		return solo(k, func(c client) goredis.Cmder {
			// miniredis (v2.40.0) answers XLEN of a key of another type
			// with WRONGTYPE and then 0: two replies to one command. On
			// miniredis, such a key gets TYPE instead.
			if !real {
				if t := c.Type(ctx, k); t.Err() != nil || t.Val() != "stream" && t.Val() != "none" {
					return t
				}
			}
			return c.XLen(ctx, k)
		})
	}},
	{10, false, func(g *gen) op {
		k, lo, n := g.key("stream"), pick(g, []string{"-", g.oldID()}), int64(g.intn(0, 4))
		return one(k, func(c client) goredis.Cmder {
			if n == 0 {
				return c.XRange(ctx, k, lo, "+")
			}
			return c.XRangeN(ctx, k, lo, "+", n)
		})
	}},
	{10, false, func(g *gen) op {
		k, n := g.key("stream"), int64(g.intn(0, 4))
		return one(k, func(c client) goredis.Cmder {
			if n == 0 {
				return c.XRevRange(ctx, k, "+", "-")
			}
			return c.XRevRangeN(ctx, k, "+", "-", n)
		})
	}},
	{8, false, func(g *gen) op {
		k, ids := g.key("stream"), []string{g.oldID(), g.oldID()}[:g.intn(1, 2)]
		return one(k, func(c client) goredis.Cmder { return c.XDel(ctx, k, ids...) })
	}},
	{6, false, func(g *gen) op {
		k, n, id, byID := g.key("stream"), int64(g.intn(2, 8)), g.oldID(), g.chance(0.3)
		return one(k, func(c client) goredis.Cmder {
			if byID {
				return c.XTrimMinID(ctx, k, id)
			}
			return c.XTrimMaxLen(ctx, k, n)
		})
	}},
	{20, false, func(g *gen) op {
		k, grp, start, mk := g.key("stream"), g.group(), pick(g, []string{"$", "0"}), g.chance(0.5)
		return one(k, func(c client) goredis.Cmder {
			if mk {
				return c.XGroupCreateMkStream(ctx, k, grp, start)
			}
			return c.XGroupCreate(ctx, k, grp, start)
		})
	}},
	{5, false, func(g *gen) op {
		k, grp, cons := g.key("stream"), g.group(), g.consumer()
		return one(k, func(c client) goredis.Cmder { return c.XGroupCreateConsumer(ctx, k, grp, cons) })
	}},
	{3, false, func(g *gen) op {
		k, grp, cons := g.key("stream"), g.group(), g.consumer()
		return one(k, func(c client) goredis.Cmder { return c.XGroupDelConsumer(ctx, k, grp, cons) })
	}},
	{2, false, func(g *gen) op {
		k, grp := g.key("stream"), g.group()
		return one(k, func(c client) goredis.Cmder { return c.XGroupDestroy(ctx, k, grp) })
	}},
	{15, false, func(g *gen) op {
		ks, grp, cons, id := g.streams(), g.group(), g.consumer(), pick(g, []string{">", ">", "0"})
		n, noack := int64(g.intn(0, 3)), g.chance(0.1)
		return op{keys: ks, run: func(c client) goredis.Cmder {
			streams := slices.Clone(ks)
			for range ks {
				streams = append(streams, id)
			}
			return c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: grp, Consumer: cons, Streams: streams, Count: n, Block: -1, NoAck: noack})
		}}
	}},
	{10, false, func(g *gen) op {
		k, grp, ids := g.key("stream"), g.group(), []string{g.oldID(), g.oldID(), g.oldID()}
		return one(k, func(c client) goredis.Cmder { return c.XAck(ctx, k, grp, ids...) })
	}},
	{10, false, func(g *gen) op {
		k, grp := g.key("stream"), g.group()
		return one(k, func(c client) goredis.Cmder { return c.XPending(ctx, k, grp) })
	}},
	{10, false, func(g *gen) op {
		k, grp, cons := g.key("stream"), g.group(), pick(g, []string{"", "c1"})
		o := one(k, func(c client) goredis.Cmder {
			return c.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: k, Group: grp, Start: "-", End: "+", Count: 10, Consumer: cons})
		})
		o.norm = noIdle
		return o
	}},
	{10, false, func(g *gen) op {
		ks, id, n := g.streams(), pick(g, []string{"0", g.oldID()}), int64(g.intn(0, 3))
		return op{keys: ks, run: func(c client) goredis.Cmder {
			streams := slices.Clone(ks)
			for range ks {
				streams = append(streams, id)
			}
			return c.XRead(ctx, &goredis.XReadArgs{Streams: streams, Count: n, Block: -1})
		}}
	}},
	{8, false, func(g *gen) op {
		k, grp, cons, ids := g.key("stream"), g.group(), g.consumer(), []string{g.oldID(), g.oldID()}
		return one(k, func(c client) goredis.Cmder {
			return c.XClaim(ctx, &goredis.XClaimArgs{Stream: k, Group: grp, Consumer: cons, Messages: ids})
		})
	}},
	{8, false, func(g *gen) op {
		k, grp, cons := g.key("stream"), g.group(), g.consumer()
		return one(k, func(c client) goredis.Cmder {
			return c.XAutoClaim(ctx, &goredis.XAutoClaimArgs{Stream: k, Group: grp, Consumer: cons, Start: "0-0", Count: 3})
		})
	}},
	{8, false, func(g *gen) op {
		k := g.key("stream")
		o := one(k, func(c client) goredis.Cmder { return c.XInfoGroups(ctx, k) })
		o.norm = sortedGroups
		return o
	}},
	{5, true, func(g *gen) op {
		k := g.key("stream")
		return one(k, func(c client) goredis.Cmder { return c.XInfoStream(ctx, k) })
	}},

	// Scripting.
	{10, false, func(g *gen) op {
		s, ks, arg := g.script()
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.Eval(ctx, s, ks, arg) }}
	}},
	{10, false, func(g *gen) op {
		s, ks, arg := g.script()
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.EvalSha(ctx, sha(s), ks, arg) }}
	}},
	{8, false, func(g *gen) op {
		s, k := pick(g, roScripts), g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.EvalRO(ctx, s, []string{k}) })
	}},
	{8, false, func(g *gen) op {
		s, k := pick(g, roScripts), g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.EvalShaRO(ctx, sha(s), []string{k}) })
	}},
	{6, false, func(g *gen) op {
		s := pick(g, allScripts())
		return op{run: func(c client) goredis.Cmder { return c.ScriptLoad(ctx, s) }}
	}},
	{1, false, func(g *gen) op {
		g.next = loadScripts() // the cache is full again before any EVAL
		return op{run: func(c client) goredis.Cmder { return c.ScriptFlush(ctx) }}
	}},
	{2, false, func(g *gen) op {
		k := g.key(pick(g, families))
		return one(k, func(c client) goredis.Cmder { return c.EvalSha(ctx, sha("return 'never loaded'"), []string{k}) })
	}},
	{4, true, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.FunctionLoadReplace(ctx, luaLibrary) }}
	}},
	{1, true, func(g *gen) op {
		return op{run: func(c client) goredis.Cmder { return c.FunctionFlush(ctx) }}
	}},
	{10, true, func(g *gen) op {
		fn, k, n := pick(g, []string{"dget", "dincr"}), g.key("str"), g.intn(-2, 5)
		return one(k, func(c client) goredis.Cmder { return c.FCall(ctx, fn, []string{k}, n) })
	}},
	{10, true, func(g *gen) op {
		ks := g.keys("str", 2)
		return op{keys: ks, run: func(c client) goredis.Cmder { return c.FCallRO(ctx, "dlen", ks) }}
	}},
}

func blockArgs(name string, keys []string) []any {
	args := []any{name}
	for _, k := range keys {
		args = append(args, k)
	}
	return append(args, "0.01")
}

func (g *gen) rangeBy(bound func() string) goredis.ZRangeBy {
	b := goredis.ZRangeBy{Min: bound(), Max: bound()}
	if g.chance(0.3) {
		b.Offset, b.Count = int64(g.intn(0, 2)), int64(g.intn(1, 3))
	}
	return b
}

func (g *gen) zstore() goredis.ZStore {
	var s goredis.ZStore
	if g.chance(0.4) {
		s.Weights = []float64{float64(g.intn(0, 3)), 0.5, 2}
	}
	if g.chance(0.4) {
		s.Aggregate = pick(g, []string{"SUM", "MIN", "MAX"})
	}
	return s
}

func (g *gen) geoSearch() goredis.GeoSearchQuery {
	q := goredis.GeoSearchQuery{Sort: "ASC"}
	if g.chance(0.5) {
		q.Member = g.geoMember()
	} else {
		q.Longitude, q.Latitude = g.lonLat()
	}
	if g.chance(0.5) {
		q.Radius, q.RadiusUnit = float64(g.intn(1, 40)), "km"
	} else {
		q.BoxWidth, q.BoxHeight, q.BoxUnit = float64(g.intn(1, 60)), float64(g.intn(1, 60)), "km"
	}
	if g.chance(0.3) {
		q.Count = g.intn(1, 3)
	}
	return q
}

func (g *gen) geoRadius() goredis.GeoRadiusQuery {
	q := goredis.GeoRadiusQuery{Radius: float64(g.intn(1, 40)), Unit: pick(g, []string{"km", "m"}), Sort: "ASC"}
	if q.Unit == "m" {
		q.Radius *= 1000
	}
	q.WithDist, q.WithCoord = g.chance(0.5), g.chance(0.3)
	if g.chance(0.3) {
		q.Count = g.intn(1, 3)
	}
	return q
}

// script returns a script with its keys and argument.
func (g *gen) script() (string, []string, any) {
	f := pick(g, families)
	if g.chance(0.4) {
		return pick(g, scripts2), g.keys(f, 2), g.member()
	}
	return pick(g, scripts1), []string{g.key(f)}, g.intn(-2, 5)
}
