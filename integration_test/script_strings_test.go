package integration_test

// The differential script's commands on strings (the split commands sent
// raw among them), bitmaps and HyperLogLog (see script_test.go).

import (
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

var stringsEntries = []entry{
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
}
