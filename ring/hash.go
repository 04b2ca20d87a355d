package ring

import (
	"crypto/md5"
	"encoding/binary"
)

// Hash is a hash function for the ring: it maps a key's bytes to a point, an
// unsigned integer below 2^Bits(). Points are ordered as unsigned integers;
// a hash whose peer orders its values otherwise (Jedis orders signed Java
// longs) maps them to points that keep the peer's order.
//
// The set of hashes is closed (the package's variables), so placement stays
// exact and the lookup stays allocation-free.
type Hash struct {
	kind hashKind
}

type hashKind uint8

const (
	kindMurmur64A hashKind = iota
	kindJedisMD5
)

var (
	// MurmurHash64A is Jedis's Hashing.MURMUR_HASH: Austin Appleby's
	// MurmurHash64A with seed 0x1234ABCD over the key's bytes. Jedis reads the
	// result as a signed Java long; the point is that value with its sign bit
	// flipped, so the unsigned order of points is Java's signed order.
	// The ring is 64 bits wide. It is the default.
	MurmurHash64A = Hash{kindMurmur64A}

	// JedisMD5 is Jedis's Hashing.MD5: the first four bytes of the key's MD5
	// digest read as a little-endian unsigned 32-bit integer. The ring is 32
	// bits wide, so vnode collisions are possible on large rings (the later
	// node wins, as in Jedis).
	JedisMD5 = Hash{kindJedisMD5}
)

// JedisMurmurSeed is the seed Jedis passes to MurmurHash64A.
const JedisMurmurSeed = 0x1234ABCD

// String returns the hash's name, e.g. "MurmurHash64A".
func (h Hash) String() string {
	switch h.kind {
	case kindMurmur64A:
		return "MurmurHash64A"
	case kindJedisMD5:
		return "JedisMD5"
	}
	return "unknown"
}

// Bits returns the width of the ring in bits: every point is below 2^Bits.
func (h Hash) Bits() int {
	if h.kind == kindJedisMD5 {
		return 32
	}
	return 64
}

// Point returns the point of key on the ring, below 2^Bits.
func (h Hash) Point(key []byte) uint64 {
	switch h.kind {
	case kindJedisMD5:
		return uint64(JedisMD5Sum(key))
	default:
		return Murmur64A(key, JedisMurmurSeed) ^ (1 << 63)
	}
}

// valid reports whether h is one of the package's hashes (the zero Hash is
// MurmurHash64A).
func (h Hash) valid() bool { return h.kind <= kindJedisMD5 }

// Murmur64A returns MurmurHash64A of data with the given seed, as published
// by Austin Appleby (MurmurHash2, 64-bit version for 64-bit platforms): 8-byte
// little-endian blocks, the 1-7 tail bytes read as one zero-padded
// little-endian word. Jedis's MurmurHash.hash64A returns the same 64 bits as
// a signed long.
func Murmur64A(data []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ (uint64(len(data)) * m)
	for len(data) >= 8 {
		k := binary.LittleEndian.Uint64(data)
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		data = data[8:]
	}
	if len(data) > 0 {
		var tail uint64
		for i := len(data) - 1; i >= 0; i-- {
			tail = tail<<8 | uint64(data[i])
		}
		h ^= tail
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// JedisMD5Sum returns Jedis's Hashing.MD5 of data: bytes 0-3 of the MD5
// digest as a little-endian unsigned 32-bit integer.
func JedisMD5Sum(data []byte) uint32 {
	d := md5.Sum(data)
	return binary.LittleEndian.Uint32(d[:4])
}

// maxPoint returns the largest point on a ring of the given width in bits.
func maxPoint(width int) uint64 {
	return ^uint64(0) >> (64 - width)
}
