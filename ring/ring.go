package ring

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"unsafe"
)

// DefaultReplicas is the number of virtual nodes per unit of weight, as in
// Jedis's Sharded (160 * weight).
const DefaultReplicas = 160

// MaxVirtualNodes bounds the number of virtual nodes of one ring (replicas x
// total weight), so that a mistyped weight is an error and not an
// out-of-memory crash. 2^24 vnodes take 256 MiB.
const MaxVirtualNodes = 1 << 24

// ErrNoNodes is returned by New and RemoveKeepingSlots when the ring would
// have no node.
var ErrNoNodes = errors.New("ring: no nodes")

// Node is one target on the ring.
type Node struct {
	// Name identifies the node; it may be empty. A named node's vnodes are
	// "<name>*<n>", an unnamed node's "SHARD-<i>-NODE-<n>" where i is its
	// position in the list (Jedis); with the ketama presets the name is the
	// label of its points. Two nodes may not share a non-empty name.
	Name string
	// Weight scales the node's share: it gets replicas x Weight vnodes
	// (Jedis), its share of the total weight (libketama), or Weight slots
	// (twemproxy's modula). 0 means 1; negative is an error, and so is a
	// weight above 1 on a preset that ignores weights.
	Weight int
	// Addr is the node's "host:port" (or socket path); optional. Only
	// ketama uses it: an unnamed node's label is derived from it, as
	// libmemcached, twemproxy and spymemcached do (see their presets). It
	// is also the node's identity across rings (see ID).
	Addr string
}

// member is a node with the slot that names its vnodes when it is unnamed:
// its position in the list it was first placed in. RemoveKeepingSlots keeps the slots of
// the remaining nodes so that their vnodes keep their names.
type member struct {
	Node
	slot    int
	ejected bool // owns nothing (see Eject)
}

// vnode is one point on the ring and the index of the node that owns it.
type vnode struct {
	point uint64
	node  int32
}

// Ring is an immutable placement of keys on nodes: a consistent-hash ring,
// or, for the presets of peers that use them, a modulo slot list or
// rendezvous hashing. Its methods are safe for concurrent use; lookups take
// no lock and allocate nothing.
type Ring struct {
	cfg     config
	members []member
	live    int // members not ejected

	vnodes   []vnode // consistent: sorted by point, one per distinct point
	idx      index
	slots    []int32  // modula: slot -> node
	nameHash []uint64 // rendezvous: xxhash64 of each node's name

	ids  []string       // ids[i] is node i's ID, computed once (see ID)
	byID map[string]int // ID -> node index
}

// New builds a ring over nodes, in list order, placed by preset p (nil is
// Jedis{}, Jedis's ring). Placement is a pure function of (p, nodes): the
// same arguments always give the same ring. It returns an error naming the
// culprit for an empty list (ErrNoNodes), a negative weight, a weight other
// than 1 on a preset that ignores weights, two nodes with the same non-empty
// name (or, with ketama, the same label), a node that would own no point or
// slot, more than MaxVirtualNodes vnodes, or a setting of p that its
// configuration does not use.
func New(nodes []Node, p Preset) (*Ring, error) {
	if p == nil {
		p = Jedis{}
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	members := make([]member, len(nodes))
	for i, n := range nodes {
		members[i] = member{Node: n, slot: i}
	}
	return build(cfg, members)
}

func build(cfg config, members []member) (*Ring, error) {
	if len(members) == 0 {
		return nil, ErrNoNodes
	}
	r := &Ring{cfg: cfg, members: members}
	names := make(map[string]int, len(members))
	for i := range members {
		m := &members[i]
		if m.Weight < 0 {
			return nil, fmt.Errorf("ring: node %d (%q): weight %d is negative", i, m.Name, m.Weight)
		}
		if m.Weight == 0 {
			m.Weight = 1
		}
		if m.Weight > 1 && !cfg.weighted {
			return nil, fmt.Errorf("ring: node %d (%q): weight %d, but %v ignores weights", i, m.Name, m.Weight, cfg.preset)
		}
		if m.Name != "" {
			if j, dup := names[m.Name]; dup {
				return nil, fmt.Errorf("ring: nodes %d and %d have the same name %q", j, i, m.Name)
			}
			names[m.Name] = i
		}
		if !m.ejected {
			r.live++
		}
	}
	if r.live == 0 {
		return nil, fmt.Errorf("ring: every node is ejected: %w", ErrNoNodes)
	}
	if err := r.layOut(); err != nil {
		return nil, err
	}
	r.ids, r.byID = make([]string, len(members)), make(map[string]int, len(members))
	for i := range members {
		r.ids[i] = r.id(i)
		if a := members[i].Addr; a != "" {
			r.ids[i] = "addr:" + a
		}
		r.byID[r.ids[i]] = i
	}
	if cfg.dist == distConsistent {
		r.vnodes = sortPoints(r.vnodes, cfg.lastWins)
		if err := r.checkOwners(); err != nil {
			return nil, err
		}
		r.idx = newIndex(r.vnodes)
	}
	return r, nil
}

// checkOwners fails when a live node owns no point: every one of its points
// went to another node that has the same value.
func (r *Ring) checkOwners() error {
	owns := make([]bool, len(r.members))
	for _, v := range r.vnodes {
		owns[v.node] = true
	}
	for i, m := range r.members {
		if !m.ejected && !owns[i] {
			return fmt.Errorf("ring: node %d (%q): every one of its points is another node's (equal hashes), so it would own no key", i, r.id(i))
		}
	}
	return nil
}

// sortPoints sorts vnodes by point and keeps one vnode per point: of equal
// points, the last in list order when lastWins (Jedis and spymemcached:
// TreeMap.put overwrites), else the first (libmemcached sorts ties by server
// index). The sort is stable (sortByPoint).
func sortPoints(vnodes []vnode, lastWins bool) []vnode {
	sortByPoint(vnodes)
	w := 0
	for i := range vnodes {
		if w > 0 && vnodes[w-1].point == vnodes[i].point {
			if lastWins {
				vnodes[w-1] = vnodes[i]
			}
			continue
		}
		vnodes[w] = vnodes[i]
		w++
	}
	return slices.Clip(vnodes[:w])
}

// sortByPoint sorts vnodes by point, stably (equal points keep their list
// order), without comparisons in the common case: a most-significant-digit
// radix sort (bucketSort) over the span of points actually used, so that
// 32-bit, 64-bit and clustered points all spread over the buckets.
func sortByPoint(vnodes []vnode) {
	if len(vnodes) < 2 {
		return
	}
	lo, hi := vnodes[0].point, vnodes[0].point
	for _, v := range vnodes {
		lo, hi = min(lo, v.point), max(hi, v.point)
	}
	s := bucketSorter{scratch: make([]vnode, len(vnodes))}
	s.sort(vnodes, s.scratch, lo, hi, 0)
}

// maxBuckets bounds the buckets of one bucketSort pass: few enough that
// the scatter writes stream into the cache.
const maxBuckets = 1024

// bucketSorter holds the buffers of one sortByPoint.
type bucketSorter struct {
	scratch []vnode
	ends    [][]uint32 // ends[depth]: the bucket bounds of a pass at that depth
}

// sort sorts v, whose points lie in [lo, hi], stably, with scratch (as
// long as v): it scatters v into up to maxBuckets buckets, each an equal
// slice of [lo, hi], sorts each bucket the same way one level deeper, and
// copies the result back. A bucket of at most 32 vnodes is sorted by
// insertion; one of equal points is already sorted.
func (s *bucketSorter) sort(v, scratch []vnode, lo, hi uint64, depth int) {
	if lo == hi {
		return
	}
	if len(v) <= 32 {
		for i := 1; i < len(v); i++ {
			x := v[i]
			j := i
			for ; j > 0 && v[j-1].point > x.point; j-- {
				v[j] = v[j-1]
			}
			v[j] = x
		}
		return
	}
	k := min(bits.Len(uint(len(v)-1)), bits.Len(maxBuckets-1)) // 2^k buckets at most
	shift := 0
	if used := bits.Len64(hi - lo); used > k {
		shift = used - k
	}
	buckets := int((hi-lo)>>shift) + 1
	if depth == len(s.ends) {
		s.ends = append(s.ends, make([]uint32, maxBuckets+1))
	}
	end := s.ends[depth][:buckets+1]
	clear(end)
	for _, x := range v {
		end[(x.point-lo)>>shift+1]++
	}
	for b := 1; b <= buckets; b++ {
		end[b] += end[b-1] // end[b]: where bucket b starts
	}
	for _, x := range v {
		b := (x.point - lo) >> shift
		scratch[end[b]] = x
		end[b]++ // after the scatter, end[b] is where bucket b ends
	}
	from := uint32(0)
	for b := range buckets {
		to := end[b]
		if to-from > 1 {
			blo := lo + uint64(b)<<shift
			bhi := min(hi, blo+(uint64(1)<<shift-1))
			s.sort(scratch[from:to], v[from:to], blo, bhi, depth+1)
		}
		from = to
	}
	copy(v, scratch)
}

// Locate returns the index, in the node list, of the node that owns key.
// With key tags on (Jedis.KeyTags, Twemproxy.HashTag, GoRedisRing's Redis
// Cluster tags), a tagged key is placed by its tag.
func (r *Ring) Locate(key string) int {
	switch r.cfg.tag.kind {
	case tagJedis:
		key, _ = KeyTag(key)
	case tagPair:
		key = r.cfg.tag.pair(key)
	}
	// The hash only reads the bytes; no copy is made.
	return r.locate(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// LocateBytes returns the index of the node that owns key. Jedis key tags do
// not apply, as in Jedis's getShardInfo(byte[]); two-character hash tags
// (Twemproxy.HashTag, GoRedisRing) do, as in twemproxy and go-redis.
func (r *Ring) LocateBytes(key []byte) int {
	if r.cfg.tag.kind == tagPair {
		key = r.cfg.tag.pairBytes(key)
	}
	return r.locate(key)
}

func (r *Ring) locate(key []byte) int {
	if r.live == 1 && len(r.members) == 1 {
		return 0 // every peer answers the only node without hashing
	}
	var p uint64
	if len(key) > 0 || !r.cfg.emptyKeyZero {
		p = r.cfg.hash.Point(key)
	}
	return r.LocatePoint(p)
}

// LocatePoint returns the index of the node that owns the given point (a
// key's hash): on a consistent ring the node of the first vnode at or after
// it, wrapping to the lowest vnode.
func (r *Ring) LocatePoint(p uint64) int {
	switch r.cfg.dist {
	case distModula:
		return int(r.slots[p%uint64(len(r.slots))])
	case distRendezvous:
		return r.rendezvous(p)
	}
	return int(r.vnodes[r.idx.search(r.vnodes, p)].node)
}

// Len returns the number of nodes.
func (r *Ring) Len() int { return len(r.members) }

// Nodes returns a copy of the node list, with weight 0 given as 1.
func (r *Ring) Nodes() []Node {
	out := make([]Node, len(r.members))
	for i, m := range r.members {
		out[i] = m.Node
	}
	return out
}

// Hash returns the ring's key hash.
func (r *Ring) Hash() Hash { return r.cfg.hash }

// Preset returns the preset the ring was built with (Jedis{} for nil).
func (r *Ring) Preset() Preset { return r.cfg.preset }

// VirtualNodes returns the number of distinct points on the ring (vnodes
// whose hash clashed with a later one are not counted).
func (r *Ring) VirtualNodes() int { return len(r.vnodes) }

// Add returns a new ring with n appended to the node list. The other nodes
// keep their vnodes, so only keys that move to n change owner. An unnamed n
// takes the slot after the highest one in use, which is its list position
// unless a node was removed before. (Libmemcached's unweighted ketama
// values every point with the hash in force when it rebuilds, as
// libmemcached does on a server add: see Libmemcached.HashAfter.)
func (r *Ring) Add(n Node) (*Ring, error) {
	next := 0
	for _, m := range r.members {
		next = max(next, m.slot+1)
	}
	members := append(slices.Clone(r.members), member{Node: n, slot: next})
	return build(r.rebuildConfig(), members)
}

// RemoveKeepingSlots returns a new ring without node i; later nodes'
// indices shift down by one. Every remaining node keeps its vnode names (an
// unnamed node keeps the slot number of its original position), so only
// node i's keys move. For unnamed nodes of the Jedis ring this is not the
// ring New builds over the remaining list (there a node after i takes the
// slot of its new position, as Jedis does): hence the name; with named
// nodes the two are the same. It fails for an index out of range, or with
// ErrNoNodes for the last node.
func (r *Ring) RemoveKeepingSlots(i int) (*Ring, error) {
	if i < 0 || i >= len(r.members) {
		return nil, fmt.Errorf("ring: remove node %d: index out of range [0, %d)", i, len(r.members))
	}
	return build(r.rebuildConfig(), slices.Delete(slices.Clone(r.members), i, i+1))
}

// rebuildConfig is the configuration of a ring rebuilt from r's: the same,
// except that libmemcached values its unweighted points with the hash in
// force when it rebuilds (Libmemcached.HashAfter becomes the point hash).
func (r *Ring) rebuildConfig() config {
	cfg := r.cfg
	if cfg.rehash {
		cfg.pointHash = cfg.hash
	}
	return cfg
}

// ID returns the identity of node i across node lists, which Compare and
// Owners use to tell that a node of one ring is the same as a node of
// another, and a client to keep per-node state: the node's address when it
// has one ("addr:<Addr>": two nodes at one address hold the same keys,
// whatever their names, and a node that keeps its name but changes address
// is another node), else its placement identity (see Placement).
// It allocates nothing: IDs are computed when the ring is built.
func (r *Ring) ID(i int) string { return r.ids[i] }

// Index returns the index of the node whose ID is id, or -1 (a map lookup).
// Two nodes with one ID (one address listed twice) give the later one.
func (r *Ring) Index(id string) int {
	if i, ok := r.byID[id]; ok {
		return i
	}
	return -1
}

// Placement returns what node i's points are derived from: "name:<Name>",
// its label on the ketama-like presets ("label:<label>"), or, for an unnamed
// node of the Jedis ring, its slot ("slot:<n>", its position in the list it
// was first placed in). Two nodes with the same Placement, weight and
// preset own the same keys.
func (r *Ring) Placement(i int) string { return r.id(i) }

// id is Placement.
func (r *Ring) id(i int) string {
	m := r.members[i]
	if m.Name != "" {
		return "name:" + m.Name
	}
	if r.cfg.points != pointsJedis {
		return "label:" + r.cfg.labelOf(m)
	}
	return "slot:" + strconv.Itoa(m.slot)
}

// Eject returns a ring over the same node list in which the given nodes own
// no key, as the preset's peer rebuilds it when servers fail: the Jedis ring
// and rendezvous hashing drop the ejected nodes (every other node keeps its
// keys); ketama is rebuilt over the live nodes with their weight shares
// (twemproxy's and libmemcached's auto-eject: with equal weights the live
// nodes keep their points); modula runs over the live nodes. Indices keep
// referring to the full list. Ejections add up: nodes ejected in r stay
// ejected (see Rejoin). It fails for an index out of range, or with
// ErrNoNodes when every node would be ejected.
func (r *Ring) Eject(nodes ...int) (*Ring, error) { return r.setEjected("eject", nodes, true) }

// Rejoin returns a ring in which the given ejected nodes own their keys
// again, as Eject's inverse: a ring ejected and rejoined places every key as
// the original did, except with a libmemcached KETAMA preset and HashAfter,
// whose every rebuild (Eject, Rejoin) values the points with the key hash,
// as libmemcached does.
func (r *Ring) Rejoin(nodes ...int) (*Ring, error) { return r.setEjected("rejoin", nodes, false) }

func (r *Ring) setEjected(verb string, nodes []int, ejected bool) (*Ring, error) {
	members := slices.Clone(r.members)
	for _, i := range nodes {
		if i < 0 || i >= len(members) {
			return nil, fmt.Errorf("ring: %s node %d: index out of range [0, %d)", verb, i, len(members))
		}
		members[i].ejected = ejected
	}
	return build(r.rebuildConfig(), members)
}

// Ejected reports whether node i is ejected (owns no key).
func (r *Ring) Ejected(i int) bool { return r.members[i].ejected }
