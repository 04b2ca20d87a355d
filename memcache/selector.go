package memcache

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/ring"
)

// Server is one memcached server of a Selector.
type Server struct {
	// Name identifies the server on the ring; optional. A named server
	// keeps its keys when the list is reordered or a server before it is
	// removed (see package ring). With the ketama presets the name is the
	// server's ketama label; an unnamed server is labelled by its Addr.
	Name string
	// Weight scales the server's share of keys; 0 means 1, negative is an
	// error.
	Weight int
	// Addr is the server's "host:port", or the path of a unix socket: an
	// address that contains "/" is a unix socket, as in gomemcache's
	// ServerList. Host names are resolved once, when the list is set.
	Addr string
}

// Selector is a gomemcache memcache.ServerSelector that places keys on a
// consistent-hash ring (package ring) instead of gomemcache's crc32 % N:
// memcache.NewFromSelector(sel) gives a plain *memcache.Client whose keys
// keep their server when servers are added or removed, except the keys the
// change must move.
//
// A server can be ejected and rejoined (Eject, Rejoin): its keys then go
// where the ring's preset sends them when a server is down, as the peer's
// auto-eject does, and come back on Rejoin. gomemcache tells a selector
// nothing of failures, so the caller decides when; the sharded client
// (NewShardedClient with Health.Mode shardedclient.EjectMode) ejects and
// rejoins by itself, probing the servers.
//
// The zero Selector has no servers: PickServer returns memcache.ErrNoServers
// and Each calls nothing, until SetServers succeeds. A Selector is safe for
// concurrent use; PickServer takes no lock and allocates nothing.
type Selector struct {
	preset ring.Preset // set by NewSelector, read-only afterwards
	mu     sync.Mutex  // serializes SetServers, Eject and Rejoin
	state  atomic.Pointer[selectorState]
}

// selectorState is one immutable server list: SetServers replaces it whole.
type selectorState struct {
	servers []Server   // as given, weight 0 given as 1
	addrs   []net.Addr // addrs[i] is servers[i]'s resolved address
	ring    *ring.Ring // node i is servers[i]
}

var _ memcache.ServerSelector = (*Selector)(nil)

// NewSelector returns a Selector over servers, in ring order, placed by
// preset p (nil is ring.Jedis{}, Jedis's placement;
// ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted} gives
// libketama, ring.Spymemcached{...} spymemcached's, ring.Gomemcache{}
// gomemcache's ServerList). It resolves every
// address once and connects to nothing. It returns an error wrapping
// memcache.ErrNoServers for an empty list, an error naming the server for a
// missing or unresolvable address or an address listed twice, and the errors
// of ring.New (negative weight, duplicate name or ketama label).
func NewSelector(servers []Server, p ring.Preset) (*Selector, error) {
	s := &Selector{preset: p}
	if err := s.SetServers(servers); err != nil {
		return nil, err
	}
	return s, nil
}

// SetServers replaces the server list, atomically: a PickServer running
// meanwhile sees the old list or the new one, whole. The new ring is built
// with the Selector's preset; no server of the new list is ejected. On a
// consistent ring (the default and
// the ketama presets; not the modulo ones such as ring.Gomemcache{}) a
// server keeps its keys when it keeps its identity (its name; unnamed, its
// list position, or with ketama its address), so only the keys of servers
// added or removed move. On error (the same as NewSelector's) the list is
// left unchanged. On a zero Selector the preset is ring.Jedis{}.
func (s *Selector) SetServers(servers []Server) error {
	st, err := newSelectorState(servers, s.preset)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.state.Store(st)
	s.mu.Unlock()
	return nil
}

// Eject makes the given servers (indices in Servers()) own no key, as
// ring.Ring.Eject does: their keys go where the preset's peer sends them
// while a server is down (the other servers keep theirs on a consistent
// ring; libketama's and twemproxy's ketama rebuild over the live servers'
// weights; modulo presets run over the live servers). Ejections add up.
// It fails, changing nothing, for an index out of range, when every server
// would be ejected, or (wrapping memcache.ErrNoServers) on a Selector with
// no servers.
func (s *Selector) Eject(servers ...int) error { return s.setEjected(servers, (*ring.Ring).Eject) }

// Rejoin gives the given ejected servers their keys back (ring.Ring.Rejoin):
// ejecting and rejoining a server places every key as before, except with
// libmemcached's unweighted ketama, which values its points with the hash
// in force when it rebuilds (ring.Libmemcached.HashAfter). Its errors are
// Eject's.
func (s *Selector) Rejoin(servers ...int) error { return s.setEjected(servers, (*ring.Ring).Rejoin) }

// Ejected reports whether server i is ejected (false for an index out of
// range and on a Selector with no servers).
func (s *Selector) Ejected(i int) bool {
	st := s.state.Load()
	return st != nil && i >= 0 && i < st.ring.Len() && st.ring.Ejected(i)
}

func (s *Selector) setEjected(servers []int, f func(*ring.Ring, ...int) (*ring.Ring, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	if st == nil {
		return fmt.Errorf("shardedcache: %w", memcache.ErrNoServers)
	}
	r, err := f(st.ring, servers...)
	if err != nil {
		return err
	}
	next := *st
	next.ring = r
	s.state.Store(&next)
	return nil
}

func newSelectorState(servers []Server, p ring.Preset) (*selectorState, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("shardedcache: %w", memcache.ErrNoServers)
	}
	st := &selectorState{addrs: make([]net.Addr, len(servers))}
	nodes := make([]ring.Node, len(servers))
	seen := make(map[addr]int, len(servers))
	for i, srv := range servers {
		a, err := resolve(srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("shardedcache: server %d (%q): %w", i, srv.Name, err)
		}
		if j, dup := seen[*a]; dup {
			return nil, fmt.Errorf("shardedcache: servers %d and %d have the same address %s", j, i, a)
		}
		seen[*a] = i
		st.addrs[i] = a
		nodes[i] = ring.Node{Name: srv.Name, Weight: srv.Weight, Addr: srv.Addr}
	}
	r, err := ring.New(nodes, p)
	if err != nil {
		return nil, err // ring's errors carry their own prefix
	}
	st.ring = r
	st.servers = append([]Server(nil), servers...)
	for i, n := range r.Nodes() {
		st.servers[i].Weight = n.Weight
	}
	return st, nil
}

// PickServer returns the resolved address of the server that owns key. It
// returns memcache.ErrMalformedKey for a key that is not safe on the wire
// (empty, longer than 250 bytes, or holding a space, a control character or
// DEL), so that a *memcache.Client over the Selector sends nothing for it:
// gomemcache's own check lets the empty key through, and memcached then
// runs the item's value as a command. For the same reason gomemcache's
// DeleteAll, which picks a server for the empty key, returns
// memcache.ErrMalformedKey over a Selector: use FlushAll, which flushes
// every server. On a Selector with no servers it returns
// memcache.ErrNoServers.
func (s *Selector) PickServer(key string) (net.Addr, error) {
	if !legalKey(key) {
		return nil, memcache.ErrMalformedKey
	}
	st := s.state.Load()
	if st == nil {
		return nil, memcache.ErrNoServers
	}
	return st.addrs[st.ring.Locate(key)], nil
}

// Each calls f with every server's address, once each, in list order, and
// stops at the first error, which it returns.
func (s *Selector) Each(f func(net.Addr) error) error {
	st := s.state.Load()
	if st == nil {
		return nil
	}
	for _, a := range st.addrs {
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}

// Servers returns a copy of the server list, in ring order, with weight 0
// given as 1; nil when there are no servers.
func (s *Selector) Servers() []Server {
	st := s.state.Load()
	if st == nil {
		return nil
	}
	return append([]Server(nil), st.servers...)
}

// Ring returns the current ring (node i is server i), or nil when there are
// no servers.
func (s *Selector) Ring() *ring.Ring {
	if st := s.state.Load(); st != nil {
		return st.ring
	}
	return nil
}

// addr is a resolved address with its network and text computed once, so
// that handing it out (as a *addr in a net.Addr) allocates nothing and
// gomemcache's connection pool, keyed by String(), sees a stable key.
type addr struct {
	network, str string
}

func (a *addr) Network() string { return a.network }
func (a *addr) String() string  { return a.str }

// resolve resolves a server address as gomemcache's ServerList.SetServers
// does: a unix socket when it contains "/", else TCP "host:port".
func resolve(s string) (*addr, error) {
	if s == "" {
		return nil, errors.New("no address")
	}
	var a net.Addr
	var err error
	if strings.Contains(s, "/") {
		a, err = net.ResolveUnixAddr("unix", s)
	} else {
		a, err = net.ResolveTCPAddr("tcp", s)
	}
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", s, err)
	}
	return &addr{network: a.Network(), str: a.String()}, nil
}

// oneServer is the selector of a shard's own *memcache.Client: the shard's
// one resolved address for every key that is safe on the wire (see
// PickServer), so that a shard client handed out by GetShard refuses the
// empty key too.
type oneServer struct{ addr net.Addr }

func (o oneServer) PickServer(key string) (net.Addr, error) {
	if !legalKey(key) {
		return nil, memcache.ErrMalformedKey
	}
	return o.addr, nil
}

func (o oneServer) Each(f func(net.Addr) error) error { return f(o.addr) }

// refusing is the selector of a client that GetShard hands out when it may
// not send: every call fails with err, before any connection.
type refusing struct{ err error }

func (r refusing) PickServer(string) (net.Addr, error) { return nil, r.err }
func (r refusing) Each(func(net.Addr) error) error     { return r.err }
