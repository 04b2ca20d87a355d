package integration_test

// The differential script's commands on keys and expiry, on any family (see
// script_test.go).

import (
	"time"

	goredis "github.com/redis/go-redis/v9"
)

var keysEntries = []entry{
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
}
