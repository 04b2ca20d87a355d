// Package shardedclient holds a set of clients of any type, one per shard,
// and a consistent-hash ring over them: it answers which shard owns a key,
// groups many keys by shard for scatter-gather, and closes every shard. It
// knows nothing of Redis or memcached; the backends (packages redis and
// memcache) build on it.
//
// Lookups take no lock and allocate nothing: the shards and their ring are an
// immutable snapshot behind an atomic pointer.
package shardedclient

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync/atomic"

	"github.com/shardedcache/shardedcache/ring"
)

// Shard is one shard: a client and its place on the ring.
type Shard[C any] struct {
	// Name identifies the shard on the ring (see ring.Node); optional.
	Name string
	// Weight scales the shard's share of keys; 0 means 1.
	Weight int
	// Addr is the shard's server address: for errors and logs, and for
	// the ketama presets, which label an unnamed shard by it; optional.
	Addr string
	// Client is the shard's client; it must not be nil.
	Client C
}

// Info describes the shard that owns a key.
type Info struct {
	Index  int    // position in the shard list
	Name   string // configured name, possibly empty
	Weight int    // configured weight, 0 given as 1
}

// Group is the set of keys that one shard owns, as returned by GroupKeys.
type Group struct {
	Shard     int      // index of the shard
	Keys      []string // the keys, in the order they were given
	Positions []int    // Positions[i] is the index of Keys[i] in the input
}

// Sharded is a ring of shards, each holding a client of type C. Its methods
// are safe for concurrent use.
type Sharded[C any] struct {
	state atomic.Pointer[state[C]]
}

type state[C any] struct {
	shards []Shard[C]
	ring   *ring.Ring
}

// New builds a Sharded over shards, in order, with the given ring options.
// It returns an error for an empty list, a nil client (naming the shard), or
// any error of ring.New (negative weight, duplicate name, ...).
func New[C any](shards []Shard[C], opts ...ring.Option) (*Sharded[C], error) {
	if len(shards) == 0 {
		return nil, errors.New("shardedclient: no shards")
	}
	nodes := make([]ring.Node, len(shards))
	for i, s := range shards {
		if isNil(s.Client) {
			return nil, fmt.Errorf("shardedclient: shard %d (%q): nil client", i, s.Name)
		}
		nodes[i] = ring.Node{Name: s.Name, Weight: s.Weight, Addr: s.Addr}
	}
	r, err := ring.New(nodes, opts...)
	if err != nil {
		return nil, err
	}
	st := &state[C]{shards: make([]Shard[C], len(shards)), ring: r}
	for i, n := range r.Nodes() {
		st.shards[i] = shards[i]
		st.shards[i].Weight = n.Weight
	}
	s := &Sharded[C]{}
	s.state.Store(st)
	return s, nil
}

// isNil reports whether c is a nil interface, pointer, map, slice, channel
// or function.
func isNil(c any) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return v.IsNil()
	}
	return false
}

// Ring returns the current ring.
func (s *Sharded[C]) Ring() *ring.Ring { return s.state.Load().ring }

// Locate returns the index of the shard that owns key.
func (s *Sharded[C]) Locate(key string) int { return s.state.Load().ring.Locate(key) }

// GetShard returns the client of the shard that owns key.
func (s *Sharded[C]) GetShard(key string) C {
	st := s.state.Load()
	return st.shards[st.ring.Locate(key)].Client
}

// GetShardInfo returns the index, name and weight of the shard that owns key.
func (s *Sharded[C]) GetShardInfo(key string) Info {
	st := s.state.Load()
	return st.info(st.ring.Locate(key))
}

func (st *state[C]) info(i int) Info {
	return Info{Index: i, Name: st.shards[i].Name, Weight: st.shards[i].Weight}
}

// Shard returns shard i. It panics if i is out of range, like a slice index.
func (s *Sharded[C]) Shard(i int) Shard[C] { return s.state.Load().shards[i] }

// Len returns the number of shards.
func (s *Sharded[C]) Len() int { return len(s.state.Load().shards) }

// AllShards returns a copy of the shard list, in order.
func (s *Sharded[C]) AllShards() []Shard[C] {
	return append([]Shard[C](nil), s.state.Load().shards...)
}

// GroupKeys splits keys by owning shard. Groups are ordered by shard index;
// within a group keys keep their input order, and Positions maps each back
// to its index in keys, so that per-shard replies can be put back in order.
// Shards that own none of the keys get no group.
func (s *Sharded[C]) GroupKeys(keys []string) []Group {
	st := s.state.Load()
	owner := make([]int, len(keys))
	count := make([]int, len(st.shards))
	for i, k := range keys {
		owner[i] = st.ring.Locate(k)
		count[owner[i]]++
	}
	slot := make([]int, len(st.shards)) // shard -> index in groups
	var groups []Group
	for shard, n := range count {
		if n > 0 {
			slot[shard] = len(groups)
			groups = append(groups, Group{Shard: shard, Keys: make([]string, 0, n), Positions: make([]int, 0, n)})
		}
	}
	for i, k := range keys {
		g := &groups[slot[owner[i]]]
		g.Keys = append(g.Keys, k)
		g.Positions = append(g.Positions, i)
	}
	return groups
}

// Label names shard i for messages, as `shard 1 "b" (10.0.0.2:6379)`.
func (s *Sharded[C]) Label(i int) string {
	sh := s.state.Load().shards[i]
	return label(i, sh.Name, sh.Addr)
}

// Err wraps err, a failure of shard i, in a *ShardError naming the shard.
// It returns nil for a nil err.
func (s *Sharded[C]) Err(i int, err error) error {
	if err == nil {
		return nil
	}
	sh := s.state.Load().shards[i]
	return &ShardError{Index: i, Name: sh.Name, Addr: sh.Addr, Err: err}
}

// Close closes every shard whose client implements io.Closer, and returns
// their errors joined (errors.Join), each naming its shard.
func (s *Sharded[C]) Close() error {
	var errs []error
	for i, sh := range s.state.Load().shards {
		if c, ok := any(sh.Client).(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, s.Err(i, fmt.Errorf("close: %w", err)))
			}
		}
	}
	return errors.Join(errs...)
}
