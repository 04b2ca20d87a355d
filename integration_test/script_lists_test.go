package integration_test

// The differential script's commands on lists and blocking pops (see script_test.go).

import goredis "github.com/redis/go-redis/v9"

var listsEntries = []entry{
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
}

func blockArgs(name string, keys []string) []any {
	args := []any{name}
	for _, k := range keys {
		args = append(args, k)
	}
	return append(args, "0.01")
}
