// Package pubsub is the sharded client's pub/sub fan-in. go-redis's own
// *redis.PubSub talks RESP2 over an in-memory connection (Dial) to a fan-in,
// which holds one subscription connection per shard and relays the shards'
// messages. What the receiver can rely on:
//
//   - Every subscription is held where PUBLISH reaches it: a channel (or a
//     shard channel) on the live shard that owns it, a pattern on every live
//     shard. Subscriptions belong to shards by identity
//     (shardcore.View.ID), never by position, and follow every change of
//     the shard list: SetShards, BeginWindow, EndWindow, an ejection, a rejoin.
//     A publish reaches one server, which one connection of the fan-in holds
//     it on, so a message is delivered at most once per subscription. A
//     connection the fan-in leaves (its shard left, was ejected or changed
//     client) is closed, not unsubscribed: its messages are no longer
//     relayed, but until its server sees the close, PUBLISH there counts it
//     among the receivers.
//   - The confirmations of one (P|S)SUBSCRIBE or (P|S)UNSUBSCRIBE call are
//     written once every shard of the call has confirmed (or failed), in
//     call order, with the counts one server would give: the first
//     confirmation means every channel of the call is live. No message of a
//     channel comes before its subscribe confirmation or after its
//     unsubscribe confirmation.
//   - PING's reply comes once every subscription is confirmed where the
//     shard list current when PING arrived places it.
//   - A shard that is a Redis Cluster (Clusters) is subscribed through its
//     *redis.ClusterClient: channels and patterns on one connection to any
//     node (the cluster broadcasts every PUBLISH to every node), each shard
//     channel on a connection of its hash slot, which go-redis opens to the
//     slot's master.
//   - A shard's failure arrives as the error of Receive, where errors.As
//     finds a *shardedclient.ShardError naming the shard: for each call
//     waiting on that shard, else once per run of failures. go-redis keeps
//     the shard's subscriptions and restores them when the shard returns.
package pubsub

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// Shards is the sharded client's shard list.
type Shards = shardcore.Sharded[*goredis.Client]

type view = shardcore.View[*goredis.Client]

// kind is what a subscription names: a channel, a pattern or a shard channel.
type kind uint8

const (
	channel kind = iota
	pattern
	shardChannel
)

// method is a go-redis *PubSub method that (un)subscribes.
type method = func(*goredis.PubSub, context.Context, ...string) error

// kinds holds, per kind, its commands and the go-redis methods that send them.
var kinds = [...]struct {
	subscribe, unsubscribe string
	sub, unsub             method
}{
	channel:      {"subscribe", "unsubscribe", (*goredis.PubSub).Subscribe, (*goredis.PubSub).Unsubscribe},
	pattern:      {"psubscribe", "punsubscribe", (*goredis.PubSub).PSubscribe, (*goredis.PubSub).PUnsubscribe},
	shardChannel: {"ssubscribe", "sunsubscribe", (*goredis.PubSub).SSubscribe, (*goredis.PubSub).SUnsubscribe},
}

// kindOf returns the kind of a (un)subscribe command and whether it
// subscribes; ok is false for any other command.
func kindOf(command string) (k kind, subscribes, ok bool) {
	for i, c := range kinds {
		switch command {
		case c.subscribe:
			return kind(i), true, true
		case c.unsubscribe:
			return kind(i), false, true
		}
	}
	return 0, false, false
}

// counter is the index in fanIn.counts of the count that confirmations of
// kind k report: Redis counts shard channels apart from channels and
// patterns.
func (k kind) counter() int {
	if k == shardChannel {
		return 1
	}
	return 0
}

type key struct {
	kind kind
	name string
}

// subscription is one channel, pattern or shard channel of the receiver.
type subscription struct {
	key
	wanted    bool                      // subscribed by the receiver, not unsubscribed since
	announced bool                      // its subscribe confirmation was written: it counts
	held      [][]byte                  // its messages that came before that confirmation
	on        map[*shardConn]*placement // the shard connections it was sent to
}

// placement is a subscription's state on one shard connection.
type placement struct {
	subscribed  bool // the last command sent there subscribes
	unconfirmed int  // commands sent there that the shard has not confirmed
}

// Clusters tells the fan-in which shards are Redis Clusters, and which
// share a server. Its zero value says none is a cluster, and that shards
// share a server when their clients' addresses are the same string.
type Clusters struct {
	// Of returns the cluster client behind a shard's client, or nil for a
	// shard that is one server.
	Of func(*goredis.Client) *goredis.ClusterClient
	// Slot returns the Redis Cluster hash slot of a shard channel.
	Slot func(string) int
	// Server names the server a shard reaches, whatever its DB: two shards
	// of one server (two DBs) share a pattern subscription.
	Server func(shardedclient.Shard[*goredis.Client]) string
}

// connKey names a subscription connection: the shard's identity (View.ID)
// and, on a cluster shard, the hash slot of the shard channels it holds
// (-1 on every other connection).
type connKey struct {
	id   string
	slot int
}

// shardConn is one subscription connection of the fan-in to a shard: a
// shard's own, or one through a cluster shard's *redis.ClusterClient. On a
// cluster shard, channels and patterns share one connection to any node,
// and each hash slot of shard channels has its own, because go-redis opens
// a cluster PubSub to the master of its first channel's slot, and after a
// reconnect resubscribes its shard channels in one SSUBSCRIBE, which Redis
// refuses across slots.
type shardConn struct {
	connKey
	client  *goredis.Client // the shard's client
	index   int             // the shard's position in fanIn.view, for errors
	ps      *goredis.PubSub
	timeout time.Duration // the ReadTimeout of the client that opened ps
	stop    chan struct{} // closed when retired: ends the relay's backoff

	// The fields below are guarded by fanIn.mu.
	retired     bool
	placed      int       // the subscriptions whose on holds it
	failing     bool      // its last receive failed; reported once
	unconfirmed int       // the placements' unconfirmed, summed
	since       time.Time // when unconfirmed last rose from 0
	todo        []send    // commands not yet sent, in order
	sending     bool      // a work goroutine runs todo
	relaying    bool      // its relay runs: since its first command was sent
}

// send is a command for a shard connection: subscribe or unsubscribe names,
// or, with no method, close the connection.
type send struct {
	method method
	names  []string
}

// op is a command of the receiver waiting to be answered, in order.
type op struct {
	kind       kind
	subscribes bool
	command    string          // the (un)subscribe command, else ""
	subs       []*subscription // the subscriptions it names, in order
	all        bool            // PING: waits for every subscription
	reply      []byte          // written after the confirmations
	failed     []*shardedclient.ShardError
}

// fanIn serves one go-redis pub/sub connection.
type fanIn struct {
	shards   *Shards
	clusters Clusters
	replies  *replies
	cmds     *io.PipeReader
	done     chan struct{} // closed when serve ends
	ended    chan struct{} // closed when every goroutine of the fan-in has ended
	wg       sync.WaitGroup

	mu     sync.Mutex
	subs   map[key]*subscription
	conns  map[connKey]*shardConn
	ops    []*op
	view   *view  // the view the subscriptions were last placed on
	counts [2]int // announced subscriptions (see kind.counter)
	closed bool
}

// Dial starts a fan-in over shards, of which clusters are Redis Clusters,
// and returns go-redis's end of it.
func Dial(shards *Shards, clusters Clusters) net.Conn {
	r, w := io.Pipe()
	f := &fanIn{shards: shards, clusters: clusters, replies: newReplies(), cmds: r, done: make(chan struct{}),
		ended: make(chan struct{}), subs: map[key]*subscription{}, conns: map[connKey]*shardConn{}}
	changes, stop := shards.Changes()
	f.wg.Add(1)
	go f.watch(changes, stop)
	go f.serve()
	return &conn{cmds: w, replies: f.replies, ended: f.ended}
}

// serve runs the receiver's commands until its connection closes.
func (f *fanIn) serve() {
	defer f.shutdown()
	r := bufio.NewReader(f.cmds)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.handle(strings.ToLower(args[0]), args[1:])
		f.mu.Unlock()
	}
}

// shutdown closes every shard connection and waits for their goroutines.
func (f *fanIn) shutdown() {
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		f.retire(c)
	}
	f.mu.Unlock()
	close(f.done)
	f.wg.Wait()
	f.replies.close()
	_ = f.cmds.Close()
	close(f.ended)
}

// watch places the subscriptions again after each change of the shard list.
func (f *fanIn) watch(changes <-chan struct{}, stop func()) {
	defer f.wg.Done()
	defer stop()
	for {
		select {
		case <-f.done:
			return
		case <-changes:
			f.mu.Lock()
			f.place(nil)
			f.answer()
			f.mu.Unlock()
		}
	}
}

// handle runs one command of the receiver; f.mu is held.
func (f *fanIn) handle(command string, args []string) {
	switch command {
	case "ping":
		payload := ""
		if len(args) > 0 {
			payload = args[0]
		}
		f.place(nil)
		f.queue(&op{all: true, reply: appendArray(nil, "pong", payload)})
		return
	case "hello":
		if len(args) > 0 && args[0] == "3" {
			f.replies.errorReads(2)
		}
		// go-redis falls back to RESP2, which the fan-in speaks.
		f.queue(&op{reply: appendError(nil, "ERR unknown command 'HELLO'")})
		return
	}
	k, subscribes, ok := kindOf(command)
	switch {
	case !ok:
		f.queue(&op{reply: appendError(nil, "ERR shardedcache: "+command+" is not supported on a sharded pub/sub connection")})
		return
	case subscribes && len(args) == 0:
		f.queue(&op{reply: appendError(nil, "ERR wrong number of arguments for '"+command+"' command")})
		return
	case len(args) == 0: // unsubscribe from every subscription of that kind
		for _, s := range f.subs {
			if s.kind == k && s.wanted {
				args = append(args, s.name)
			}
		}
		slices.Sort(args)
	}
	o := &op{kind: k, subscribes: subscribes, command: command}
	for _, name := range args {
		s := f.subs[key{k, name}]
		if s == nil {
			s = &subscription{key: key{k, name}, on: map[*shardConn]*placement{}}
			f.subs[s.key] = s
		}
		s.wanted = subscribes
		o.subs = append(o.subs, s)
	}
	f.place(o.subs)
	f.queue(o)
}

// queue adds o to the commands waiting to be answered; f.mu is held.
func (f *fanIn) queue(o *op) {
	f.ops = append(f.ops, o)
	f.answer()
}

// answer writes the answers of the waiting commands that are ready, in
// order; f.mu is held.
func (f *fanIn) answer() {
	for len(f.ops) > 0 && f.ready(f.ops[0]) {
		o := f.ops[0]
		f.ops = f.ops[1:]
		for _, err := range o.failed {
			f.replies.pushErr(err)
		}
		var held [][]byte
		for _, s := range o.subs {
			f.announce(s, o.subscribes)
			f.write(appendArray(nil, o.command, s.name, f.counts[s.kind.counter()]))
			if o.subscribes {
				held = append(held, s.held...)
				s.held = nil
			}
			f.forget(s)
		}
		if o.command != "" && len(o.subs) == 0 {
			f.write(appendArray(nil, o.command, nil, f.counts[o.kind.counter()]))
		}
		for _, b := range held {
			f.write(b)
		}
		if o.reply != nil {
			f.write(o.reply)
		}
	}
}

// ready reports whether every shard that o's subscriptions (every
// subscription, for PING) were sent to has confirmed them or failed.
func (f *fanIn) ready(o *op) bool {
	for _, c := range f.conns {
		if f.waits(o, c) {
			return false
		}
	}
	return true
}

// waits reports whether o waits for a confirmation from c.
func (f *fanIn) waits(o *op, c *shardConn) bool {
	if o.all {
		return c.unconfirmed > 0
	}
	return slices.ContainsFunc(o.subs, func(s *subscription) bool {
		p := s.on[c]
		return p != nil && p.unconfirmed > 0
	})
}

// announce counts s in or out as its confirmation is written.
func (f *fanIn) announce(s *subscription, subscribes bool) {
	if s.announced != subscribes {
		s.announced = subscribes
		if subscribes {
			f.counts[s.kind.counter()]++
		} else {
			f.counts[s.kind.counter()]--
		}
	}
}

// forget drops s once nothing refers to it.
func (f *fanIn) forget(s *subscription) {
	if !s.wanted && !s.announced && len(s.on) == 0 && f.subs[s.key] == s {
		delete(f.subs, s.key)
	}
}

// unplace takes s off c.
func (f *fanIn) unplace(s *subscription, c *shardConn) {
	delete(s.on, c)
	c.placed--
	f.forget(s)
}

// closeIdle retires c when it is the connection of a cluster's hash slot
// and holds nothing: a receiver that goes through many shard channels
// keeps no connection per slot it once used.
func (f *fanIn) closeIdle(c *shardConn) {
	if c.slot >= 0 && c.placed == 0 && !c.retired {
		f.retire(c)
	}
}

// write queues b for the receiver; a receiver too far behind is
// disconnected.
func (f *fanIn) write(b []byte) {
	if !f.replies.push(b) {
		f.replies.close()
		f.cmds.CloseWithError(errOverflow)
	}
}

// place sends the commands that put subs where the current view's PUBLISH
// reaches them (see targets), and takes them off the shards it does not;
// every subscription, when the view changed since the last call; f.mu is
// held.
func (f *fanIn) place(subs []*subscription) {
	if f.closed {
		return
	}
	v := f.shards.Pin()
	defer v.Unpin()
	if v != f.view {
		f.view = v
		f.retireStale(v)
		subs = slices.Collect(maps.Values(f.subs))
	}
	type batch struct {
		conn       *shardConn
		kind       kind
		subscribes bool
	}
	batches := map[batch][]string{}
	put := func(c *shardConn, s *subscription, subscribes bool) {
		p := s.on[c]
		if p == nil {
			p = &placement{}
			s.on[c] = p
			c.placed++
		}
		p.subscribed = subscribes
		p.unconfirmed++
		if c.unconfirmed++; c.unconfirmed == 1 {
			c.since = time.Now()
		}
		b := batch{c, s.kind, subscribes}
		batches[b] = append(batches[b], s.name)
	}
	for _, s := range subs {
		targets := f.targets(v, s)
		for _, c := range targets {
			if p := s.on[c]; p == nil || !p.subscribed {
				put(c, s, true)
			}
		}
		for c, p := range s.on {
			if p.subscribed && !slices.Contains(targets, c) {
				put(c, s, false)
			}
		}
	}
	for b, names := range batches {
		m := kinds[b.kind].unsub
		if b.subscribes {
			m = kinds[b.kind].sub
		}
		f.enqueue(b.conn, send{m, names})
	}
}

// targets returns the connections to the shards of v that PUBLISH reaches
// s on: the live shard that owns a channel, every live shard for a pattern,
// but one per server (pub/sub ignores the DB: two DBs of one server
// subscribed twice would deliver each message twice); none once
// unsubscribed.
func (f *fanIn) targets(v *view, s *subscription) []*shardConn {
	switch {
	case !s.wanted:
		return nil
	case s.kind != pattern:
		return []*shardConn{f.connect(v, v.Locate(s.name), s.key)}
	}
	var out []*shardConn
	servers := make(map[string]bool, v.Len())
	for i := range v.Len() {
		if srv := f.server(v, i); !v.Ejected(i) && !servers[srv] {
			servers[srv] = true
			out = append(out, f.connect(v, i, s.key))
		}
	}
	return out
}

// server names the server of shard i of v (see Clusters.Server).
func (f *fanIn) server(v *view, i int) string {
	if f.clusters.Server != nil {
		return f.clusters.Server(v.Shard(i))
	}
	o := v.Client(i).Options()
	return o.Network + " " + o.Addr
}

// connect returns the connection to shard i of v that holds k, opening it
// on first use: the shard's own, or, on a cluster shard, one through its
// cluster client (see shardConn).
func (f *fanIn) connect(v *view, i int, k key) *shardConn {
	client := v.Client(i)
	var cc *goredis.ClusterClient
	if f.clusters.Of != nil {
		cc = f.clusters.Of(client)
	}
	ck := connKey{id: v.ID(i), slot: -1}
	if cc != nil && k.kind == shardChannel {
		ck.slot = f.clusters.Slot(k.name)
	}
	if c := f.conns[ck]; c != nil {
		return c
	}
	c := &shardConn{connKey: ck, client: client, index: i, stop: make(chan struct{})}
	if cc != nil {
		c.ps, c.timeout = cc.Subscribe(context.Background()), cc.Options().ReadTimeout
	} else {
		c.ps, c.timeout = client.Subscribe(context.Background()), client.Options().ReadTimeout
	}
	f.conns[ck] = c
	return c
}

// retireStale retires the connections to shards that v does not hold live
// with the same client (the shard left, was ejected, or changed client),
// and updates the positions of the others.
func (f *fanIn) retireStale(v *view) {
	live := make(map[string]int, v.Len())
	for i := range v.Len() {
		if !v.Ejected(i) {
			live[v.ID(i)] = i
		}
	}
	for _, c := range f.conns {
		if i, ok := live[c.id]; ok && v.Client(i) == c.client {
			c.index = i
		} else {
			f.retire(c)
		}
	}
}

// retire drops c: its subscriptions are placed elsewhere by the caller, its
// messages are no longer relayed, its commands not yet sent are dropped,
// and it is closed.
func (f *fanIn) retire(c *shardConn) {
	c.retired = true
	delete(f.conns, c.connKey)
	for _, s := range f.subs {
		if _, ok := s.on[c]; ok {
			f.unplace(s, c)
		}
	}
	close(c.stop)
	c.todo = nil
	f.enqueue(c, send{})
}

// enqueue queues s on c's connection, in order, sent by a goroutine of c's
// own so that a slow shard holds up no other; after the first command, that
// goroutine starts c's relay.
func (f *fanIn) enqueue(c *shardConn, s send) {
	c.todo = append(c.todo, s)
	if !c.sending {
		c.sending = true
		f.wg.Add(1)
		go f.work(c)
	}
}

// work sends c's queued commands.
func (f *fanIn) work(c *shardConn) {
	defer f.wg.Done()
	ctx := context.Background()
	for {
		f.mu.Lock()
		if len(c.todo) == 0 {
			c.sending = false
			f.mu.Unlock()
			return
		}
		s := c.todo[0]
		c.todo = c.todo[1:]
		f.mu.Unlock()
		if s.method == nil {
			_ = c.ps.Close()
			continue
		}
		err := s.method(c.ps, ctx, s.names...)
		f.mu.Lock()
		if err != nil {
			f.fail(c, err)
		}
		if !c.relaying && !c.retired {
			// Only now: a Receive opens the connection when no command
			// has, and a cluster PubSub names no channel then, so go-redis
			// would open it to a random node, not the slot's master.
			c.relaying = true
			f.wg.Add(1)
			go f.relay(c)
		}
		f.mu.Unlock()
	}
}

// Backoff of a shard connection's receive loop after a failure.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// relay receives c's confirmations and messages until c is closed. A
// confirmation the shard owes longer than its client's ReadTimeout fails
// as a timeout.
func (f *fanIn) relay(c *shardConn) {
	defer f.wg.Done()
	ctx := context.Background()
	timeout := max(c.timeout, 0)
	backoff := minBackoff
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, timeout)
		f.mu.Lock()
		var ne net.Error
		switch {
		case err == nil:
			c.failing = false
			backoff = minBackoff
			f.receive(c, msg)
		case errors.Is(err, goredis.ErrClosed):
			f.fail(c, err)
			f.mu.Unlock()
			return
		case errors.As(err, &ne) && ne.Timeout():
			if c.unconfirmed > 0 && time.Since(c.since) >= timeout {
				f.fail(c, err)
			}
		default:
			f.fail(c, err)
			f.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		f.mu.Unlock()
	}
}

// receive handles a confirmation or a message of c; f.mu is held.
func (f *fanIn) receive(c *shardConn, msg any) {
	switch m := msg.(type) {
	case *goredis.Subscription:
		k, _, _ := kindOf(m.Kind)
		s := f.subs[key{k, m.Channel}]
		if s == nil {
			return
		}
		p := s.on[c]
		if p == nil || p.unconfirmed == 0 {
			return // go-redis resubscribed after reconnecting
		}
		p.unconfirmed--
		c.unconfirmed--
		if p.unconfirmed == 0 && !p.subscribed {
			f.unplace(s, c)
			f.closeIdle(c)
		}
		f.answer()
	case *goredis.Message:
		if c.retired {
			return
		}
		var s *subscription
		var b []byte
		if m.Pattern != "" {
			s = f.subs[key{pattern, m.Pattern}]
			b = appendArray(nil, "pmessage", m.Pattern, m.Channel, m.Payload)
		} else {
			// go-redis reports a message and an smessage alike.
			name := "message"
			if s = f.subs[key{channel, m.Channel}]; s == nil || !s.wanted {
				s, name = f.subs[key{shardChannel, m.Channel}], "smessage"
			}
			b = appendArray(nil, name, m.Channel, m.Payload)
		}
		switch {
		case s == nil || !s.wanted:
		case s.announced:
			f.write(b)
		default:
			s.held = append(s.held, b)
		}
	}
}

// fail handles a failure of c's connection: the commands waiting for c get
// its *ShardError, else the receiver gets it once per run of failures, and
// c's unconfirmed commands are given up; f.mu is held.
func (f *fanIn) fail(c *shardConn, err error) {
	// A change not seen yet may have retired c's shard (and closed its
	// client, which fails c with redis.ErrClosed): place first.
	f.place(nil)
	if f.closed || c.retired {
		return
	}
	var se *shardedclient.ShardError
	errors.As(f.view.Err(c.index, err), &se)
	reported := false
	for _, o := range f.ops {
		if f.waits(o, c) {
			o.failed = append(o.failed, se)
			reported = true
		}
	}
	for _, s := range f.subs {
		if p := s.on[c]; p != nil && p.unconfirmed > 0 {
			p.unconfirmed = 0
			if !p.subscribed {
				f.unplace(s, c)
			}
		}
	}
	c.unconfirmed = 0
	if !reported && !c.failing {
		f.replies.pushErr(se)
	}
	c.failing = true
	f.answer()
	f.closeIdle(c)
}
