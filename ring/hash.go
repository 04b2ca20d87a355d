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
// The set of hashes is closed (the package's Hash variables), so placement
// stays exact and the lookup stays allocation-free. The zero Hash is no
// hash: in a preset's Hash field it stands for the peer's default hash; its
// Point is 0 and its Bits 0.
//
// Each hash is named after what it computes; the package documentation
// lists, for each, its output width and what each peer calls it.
type Hash struct {
	kind hashKind
}

type hashKind uint8

const (
	kindNone hashKind = iota
	kindMurmur64A
	kindMD5
	kindFNV1a64Low32
	kindFNV164Low32
	kindFNV1a32
	kindFNV132
	kindOneAtATime
	kindCRC16Twemproxy
	kindCRC32Bits16to30
	kindCRC32
	kindMurmur2
	kindMurmur3
	kindLookup3
	kindHsiehTwemproxy
	kindXXHash64
	kindCRC32First256
	kindJavaStringHashCode
	numKinds
)

// hashes names every hash and gives the width of its output in bits;
// uniform is false for a hash whose values are not spread over one fixed
// range for keys in general (Shares and Compare refuse it).
var hashes = [numKinds]struct {
	name    string
	bits    int
	uniform bool
}{
	kindNone:               {"none", 0, false},
	kindMurmur64A:          {"Murmur64A", 64, true},
	kindMD5:                {"MD5", 32, true},
	kindFNV1a64Low32:       {"FNV1a64Low32", 32, true},
	kindFNV164Low32:        {"FNV164Low32", 32, true},
	kindFNV1a32:            {"FNV1a32", 32, true},
	kindFNV132:             {"FNV132", 32, true},
	kindOneAtATime:         {"OneAtATime", 32, true},
	kindCRC16Twemproxy:     {"CRC16Twemproxy", 32, false},
	kindCRC32Bits16to30:    {"CRC32Bits16to30", 15, true},
	kindCRC32:              {"CRC32", 32, true},
	kindMurmur2:            {"Murmur2", 32, true},
	kindMurmur3:            {"Murmur3", 32, true},
	kindLookup3:            {"Lookup3", 32, true},
	kindHsiehTwemproxy:     {"HsiehTwemproxy", 32, true},
	kindXXHash64:           {"XXHash64", 64, true},
	kindCRC32First256:      {"CRC32First256", 32, true},
	kindJavaStringHashCode: {"JavaStringHashCode", 32, true},
}

// The hashes. Each is also a plain function (named in its comment) whose
// documentation gives the exact definition, quirks included; the package
// documentation has the table of peer names.
var (
	// HashMurmur64A is MurmurHash64A with seed 0x1234ABCD (JedisMurmurSeed):
	// Jedis's Hashing.MURMUR_HASH (Murmur64A). Jedis reads the result as a
	// signed Java long; the point is that value with its sign bit flipped,
	// so the unsigned order of points is Java's signed order. 64 bits.
	HashMurmur64A = Hash{kindMurmur64A}
	// HashMD5 is the first four bytes of the key's MD5 digest read as a
	// little-endian uint32 (MD5Sum32): "md5" in twemproxy, MEMCACHED_HASH_MD5
	// in libmemcached, Hashing.MD5 in Jedis, KETAMA_HASH in spymemcached.
	HashMD5 = Hash{kindMD5}
	// HashFNV1a64Low32 is FNV-1a 64 computed in its low 32 bits, bytes
	// sign-extended (FNV1a64Twemproxy): twemproxy's "fnv1a_64" (its
	// default) and libmemcached's FNV1A_64. 32 bits, not 64.
	HashFNV1a64Low32 = Hash{kindFNV1a64Low32}
	// HashFNV164Low32 is the low 32 bits of FNV-1 64, bytes sign-extended
	// (FNV164): twemproxy's "fnv1_64", libmemcached's FNV1_64.
	HashFNV164Low32 = Hash{kindFNV164Low32}
	// HashFNV1a32 is FNV-1a 32, bytes sign-extended (FNV1a32): "fnv1a_32".
	HashFNV1a32 = Hash{kindFNV1a32}
	// HashFNV132 is FNV-1 32, bytes sign-extended (FNV132): "fnv1_32".
	HashFNV132 = Hash{kindFNV132}
	// HashOneAtATime is Bob Jenkins' one-at-a-time hash, bytes
	// sign-extended (OneAtATime): twemproxy's "one_at_a_time",
	// libmemcached's ONE_AT_A_TIME and DEFAULT (its default hash).
	HashOneAtATime = Hash{kindOneAtATime}
	// HashCRC16Twemproxy is CRC-16/XMODEM run in an unmasked 32-bit
	// register (CRC16Twemproxy): twemproxy's "crc16". Its values for keys of
	// one or two bytes stay below 2^16 or 2^24, so it is not uniform over
	// one range: Shares and Compare refuse it (ErrInexact).
	HashCRC16Twemproxy = Hash{kindCRC16Twemproxy}
	// HashCRC32Bits16to30 is bits 16 to 30 of the standard CRC-32, a value
	// below 2^15 (CRC32Twemproxy): twemproxy's "crc32", libmemcached's CRC,
	// spymemcached's CRC_HASH. 15 bits.
	HashCRC32Bits16to30 = Hash{kindCRC32Bits16to30}
	// HashCRC32 is the standard CRC-32 (IEEE, crc32.ChecksumIEEE; CRC32a):
	// twemproxy's "crc32a".
	HashCRC32 = Hash{kindCRC32}
	// HashCRC32First256 is the standard CRC-32 of the key's first 256
	// bytes (GomemcacheCRC32): gomemcache's ServerList.
	HashCRC32First256 = Hash{kindCRC32First256}
	// HashMurmur2 is 32-bit MurmurHash2 with seed 0xdeadbeef*len
	// (Murmur2Twemproxy): twemproxy's "murmur", libmemcached's MURMUR.
	HashMurmur2 = Hash{kindMurmur2}
	// HashMurmur3 is MurmurHash3 x86_32 with seed 0xdeadbeef*len
	// (Murmur3Libmemcached): libmemcached's MURMUR3.
	HashMurmur3 = Hash{kindMurmur3}
	// HashLookup3 is Bob Jenkins' lookup3 hashlittle with initval 13
	// (Jenkins): twemproxy's "jenkins", libmemcached's JENKINS.
	HashLookup3 = Hash{kindLookup3}
	// HashHsiehTwemproxy is Paul Hsieh's SuperFastHash started at 0 instead
	// of the key length (Hsieh): twemproxy's "hsieh".
	HashHsiehTwemproxy = Hash{kindHsiehTwemproxy}
	// HashXXHash64 is 64-bit xxHash, seed 0 (XXHash64): go-redis Ring's key
	// and name hash. 64 bits.
	HashXXHash64 = Hash{kindXXHash64}
	// HashJavaStringHashCode is Java's String.hashCode() of the key read as
	// UTF-8, as an unsigned 32-bit value (JavaStringHashCode):
	// spymemcached's NATIVE_HASH, its DefaultConnectionFactory's hash.
	HashJavaStringHashCode = Hash{kindJavaStringHashCode}
)

// JedisMurmurSeed is the seed Jedis passes to MurmurHash64A.
const JedisMurmurSeed = 0x1234ABCD

// String returns the hash's name: its variable's name without "Hash", e.g.
// "Murmur64A" or "FNV1a64Low32"; "none" for the zero Hash.
func (h Hash) String() string {
	if h.kind >= numKinds {
		return "unknown"
	}
	return hashes[h.kind].name
}

// Bits returns the width of the hash's output in bits: every point is below
// 2^Bits (15 for HashCRC32Bits16to30, 64 for HashMurmur64A and
// HashXXHash64, 32 for the others; 0 for the zero Hash).
func (h Hash) Bits() int { return hashes[h.kind].bits }

// Point returns the point of key on the ring, below 2^Bits. (A switch of
// direct calls, not the table's function values, so that key does not
// escape: a caller's stack-allocated key stays on the stack.)
func (h Hash) Point(key []byte) uint64 {
	switch h.kind {
	case kindMurmur64A:
		return Murmur64A(key, JedisMurmurSeed) ^ (1 << 63)
	case kindMD5:
		return uint64(MD5Sum32(key))
	case kindFNV1a64Low32:
		return uint64(FNV1a64Twemproxy(key))
	case kindFNV164Low32:
		return uint64(FNV164(key))
	case kindFNV1a32:
		return uint64(FNV1a32(key))
	case kindFNV132:
		return uint64(FNV132(key))
	case kindOneAtATime:
		return uint64(OneAtATime(key))
	case kindCRC16Twemproxy:
		return uint64(CRC16Twemproxy(key))
	case kindCRC32Bits16to30:
		return uint64(CRC32Twemproxy(key))
	case kindCRC32:
		return uint64(CRC32a(key))
	case kindMurmur2:
		return uint64(Murmur2Twemproxy(key))
	case kindMurmur3:
		return uint64(Murmur3Libmemcached(key))
	case kindLookup3:
		return uint64(Jenkins(key))
	case kindHsiehTwemproxy:
		return uint64(Hsieh(key))
	case kindXXHash64:
		return XXHash64(key)
	case kindCRC32First256:
		return uint64(GomemcacheCRC32(key))
	case kindJavaStringHashCode:
		return uint64(JavaStringHashCode(key))
	}
	return 0
}

// valid reports whether h is one of the package's hashes.
func (h Hash) valid() bool { return h.kind > kindNone && h.kind < numKinds }

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
