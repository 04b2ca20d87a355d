package integration_test

// The differential script's commands on streams (see script_test.go).

import (
	"slices"

	goredis "github.com/redis/go-redis/v9"
)

var streamsEntries = []entry{
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
}
