package ring

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Shares returns, for each node in list order, the exact fraction of the
// hash space it owns: the summed lengths of the arcs that end at its vnodes,
// divided by 2^Bits. Lengths are summed as integers and divided once, so a
// node that owns the whole ring gets exactly 1. Keys hashed uniformly land on
// a node with that probability.
//
// For a modulo preset a node's share is its fraction of the slots; for
// rendezvous hashing it is 1/live nodes (each node is equally likely to
// score highest). Both assume a hash uniform over the keys.
func (r *Ring) Shares() []float64 {
	switch r.cfg.dist {
	case distModula:
		shares := make([]float64, len(r.members))
		for _, s := range r.slots {
			shares[s] += 1 / float64(len(r.slots))
		}
		return shares
	case distRendezvous:
		shares := make([]float64, len(r.members))
		for i, m := range r.members {
			if !m.ejected {
				shares[i] = 1 / float64(r.live)
			}
		}
		return shares
	}
	sums := make([]arcSum, len(r.members))
	arcs(r.cfg.hash.Bits(), func(yield func(uint64)) {
		for _, v := range r.vnodes {
			yield(v.point)
		}
	}, func(a arc) { sums[r.LocatePoint(a.end)].add(a) })
	shares := make([]float64, len(sums))
	for i := range sums {
		shares[i] = sums[i].fraction(r.cfg.hash.Bits())
	}
	return shares
}

// arc is the part of the ring after one point up to and including the next
// one, end. whole marks the entire ring (a single point), whose length 2^64
// does not fit in length.
type arc struct {
	end, length uint64
	whole       bool
}

// arcSum is a 128-bit sum of arc lengths.
type arcSum struct{ hi, lo uint64 }

func (s *arcSum) add(a arc) {
	if a.whole {
		s.hi++ // 2^64, the whole of the widest ring
		return
	}
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, a.length, 0)
	s.hi += carry
}

// fraction returns the sum as a fraction of a ring 2^width points long.
func (s arcSum) fraction(width int) float64 {
	return math.Ldexp(float64(s.hi), 64-width) + math.Ldexp(float64(s.lo), -width)
}

// arcs calls f for each arc between consecutive points of a sorted,
// duplicate-free sequence on a ring of the given width. The arc that ends at
// the first point starts after the last one and wraps around.
func arcs(width int, points func(yield func(uint64)), f func(arc)) {
	var first, prev uint64
	n := 0
	points(func(p uint64) {
		if n == 0 {
			first = p
		} else {
			f(arc{end: p, length: p - prev})
		}
		prev = p
		n++
	})
	if n == 1 {
		if width < 64 {
			f(arc{end: first, length: 1 << width})
		} else {
			f(arc{end: first, whole: true})
		}
		return
	}
	// The wrap-around arc, (prev, 2^width) and [0, first], is
	// 2^width + first - prev long: first-prev modulo 2^width.
	f(arc{end: first, length: (first - prev) & maxPoint(width)})
}

// Move is the share of the hash space whose owner changes from node From of
// one ring to node To of another.
type Move struct {
	From, To int     // indices in the old and the new ring's node lists
	Share    float64 // fraction of the hash space, in (0, 1]
}

// Diff is the exact change of ownership between two rings over the same hash.
type Diff struct {
	// Moved is the fraction of the hash space whose owner changes: the
	// fraction of uniformly hashed keys that move.
	Moved float64
	// Moves lists the changes per (from, to) pair of nodes, ordered by From
	// then To. Shares that stay with their node are not listed.
	Moves []Move

	from, to []Node
}

// Compare returns the exact change of ownership from ring a to ring b,
// computed over the arcs of both rings, not by sampling. A node of a and a
// node of b are the same node when they have the same ID: the same address,
// or, without one, the same name, ketama label, or (both unnamed) slot
// (list position at creation; Add and RemoveKeepingSlots keep it). So a node that keeps
// its name but changes address gives all its keys to the new address, and
// an unnamed Jedis node that shifts position in the list keeps none of the
// keys it had. It fails when the rings use different hashes or
// distributions.
//
// Modulo presets are compared over one period of both slot lists (exact
// for a hash uniform modulo their lengths); rendezvous hashing by its
// probabilities (a key moves when the highest scorer of the two node sets
// together is a node not in both).
func Compare(a, b *Ring) (Diff, error) {
	if a.cfg.hash != b.cfg.hash || a.cfg.dist != b.cfg.dist {
		return Diff{}, fmt.Errorf("ring: cannot compare rings over different hashes or distributions (%v and %v)", a.cfg.hash, b.cfg.hash)
	}
	same := make([]int, len(b.members)) // node of b -> same node of a, or -1
	for j := range b.members {
		same[j] = a.Index(b.ID(j))
	}
	switch a.cfg.dist {
	case distModula:
		return compareModula(a, b, same)
	case distRendezvous:
		return compareRendezvous(a, b, same), nil
	}
	moved := make(map[[2]int]*arcSum)
	var total arcSum
	arcs(a.cfg.hash.Bits(), func(yield func(uint64)) { mergePoints(a.vnodes, b.vnodes, yield) },
		func(arc arc) {
			from, to := a.LocatePoint(arc.end), b.LocatePoint(arc.end)
			if same[to] == from {
				return
			}
			k := [2]int{from, to}
			if moved[k] == nil {
				moved[k] = &arcSum{}
			}
			moved[k].add(arc)
			total.add(arc)
		})
	shares := make(map[[2]int]float64, len(moved))
	for k, sum := range moved {
		shares[k] = sum.fraction(a.cfg.hash.Bits())
	}
	return newDiff(a, b, shares), nil
}

// newDiff builds a Diff from the shares that move per (from, to) pair.
func newDiff(a, b *Ring, moved map[[2]int]float64) Diff {
	d := Diff{from: a.Nodes(), to: b.Nodes()}
	for k, share := range moved {
		d.Moves = append(d.Moves, Move{From: k[0], To: k[1], Share: share})
		d.Moved += share
	}
	slices.SortFunc(d.Moves, func(x, y Move) int {
		if x.From != y.From {
			return x.From - y.From
		}
		return x.To - y.To
	})
	return d
}

// maxPeriod bounds the slot-list period compareModula walks.
const maxPeriod = 1 << 24

func compareModula(a, b *Ring, same []int) (Diff, error) {
	la, lb := len(a.slots), len(b.slots)
	period := la / gcd(la, lb) * lb
	if period > maxPeriod {
		return Diff{}, fmt.Errorf("ring: slot lists of %d and %d repeat only every %d slots", la, lb, period)
	}
	moved := map[[2]int]float64{}
	for h := range period {
		from, to := int(a.slots[h%la]), int(b.slots[h%lb])
		if same[to] != from {
			moved[[2]int{from, to}] += 1 / float64(period)
		}
	}
	return newDiff(a, b, moved), nil
}

func gcd(x, y int) int {
	for y != 0 {
		x, y = y, x%y
	}
	return x
}

// compareRendezvous: with independent uniform scores, the top scorer of the
// union U of both rings' live nodes is uniform over U. When it is in both
// rings the key stays; when it is only in a, the key leaves it for b's top
// scorer, uniform over b's live nodes; when only in b, it comes from a's
// top scorer, uniform over a's.
func compareRendezvous(a, b *Ring, same []int) Diff {
	inB := map[int]int{} // node of a -> same node of b
	var liveA, liveB []int
	for i, m := range a.members {
		if !m.ejected {
			liveA = append(liveA, i)
		}
	}
	for j, m := range b.members {
		if !m.ejected {
			liveB = append(liveB, j)
			if same[j] >= 0 && !a.members[same[j]].ejected {
				inB[same[j]] = j
			}
		}
	}
	union := float64(len(liveA) + len(liveB) - len(inB))
	moved := map[[2]int]float64{}
	for _, i := range liveA {
		if _, ok := inB[i]; !ok {
			for _, j := range liveB {
				moved[[2]int{i, j}] += 1 / union / float64(len(liveB))
			}
		}
	}
	for _, j := range liveB {
		if same[j] < 0 || a.members[same[j]].ejected {
			for _, i := range liveA {
				moved[[2]int{i, j}] += 1 / union / float64(len(liveA))
			}
		}
	}
	return newDiff(a, b, moved)
}

// Owners returns the owner of key in ring before and in ring after (indices
// in each ring's node list), and whether it changes: whether they are
// different nodes by the identity Compare uses.
func Owners(before, after *Ring, key string) (from, to int, moved bool) {
	from, to = before.Locate(key), after.Locate(key)
	return from, to, before.ID(from) != after.ID(to)
}

// mergePoints yields the union of two sorted point lists, in order, once each.
func mergePoints(a, b []vnode, yield func(uint64)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].point < b[j].point):
			yield(a[i].point)
			i++
		case i == len(a) || b[j].point < a[i].point:
			yield(b[j].point)
			j++
		default:
			yield(a[i].point)
			i++
			j++
		}
	}
}

// String prints the diff as a table, one row per move.
func (d Diff) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "moved %.4f%% of the hash space\n", 100*d.Moved)
	for _, m := range d.Moves {
		fmt.Fprintf(&sb, "  %-20s -> %-20s %8.4f%%\n", nodeLabel(d.from, m.From), nodeLabel(d.to, m.To), 100*m.Share)
	}
	return sb.String()
}

func nodeLabel(nodes []Node, i int) string {
	if i < len(nodes) && nodes[i].Name != "" {
		return nodes[i].Name
	}
	return fmt.Sprintf("#%d", i)
}
