package integration_test

// Pub/sub across changes of the shard list (SetShards, ejection and rejoin,
// resharding) and shard failures, on miniredis and on real redis-server
// processes: every subscription is where PUBLISH reaches it, confirmations
// mean what they mean on one server, no goroutine panics.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// psServer is one server of a pub/sub test.
type psServer struct {
	name   string // the shard's name in every list ("s0", "s1", ...)
	addr   string
	direct *goredis.Client // the server itself, not through the sharded client
	down   func()          // the server fails: miniredis closes, redis-server stops (SIGSTOP)
	up     func()          // it serves again at the same address
	real   bool            // redis-server: keyspace notifications, SSUBSCRIBE
}

// psBackend starts the servers of pub/sub tests.
type psBackend struct {
	name  string
	start func(t *testing.T, name string) *psServer
}

var psBackends = []psBackend{
	{name: "miniredis", start: func(t *testing.T, name string) *psServer {
		m := miniredis.RunT(t)
		return newPSServer(t, name, m.Addr(), false, m.Close, func() {
			if err := m.Restart(); err != nil {
				t.Fatal(err)
			}
		})
	}},
	{name: "redis-server", start: func(t *testing.T, name string) *psServer {
		p := startRedisProc(t, realRedisBin(t), "")
		return newPSServer(t, name, p.addr, true,
			func() { p.signal(t, syscall.SIGSTOP) }, func() { p.signal(t, syscall.SIGCONT) })
	}},
}

func newPSServer(t *testing.T, name, addr string, real bool, down, up func()) *psServer {
	direct := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	return &psServer{name: name, addr: addr, direct: direct, down: down, up: up, real: real}
}

// forEachPubSubBackend runs f on miniredis and on redis-server.
func forEachPubSubBackend(t *testing.T, f func(t *testing.T, b psBackend)) {
	for _, b := range psBackends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// startPSServers starts n servers named s0, s1, ...
func startPSServers(t *testing.T, b psBackend, n int) []*psServer {
	t.Helper()
	out := make([]*psServer, n)
	for i := range out {
		out[i] = b.start(t, fmt.Sprintf("s%d", i))
	}
	return out
}

// psShards is the shard list of servers, in order, each shard named after
// its server, with failShard's short timeouts.
func psShards(servers ...*psServer) []shardedredis.ShardOptions {
	out := make([]shardedredis.ShardOptions, len(servers))
	for i, s := range servers {
		out[i] = failShard(s.addr)
		out[i].Name = s.name
	}
	return out
}

// newPSClient is a ShardedClient over servers with health policy h.
func newPSClient(t *testing.T, h shardedredis.Health, servers ...*psServer) *shardedredis.ShardedClient {
	t.Helper()
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: psShards(servers...), Health: h})
	if err != nil {
		t.Fatal(err)
	}
	closeAndSettle(t, c)
	return c
}

// ownedBy returns the first of n names prefix0, prefix1, ... that c places
// on the shard named shard.
func ownedBy(t *testing.T, c *shardedredis.ShardedClient, prefix, shard string) string {
	t.Helper()
	for i := range 1000 {
		if name := fmt.Sprint(prefix, i); c.GetShardInfo(name).Name == shard {
			return name
		}
	}
	t.Fatalf("no %s* on shard %s", prefix, shard)
	return ""
}

// psNames returns prefix0 ... prefix<n-1>.
func psNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// psReader reads a *redis.PubSub for a test.
type psReader struct {
	t     *testing.T
	ps    *goredis.PubSub
	pings int
}

func newPSReader(t *testing.T, ps *goredis.PubSub) *psReader {
	t.Cleanup(func() { _ = ps.Close() })
	return &psReader{t: t, ps: ps}
}

// next returns the next confirmation, message or pong, or the error of
// Receive (a shard's failure); nothing for 5 seconds fails the test.
func (r *psReader) next() any {
	r.t.Helper()
	msg, err := r.ps.ReceiveTimeout(ctx, 5*time.Second)
	var se *shardedclient.ShardError
	var ne net.Error
	if !errors.As(err, &se) && errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("nothing received for 5s: %v", err)
	}
	if err != nil {
		return err
	}
	return msg
}

// expect reads confirmations and fails unless they are want, in order.
func (r *psReader) expect(want ...goredis.Subscription) {
	r.t.Helper()
	for _, w := range want {
		got, ok := r.next().(*goredis.Subscription)
		if !ok || *got != w {
			r.t.Fatalf("received %#v, want confirmation %+v", got, w)
		}
	}
}

// confirmations are the confirmations of kind for names, counts rising
// (or falling, step -1) from first.
func confirmations(kind string, first, step int, names ...string) []goredis.Subscription {
	out := make([]goredis.Subscription, len(names))
	for i, n := range names {
		out[i] = goredis.Subscription{Kind: kind, Channel: n, Count: first + i*step}
	}
	return out
}

// sync pings and reads up to the pong, which means every subscription is
// in place on the current shard list. It returns the errors read before the
// pong and fails on anything else (a message there is late or duplicate).
func (r *psReader) sync() []error {
	r.t.Helper()
	r.pings++
	payload := fmt.Sprint("sync ", r.pings)
	if err := r.ps.Ping(ctx, payload); err != nil {
		r.t.Fatal(err)
	}
	var errs []error
	for {
		switch m := r.next().(type) {
		case *goredis.Pong:
			if m.Payload != payload {
				r.t.Fatalf("pong %q, want %q", m.Payload, payload)
			}
			return errs
		case error:
			errs = append(errs, m)
		default:
			r.t.Fatalf("received %v before the pong", m)
		}
	}
}

// syncClean is sync where no error may come.
func (r *psReader) syncClean() {
	r.t.Helper()
	if errs := r.sync(); len(errs) > 0 {
		r.t.Fatalf("errors before the pong: %v", errs)
	}
}

// route is how a message reaches the receiver: by its channel (pattern "")
// or by a pattern.
type route struct{ channel, pattern string }

// deliver publishes a payload unique to tag on each channel of routes'
// keys, checks that PUBLISH (or SPUBLISH) reached exactly as many
// subscriptions as it has routes, and that exactly one message per route
// arrives, and nothing else.
func (r *psReader) deliver(publish func(ch, payload string) (int64, error), tag string, routes map[string][]string) {
	r.t.Helper()
	want := map[string]int{}
	for ch, patterns := range routes {
		payload := tag + " " + ch
		n, err := publish(ch, payload)
		if err != nil || n != int64(len(patterns)) {
			r.t.Fatalf("%s: publish %s = %d, %v; want %d receivers", tag, ch, n, err, len(patterns))
		}
		for _, p := range patterns {
			want[fmt.Sprint(route{ch, p}, payload)]++
		}
	}
	for missing := len(want); missing > 0; {
		m, ok := r.next().(*goredis.Message)
		if !ok {
			r.t.Fatalf("%s: received %v, want a message", tag, m)
		}
		k := fmt.Sprint(route{m.Channel, m.Pattern}, m.Payload)
		if want[k]--; want[k] < 0 {
			r.t.Fatalf("%s: unexpected or duplicate message %v (pattern %q)", tag, m, m.Pattern)
		}
		if want[k] == 0 {
			missing--
		}
	}
}

// routes returns, for each channel of chs, one direct route.
func routes(chs ...string) map[string][]string {
	out := map[string][]string{}
	for _, ch := range chs {
		out[ch] = []string{""}
	}
	return out
}

// publisher publishes through c.
func publisher(c *shardedredis.ShardedClient) func(ch, payload string) (int64, error) {
	return func(ch, payload string) (int64, error) { return c.Publish(ctx, ch, payload).Result() }
}

// placement is what the servers should hold: channels, shard channels and
// patterns; down servers are not asked.
type placement struct {
	channels, shardChannels, patterns []string
	down                              []*psServer
}

// checkPlacement polls until every server that is up holds exactly the
// subscriptions that the current shard list places on it: each channel on
// the server of its live owner, each pattern on every live shard, nothing
// anywhere else (a server that left stops holding them once its connection
// is closed).
func checkPlacement(t *testing.T, c *shardedredis.ShardedClient, servers []*psServer, want placement) {
	t.Helper()
	poll(t, 5*time.Second, "subscriptions in place", func() error {
		shards, stats := c.Shards(), c.Stats()
		owner := func(ch string) string { return shards[c.GetShardInfo(ch).Index].Addr }
		for _, s := range servers {
			if slices.Contains(want.down, s) {
				continue
			}
			var chs, schs []string
			for _, ch := range want.channels {
				if owner(ch) == s.addr {
					chs = append(chs, ch)
				}
			}
			for _, ch := range want.shardChannels {
				if owner(ch) == s.addr {
					schs = append(schs, ch)
				}
			}
			numpat := 0
			if i := slices.IndexFunc(shards, func(sh shardedredis.Shard) bool { return sh.Addr == s.addr }); i >= 0 && !stats[i].Ejected {
				numpat = len(want.patterns)
			}
			if err := serverHolds(s, chs, schs, numpat); err != nil {
				return fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
			}
		}
		return nil
	})
}

// serverHolds checks PUBSUB CHANNELS, SHARDCHANNELS (redis-server only)
// and NUMPAT of s.
func serverHolds(s *psServer, channels, shardChannels []string, numpat int) error {
	got, err := s.direct.PubSubChannels(ctx, "*").Result()
	if err != nil {
		return err
	}
	if slices.Sort(got); !slices.Equal(got, sorted(channels)) {
		return fmt.Errorf("PUBSUB CHANNELS = %q, want %q", got, sorted(channels))
	}
	if s.real {
		got, err := s.direct.PubSubShardChannels(ctx, "*").Result()
		if err != nil {
			return err
		}
		if slices.Sort(got); !slices.Equal(got, sorted(shardChannels)) {
			return fmt.Errorf("PUBSUB SHARDCHANNELS = %q, want %q", got, sorted(shardChannels))
		}
	}
	if n, err := s.direct.PubSubNumPat(ctx).Result(); err != nil || n != int64(numpat) {
		return fmt.Errorf("PUBSUB NUMPAT = %d, %v; want %d", n, err, numpat)
	}
	return nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	if s == nil {
		return []string{}
	}
	return s
}

// wantShardErrors fails unless every error of errs is a *ShardError naming
// the shard of server s.
func wantShardErrors(t *testing.T, what string, errs []error, s *psServer) {
	t.Helper()
	for _, err := range errs {
		var se *shardedclient.ShardError
		if !errors.As(err, &se) || se.Name != s.name || se.Addr != s.addr {
			t.Fatalf("%s: %v (%T), want a ShardError naming %s (%s)", what, err, err, s.name, s.addr)
		}
	}
}

// Issue 17: subscribed on 3 shards, SetShards to 2. No goroutine panics
// (the relay of the removed shard once indexed the new list by its old
// position); the channel of the removed shard moves to its new owner; an
// Unsubscribe is confirmed only once the shards have unsubscribed: no
// publish reaches the receiver after it.
func TestPubSubShrinkShardList(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		var chs []string
		for _, s := range servers {
			chs = append(chs, ownedBy(t, c, "ch", s.name))
		}
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		r.expect(confirmations("subscribe", 1, 1, chs...)...)
		checkPlacement(t, c, servers, placement{channels: chs})

		if err := c.SetShards(psShards(servers[:2]...)); err != nil {
			t.Fatal(err)
		}
		r.syncClean()
		checkPlacement(t, c, servers, placement{channels: chs})
		r.deliver(publisher(c), "after SetShards", routes(chs...))

		if err := r.ps.Unsubscribe(ctx, chs...); err != nil {
			t.Fatal(err)
		}
		r.expect(confirmations("unsubscribe", 2, -1, chs...)...)
		r.deliver(publisher(c), "after Unsubscribe", map[string][]string{chs[0]: nil, chs[1]: nil, chs[2]: nil})
		checkPlacement(t, c, servers, placement{})
		r.syncClean()
	})
}

// Issue 11, item 1: named shards [a, b], Subscribe(chA), SetShards(b, a),
// then Subscribe(chB) where chB belongs to b: chB is subscribed on b's
// server (not a's), and PUBLISH chB reaches it.
func TestPubSubReorderedNamedShards(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 2)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		chA, chB := ownedBy(t, c, "ch", "s0"), ownedBy(t, c, "ch", "s1")
		r := newPSReader(t, c.Subscribe(ctx, chA))
		r.expect(confirmations("subscribe", 1, 1, chA)...)
		if err := c.SetShards(psShards(servers[1], servers[0])); err != nil {
			t.Fatal(err)
		}
		if got := c.GetShardInfo(chB).Name; got != "s1" {
			t.Fatalf("%s moved to %s when the named shards were reordered", chB, got)
		}
		if err := r.ps.Subscribe(ctx, chB); err != nil {
			t.Fatal(err)
		}
		r.expect(confirmations("subscribe", 2, 1, chB)...)
		r.deliver(publisher(c), "reordered", routes(chA, chB))
		checkPlacement(t, c, servers, placement{channels: []string{chA, chB}})
	})
}

// A channel that moves to a shard added by SetShards keeps receiving; it
// is unsubscribed on its old owner.
func TestPubSubChannelMovesToAddedShard(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers[:2]...)
		chs := psNames("ch", 30)
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		r.expect(confirmations("subscribe", 1, 1, chs...)...)
		if err := c.SetShards(psShards(servers...)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(chs, func(ch string) bool { return c.GetShardInfo(ch).Name == "s2" }) {
			t.Fatal("no channel moved to the added shard")
		}
		r.syncClean()
		checkPlacement(t, c, servers, placement{channels: chs})
		r.deliver(publisher(c), "after adding s2", routes(chs...))
	})
}

// Issue 18, item 3: a pattern covers every shard, shards added later
// included: PSubscribe("__keyspace@0__:*"), SetShards adding c, then a
// write on c: its keyspace event arrives (redis-server). On miniredis,
// which has no keyspace events, a publish on a channel of c arrives.
func TestPubSubPatternCoversAddedShard(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers[:2]...)
		pattern := "news.*"
		if servers[0].real {
			pattern = "__keyspace@0__:*"
			for _, s := range servers {
				if err := s.direct.ConfigSet(ctx, "notify-keyspace-events", "KEA").Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := newPSReader(t, c.PSubscribe(ctx, pattern))
		r.expect(confirmations("psubscribe", 1, 1, pattern)...)
		if err := c.SetShards(psShards(servers...)); err != nil {
			t.Fatal(err)
		}
		r.syncClean()
		checkPlacement(t, c, servers, placement{patterns: []string{pattern}})
		if !servers[0].real {
			ch := ownedBy(t, c, "news.", "s2")
			r.deliver(publisher(c), "on the added shard", map[string][]string{ch: {pattern}})
			return
		}
		k := ownedBy(t, c, "key:", "s2")
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		want := goredis.Message{Channel: "__keyspace@0__:" + k, Pattern: pattern, Payload: "set"}
		if m, ok := r.next().(*goredis.Message); !ok || m.Channel != want.Channel || m.Pattern != want.Pattern || m.Payload != want.Payload {
			t.Fatalf("after SET %s on the added shard: %v, want %v", k, m, want)
		}
	})
}

// Issue 11, item 2: the first confirmation of a Subscribe over several
// shards means every channel of the call is live (go-redis's documented
// way to wait is one Receive): PUBLISH sports right after it reaches 1
// receiver, in every one of 10 runs. The other confirmations follow, in
// order, with one server's counts.
func TestPubSubSubscribeConfirmsEveryShard(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 4)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		chs := []string{"news", "sports", "weather", "c4"}
		shards := map[string]bool{}
		for _, ch := range chs {
			shards[c.GetShardInfo(ch).Name] = true
		}
		if len(shards) < 2 {
			t.Fatalf("the channels are all on %v", shards)
		}
		for run := range 10 {
			ps := c.Subscribe(ctx, chs...)
			m, err := ps.Receive(ctx)
			if sub, ok := m.(*goredis.Subscription); !ok || err != nil || *sub != confirmations("subscribe", 1, 1, chs...)[0] {
				t.Fatalf("run %d: first reply %v, %v", run, m, err)
			}
			if n, err := c.Publish(ctx, "sports", "goal").Result(); err != nil || n != 1 {
				t.Fatalf("run %d: PUBLISH sports right after the first confirmation = %d, %v; want 1", run, n, err)
			}
			r := &psReader{t: t, ps: ps}
			r.expect(confirmations("subscribe", 2, 1, chs[1:]...)...)
			if m, ok := r.next().(*goredis.Message); !ok || m.Channel != "sports" || m.Payload != "goal" {
				t.Fatalf("run %d: %v, want the message on sports", run, m)
			}
			if err := ps.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Issue 11, item 2: the subscription of a dead shard fails with a
// *ShardError naming the shard (not reply text), before the confirmations
// of that call; the other shards' channels work, and the dead shard's
// channel receives once it is back (go-redis resubscribes).
func TestPubSubDeadShardError(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		var chs []string
		for _, s := range servers {
			chs = append(chs, ownedBy(t, c, "ch", s.name))
		}
		dead := servers[1]
		dead.down()
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		err, _ := r.next().(error)
		wantShardError(t, "Subscribe with a dead shard", err, 1, dead.addr)
		r.expect(confirmations("subscribe", 1, 1, chs...)...)
		live := routes(chs[0], chs[2])
		r.deliver(publisher(c), "with a dead shard", live)

		dead.up()
		payload := ""
		poll(t, 10*time.Second, "the returned shard's channel", func() error {
			payload = fmt.Sprint("back ", time.Now().UnixNano())
			if n, err := c.Publish(ctx, chs[1], payload).Result(); err != nil || n != 1 {
				return fmt.Errorf("PUBLISH = %d, %v", n, err)
			}
			return nil
		})
		for {
			m := r.next()
			if err, ok := m.(error); ok { // the failures of the relay meanwhile
				wantShardErrors(t, "while the shard was down", []error{err}, dead)
				continue
			}
			if msg, ok := m.(*goredis.Message); !ok || msg.Channel != chs[1] || msg.Payload != payload {
				t.Fatalf("received %v, want %q on %s", m, payload, chs[1])
			}
			break
		}
		r.syncClean()
		r.deliver(publisher(c), "after the shard returned", routes(chs...))
	})
}

// EjectMode: the channels of an ejected shard move to the shards that now
// own them, and back when it rejoins; patterns leave the ejected shard and
// return to it.
func TestPubSubFollowsEjectionAndRejoin(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{
			Mode: shardedclient.EjectMode, FailureLimit: 1, RetryTimeout: 50 * time.Millisecond,
		}, servers...)
		chs := psNames("ch", 30)
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		r.expect(confirmations("subscribe", 1, 1, chs...)...)
		if err := r.ps.PSubscribe(ctx, "p.*"); err != nil {
			t.Fatal(err)
		}
		r.expect(confirmations("psubscribe", 31, 1, "p.*")...)
		want := placement{channels: chs, patterns: []string{"p.*"}}
		all := routes(chs...)
		all["p.x"] = []string{"p.*"}

		dead := servers[1]
		ejectServer(t, c, dead)
		wantShardErrors(t, "ejection", r.sync(), dead)
		checkPlacement(t, c, servers, placement{channels: chs, patterns: want.patterns, down: []*psServer{dead}})
		r.deliver(publisher(c), "ejected", all)

		rejoinServer(t, c, dead)
		r.syncClean()
		checkPlacement(t, c, servers, want)
		r.deliver(publisher(c), "rejoined", all)
	})
}

// ejectServer takes s down and fails a command on its shard until the
// shard is ejected (EjectMode, FailureLimit 1).
func ejectServer(t *testing.T, c *shardedredis.ShardedClient, s *psServer) {
	t.Helper()
	s.down()
	k := ownedBy(t, c, "key:", s.name)
	poll(t, 5*time.Second, "ejection of "+s.name, func() error {
		_ = c.Get(ctx, k).Err()
		for _, st := range c.Stats() {
			if st.Name == s.name && !st.Ejected {
				return errors.New("not ejected")
			}
		}
		return nil
	})
}

// rejoinServer brings s up and waits until its shard has rejoined.
func rejoinServer(t *testing.T, c *shardedredis.ShardedClient, s *psServer) {
	t.Helper()
	s.up()
	poll(t, 5*time.Second, "rejoin of "+s.name, func() error {
		for _, st := range c.Stats() {
			if st.Name == s.name && st.Ejected {
				return errors.New("still ejected")
			}
		}
		return nil
	})
}

// Resharding: subscriptions move to the new owners at BeginResharding; a
// shard that the window removes keeps the patterns (it is still in the
// list) but no channel, and nothing once the window ends.
func TestPubSubFollowsResharding(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers[:2]...)
		chs := psNames("ch", 30)
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		r.expect(confirmations("subscribe", 1, 1, chs...)...)
		if err := r.ps.PSubscribe(ctx, "p.*"); err != nil {
			t.Fatal(err)
		}
		r.expect(confirmations("psubscribe", 31, 1, "p.*")...)
		want := placement{channels: chs, patterns: []string{"p.*"}}
		all := routes(chs...)
		all["p.x"] = []string{"p.*"}
		for _, step := range []struct {
			name string
			run  func() error
		}{
			{"BeginResharding adding s2", func() error { return c.BeginResharding(psShards(servers...)) }},
			{"the migration ends the window", func() error { return migrate(c) }},
			{"BeginResharding removing s1", func() error { return c.BeginResharding(psShards(servers[2], servers[0])) }},
			{"the migration ends the window", func() error { return migrate(c) }},
		} {
			if err := step.run(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			r.syncClean()
			checkPlacement(t, c, servers, want)
			r.deliver(publisher(c), step.name, all)
		}
	})
}

// Shard channels (SSUBSCRIBE, redis-server only) follow SetShards as
// channels do, and SPUBLISH reaches them; smessages arrive as messages.
func TestPubSubShardChannelsFollowSetShards(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		if !servers[0].real {
			t.Skip("miniredis has no SSUBSCRIBE")
		}
		c := newPSClient(t, shardedredis.Health{}, servers[:2]...)
		chs := psNames("sch", 20)
		r := newPSReader(t, c.SSubscribe(ctx, chs...))
		r.expect(confirmations("ssubscribe", 1, 1, chs...)...)
		spublish := func(ch, payload string) (int64, error) { return c.SPublish(ctx, ch, payload).Result() }
		for _, list := range [][]*psServer{servers, {servers[2], servers[0]}} {
			if err := c.SetShards(psShards(list...)); err != nil {
				t.Fatal(err)
			}
			r.syncClean()
			checkPlacement(t, c, servers, placement{shardChannels: chs})
			r.deliver(spublish, "shard channels on "+strings.Join(shardNames(list), ","), routes(chs...))
		}
		if err := r.ps.SUnsubscribe(ctx); err != nil {
			t.Fatal(err)
		}
		r.expect(confirmations("sunsubscribe", 19, -1, sorted(chs)...)...)
		checkPlacement(t, c, servers, placement{})
	})
}

// migrate runs a migration of the resharding window to its end, which ends
// the window.
func migrate(c *shardedredis.ShardedClient) error {
	m, err := c.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		return err
	}
	return m.Run(ctx)
}

func shardNames(servers []*psServer) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.name
	}
	return out
}
