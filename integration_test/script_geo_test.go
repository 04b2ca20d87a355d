package integration_test

// The differential script's commands on geo (see script_test.go).

import goredis "github.com/redis/go-redis/v9"

var geoEntries = []entry{
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
