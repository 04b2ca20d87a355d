package integration_test

// The differential script's scripting commands: EVAL, FUNCTION, FCALL (see
// script_test.go).

import goredis "github.com/redis/go-redis/v9"

var scriptingEntries = []entry{
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
	{3, false, func(g *gen) op {
		// A keyless script runs on any one shard, by Redis's rule for
		// clients; its text is not one that EVALSHA uses.
		n := g.intn(0, 99)
		return op{run: func(c client) goredis.Cmder { return c.Eval(ctx, "return tonumber(ARGV[1]) * 2", nil, n) }}
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

// script returns a script with its keys and argument.
func (g *gen) script() (string, []string, any) {
	f := pick(g, families)
	if g.chance(0.4) {
		return pick(g, scripts2), g.keys(f, 2), g.member()
	}
	return pick(g, scripts1), []string{g.key(f)}, g.intn(-2, 5)
}
