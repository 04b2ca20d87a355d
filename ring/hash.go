package ring

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
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
	kindFNV1a64
	kindFNV164
	kindFNV1a32
	kindFNV132
	kindOneAtATime
	kindCRC16
	kindCRC32
	kindCRC32a
	kindMurmur
	kindMurmur3
	kindJenkins
	kindHsieh
	kindXXHash64
	kindGomemcacheCRC32
	numKinds
)

// hashes names every hash and gives its ring width; Point computes it.
var hashes = [numKinds]struct {
	name string
	bits int
}{
	kindMurmur64A:       {"MurmurHash64A", 64},
	kindJedisMD5:        {"JedisMD5", 32},
	kindFNV1a64:         {"fnv1a_64", 32},
	kindFNV164:          {"fnv1_64", 32},
	kindFNV1a32:         {"fnv1a_32", 32},
	kindFNV132:          {"fnv1_32", 32},
	kindOneAtATime:      {"one_at_a_time", 32},
	kindCRC16:           {"crc16", 32},
	kindCRC32:           {"crc32", 32},
	kindCRC32a:          {"crc32a", 32},
	kindMurmur:          {"murmur", 32},
	kindMurmur3:         {"murmur3", 32},
	kindJenkins:         {"jenkins", 32},
	kindHsieh:           {"hsieh", 32},
	kindXXHash64:        {"xxhash64", 64},
	kindGomemcacheCRC32: {"gomemcache_crc32", 32},
}

var (
	// MurmurHash64A is Jedis's Hashing.MURMUR_HASH: Austin Appleby's
	// MurmurHash64A with seed 0x1234ABCD over the key's bytes. Jedis reads the
	// result as a signed Java long; the point is that value with its sign bit
	// flipped, so the unsigned order of points is Java's signed order.
	// The ring is 64 bits wide. It is the default.
	MurmurHash64A = Hash{kindMurmur64A}

	// JedisMD5 is Jedis's Hashing.MD5, which is also libketama's,
	// libmemcached's and twemproxy's "md5" key hash: the first four bytes of
	// the key's MD5 digest read as a little-endian unsigned 32-bit integer
	// (MD5Sum32). The ring is 32 bits wide, so vnode collisions are possible
	// on large rings.
	JedisMD5 = Hash{kindJedisMD5}

	// The key hashes of twemproxy 0.5.0 and libmemcached 1.1.4 (32 bits;
	// see the functions of the same algorithms for their exact
	// definitions, quirks included), go-redis's and gomemcache's.
	HashFNV1a64         = Hash{kindFNV1a64}         // twemproxy "fnv1a_64" (its default), libmemcached FNV1A_64: FNV1a64Twemproxy
	HashFNV164          = Hash{kindFNV164}          // "fnv1_64": FNV164
	HashFNV1a32         = Hash{kindFNV1a32}         // "fnv1a_32": FNV1a32
	HashFNV132          = Hash{kindFNV132}          // "fnv1_32": FNV132
	HashOneAtATime      = Hash{kindOneAtATime}      // "one_at_a_time", libmemcached's default: OneAtATime
	HashCRC16           = Hash{kindCRC16}           // twemproxy "crc16": CRC16Twemproxy
	HashCRC32           = Hash{kindCRC32}           // twemproxy "crc32", libmemcached CRC (15 bits): CRC32Twemproxy
	HashCRC32a          = Hash{kindCRC32a}          // twemproxy "crc32a": CRC32a
	HashMurmur          = Hash{kindMurmur}          // "murmur", MurmurHash2: Murmur2Twemproxy
	HashMurmur3         = Hash{kindMurmur3}         // libmemcached MURMUR3: Murmur3Libmemcached
	HashJenkins         = Hash{kindJenkins}         // "jenkins", lookup3: Jenkins
	HashHsieh           = Hash{kindHsieh}           // "hsieh": Hsieh
	HashXXHash64        = Hash{kindXXHash64}        // go-redis Ring's key hash: XXHash64 (64 bits)
	HashGomemcacheCRC32 = Hash{kindGomemcacheCRC32} // gomemcache ServerList: GomemcacheCRC32
)

// JedisMurmurSeed is the seed Jedis passes to MurmurHash64A.
const JedisMurmurSeed = 0x1234ABCD

// String returns the hash's name, e.g. "MurmurHash64A" or "fnv1a_64".
func (h Hash) String() string {
	if !h.valid() {
		return "unknown"
	}
	return hashes[h.kind].name
}

// Bits returns the width of the ring in bits: every point is below 2^Bits.
func (h Hash) Bits() int { return hashes[h.kind].bits }

// Point returns the point of key on the ring, below 2^Bits. (A switch of
// direct calls, not the table's function values, so that key does not
// escape: a caller's stack-allocated key stays on the stack.)
func (h Hash) Point(key []byte) uint64 {
	switch h.kind {
	case kindMurmur64A:
		return Murmur64A(key, JedisMurmurSeed) ^ (1 << 63)
	case kindJedisMD5:
		return uint64(MD5Sum32(key))
	case kindFNV1a64:
		return uint64(FNV1a64Twemproxy(key))
	case kindFNV164:
		return uint64(FNV164(key))
	case kindFNV1a32:
		return uint64(FNV1a32(key))
	case kindFNV132:
		return uint64(FNV132(key))
	case kindOneAtATime:
		return uint64(OneAtATime(key))
	case kindCRC16:
		return uint64(CRC16Twemproxy(key))
	case kindCRC32:
		return uint64(CRC32Twemproxy(key))
	case kindCRC32a:
		return uint64(CRC32a(key))
	case kindMurmur:
		return uint64(Murmur2Twemproxy(key))
	case kindMurmur3:
		return uint64(Murmur3Libmemcached(key))
	case kindJenkins:
		return uint64(Jenkins(key))
	case kindHsieh:
		return uint64(Hsieh(key))
	case kindXXHash64:
		return XXHash64(key)
	case kindGomemcacheCRC32:
		return uint64(GomemcacheCRC32(key))
	}
	return 0
}

// valid reports whether h is one of the package's hashes (the zero Hash is
// MurmurHash64A).
func (h Hash) valid() bool { return h.kind < numKinds }

// XXHash64 returns the 64-bit xxHash of data (seed 0), the key and name hash
// of go-redis's Ring, from github.com/cespare/xxhash/v2.
func XXHash64(data []byte) uint64 { return xxhash.Sum64(data) }

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

// maxPoint returns the largest point on a ring of the given width in bits.
func maxPoint(width int) uint64 {
	return ^uint64(0) >> (64 - width)
}
