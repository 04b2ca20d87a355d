package ring

import "math/bits"

// index finds the first vnode at or after a point in O(1) expected time.
//
// A plain binary search over 160,000 vnodes (1,000 nodes) takes 17 probes,
// each a likely cache miss. The index cuts the span of points, [lo, lo+span],
// into 2^k equal buckets, k chosen so there are about as many buckets as
// vnodes, and records for each bucket the first vnode in it or after it. A
// lookup reads one bucket entry and its successor, and binary-searches the
// few vnodes between them: one or two cache lines instead of seventeen.
// Basing the buckets on the span actually used (not the full 2^64) keeps
// them even for 32-bit hashes and for clustered points.
type index struct {
	lo, span uint64   // points lie in [lo, lo+span]
	shift    uint     // bucket of point p is (p-lo) >> shift
	first    []uint32 // first[b]: first vnode whose bucket is >= b; len 2^k + 1
}

func newIndex(vnodes []vnode) index {
	lo, hi := vnodes[0].point, vnodes[len(vnodes)-1].point
	span := hi - lo
	k := bits.Len(uint(len(vnodes))) // 2^k >= number of vnodes
	shift := 0
	if used := bits.Len64(span); used > k {
		shift = used - k
	}
	buckets := int(span>>shift) + 1
	first := make([]uint32, buckets+1)
	v := 0
	for b := range first {
		for v < len(vnodes) && int((vnodes[v].point-lo)>>shift) < b {
			v++
		}
		first[b] = uint32(v)
	}
	return index{lo: lo, span: span, shift: uint(shift), first: first}
}

// search returns the position in vnodes of the first vnode whose point is
// >= p, or 0 (the lowest vnode) when p is above every vnode.
func (x *index) search(vnodes []vnode, p uint64) int {
	d := p - x.lo
	if d > x.span {
		// Below the lowest vnode (d wrapped around) or above the highest:
		// the lowest vnode owns p either way.
		return 0
	}
	b := d >> x.shift
	i, j := int(x.first[b]), int(x.first[b+1])
	// vnodes[j], the first vnode of a later bucket, is > p; it exists
	// because p <= the highest point. Binary search in [i, j).
	for i < j {
		h := int(uint(i+j) >> 1)
		if vnodes[h].point < p {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}
