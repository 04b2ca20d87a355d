package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// The property of pub/sub across change: one *redis.PubSub, subscribed and
// unsubscribed at random, while random steps change the shards (SetShards
// to a random list in a random order, an ejection, a rejoin, a resharding
// window opened and migrated to its end). After every step, checked
// against a plain map of what the receiver subscribed: every confirmation
// carries one server's count; after a PING, every server holds exactly the
// subscriptions the shard list places on it; a publish on every channel
// reaches exactly its subscriptions (PUBLISH's count), and each arrives
// exactly once, nothing else. The seed is -seed or $DIFF_SEED (else the
// clock), logged.
func TestPubSubPropertyShardChanges(t *testing.T) {
	seed := fixtures.DiffSeed(t)
	t.Logf("seed=%d (rerun with -seed %d or DIFF_SEED=%d)", seed, seed, seed)
	fixtures.ForEachPubSubBackend(t, func(t *testing.T, b fixtures.PSBackend) {
		p := newPSProperty(t, b, rand.New(rand.NewPCG(uint64(seed), 0)))
		// redis-server stops (SIGSTOP) to be ejected: each ejection waits a
		// read timeout, so fewer steps there.
		steps := 80
		if p.servers[0].Real {
			steps = 30
		}
		for i := range steps {
			p.step(i)
		}
		t.Logf("%d steps: %v", steps, p.done)
	})
}

// psProperty is the state of the property test: the servers, the shard
// list, and the model of the receiver's subscriptions.
type psProperty struct {
	t       *testing.T
	rng     *rand.Rand
	servers []*fixtures.PSServer
	c       *shardedredis.ShardedClient
	r       *fixtures.PSReader
	list    []*fixtures.PSServer // the shard list, in order
	down    []*fixtures.PSServer // servers down, their shards ejected
	subs    map[string]bool      // channels and patterns subscribed: the model
	done    map[string]int       // steps run, by kind
}

// The channels and patterns the test draws from, and the channels that
// only patterns reach, each at most one (miniredis delivers a message once
// per client however many of its patterns match, Redis once per pattern).
var (
	psChannels        = fixtures.PSNames("ch", 16)
	psPatterns        = []string{"p.a*", "p.b?", "p.c*"}
	psPatternChannels = []string{"p.a1", "p.b1", "p.c", "p.bb2"}
)

func newPSProperty(t *testing.T, b fixtures.PSBackend, rng *rand.Rand) *psProperty {
	servers := fixtures.StartPSServers(t, b, 4)
	p := &psProperty{t: t, rng: rng, servers: servers, list: servers[:2], subs: map[string]bool{}, done: map[string]int{}}
	p.c = fixtures.NewPSClient(t, shardedredis.Health{
		Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 20 * time.Millisecond,
	}, p.list...)
	p.r = fixtures.NewPSReader(t, p.c.PSubscribe(ctx, psPatterns[0]))
	p.expectCalls("psubscribe", true, psPatterns[:1])
	return p
}

// step runs one random step and checks the property after it.
func (p *psProperty) step(i int) {
	t := p.t
	t.Helper()
	steps := []struct {
		name string
		ok   bool // can run now
		run  func()
	}{
		{"subscribe", true, func() { p.call("subscribe", true, p.pick(psChannels)) }},
		{"unsubscribe", true, func() { p.call("unsubscribe", false, p.pick(psChannels)) }},
		{"unsubscribe all", true, func() { p.call("unsubscribe", false, nil) }},
		{"psubscribe", true, func() { p.call("psubscribe", true, p.pick(psPatterns)) }},
		{"punsubscribe", true, func() { p.call("punsubscribe", false, p.pick(psPatterns)) }},
		{"SetShards", true, func() {
			p.list = p.randomList()
			if err := p.c.SetShards(fixtures.PSShards(p.list...)); err != nil {
				t.Fatalf("step %d: SetShards: %v", i, err)
			}
		}},
		{"eject", len(p.list)-len(p.down) >= 2, func() {
			s := p.randomOf(p.list, func(s *fixtures.PSServer) bool { return !slices.Contains(p.down, s) })
			fixtures.EjectServer(t, p.c, s)
			p.down = append(p.down, s)
		}},
		{"rejoin", len(p.down) > 0, func() {
			s := p.down[p.rng.IntN(len(p.down))]
			fixtures.RejoinServer(t, p.c, s)
			p.down = slices.DeleteFunc(p.down, func(d *fixtures.PSServer) bool { return d == s })
		}},
		{"resharding", true, func() {
			list := p.randomList()
			if err := p.c.BeginResharding(fixtures.PSShards(list...)); err != nil {
				// A server that is down cannot be cleaned of stale copies:
				// the window is refused, naming it, and nothing changes.
				var se *shardedclient.ShardError
				if !errors.As(err, &se) || !slices.ContainsFunc(p.down, func(d *fixtures.PSServer) bool { return se.Addr == d.Addr }) {
					t.Fatalf("step %d: BeginResharding: %v", i, err)
				}
				p.check(fmt.Sprintf("step %d (resharding refused)", i), nil)
				return
			}
			p.list = list
			p.check(fmt.Sprintf("step %d (resharding window open)", i), nil)
			if len(p.down) == 0 {
				fixtures.RunMigration(t, p.c) // it ends the window
			} else if err := p.c.AbandonResharding(); err != nil { // an ejected source cannot be migrated; there are no keys
				t.Fatalf("step %d: AbandonResharding: %v", i, err)
			}
		}},
	}
	st := steps[p.rng.IntN(len(steps))]
	for !st.ok {
		st = steps[p.rng.IntN(len(steps))]
	}
	var ejected *fixtures.PSServer
	st.run()
	p.done[st.name]++
	if st.name == "eject" {
		ejected = p.down[len(p.down)-1]
	}
	p.check(fmt.Sprintf("step %d (%s)", i, st.name), ejected)
}

// psCalls are the go-redis methods of the commands the test sends.
var psCalls = map[string]func(*goredis.PubSub, context.Context, ...string) error{
	"subscribe":    (*goredis.PubSub).Subscribe,
	"unsubscribe":  (*goredis.PubSub).Unsubscribe,
	"psubscribe":   (*goredis.PubSub).PSubscribe,
	"punsubscribe": (*goredis.PubSub).PUnsubscribe,
}

// call sends a (un)subscribe of names (nil: every subscription of its
// kind) and checks its PSConfirmations against the model.
func (p *psProperty) call(command string, subscribes bool, names []string) {
	p.t.Helper()
	if err := psCalls[command](p.r.PS, ctx, names...); err != nil {
		p.t.Fatalf("%s %q: %v", command, names, err)
	}
	p.expectCalls(command, subscribes, names)
}

// expectCalls reads the PSConfirmations of a (un)subscribe of names and
// applies it to the model.
func (p *psProperty) expectCalls(command string, subscribes bool, names []string) {
	p.t.Helper()
	if names == nil { // every subscription of that kind, in name order
		universe := psChannels
		if command == "punsubscribe" {
			universe = psPatterns
		}
		names = slices.DeleteFunc(slices.Clone(universe), func(n string) bool { return !p.subs[n] })
		slices.Sort(names)
		if len(names) == 0 {
			p.r.Expect(goredis.Subscription{Kind: command, Count: len(p.subs)})
			return
		}
	}
	for _, n := range names {
		if subscribes {
			p.subs[n] = true
		} else {
			delete(p.subs, n)
		}
		p.r.Expect(goredis.Subscription{Kind: command, Channel: n, Count: len(p.subs)})
	}
}

// check syncs and checks the property; errors before the pong may only be
// the ejected server's.
func (p *psProperty) check(what string, ejected *fixtures.PSServer) {
	p.t.Helper()
	errs := p.r.Sync()
	if ejected == nil && len(errs) > 0 {
		p.t.Fatalf("%s: errors before the pong: %v", what, errs)
	}
	fixtures.WantShardErrors(p.t, what, errs, ejected)
	want := fixtures.PSPlacement{Down: p.down}
	for n := range p.subs {
		if slices.Contains(psPatterns, n) {
			want.Patterns = append(want.Patterns, n)
		} else {
			want.Channels = append(want.Channels, n)
		}
	}
	fixtures.CheckPSPlacement(p.t, p.c, p.servers, want)
	rs := map[string][]string{}
	for _, ch := range psChannels {
		if p.subs[ch] {
			rs[ch] = []string{""}
		} else {
			rs[ch] = nil
		}
	}
	for _, ch := range psPatternChannels {
		rs[ch] = nil
		for _, pat := range want.Patterns {
			if ok, _ := path.Match(pat, ch); ok {
				rs[ch] = append(rs[ch], pat)
			}
		}
	}
	p.r.Deliver(fixtures.PSPublisher(p.c), what, rs)
}

// pick returns 1 to 4 names of universe.
func (p *psProperty) pick(universe []string) []string {
	out := make([]string, 1+p.rng.IntN(4))
	for i := range out {
		out[i] = universe[p.rng.IntN(len(universe))]
	}
	return out
}

// randomList returns a random shard list: every server that is down (its
// shard stays ejected only while it stays in the list) and at least one
// that is up, in a random order.
func (p *psProperty) randomList() []*fixtures.PSServer {
	var list []*fixtures.PSServer
	for _, s := range p.servers {
		if slices.Contains(p.down, s) || p.rng.IntN(2) == 0 {
			list = append(list, s)
		}
	}
	if len(list) == len(p.down) {
		list = append(list, p.randomOf(p.servers, func(s *fixtures.PSServer) bool { return !slices.Contains(p.down, s) }))
	}
	p.rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	return list
}

// randomOf returns a random server of from that ok accepts.
func (p *psProperty) randomOf(from []*fixtures.PSServer, ok func(*fixtures.PSServer) bool) *fixtures.PSServer {
	var candidates []*fixtures.PSServer
	for _, s := range from {
		if ok(s) {
			candidates = append(candidates, s)
		}
	}
	return candidates[p.rng.IntN(len(candidates))]
}
