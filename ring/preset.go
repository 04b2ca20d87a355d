package ring

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
)

// A preset is a whole placement algorithm: how the ring is built from the
// nodes (its distribution and points), how keys are hashed and which part of
// a key is hashed (tags), and how ties and ejections are resolved. The
// default is Jedis's ring; the With<Peer> options select the others.

// distribution is how a key's hash picks a node.
type distribution uint8

const (
	distConsistent distribution = iota // first point at or after the hash
	distModula                         // hash modulo the slot count
	distRendezvous                     // highest score of (key, node)
)

// pointScheme is how a consistent ring's points are made.
type pointScheme uint8

const (
	pointsJedis       pointScheme = iota // replicas x weight vnodes, hashed by the ring's hash
	pointsKetama                         // libketama: float32 digest counts, 4 MD5 points per digest
	pointsKetamaPlain                    // libmemcached BEHAVIOR_KETAMA: 100 points per node, one per label
)

// labelRule is how an unnamed node's ketama label comes from its address.
type labelRule uint8

const (
	labelLibketama labelRule = iota // "host" on port 11211, else "host:port"
	labelAddr                       // the address as given (spymemcached)
	labelSlashAddr                  // "/" + the address (libmemcached's KETAMA_SPY)
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
// otherwise. When two points are equal the node earlier in the list owns
// it, as in libmemcached. WithReplicas does not apply.
func WithKetama() Option {
	return func(c *config) {
		c.dist, c.points, c.label, c.defaultHash = distConsistent, pointsKetama, labelLibketama, JedisMD5
	}
}

// WithKetamaSpymemcached is WithKetama with spymemcached's labels
// (KetamaNodeLocator, spymemcached 2.5 and later): an unnamed node's label is
// its Addr as given, port 11211 included.
func WithKetamaSpymemcached() Option {
	return func(c *config) {
		c.dist, c.points, c.label, c.defaultHash = distConsistent, pointsKetama, labelAddr, JedisMD5
	}
}

// WithLibmemcachedKetamaSpy places keys as libmemcached's
// MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY with the weighted flag set
// first: WithKetama with labels "/<host>:<port>" (port 11211 kept). It
// reproduces spymemcached before 2.5 only; WithKetamaSpymemcached is today's.
func WithLibmemcachedKetamaSpy() Option {
	return func(c *config) {
		c.dist, c.points, c.label, c.defaultHash = distConsistent, pointsKetama, labelSlashAddr, JedisMD5
	}
}

// WithLibmemcachedKetama places keys as libmemcached 1.1.4's unweighted
// MEMCACHED_BEHAVIOR_KETAMA (MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA),
// which is not libketama: each node gets 100 points, one per label
// "<label>-<i>" (labels as in WithKetama), valued with pointHash; keys are
// hashed with keyHash; weights are ignored; of equal points the node
// earlier in the list wins. libmemcached values the points with the key
// hash in force when the ring was last rebuilt, so setting
// MEMCACHED_BEHAVIOR_HASH after KETAMA leaves the points on the old hash:
// pass both. Its default hash is HashOneAtATime.
func WithLibmemcachedKetama(pointHash, keyHash Hash) Option {
	return func(c *config) {
		c.dist, c.points, c.label, c.defaultHash, c.pointHash = distConsistent, pointsKetamaPlain, labelLibketama, keyHash, pointHash
	}
}

// Distribution is a twemproxy distribution (the "distribution:" of a pool).
type Distribution uint8

const (
	// Ketama is twemproxy's "distribution: ketama": WithKetama's ring, keys
	// hashed by the pool's hash.
	Ketama Distribution = iota
	// Modula is twemproxy's "distribution: modula": a slot list holding
	// each node's index weight times, in list order; a key goes to
	// slots[hash % len(slots)].
	Modula
)

// WithTwemproxy places keys as a twemproxy (nutcracker 0.5.0) pool with the
// given distribution and "hash:" does. An unnamed node is labelled as in
// WithKetama; a node named in the pool ("host:port:weight name") takes its
// Name. An empty key (after the hash tag, see WithHashTag) hashes to 0.
// twemproxy's default hash is HashFNV1a64.
func WithTwemproxy(d Distribution, h Hash) Option {
	return func(c *config) {
		c.dist, c.points, c.label, c.defaultHash = distConsistent, pointsKetama, labelLibketama, h
		if d == Modula {
			c.dist, c.weightedModula = distModula, true
		}
		c.emptyKeyZero = true
	}
}

// WithLibmemcachedModula places keys as libmemcached's default
// distribution, MEMCACHED_DISTRIBUTION_MODULA, does: hash % number of nodes,
// weights ignored. libmemcached's default hash is HashOneAtATime.
func WithLibmemcachedModula(h Hash) Option {
	return func(c *config) {
		c.dist, c.weightedModula, c.defaultHash = distModula, false, h
	}
}

// WithGomemcache places keys as gomemcache's ServerList does:
// crc32.ChecksumIEEE of the key's first 256 bytes, modulo the number of
// nodes (HashGomemcacheCRC32). Weights are ignored; gomemcache has none.
// This is not consistent hashing: adding a node moves most keys.
func WithGomemcache() Option {
	return func(c *config) {
		c.dist, c.weightedModula, c.defaultHash = distModula, false, HashGomemcacheCRC32
	}
}

// WithGoRedisRing places keys as go-redis v9's Ring does by default:
// rendezvous (highest random weight) hashing over the nodes' names, each
// node's score xorshift-mixed from xxhash64(key) ^ xxhash64(name), the
// highest score winning (the first node on a tie); keys pass through Redis
// Cluster hash tags ("{...}", see WithHashTag). Every node needs a Name: the
// name of the shard in RingOptions.Addrs. Weights are ignored.
func WithGoRedisRing() Option {
	return func(c *config) {
		c.dist, c.defaultHash = distRendezvous, HashXXHash64
		c.tag = tagRule{kind: tagPair, open: '{', close: '}', spec: "{}"}
	}
}

// WithHashTag makes keys that share a tag share a node, by twemproxy's
// two-character hash_tag rule (also Redis Cluster's for "{}"): the text
// between the first tag[0] and the first tag[1] after it is hashed, unless
// either is missing or the text is empty, when the whole key is. New fails
// unless tag is exactly two bytes.
func WithHashTag(tag string) Option {
	return func(c *config) {
		c.tag = tagRule{kind: tagPair, spec: tag}
		if len(tag) == 2 {
			c.tag.open, c.tag.close = tag[0], tag[1]
		}
	}
}

// configure fills the defaults of c's preset and checks the options
// against it.
func (c *config) configure() error {
	if !c.hashSet {
		c.hash = c.defaultHash
	}
	if c.tag.kind == tagPair && len(c.tag.spec) != 2 {
		return fmt.Errorf("ring: hash tag %q: must be two characters, as \"{}\"", c.tag.spec)
	}
	if c.dist == distConsistent && c.points == pointsJedis {
		if !c.replicasSet {
			c.replicas = DefaultReplicas
		}
		if c.replicas < 1 {
			return fmt.Errorf("ring: replicas %d: must be at least 1", c.replicas)
		}
		return nil
	}
	switch {
	case c.replicasSet:
		return fmt.Errorf("ring: replicas %d: this placement does not use replicas", c.replicas)
	case c.legacyNames:
		return fmt.Errorf("ring: Jedis legacy names apply to the Jedis ring only")
	case c.points != pointsJedis && c.dist == distConsistent && c.hash.Bits() != 32:
		return fmt.Errorf("ring: ketama points are 32-bit; key hash %v is %d-bit", c.hash, c.hash.Bits())
	case c.points == pointsKetamaPlain && (!c.pointHash.valid() || c.pointHash.Bits() != 32):
		return fmt.Errorf("ring: ketama points are 32-bit; point hash %v is not", c.pointHash)
	}
	return nil
}

// build lays out r's points (consistent), slots (modula) or name hashes
// (rendezvous) over its live members.
func (r *Ring) layOut() error {
	switch r.cfg.dist {
	case distModula:
		for i, m := range r.members {
			if m.ejected {
				continue
			}
			n := 1
			if r.cfg.weightedModula {
				n = m.Weight
			}
			if len(r.slots)+n > MaxVirtualNodes {
				return fmt.Errorf("ring: node %d (%q): weight %d exceeds %d slots in all", i, m.Name, m.Weight, MaxVirtualNodes)
			}
			for range n {
				r.slots = append(r.slots, int32(i))
			}
		}
		return nil
	case distRendezvous:
		r.nameHash = make([]uint64, len(r.members))
		for i, m := range r.members {
			if m.Name == "" {
				return fmt.Errorf("ring: node %d: rendezvous hashing needs a name", i)
			}
			r.nameHash[i] = XXHash64([]byte(m.Name))
		}
		return nil
	}
	var err error
	switch r.cfg.points {
	case pointsKetama, pointsKetamaPlain:
		r.vnodes, err = ketamaPoints(r.cfg, r.members)
	default:
		r.vnodes, err = jedisPoints(r.cfg, r.members)
	}
	return err
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
		if m.ejected {
			continue
		}
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

// ketamaPoints: libketama's continuum (libmemcached's update_continuum,
// twemproxy's ketama_update) over the live members: an ejected member's
// weight leaves the total and it leaves the node count.
func ketamaPoints(cfg config, members []member) ([]vnode, error) {
	if len(members)*160 > MaxVirtualNodes {
		return nil, fmt.Errorf("ring: %d nodes exceed %d virtual nodes in all", len(members), MaxVirtualNodes)
	}
	total, live := 0, 0
	labels := make(map[string]int, len(members))
	for i, m := range members {
		label := cfg.labelOf(m)
		if label == "" {
			return nil, fmt.Errorf("ring: node %d: ketama needs a name or an address", i)
		}
		if j, dup := labels[label]; dup {
			return nil, fmt.Errorf("ring: nodes %d and %d have the same ketama label %q", j, i, label)
		}
		labels[label] = i
		if m.ejected {
			continue
		}
		if total += m.Weight; total > maxKetamaWeight {
			return nil, fmt.Errorf("ring: node %d (%q): total weight exceeds %d", i, m.Name, maxKetamaWeight)
		}
		live++
	}
	vnodes := make([]vnode, 0, 160*live)
	var buf []byte
	for i, m := range members {
		if m.ejected {
			continue
		}
		if cfg.points == pointsKetamaPlain {
			prefix := append(append(buf[:0], cfg.labelOf(m)...), '-')
			for p := range 100 {
				buf = strconv.AppendInt(prefix, int64(p), 10)
				vnodes = append(vnodes, vnode{point: cfg.pointHash.Point(buf), node: int32(i)})
			}
			continue
		}
		pct := float32(m.Weight) / float32(total)
		share := float32(pct * 160)
		perDigest := float32(share / 4)
		digests := int(float32(perDigest * float32(live))) // floor: the value is positive
		prefix := append(append(buf[:0], cfg.labelOf(m)...), '-')
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

// labelOf returns the ketama label of m: its name, or its address without
// ":11211" (libketama) or as given (spymemcached).
func (c *config) labelOf(m member) string {
	if m.Name != "" {
		return m.Name
	}
	switch c.label {
	case labelLibketama:
		if host, port, err := net.SplitHostPort(m.Addr); err == nil && port == "11211" {
			return host
		}
	case labelSlashAddr:
		if m.Addr != "" {
			return "/" + m.Addr
		}
	}
	return m.Addr
}

// rendezvous returns the node with the highest score for key hash kh, as
// go-redis's hashtag.RendezvousHash: score = mix(kh ^ xxhash64(name)), mix
// being a xorshift followed by a multiplication.
func (r *Ring) rendezvous(kh uint64) int {
	best, bestScore := -1, uint64(0)
	for i, h := range r.nameHash {
		if r.members[i].ejected {
			continue
		}
		x := kh ^ h
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		if score := x * 2685821657736338717; best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
