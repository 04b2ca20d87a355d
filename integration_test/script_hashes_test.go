package integration_test

// The differential script's commands on hashes (see script_test.go).

import goredis "github.com/redis/go-redis/v9"

var hashesEntries = []entry{
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
}
