package integration_test

// The differential script's commands on sets (see script_test.go).

import goredis "github.com/redis/go-redis/v9"

var setsEntries = []entry{
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
}
