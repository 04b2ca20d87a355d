package ring

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// ErrInexact is wrapped by the errors of Shares and Compare for a ring
// whose key hash has no fixed output range over which its values spread
// (HashCRC16Twemproxy, whose values for short keys stay low): no fraction of
// a hash space says what share of keys a node gets. Test with errors.Is;
// errors.As gives the *InexactError.
var ErrInexact = errors.New("ring: shares cannot be computed exactly")

// InexactError is the error of Shares and Compare for a hash that is not
// uniform over one range (see ErrInexact).
type InexactError struct {
	Hash Hash // the ring's key hash
}

func (e *InexactError) Error() string {
	return fmt.Sprintf("ring: hash %v has no fixed output range (its values depend on the key length), so shares of the hash space are not shares of keys", e.Hash)
}

// Is makes errors.Is(err, ErrInexact) true.
func (e *InexactError) Is(target error) bool { return target == ErrInexact }

// exact fails for a ring whose key hash has no fixed range.
func (r *Ring) exact() error {
	if !hashes[r.cfg.hash.kind].uniform {
		return &InexactError{Hash: r.cfg.hash}
	}
	return nil
}

// Shares returns, for each node in list order, the exact fraction of the
// key hash's output range, [0, 2^Bits), that it owns: keys whose hashes
// spread evenly over that range land on a node with that probability. On a
// consistent ring a node owns the hashes from the point before each of its
// points up to that point; the range is the key hash's, not the points'
// (HashCRC32Bits16to30's keys lie below 2^15, so on a ketama ring, whose
// points are 32-bit, they mostly belong to the owner of the lowest point).
// Lengths are summed as integers and divided once, so a node that owns the
// whole range gets exactly 1.
//
// For a modulo preset a node's share is its count of hash values h below
// 2^Bits with h % slots falling in its slots, divided by 2^Bits; for
// rendezvous hashing it is 1/live nodes (each live node is equally likely
// to score highest, for scores independent and uniform). It fails with an
// *InexactError (ErrInexact) for a hash with no fixed range.
func (r *Ring) Shares() ([]float64, error) {
	if err := r.exact(); err != nil {
		return nil, err
	}
	width := r.cfg.hash.Bits()
	sums := make([]arcSum, len(r.members))
	switch r.cfg.dist {
	case distModula:
		q, rem := modCounts(width, len(r.slots))
		for s, node := range r.slots {
			sums[node].add(countMod(q, rem, s))
		}
	case distRendezvous:
		shares := make([]float64, len(r.members))
		for i, m := range r.members {
			if !m.ejected {
				shares[i] = 1 / float64(r.live)
			}
		}
		return shares, nil
	default:
		spans(width, func(yield func(uint64)) {
			for _, v := range r.vnodes {
				yield(v.point)
			}
		}, func(end, lo, hi uint64) { sums[r.LocatePoint(end)].addSpan(lo, hi) })
	}
	shares := make([]float64, len(sums))
	for i := range sums {
		shares[i] = sums[i].fraction(width)
	}
	return shares, nil
}

// modCounts returns q and rem such that 2^width = q*n + rem: of the values
// below 2^width, q+1 have a remainder modulo n below rem, q each other one.
func modCounts(width, n int) (q, rem uint64) {
	if width == 64 {
		q, rem = ^uint64(0)/uint64(n), ^uint64(0)%uint64(n)+1
		if rem == uint64(n) {
			q, rem = q+1, 0
		}
		return q, rem
	}
	return (uint64(1) << width) / uint64(n), (uint64(1) << width) % uint64(n)
}

// countMod returns how many values below 2^width are s modulo n, given
// modCounts(width, n).
func countMod(q, rem uint64, s int) uint64 {
	if uint64(s) < rem {
		return q + 1
	}
	return q
}

// arcSum is a 128-bit count of hash values.
type arcSum struct{ hi, lo uint64 }

// add adds n.
func (s *arcSum) add(n uint64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, n, 0)
	s.hi += carry
}

// addSpan adds the length of [lo, hi], which may be 2^64.
func (s *arcSum) addSpan(lo, hi uint64) {
	s.add(hi - lo)
	s.add(1)
}

// fraction returns the sum as a fraction of a range 2^width values long.
func (s arcSum) fraction(width int) float64 {
	return math.Ldexp(float64(s.hi), 64-width) + math.Ldexp(float64(s.lo), -width)
}

// spans calls f(end, lo, hi) for each stretch [lo, hi] of hash values
// below 2^width whose owner is that of point end, given the sorted,
// duplicate-free points of a consistent ring (which may lie above 2^width:
// ketama's points are 32-bit whatever the key hash). The point end owns
// the values after the point before it, up to end; the lowest point also
// owns those above the highest one, wrapping.
func spans(width int, points func(yield func(uint64)), f func(end, lo, hi uint64)) {
	top := maxPoint(width)
	var first, prev uint64
	n := 0
	points(func(p uint64) {
		switch {
		case n == 0:
			first = p
		case prev < top:
			f(p, prev+1, min(p, top))
		}
		prev = p
		n++
	})
	if n == 0 {
		return
	}
	// The lowest point owns [0, first] and (prev, top].
	f(first, 0, min(first, top))
	if prev < top {
		f(first, prev+1, top)
	}
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
// computed over the key hash's whole range, not by sampling: the fraction
// of hash values below 2^Bits whose owner changes (see Shares). A node of a
// and a node of b are the same node when they have the same ID: the same
// address, or, without one, the same name, ketama label, or (both unnamed)
// slot (list position at creation; Add and RemoveKeepingSlots keep it). So
// a node that keeps its name but changes address gives all its keys to the
// new address, and an unnamed Jedis node that shifts position in the list
// keeps none of the keys it had.
//
// It fails when the rings hash keys differently (another hash, tag rule or
// empty-key rule: a key's hash would not be the same in both), when their
// distributions differ (consistent, modulo, rendezvous), with an
// *InexactError for a hash with no fixed range, and for modulo rings whose
// slot lists repeat only after more than 2^24 slots. Modulo rings are
// compared exactly over the whole range; rendezvous hashing by its
// probabilities (a key moves when the highest scorer of the two node sets
// together is a node not in both).
func Compare(a, b *Ring) (Diff, error) {
	same := make([]int, len(b.members)) // node of b -> same node of a, or -1
	for j := range b.members {
		same[j] = a.Index(b.ID(j))
	}
	return CompareMatched(a, b, same)
}

// CompareMatched is Compare with the nodes of b matched to those of a by
// same, of b.Len() indices: same[j] is the node of a that node j of b is,
// or -1 for a node new in b. A caller that knows two IDs to be one node
// (an address written two ways that reaches one server) matches them so.
// It fails, besides Compare's errors, when same has another length or an
// index out of a's range.
func CompareMatched(a, b *Ring, same []int) (Diff, error) {
	ka, kb := a.cfg, b.cfg
	if ka.hash != kb.hash || ka.tag != kb.tag || ka.emptyKeyZero != kb.emptyKeyZero || ka.dist != kb.dist {
		return Diff{}, fmt.Errorf("ring: cannot compare %v with %v: keys are hashed or distributed differently", ka.preset, kb.preset)
	}
	if len(same) != len(b.members) || slices.ContainsFunc(same, func(i int) bool { return i < -1 || i >= len(a.members) }) {
		return Diff{}, fmt.Errorf("ring: %d matches for %d nodes of %d: each is a node index of a or -1", len(same), len(b.members), len(a.members))
	}
	if err := a.exact(); err != nil {
		return Diff{}, err
	}
	switch a.cfg.dist {
	case distModula:
		return compareModula(a, b, same)
	case distRendezvous:
		return compareRendezvous(a, b, same), nil
	}
	width := a.cfg.hash.Bits()
	moved := make(map[[2]int]*arcSum)
	spans(width, func(yield func(uint64)) { mergePoints(a.vnodes, b.vnodes, yield) },
		func(end, lo, hi uint64) {
			from, to := a.LocatePoint(end), b.LocatePoint(end)
			if same[to] == from {
				return
			}
			k := [2]int{from, to}
			if moved[k] == nil {
				moved[k] = &arcSum{}
			}
			moved[k].addSpan(lo, hi)
		})
	return newDiff(a, b, fractions(moved, width)), nil
}

// fractions turns counts of hash values into fractions of 2^width.
func fractions(moved map[[2]int]*arcSum, width int) map[[2]int]float64 {
	shares := make(map[[2]int]float64, len(moved))
	for k, sum := range moved {
		shares[k] = sum.fraction(width)
	}
	return shares
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

// compareModula counts, for each (from, to) pair, the hash values h below
// 2^Bits with a.slots[h % la] = from and b.slots[h % lb] = to: the pairs
// repeat every period = lcm(la, lb) values, so the count is q times a
// period's plus the first rem values', where 2^Bits = q*period + rem.
func compareModula(a, b *Ring, same []int) (Diff, error) {
	la, lb := len(a.slots), len(b.slots)
	period := la / gcd(la, lb) * lb
	if period > maxPeriod {
		return Diff{}, fmt.Errorf("ring: slot lists of %d and %d repeat only every %d slots", la, lb, period)
	}
	width := a.cfg.hash.Bits()
	q, rem := modCounts(width, period)
	moved := map[[2]int]*arcSum{}
	for h := range period {
		from, to := int(a.slots[h%la]), int(b.slots[h%lb])
		if same[to] == from {
			continue
		}
		k := [2]int{from, to}
		if moved[k] == nil {
			moved[k] = &arcSum{}
		}
		moved[k].add(countMod(q, rem, h))
	}
	return newDiff(a, b, fractions(moved, width)), nil
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
