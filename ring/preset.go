package ring

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
)

// Preset is one whole placement scheme, a peer's: how the ring is built from
// the nodes, how a key is hashed and which part of it, and how ties and
// ejections are resolved. A ring has exactly one preset, given to New as one
// value, so schemes cannot mix: the types are Jedis, Twemproxy, Libmemcached,
// Spymemcached, GoRedisRing and Gomemcache, each with the settings its peer
// has and no others; their zero values are the peers' defaults. A setting
// the preset's configuration does not use is an error at New, as is a node
// weight other than 1 on a preset that ignores weights. Only this package's
// types implement Preset.
type Preset interface {
	// String describes the preset and its settings, e.g.
	// "Twemproxy{distribution: ketama, hash: MD5}".
	String() string
	// config returns the preset's internal configuration, or an error
	// naming the setting that does not apply.
	config() (config, error)
}

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
	pointsKetama                         // libketama: float32 weight shares, 4 MD5 points per digest
	pointsKetama40                       // spymemcached unweighted: 40 MD5 digests per node
	pointsKetamaPlain                    // libmemcached unweighted: 100 points per node, one per label
)

// labelRule is how an unnamed node's ketama label comes from its address.
type labelRule uint8

const (
	labelLibketama labelRule = iota // "host" on port 11211, else "host:port"
	labelAddr                       // the address as given (spymemcached)
	labelSlashAddr                  // "/" + the address (libmemcached's KETAMA_SPY)
)

// config is a preset's internal form.
type config struct {
	preset      Preset
	dist        distribution
	points      pointScheme
	label       labelRule
	hash        Hash // the key hash (and the Jedis ring's vnode hash)
	pointHash   Hash // pointsKetamaPlain: the hash of the point labels
	replicas    int  // pointsJedis
	legacyNames bool
	tag         tagRule
	weighted    bool // node weights count (else a weight > 1 is an error)
	lastWins    bool // of equal points the later node's wins (Java's TreeMap.put)
	// emptyKeyZero: an empty key hashes to 0 (twemproxy).
	emptyKeyZero bool
	// rehash: a rebuild (Eject, Rejoin) values plain points with the key
	// hash (libmemcached values them with the hash in force).
	rehash bool
}

// Jedis is Jedis's ring (redis.clients.jedis.util.Sharded, Jedis 2.10.0 -
// 3.10.0, and JedisSharding 4.x - 6.x for unnamed nodes), the default of New:
// node i gets Replicas x Weight vnodes named "SHARD-<i>-NODE-<n>" (unnamed)
// or "<name>*<n>", hashed with Hash; a key belongs to the first vnode at or
// after its hash, wrapping; of equal vnodes the later one wins (TreeMap.put).
// See the package documentation.
type Jedis struct {
	// Hash hashes keys and vnode names: HashMurmur64A (the default,
	// Hashing.MURMUR_HASH) or HashMD5 (Hashing.MD5); any other Hash gives
	// the same layout with that hash.
	Hash Hash
	// Replicas is the number of vnodes per unit of weight: 0 means 160
	// (Jedis); 100 reproduces the widely copied Shard<S> class (NODE_NUM =
	// 100). Negative is an error.
	Replicas int
	// KeyTags turns on Jedis key tags for string keys: a key with a tag
	// (see KeyTag) is placed by its tag alone, as ShardedJedis with
	// DEFAULT_KEY_TAG_PATTERN. Off by default, as in Jedis.
	KeyTags bool
	// LegacyNames names a named node's vnodes "<name>*<weight><n>", as Jedis
	// 2.0.0 - 2.9.3 did. The form is ambiguous (weight 1, n 10 and weight
	// 11, n 0 both give "<name>*110"); clashing vnodes go to the later node.
	LegacyNames bool
}

func (p Jedis) String() string {
	return fmt.Sprintf("Jedis{hash: %v, replicas: %d, key tags: %t, legacy names: %t}",
		orDefault(p.Hash, HashMurmur64A), orDefaultInt(p.Replicas, DefaultReplicas), p.KeyTags, p.LegacyNames)
}

func (p Jedis) config() (config, error) {
	c := config{preset: p, hash: orDefault(p.Hash, HashMurmur64A), replicas: orDefaultInt(p.Replicas, DefaultReplicas),
		legacyNames: p.LegacyNames, weighted: true, lastWins: true}
	if p.Replicas < 0 {
		return c, fmt.Errorf("ring: Jedis: replicas %d: must be at least 1 (0 means %d)", p.Replicas, DefaultReplicas)
	}
	if p.KeyTags {
		c.tag = tagRule{kind: tagJedis}
	}
	return c, checkHash(p, p.Hash, allHashes)
}

// TwemproxyDistribution is a twemproxy pool's "distribution:".
type TwemproxyDistribution uint8

const (
	// TwemproxyKetama is "distribution: ketama", twemproxy's default:
	// libketama's ring (see Libmemcached's LibmemcachedKetamaWeighted),
	// keys hashed by the pool's hash.
	TwemproxyKetama TwemproxyDistribution = iota
	// TwemproxyModula is "distribution: modula": a slot list holding each
	// node's index weight times, in list order; a key goes to
	// slots[hash % len(slots)].
	TwemproxyModula
)

// Twemproxy is a twemproxy (nutcracker 0.5.0) pool. A node's label is its
// Name ("host:port:weight name"), else its Addr with ":11211" dropped
// ("10.0.0.1:11211" is labelled "10.0.0.1", "10.0.0.1:11212" keeps its
// port). An empty key (after the hash tag) hashes to 0. Of equal ketama
// points the earlier node wins (twemproxy's qsort leaves it undefined).
// Weights count.
type Twemproxy struct {
	// Distribution is the pool's "distribution:"; the zero value is
	// ketama, twemproxy's default. ("random" is not reproduced.)
	Distribution TwemproxyDistribution
	// Hash is the pool's "hash:"; the zero Hash is HashFNV1a64Low32
	// ("fnv1a_64"), twemproxy's default. The hashes twemproxy has: md5
	// HashMD5, one_at_a_time HashOneAtATime, fnv1_64 HashFNV164Low32,
	// fnv1a_64 HashFNV1a64Low32, fnv1_32 HashFNV132, fnv1a_32 HashFNV1a32,
	// hsieh HashHsiehTwemproxy, murmur HashMurmur2, jenkins HashLookup3,
	// crc16 HashCRC16Twemproxy, crc32 HashCRC32Bits16to30, crc32a HashCRC32.
	Hash Hash
	// HashTag is the pool's "hash_tag:", two characters such as "{}", or
	// empty for none: keys that share a tag share a node (see
	// ClusterHashTag for "{}").
	HashTag string
}

var twemproxyHashes = []Hash{HashMD5, HashOneAtATime, HashFNV164Low32, HashFNV1a64Low32, HashFNV132, HashFNV1a32,
	HashHsiehTwemproxy, HashMurmur2, HashLookup3, HashCRC16Twemproxy, HashCRC32Bits16to30, HashCRC32}

func (p Twemproxy) String() string {
	d := "ketama"
	if p.Distribution == TwemproxyModula {
		d = "modula"
	}
	s := fmt.Sprintf("Twemproxy{distribution: %s, hash: %v", d, orDefault(p.Hash, HashFNV1a64Low32))
	if p.HashTag != "" {
		s += fmt.Sprintf(", hash_tag: %q", p.HashTag)
	}
	return s + "}"
}

func (p Twemproxy) config() (config, error) {
	c := config{preset: p, points: pointsKetama, label: labelLibketama, hash: orDefault(p.Hash, HashFNV1a64Low32),
		weighted: true, emptyKeyZero: true}
	switch p.Distribution {
	case TwemproxyKetama:
	case TwemproxyModula:
		c.dist = distModula
	default:
		return c, fmt.Errorf("ring: %v: unknown distribution %d", p, p.Distribution)
	}
	if p.HashTag != "" {
		if len(p.HashTag) != 2 {
			return c, fmt.Errorf("ring: twemproxy hash_tag %q: must be two characters, as \"{}\"", p.HashTag)
		}
		c.tag = tagRule{kind: tagPair, open: p.HashTag[0], close: p.HashTag[1]}
	}
	return c, checkHash(p, p.Hash, twemproxyHashes)
}

// LibmemcachedDistribution is the distribution a libmemcached 1.1.4 client
// ends up with, named after the behavior that sets it.
type LibmemcachedDistribution uint8

const (
	// LibmemcachedModula is MEMCACHED_DISTRIBUTION_MODULA, the default (or
	// MEMCACHED_BEHAVIOR_KETAMA set to 0): hash % number of nodes.
	LibmemcachedModula LibmemcachedDistribution = iota
	// LibmemcachedKetama is MEMCACHED_BEHAVIOR_KETAMA set to 1 (or
	// DISTRIBUTION set to CONSISTENT or CONSISTENT_KETAMA, or
	// KETAMA_WEIGHTED set to 0). This is not libketama: each node gets 100
	// points, one per label "<label>-<i>", valued with the hash in force
	// when the ring was built (Hash); weights are not used.
	LibmemcachedKetama
	// LibmemcachedKetamaWeighted is MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED set
	// to 1, libketama (also PHP memcached's OPT_LIBKETAMA_COMPATIBLE, and
	// twemproxy's ketama): node i gets
	// floor(float32(float32(float32(weight/total)*160)/4) * nodes) MD5
	// digests, computed in float32 (25 equal nodes get 39 digests each, not
	// 40); digest d is the MD5 of "<label>-<d>" and gives 4 points, its
	// bytes 0-3, 4-7, 8-11 and 12-15 as little-endian uint32s. The behavior
	// also sets the key hash to MD5, so a Hash set before it has no effect
	// (an error here): set HashAfter for a hash set after it.
	LibmemcachedKetamaWeighted
	// LibmemcachedConsistentWeighted is MEMCACHED_BEHAVIOR_DISTRIBUTION set
	// to MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED, or KETAMA set to 1 with
	// a server of weight > 1 added afterwards: libketama's points, but keys
	// keep the hash in force (one-at-a-time unless set).
	LibmemcachedConsistentWeighted
	// LibmemcachedKetamaSpy is DISTRIBUTION set to
	// MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY without the weighted
	// flag: LibmemcachedKetama's 100 points per node with labels
	// "/<host>:<port>-<i>" (port 11211 kept).
	LibmemcachedKetamaSpy
	// LibmemcachedKetamaSpyWeighted is KETAMA_WEIGHTED set to 1 and then
	// DISTRIBUTION set to CONSISTENT_KETAMA_SPY: libketama's ring with
	// labels "/<host>:<port>", keys hashed with MD5 (or HashAfter). It
	// reproduces spymemcached before 2.5 only.
	LibmemcachedKetamaSpyWeighted
)

var libmemcachedDistNames = [...]string{"MODULA", "KETAMA", "KETAMA_WEIGHTED", "CONSISTENT_WEIGHTED", "KETAMA_SPY", "KETAMA_SPY weighted"}

// Libmemcached is a libmemcached 1.1.4 client, as its behaviors were set:
// Distribution is what MEMCACHED_BEHAVIOR_KETAMA, KETAMA_WEIGHTED or
// DISTRIBUTION selected, Hash the MEMCACHED_BEHAVIOR_HASH set before it (or
// before the servers were added), HashAfter one set after both. The order
// matters because libmemcached rebuilds its ring when the distribution is
// set or a server is added, not when the hash is set: points keep the hash
// of the last rebuild (MEMCACHED_BEHAVIOR_KETAMA_HASH is stored but unused
// in 1.1.4, so it has no field). The zero value is libmemcached's default:
// MODULA over one-at-a-time. Nodes are in the order the servers were added;
// a node's label is its Name, else its Addr ("host" for port 11211, else
// "host:port"; see the distributions for KETAMA_SPY). Of equal points the
// earlier node wins. Weights count only in the weighted distributions.
type Libmemcached struct {
	Distribution LibmemcachedDistribution
	// Hash is the MEMCACHED_BEHAVIOR_HASH in force when the ring was last
	// built; the zero Hash is one-at-a-time (MEMCACHED_HASH_DEFAULT). The
	// hashes libmemcached has: HashOneAtATime, HashMD5, HashCRC32Bits16to30
	// (CRC), HashFNV164Low32, HashFNV1a64Low32, HashFNV132, HashFNV1a32,
	// HashLookup3 (JENKINS), HashMurmur2 (MURMUR), HashMurmur3.
	Hash Hash
	// HashAfter is a MEMCACHED_BEHAVIOR_HASH set after the distribution and
	// the servers: it hashes keys while the points keep Hash. Zero for none.
	HashAfter Hash
}

var libmemcachedHashes = []Hash{HashOneAtATime, HashMD5, HashCRC32Bits16to30, HashFNV164Low32, HashFNV1a64Low32,
	HashFNV132, HashFNV1a32, HashLookup3, HashMurmur2, HashMurmur3}

func (p Libmemcached) String() string {
	d := "unknown"
	if int(p.Distribution) < len(libmemcachedDistNames) {
		d = libmemcachedDistNames[p.Distribution]
	}
	s := "Libmemcached{distribution: " + d
	if p.Hash.kind != kindNone {
		s += fmt.Sprintf(", hash: %v", p.Hash)
	}
	if p.HashAfter.kind != kindNone {
		s += fmt.Sprintf(", hash after: %v", p.HashAfter)
	}
	return s + "}"
}

func (p Libmemcached) config() (config, error) {
	c := config{preset: p, label: labelLibketama, hash: orDefault(p.Hash, HashOneAtATime)}
	for _, h := range []Hash{p.Hash, p.HashAfter} {
		if err := checkHash(p, h, libmemcachedHashes); err != nil {
			return c, err
		}
	}
	switch p.Distribution {
	case LibmemcachedModula:
		c.dist = distModula
		if p.HashAfter.kind != kindNone {
			return c, fmt.Errorf("ring: %v: MODULA has no ring to keep an older hash: set Hash, not HashAfter", p)
		}
		return c, nil
	case LibmemcachedKetama, LibmemcachedKetamaSpy:
		c.points, c.pointHash, c.rehash = pointsKetamaPlain, c.hash, true
	case LibmemcachedKetamaWeighted, LibmemcachedKetamaSpyWeighted:
		if p.Hash.kind != kindNone {
			return c, fmt.Errorf("ring: %v: KETAMA_WEIGHTED sets the hash to MD5, so a hash set before it (%v) has no effect: drop it, or set HashAfter", p, p.Hash)
		}
		c.points, c.hash, c.weighted = pointsKetama, HashMD5, true
	case LibmemcachedConsistentWeighted:
		if p.Hash.kind != kindNone && p.HashAfter.kind != kindNone {
			return c, fmt.Errorf("ring: %v: CONSISTENT_WEIGHTED values its points with MD5 whatever the hash, so Hash (%v) has no effect beside HashAfter", p, p.Hash)
		}
		c.points, c.weighted = pointsKetama, true
	default:
		return c, fmt.Errorf("ring: %v: unknown distribution %d", p, p.Distribution)
	}
	if p.Distribution == LibmemcachedKetamaSpy || p.Distribution == LibmemcachedKetamaSpyWeighted {
		c.label = labelSlashAddr
	}
	if p.HashAfter.kind != kindNone {
		c.hash = p.HashAfter
	}
	return c, nil
}

// SpymemcachedLocator is the NodeLocator of a spymemcached connection
// factory.
type SpymemcachedLocator uint8

const (
	// SpymemcachedArrayMod is ArrayModNodeLocator with NATIVE_HASH, what
	// DefaultConnectionFactory (new MemcachedClient(addrs)) uses: node
	// HashJavaStringHashCode(key) % number of nodes.
	SpymemcachedArrayMod SpymemcachedLocator = iota
	// SpymemcachedKetama is KetamaNodeLocator with KETAMA_HASH (MD5), what
	// KetamaConnectionFactory uses: 40 MD5 digests per node (160 points),
	// digest d of "<label>-<d>", 4 little-endian points each; keys hashed
	// with HashMD5; of equal points the later node wins (TreeMap.put).
	SpymemcachedKetama
)

// SpymemcachedKeyFormat is KetamaNodeKeyFormatter.Format: how a ketama
// node's label comes from its address.
type SpymemcachedKeyFormat uint8

const (
	// SpymemcachedFormat (the default, spymemcached 2.5 and later): the
	// label is the node's Addr as given, port 11211 included ("host:port",
	// as spymemcached prints the address without its leading "/").
	SpymemcachedFormat SpymemcachedKeyFormat = iota
	// LibmemcachedFormat: "host" on port 11211, else "host:port", as
	// libmemcached's (host as InetSocketAddress.getHostName returns it).
	LibmemcachedFormat
)

// Spymemcached is a spymemcached 2.12 client. The zero value is
// DefaultConnectionFactory's placement; a node's label is its Name, else as
// KeyFormat says. Only the locators' default hashes are reproduced
// (spymemcached's FNV and CRC variants over Java chars are not).
type Spymemcached struct {
	Locator SpymemcachedLocator
	// KeyFormat is the ketama label format (SpymemcachedKetama only).
	KeyFormat SpymemcachedKeyFormat
	// Weighted is a ketama locator built with a weights map (the
	// KetamaConnectionFactory constructor that takes one): node i gets
	// libketama's float32 share of digests instead of 40.
	Weighted bool
}

func (p Spymemcached) String() string {
	if p.Locator == SpymemcachedArrayMod {
		return "Spymemcached{locator: ARRAY_MOD, hash: JavaStringHashCode}"
	}
	f := "SPYMEMCACHED"
	if p.KeyFormat == LibmemcachedFormat {
		f = "LIBMEMCACHED"
	}
	return fmt.Sprintf("Spymemcached{locator: CONSISTENT, hash: MD5, key format: %s, weighted: %t}", f, p.Weighted)
}

func (p Spymemcached) config() (config, error) {
	switch p.Locator {
	case SpymemcachedArrayMod:
		c := config{preset: p, dist: distModula, hash: HashJavaStringHashCode}
		if p.KeyFormat != SpymemcachedFormat || p.Weighted {
			return c, fmt.Errorf("ring: %v: the key format and weights apply to the ketama locator only", p)
		}
		return c, nil
	case SpymemcachedKetama:
		c := config{preset: p, points: pointsKetama40, label: labelAddr, hash: HashMD5, lastWins: true}
		if p.KeyFormat == LibmemcachedFormat {
			c.label = labelLibketama
		} else if p.KeyFormat != SpymemcachedFormat {
			return c, fmt.Errorf("ring: %v: unknown key format %d", p, p.KeyFormat)
		}
		if p.Weighted {
			c.points, c.weighted = pointsKetama, true
		}
		return c, nil
	}
	return config{}, fmt.Errorf("ring: Spymemcached: unknown locator %d", p.Locator)
}

// GoRedisRing is go-redis v9's Ring with its default NewConsistentHash:
// rendezvous (highest random weight) hashing over the nodes' names, each
// node's score xorshift-mixed from xxhash64(key) ^ xxhash64(name), the
// highest score winning (the first node on a tie); keys pass through Redis
// Cluster hash tags ("{...}", see ClusterHashTag). Every node needs a Name:
// the name of the shard in RingOptions.Addrs. go-redis has no weights.
type GoRedisRing struct{}

func (GoRedisRing) String() string { return "GoRedisRing{}" }

func (p GoRedisRing) config() (config, error) {
	return config{preset: p, dist: distRendezvous, hash: HashXXHash64, tag: clusterTags}, nil
}

// Gomemcache is gomemcache's ServerList (memcache.New(servers...)):
// crc32.ChecksumIEEE of the key's first 256 bytes (HashCRC32First256),
// modulo the number of nodes. gomemcache has no weights. This is not
// consistent hashing: adding a node moves most keys (plan a move to a
// consistent ring with Compare).
type Gomemcache struct{}

func (Gomemcache) String() string { return "Gomemcache{}" }

func (p Gomemcache) config() (config, error) {
	return config{preset: p, dist: distModula, hash: HashCRC32First256}, nil
}

// allHashes stands for "any hash" in checkHash.
var allHashes []Hash

// checkHash fails when h is set but is not a hash of the preset's peer
// (every valid hash when peer is nil).
func checkHash(p Preset, h Hash, peer []Hash) error {
	if h.kind == kindNone {
		return nil
	}
	if !h.valid() {
		return fmt.Errorf("ring: %v: unknown hash %v", p, h)
	}
	if peer == nil {
		return nil
	}
	for _, x := range peer {
		if x == h {
			return nil
		}
	}
	return fmt.Errorf("ring: %v: the peer has no hash %v", p, h)
}

func orDefault(h, def Hash) Hash {
	if h.kind == kindNone {
		return def
	}
	return h
}

func orDefaultInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// layOut lays out r's points (consistent), slots (modula) or name hashes
// (rendezvous) over its live members.
func (r *Ring) layOut() error {
	switch r.cfg.dist {
	case distModula:
		for i, m := range r.members {
			if m.ejected {
				continue
			}
			n := m.Weight // 1 unless the preset is weighted
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
	case pointsKetama, pointsKetama40, pointsKetamaPlain:
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

// ketamaPoints: the ketama continuum over the live members: libketama's
// (libmemcached's update_continuum, twemproxy's ketama_update), where an
// ejected member's weight leaves the total and it leaves the node count;
// spymemcached's 40 digests per node; or libmemcached's unweighted 100
// points per node.
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
		prefix := append(append(buf[:0], cfg.labelOf(m)...), '-')
		if cfg.points == pointsKetamaPlain {
			for p := range 100 {
				buf = strconv.AppendInt(prefix, int64(p), 10)
				vnodes = append(vnodes, vnode{point: cfg.pointHash.Point(buf), node: int32(i)})
			}
			continue
		}
		digests := 40
		if cfg.points == pointsKetama {
			pct := float32(m.Weight) / float32(total)
			share := float32(pct * 160)
			perDigest := float32(share / 4)
			digests = int(float32(perDigest * float32(live))) // floor: the value is positive
		}
		if digests == 0 {
			return nil, fmt.Errorf("ring: node %d (%q): weight %d of %d in all gives it no ketama point", i, cfg.labelOf(m), m.Weight, total)
		}
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
