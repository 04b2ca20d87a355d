package ring

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
)

// layout is how a ring places its points: how many each node gets, what
// they are named and valued, and which node owns a point two nodes share.
type layout uint8

const (
	layoutJedis layout = iota
	layoutKetama
	layoutKetamaSpy
)

// WithKetama lays the ring out as libketama does, the memcached world's
// common ground: libmemcached's MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, PHP
// memcached's OPT_LIBKETAMA_COMPATIBLE and twemproxy's "distribution:
// ketama" with "hash: md5". Node i gets
// floor(float32(float32(float32(weight/total)*160)/4) * nodes)
// MD5 digests, computed in float32 as libmemcached 1.1.4 and twemproxy 0.5.0
// do (so 25 equal nodes get 39 digests each, not 40); digest d is the MD5
// of "<label>-<d>" and gives 4 points, its bytes 0-3, 4-7, 8-11 and 12-15 as
// little-endian uint32s. The label is the node's Name, or, for an unnamed
// node, its Addr with ":11211" dropped ("10.0.0.1:11211" is labelled
// "10.0.0.1", "10.0.0.1:11212" keeps its port). Keys are hashed with
// JedisMD5 (the first four MD5 bytes, little-endian), unless WithHash says
// otherwise (twemproxy's other key hashes). When two points are equal the
// node earlier in the list owns it, as in libmemcached. WithReplicas does
// not apply.
func WithKetama() Option { return func(c *config) { c.layout = layoutKetama } }

// WithKetamaSpymemcached is WithKetama with spymemcached's labels
// (KetamaNodeLocator, spymemcached 2.5 and later): an unnamed node's label is
// its Addr as given, port 11211 included.
func WithKetamaSpymemcached() Option { return func(c *config) { c.layout = layoutKetamaSpy } }

// configure sets the layout's defaults and checks the options against it.
func (l layout) configure(c *config) error {
	if l == layoutJedis {
		if !c.replicasSet {
			c.replicas = DefaultReplicas
		}
		if c.replicas < 1 {
			return fmt.Errorf("ring: replicas %d: must be at least 1", c.replicas)
		}
		if !c.hashSet {
			c.hash = MurmurHash64A
		}
		return nil
	}
	switch {
	case c.replicasSet:
		return fmt.Errorf("ring: replicas %d: ketama gives each node points by its weight share, not replicas", c.replicas)
	case c.legacyNames:
		return fmt.Errorf("ring: Jedis legacy names do not apply to ketama")
	case !c.hashSet:
		c.hash = JedisMD5
	case c.hash.Bits() != 32:
		return fmt.Errorf("ring: ketama points are 32-bit; key hash %v is %d-bit", c.hash, c.hash.Bits())
	}
	return nil
}

// lastWins reports whether, of equal points, the node later in the list owns
// the point (Jedis, as TreeMap.put) rather than the earlier one (libmemcached).
func (l layout) lastWins() bool { return l == layoutJedis }

// points returns every node's points, in list order.
func (l layout) points(cfg config, members []member) ([]vnode, error) {
	if l == layoutJedis {
		return jedisPoints(cfg, members)
	}
	return ketamaPoints(cfg, members)
}

// jedisPoints: node i gets replicas x weight vnodes, valued by the ring's
// hash of their names (Jedis's Sharded.initialize).
func jedisPoints(cfg config, members []member) ([]vnode, error) {
	total := 0
	for i, m := range members {
		if m.Weight > MaxVirtualNodes/cfg.replicas || total+m.Weight*cfg.replicas > MaxVirtualNodes {
			return nil, fmt.Errorf("ring: node %d (%q): weight %d x %d replicas exceeds %d virtual nodes in all",
				i, m.Name, m.Weight, cfg.replicas, MaxVirtualNodes)
		}
		total += m.Weight * cfg.replicas
	}
	vnodes := make([]vnode, 0, total)
	var buf []byte
	for i, m := range members {
		prefix := jedisPrefix(buf[:0], cfg, m)
		for n := 0; n < m.Weight*cfg.replicas; n++ {
			buf = strconv.AppendInt(prefix, int64(n), 10)
			vnodes = append(vnodes, vnode{point: cfg.hash.Point(buf), node: int32(i)})
		}
	}
	return vnodes, nil
}

// jedisPrefix appends the part of m's vnode names that precedes n.
func jedisPrefix(buf []byte, cfg config, m member) []byte {
	if m.Name == "" {
		buf = append(buf, "SHARD-"...)
		buf = strconv.AppendInt(buf, int64(m.slot), 10)
		return append(buf, "-NODE-"...)
	}
	buf = append(buf, m.Name...)
	buf = append(buf, '*')
	if cfg.legacyNames {
		buf = strconv.AppendInt(buf, int64(m.Weight), 10)
	}
	return buf
}

// maxKetamaWeight bounds the total weight of a ketama ring, so that the
// weight shares stay exact enough in float32 arithmetic.
const maxKetamaWeight = 1 << 24

// ketamaPoints: libketama's continuum (libmemcached's
// update_continuum, twemproxy's ketama_update).
func ketamaPoints(cfg config, members []member) ([]vnode, error) {
	if len(members)*160 > MaxVirtualNodes {
		return nil, fmt.Errorf("ring: %d nodes exceed %d virtual nodes in all", len(members), MaxVirtualNodes)
	}
	total := 0
	labels := make(map[string]int, len(members))
	for i, m := range members {
		if total += m.Weight; total > maxKetamaWeight {
			return nil, fmt.Errorf("ring: node %d (%q): total weight exceeds %d", i, m.Name, maxKetamaWeight)
		}
		label := cfg.layout.label(cfg, m)
		if label == "" {
			return nil, fmt.Errorf("ring: node %d: ketama needs a name or an address", i)
		}
		if j, dup := labels[label]; dup {
			return nil, fmt.Errorf("ring: nodes %d and %d have the same ketama label %q", j, i, label)
		}
		labels[label] = i
	}
	vnodes := make([]vnode, 0, 160*len(members))
	var buf []byte
	for i, m := range members {
		pct := float32(m.Weight) / float32(total)
		share := float32(pct * 160)
		perDigest := float32(share / 4)
		digests := int(float32(perDigest * float32(len(members)))) // floor: the value is positive
		prefix := append(append(buf[:0], cfg.layout.label(cfg, m)...), '-')
		for d := range digests {
			buf = strconv.AppendInt(prefix, int64(d), 10)
			sum := md5.Sum(buf)
			for x := 0; x < 16; x += 4 {
				vnodes = append(vnodes, vnode{point: uint64(binary.LittleEndian.Uint32(sum[x:])), node: int32(i)})
			}
		}
	}
	return vnodes, nil
}

// label returns the ketama label of m: its name, or its address without
// ":11211" (libketama) or as given (spymemcached).
func (l layout) label(cfg config, m member) string {
	if m.Name != "" {
		return m.Name
	}
	if l == layoutKetama {
		if host, port, err := net.SplitHostPort(m.Addr); err == nil && port == "11211" {
			return host
		}
	}
	return m.Addr
}
