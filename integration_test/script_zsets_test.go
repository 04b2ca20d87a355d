package integration_test

// The differential script's commands on sorted sets (see script_test.go).

import goredis "github.com/redis/go-redis/v9"

var zsetsEntries = []entry{
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
