package redis

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/resp"
)

// Subscribe subscribes to channels, each on the shard that owns it (the
// shard PUBLISH sends it to), and returns one *redis.PubSub that delivers the
// messages of every shard. A channel is placed like a key (key tags apply).
//
// The *redis.PubSub is go-redis's own: its connection is an in-memory pipe
// to a fan-in that holds one subscription per shard involved and relays
// their messages and confirmations in RESP2. Receive, ReceiveMessage,
// Channel, Subscribe, Unsubscribe, Ping and Close work as on one server; a
// confirmation arrives once the owning shard (every shard, for patterns) has
// confirmed. A shard's failure reaches the receiver as an error naming the
// shard, and go-redis resubscribes on that shard when it returns.
func (c *ShardedClient) Subscribe(ctx context.Context, channels ...string) *goredis.PubSub {
	return c.pubsub.Subscribe(ctx, channels...)
}

// PSubscribe subscribes to patterns on every shard (a matching channel may
// be on any of them) and returns one *redis.PubSub, as Subscribe.
func (c *ShardedClient) PSubscribe(ctx context.Context, patterns ...string) *goredis.PubSub {
	return c.pubsub.PSubscribe(ctx, patterns...)
}

// SSubscribe subscribes to shard channels (SSUBSCRIBE, Redis 7), each on the
// shard that owns it, and returns one *redis.PubSub, as Subscribe.
func (c *ShardedClient) SSubscribe(ctx context.Context, channels ...string) *goredis.PubSub {
	return c.pubsub.SSubscribe(ctx, channels...)
}

// dialFanIn is the dialer of the pub/sub client: go-redis gets one end of a
// pipe whose other end a fanIn serves.
func (c *ShardedClient) dialFanIn(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	f := &fanIn{c: c, conn: server, subs: map[int]*goredis.PubSub{},
		sharded: map[string]bool{}, active: map[string]bool{}, pending: map[string]int{}}
	go f.serve()
	return client, nil
}

// fanIn serves one pub/sub connection of the router: it reads SUBSCRIBE and
// the like from go-redis, subscribes on the shards, and writes the shards'
// confirmations and messages back.
type fanIn struct {
	c    *ShardedClient
	conn net.Conn

	wmu sync.Mutex // serializes writes to conn

	mu      sync.Mutex
	subs    map[int]*goredis.PubSub // shard -> its subscription
	sharded map[string]bool         // channels subscribed with SSUBSCRIBE
	active  map[string]bool         // "kind\x00name" of every subscription, for counts
	pending map[string]int          // "kind\x00name" -> confirmations still to come
	wg      sync.WaitGroup          // relay goroutines
}

func (f *fanIn) serve() {
	defer f.close()
	r := bufio.NewReader(f.conn)
	for {
		args, err := resp.ReadCommand(r)
		if err != nil {
			return
		}
		f.handle(args)
	}
}

func (f *fanIn) close() {
	_ = f.conn.Close()
	f.mu.Lock()
	for _, s := range f.subs {
		_ = s.Close()
	}
	f.subs = nil
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fanIn) write(b []byte) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, _ = f.conn.Write(b)
}

// handle runs one command of go-redis's pub/sub connection.
func (f *fanIn) handle(args []string) {
	name, names := strings.ToLower(args[0]), args[1:]
	ctx := context.Background()
	switch name {
	case "ping":
		payload := ""
		if len(names) > 0 {
			payload = names[0]
		}
		f.write(resp.AppendArray(nil, "pong", payload))
	case "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe":
		if len(names) == 0 { // unsubscribe from every channel of that kind
			names = f.names(name)
			if len(names) == 0 {
				f.write(resp.AppendArray(nil, name, nil, f.count()))
				return
			}
		}
		byShard := map[int][]string{}
		for _, ch := range names {
			s := f.c.shards.Locate(ch)
			byShard[s] = append(byShard[s], ch)
			f.expect(name, ch, 1)
		}
		for s, chs := range byShard {
			f.send(ctx, s, name, chs)
		}
	case "psubscribe", "punsubscribe":
		if len(names) == 0 {
			names = f.names(name)
			if len(names) == 0 {
				f.write(resp.AppendArray(nil, name, nil, f.count()))
				return
			}
		}
		for _, p := range names {
			f.expect(name, p, f.c.shards.Len())
		}
		for s := range f.c.shards.Len() {
			f.send(ctx, s, name, names)
		}
	case "hello":
		// go-redis falls back to RESP2, which this fan-in speaks.
		f.write(resp.AppendError(nil, "ERR unknown command 'HELLO'"))
	default:
		f.write(resp.AppendError(nil, "ERR shardedcache: "+name+" is not supported on a sharded pub/sub connection"))
	}
}

// subscription returns the subscribing command that kind (any of the six
// (un)subscribe commands) belongs to, and whether kind subscribes.
func subscription(kind string) (base string, subscribes bool) {
	switch kind {
	case "unsubscribe":
		return "subscribe", false
	case "punsubscribe":
		return "psubscribe", false
	case "sunsubscribe":
		return "ssubscribe", false
	}
	return kind, true
}

// names returns the names of the active subscriptions that kind undoes.
func (f *fanIn) names(kind string) []string {
	base, _ := subscription(kind)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k := range f.active {
		if b, n, _ := strings.Cut(k, "\x00"); b == base {
			out = append(out, n)
		}
	}
	return out
}

func (f *fanIn) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.active)
}

// expect records that a confirmation of kind for name is due from n shards.
func (f *fanIn) expect(kind, name string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[kind+"\x00"+name] += n
	if kind == "ssubscribe" {
		f.sharded[name] = true
	}
}

// send runs a (un)subscribe on shard s's subscription, creating it and its
// relay on first use. An error (the shard is down) is written to the
// receiver naming the shard; go-redis keeps the subscription and restores
// it when the shard returns.
func (f *fanIn) send(ctx context.Context, s int, kind string, names []string) {
	f.mu.Lock()
	sub := f.subs[s]
	if sub == nil {
		if _, subscribes := subscription(kind); !subscribes {
			f.mu.Unlock()
			// Nothing subscribed there: confirm as the shard would.
			for _, n := range names {
				f.confirm(&goredis.Subscription{Kind: kind, Channel: n})
			}
			return
		}
		sub = f.c.shards.Shard(s).Client.Subscribe(ctx)
		f.subs[s] = sub
		f.wg.Add(1)
		go f.relay(s, sub)
	}
	f.mu.Unlock()
	var err error
	switch kind {
	case "subscribe":
		err = sub.Subscribe(ctx, names...)
	case "ssubscribe":
		err = sub.SSubscribe(ctx, names...)
	case "psubscribe":
		err = sub.PSubscribe(ctx, names...)
	case "unsubscribe":
		err = sub.Unsubscribe(ctx, names...)
	case "sunsubscribe":
		err = sub.SUnsubscribe(ctx, names...)
	case "punsubscribe":
		err = sub.PUnsubscribe(ctx, names...)
	}
	if err != nil {
		f.write(resp.AppendError(nil, "ERR "+f.c.shards.Err(s, err).Error()))
	}
}

// relay copies shard s's confirmations and messages to the receiver until
// the subscription is closed.
func (f *fanIn) relay(s int, sub *goredis.PubSub) {
	defer f.wg.Done()
	ctx := context.Background()
	for {
		msg, err := sub.Receive(ctx)
		if err != nil {
			if err == goredis.ErrClosed || f.closed() {
				return
			}
			f.write(resp.AppendError(nil, "ERR "+f.c.shards.Err(s, err).Error()))
			continue
		}
		switch m := msg.(type) {
		case *goredis.Subscription:
			f.confirm(m)
		case *goredis.Message:
			switch {
			case m.Pattern != "":
				f.write(resp.AppendArray(nil, "pmessage", m.Pattern, m.Channel, m.Payload))
			case f.isSharded(m.Channel):
				f.write(resp.AppendArray(nil, "smessage", m.Channel, m.Payload))
			default:
				f.write(resp.AppendArray(nil, "message", m.Channel, m.Payload))
			}
		}
	}
}

func (f *fanIn) closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs == nil
}

func (f *fanIn) isSharded(ch string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sharded[ch]
}

// confirm counts a shard's confirmation and, once every shard due has
// confirmed, writes it with this connection's subscription count.
func (f *fanIn) confirm(m *goredis.Subscription) {
	kind, key := m.Kind, m.Kind+"\x00"+m.Channel
	f.mu.Lock()
	if f.pending[key] > 1 {
		f.pending[key]--
		f.mu.Unlock()
		return
	}
	delete(f.pending, key)
	if base, subscribes := subscription(kind); subscribes {
		f.active[base+"\x00"+m.Channel] = true
	} else {
		delete(f.active, base+"\x00"+m.Channel)
	}
	n := len(f.active)
	f.mu.Unlock()
	f.write(resp.AppendArray(nil, kind, m.Channel, n))
}
