package integration_test

// Pub/sub through the sharded client, on miniredis and on real redis-server
// processes, and the helpers of every pub/sub test: servers that can go
// down and come back, a reader of the *redis.PubSub that checks what
// arrives, and a check of what each server holds.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// Subscribe to one channel on each of three shards: each is held on its
// shard's server, PUBLISH reaches it there once; an Unsubscribe of one is
// confirmed with the count of the others, after which its shard holds it no
// more and PUBLISH reaches nobody; PING on the connection answers.
func TestRedisSubscribeAcrossShards(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		chs := oneChannelPerShard(t, c, servers)
		r := newPSReader(t, c.Subscribe(ctx, chs...))
		r.expect(psConfirmations("subscribe", 1, 1, chs...)...)
		checkPSPlacement(t, c, servers, psPlacement{channels: chs})
		r.deliver(psPublisher(c), "subscribed", psRoutes(chs...))

		if err := r.ps.Unsubscribe(ctx, chs[0]); err != nil {
			t.Fatal(err)
		}
		r.expect(psConfirmations("unsubscribe", 2, 0, chs[0])...)
		checkPSPlacement(t, c, servers, psPlacement{channels: chs[1:]})
		rs := psRoutes(chs[1:]...)
		rs[chs[0]] = nil
		r.deliver(psPublisher(c), "after unsubscribing "+chs[0], rs)
		r.syncClean()
	})
}

// PSubscribe holds the pattern on every shard and receives the messages of
// every shard, also through Channel().
func TestRedisPSubscribeEveryShard(t *testing.T) {
	forEachPubSubBackend(t, func(t *testing.T, b psBackend) {
		servers := startPSServers(t, b, 3)
		c := newPSClient(t, shardedredis.Health{}, servers...)
		r := newPSReader(t, c.PSubscribe(ctx, "ch*"))
		r.expect(psConfirmations("psubscribe", 1, 1, "ch*")...)
		checkPSPlacement(t, c, servers, psPlacement{patterns: []string{"ch*"}})
		chs := oneChannelPerShard(t, c, servers)
		rs := map[string][]string{}
		for _, ch := range chs {
			rs[ch] = []string{"ch*"}
		}
		r.deliver(psPublisher(c), "pattern", rs)

		msgs := r.ps.Channel()
		if n, err := c.Publish(ctx, chs[0], "via channel").Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH = %d, %v", n, err)
		}
		select {
		case msg := <-msgs:
			if msg.Channel != chs[0] || msg.Pattern != "ch*" || msg.Payload != "via channel" {
				t.Fatalf("Channel() delivered %v", msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Channel() delivered nothing")
		}
	})
}

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
// its server, with failShard's short timeouts. Its pools are large: after
// PoolSize failed dials (probes of a shard that is down), go-redis dials
// again only once a second, which would hold up a rejoin.
func psShards(servers ...*psServer) []shardedredis.ShardOptions {
	out := make([]shardedredis.ShardOptions, len(servers))
	for i, s := range servers {
		out[i] = failShard(s.addr)
		out[i].Name = s.name
		out[i].Options.PoolSize = 1000
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

// ownedBy returns the first of the names prefix0, prefix1, ... that c
// places on the shard named shard.
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

// oneChannelPerShard returns a channel owned by each of servers' shards,
// in order.
func oneChannelPerShard(t *testing.T, c *shardedredis.ShardedClient, servers []*psServer) []string {
	t.Helper()
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = ownedBy(t, c, "ch", s.name)
	}
	return out
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

// expect reads psConfirmations and fails unless they are want, in order.
func (r *psReader) expect(want ...goredis.Subscription) {
	r.t.Helper()
	for _, w := range want {
		got, ok := r.next().(*goredis.Subscription)
		if !ok || *got != w {
			r.t.Fatalf("received %#v, want confirmation %+v", got, w)
		}
	}
}

// psConfirmations are the psConfirmations of kind for names, counts rising
// (or falling, step -1) from first.
func psConfirmations(kind string, first, step int, names ...string) []goredis.Subscription {
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

// psRoute is how a message reaches the receiver: by its channel (pattern "")
// or by a pattern.
type psRoute struct{ channel, pattern string }

// deliver publishes a payload unique to tag on each channel of routes'
// keys, checks that PUBLISH (or SPUBLISH) reached exactly as many
// subscriptions as it has psRoutes, and that exactly one message per psRoute
// arrives, and nothing else.
func (r *psReader) deliver(publish func(ch, payload string) (int64, error), tag string, psRoutes map[string][]string) {
	r.t.Helper()
	for ch, patterns := range psRoutes {
		n, err := publish(ch, psPayload(tag, ch))
		if err != nil || n != int64(len(patterns)) {
			r.t.Fatalf("%s: publish %s = %d, %v; want %d receivers", tag, ch, n, err, len(patterns))
		}
	}
	r.received(tag, psRoutes)
}

// psPayload is the payload deliver publishes on ch for tag.
func psPayload(tag, ch string) string { return tag + " " + ch }

// received checks that exactly one message per psRoute, with the payload of
// tag, arrives, and nothing else until the last of them.
func (r *psReader) received(tag string, psRoutes map[string][]string) {
	r.t.Helper()
	want := map[string]int{}
	for ch, patterns := range psRoutes {
		for _, p := range patterns {
			want[fmt.Sprint(psRoute{ch, p}, psPayload(tag, ch))]++
		}
	}
	for missing := len(want); missing > 0; {
		m, ok := r.next().(*goredis.Message)
		if !ok {
			r.t.Fatalf("%s: received %v, want a message", tag, m)
		}
		k := fmt.Sprint(psRoute{m.Channel, m.Pattern}, m.Payload)
		if want[k]--; want[k] < 0 {
			r.t.Fatalf("%s: unexpected or duplicate message %v (pattern %q)", tag, m, m.Pattern)
		}
		if want[k] == 0 {
			missing--
		}
	}
}

// psRoutes returns, for each channel of chs, one direct route.
func psRoutes(chs ...string) map[string][]string {
	out := map[string][]string{}
	for _, ch := range chs {
		out[ch] = []string{""}
	}
	return out
}

// psPublisher publishes through c.
func psPublisher(c *shardedredis.ShardedClient) func(ch, payload string) (int64, error) {
	return func(ch, payload string) (int64, error) { return c.Publish(ctx, ch, payload).Result() }
}

// psPlacement is what the servers should hold: channels, shard channels and
// patterns; down servers are not asked.
type psPlacement struct {
	channels, shardChannels, patterns []string
	down                              []*psServer
}

// checkPSPlacement polls until every server that is up holds exactly the
// subscriptions that the current shard list places on it: each channel on
// the server of its live owner, each pattern on every live shard, nothing
// anywhere else (a server that left stops holding them once its connection
// is closed).
func checkPSPlacement(t *testing.T, c *shardedredis.ShardedClient, servers []*psServer, want psPlacement) {
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
			if err := psServerHolds(s, chs, schs, numpat); err != nil {
				return fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
			}
		}
		return nil
	})
}

// psServerHolds checks PUBSUB CHANNELS and SHARDCHANNELS (redis-server
// only), and that the server's connections hold each of them once and
// numpat patterns in all: a connection the fan-in closed holds them until
// the server sees the close, and PUBLISH counts it until then.
func psServerHolds(s *psServer, channels, shardChannels []string, numpat int) error {
	got, err := s.direct.PubSubChannels(ctx, "*").Result()
	if err != nil {
		return err
	}
	if slices.Sort(got); !slices.Equal(got, psSorted(channels)) {
		return fmt.Errorf("PUBSUB CHANNELS = %q, want %q", got, psSorted(channels))
	}
	if s.real {
		got, err := s.direct.PubSubShardChannels(ctx, "*").Result()
		if err != nil {
			return err
		}
		if slices.Sort(got); !slices.Equal(got, psSorted(shardChannels)) {
			return fmt.Errorf("PUBSUB SHARDCHANNELS = %q, want %q", got, psSorted(shardChannels))
		}
	}
	n, err := psSubscriptionCounts(s, got)
	if err != nil {
		return err
	}
	if want := [3]int{len(channels), numpat, len(shardChannels)}; n != want {
		return fmt.Errorf("subscriptions (channels, patterns, shard channels) over all connections = %v, want %v", n, want)
	}
	return nil
}

// psSubscriptionCounts returns the channel, pattern and shard-channel
// subscriptions of s summed over its connections: from CLIENT LIST's sub,
// psub and ssub on redis-server (whose PUBSUB NUMPAT counts distinct
// patterns), from PUBSUB NUMSUB and NUMPAT on miniredis (which has no
// CLIENT LIST and sums NUMPAT per connection), where chs are the channels
// that PUBSUB CHANNELS lists.
func psSubscriptionCounts(s *psServer, chs []string) (n [3]int, err error) {
	if !s.real {
		subs, err := s.direct.PubSubNumSub(ctx, chs...).Result()
		if err != nil {
			return n, err
		}
		for _, k := range subs {
			n[0] += int(k)
		}
		pats, err := s.direct.PubSubNumPat(ctx).Result()
		n[1] = int(pats)
		return n, err
	}
	list, err := s.direct.ClientList(ctx).Result()
	if err != nil {
		return n, err
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		for _, field := range strings.Fields(line) {
			name, v, _ := strings.Cut(field, "=")
			if i := slices.Index([]string{"sub", "psub", "ssub"}, name); i >= 0 {
				k, err := strconv.Atoi(v)
				if err != nil {
					return n, fmt.Errorf("CLIENT LIST field %q: %w", field, err)
				}
				n[i] += k
			}
		}
	}
	return n, nil
}

func psSorted(s []string) []string {
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

func psServerNames(servers []*psServer) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.name
	}
	return out
}
