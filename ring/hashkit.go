package ring

// Key hash functions of twemproxy 0.5.0 (src/hashkit) and libmemcached 1.1.4
// (libhashkit), bit for bit as the peers compute them on linux/amd64.
//
// Every function takes the key's raw bytes and returns the unsigned 32-bit
// value the peer hands to its distribution (ketama or modula). They allocate
// nothing and do not retain the slice.
//
// Several of the C functions read key bytes through a plain `char`, which is
// signed on amd64: a byte b >= 0x80 enters the arithmetic as 0xFFFFFF00|b (or
// 0xFFFFFFFFFFFFFF00|b in 64-bit arithmetic). The functions documented as
// "signed bytes" reproduce that sign extension; for ASCII keys it makes no
// difference, for non-ASCII keys (e.g. "café") it changes the hash.
//
// hash/crc32 dispatches through a function variable, so Go's escape analysis
// treats the key passed to CRC32Twemproxy, CRC32a and GomemcacheCRC32 as
// escaping (it is not retained). A caller that passes a stack buffer or a
// []byte(string) conversion to one of those three pays one heap allocation in
// its own frame; the other functions let such keys stay on the stack.
//
// Empty keys: each function returns its algorithm's value for zero bytes (see
// each doc comment). twemproxy's dispatch never calls a hash for an empty key
// (after hash-tag extraction): it routes it as hash value 0. That rule
// belongs to the caller, not to these functions.

import (
	"crypto/md5"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// hkSX32 is a C signed char promoted to uint32: bytes >= 0x80 are
// sign-extended to 0xFFFFFF80..0xFFFFFFFF.
func hkSX32(b byte) uint32 { return uint32(int32(int8(b))) }

// MD5Sum32 is twemproxy's "md5" (twemproxy 0.5.0 src/hashkit/nc_md5.c,
// hash_md5) and libmemcached's MEMCACHED_HASH_MD5 (libmemcached 1.1.4
// libhashkit): the MD5 digest of the key, of which the first 4 bytes are
// read as a little-endian uint32. It is also the value of every ketama point
// (4 points per digest, from bytes 0–3, 4–7, 8–11 and 12–15).
// "key:0" gives 0x82ab86df; the empty key gives 0xd98c1dd4.
func MD5Sum32(key []byte) uint32 {
	d := md5.Sum(key)
	return binary.LittleEndian.Uint32(d[:4])
}

// FNV1a64Twemproxy is twemproxy's "fnv1a_64", its default key hash
// (twemproxy 0.5.0 src/hashkit/nc_fnv.c, hash_fnv1a_64), and libmemcached's
// MEMCACHED_HASH_FNV1A_64 (libmemcached 1.1.4 libhashkit).
//
// Despite the name it is a 32-bit computation: h starts at 0x84222325 (the low
// half of the FNV-64 offset basis) and for each byte h ^= b; h *= 0x1b3 (the
// low half of the FNV-64 prime), mod 2^32. Bytes are signed: b >= 0x80 is
// xored in as 0xFFFFFF00|b. For ASCII keys the result is the low 32 bits of a
// true FNV-1a-64; for "café" it is 0xcef6bb89 (unsigned bytes would give
// 0xcfa40d89). The tiny multiplier spreads similar keys badly.
// The empty key gives 0x84222325.
func FNV1a64Twemproxy(key []byte) uint32 { return fnv1a(key, 0x84222325, 0x1b3) }

// FNV164 is twemproxy's "fnv1_64" (twemproxy 0.5.0 src/hashkit/nc_fnv.c,
// hash_fnv1_64) and libmemcached's MEMCACHED_HASH_FNV1_64 (libmemcached 1.1.4
// libhashkit): FNV-1 with a real 64-bit state, h = 0xcbf29ce484222325 and for
// each byte h *= 0x100000001b3; h ^= b, returning the low 32 bits uint32(h).
// Bytes are signed, extended to 64 bits (0xFFFFFFFFFFFFFF00|b for b >= 0x80).
// For ASCII keys this is the low 32 bits of a true FNV-1-64. Only the low 32
// bits are returned, so it is computed as the same loop in 32 bits with basis
// 0x84222325 and prime 0x1b3 (the low halves). The empty key gives 0x84222325.
func FNV164(key []byte) uint32 { return fnv1(key, 0x84222325, 0x1b3) }

// FNV1a32 is twemproxy's "fnv1a_32" (twemproxy 0.5.0 src/hashkit/nc_fnv.c,
// hash_fnv1a_32) and libmemcached's MEMCACHED_HASH_FNV1A_32 (libmemcached
// 1.1.4 libhashkit): FNV-1a-32, h = 0x811c9dc5 and for each byte h ^= b;
// h *= 0x01000193. Bytes are signed (0xFFFFFF00|b for b >= 0x80), so it
// equals hash/fnv's New32a only for ASCII keys. The empty key gives
// 0x811c9dc5.
func FNV1a32(key []byte) uint32 { return fnv1a(key, 0x811c9dc5, 0x01000193) }

// FNV132 is twemproxy's "fnv1_32" (twemproxy 0.5.0 src/hashkit/nc_fnv.c,
// hash_fnv1_32) and libmemcached's MEMCACHED_HASH_FNV1_32 (libmemcached 1.1.4
// libhashkit): FNV-1-32, h = 0x811c9dc5 and for each byte h *= 0x01000193;
// h ^= b. Bytes are signed (0xFFFFFF00|b for b >= 0x80), so it equals
// hash/fnv's New32 only for ASCII keys. The empty key gives 0x811c9dc5.
func FNV132(key []byte) uint32 { return fnv1(key, 0x811c9dc5, 0x01000193) }

// fnv1a is the FNV-1a loop in 32 bits from basis h with prime p, over
// sign-extended bytes (twemproxy's and libmemcached's C char).
func fnv1a(key []byte, h, p uint32) uint32 {
	for _, b := range key {
		h ^= hkSX32(b)
		h *= p
	}
	return h
}

// fnv1 is the FNV-1 loop (multiply, then xor) as fnv1a.
func fnv1(key []byte, h, p uint32) uint32 {
	for _, b := range key {
		h *= p
		h ^= hkSX32(b)
	}
	return h
}

// OneAtATime is Bob Jenkins' one-at-a-time hash: twemproxy's "one_at_a_time"
// (twemproxy 0.5.0 src/hashkit/nc_one_at_a_time.c, hash_one_at_a_time) and
// libmemcached's MEMCACHED_HASH_DEFAULT and MEMCACHED_HASH_ONE_AT_A_TIME
// (libmemcached 1.1.4 libhashkit), libmemcached's default key hash.
//
// h = 0; for each byte h += b; h += h<<10; h ^= h>>6; then h += h<<3;
// h ^= h>>11; h += h<<15 (all mod 2^32). Bytes are signed (0xFFFFFF00|b for
// b >= 0x80). "127.0.0.1-0" gives 0x3834014f; the empty key gives 0.
func OneAtATime(key []byte) uint32 {
	var h uint32
	for _, b := range key {
		h += hkSX32(b)
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

// hkCRC16Table is the CRC-16/XMODEM table: polynomial 0x1021, MSB first.
var hkCRC16Table = func() (t [256]uint32) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = uint32(c)
	}
	return t
}()

// CRC16Twemproxy is twemproxy's "crc16" (twemproxy 0.5.0
// src/hashkit/nc_crc16.c, hash_crc16): the table-driven CRC-16/XMODEM
// (polynomial 0x1021, init 0, MSB first, no reflection, no final xor), but
// the running value is a uint32 that is never masked to 16 bits:
// crc = (crc << 8) ^ T[((crc >> 8) ^ b) & 0xff]. Bits shifted past bit 15 stay
// (up to 32), so only the low 16 bits equal CRC-16/XMODEM (Redis Cluster's
// CRC16); the full value, which twemproxy uses, does not. Byte signedness does
// not matter here (the index is masked to 8 bits). "key:0" gives 0x70128a20
// (low 16 bits 0x8a20); the empty key gives 0. libmemcached has no crc16.
func CRC16Twemproxy(key []byte) uint32 {
	var crc uint32
	for _, b := range key {
		crc = crc<<8 ^ hkCRC16Table[byte(crc>>8)^b]
	}
	return crc
}

// CRC32Twemproxy is twemproxy's "crc32" (twemproxy 0.5.0
// src/hashkit/nc_crc32.c, hash_crc32) and libmemcached's MEMCACHED_HASH_CRC
// (libmemcached 1.1.4 libhashkit): (CRC-32/IEEE(key) >> 16) & 0x7fff, only
// 15 bits (0–32767). On a ketama ring almost every key therefore falls below
// the lowest point. "key:0" gives 0x00007c68; the empty key gives 0.
func CRC32Twemproxy(key []byte) uint32 {
	return (crc32.ChecksumIEEE(key) >> 16) & 0x7fff
}

// CRC32a is twemproxy's "crc32a" (twemproxy 0.5.0 src/hashkit/nc_crc32.c,
// hash_crc32a): the standard CRC-32 (IEEE 802.3, reflected, polynomial
// 0xedb88320, init and final xor 0xffffffff), i.e. crc32.ChecksumIEEE.
// "key:0" gives 0x7c680b7a; the empty key gives 0.
func CRC32a(key []byte) uint32 {
	return crc32.ChecksumIEEE(key)
}

// GomemcacheCRC32 is the key hash of gomemcache's ServerList
// (github.com/bradfitz/gomemcache): crc32.ChecksumIEEE over the first
// min(len(key), 256) bytes. gomemcache copies the key into a 256-byte buffer
// first, so keys that share their first 256 bytes hash alike; the server is
// this value modulo the number of servers. Unlike libmemcached's
// MEMCACHED_HASH_CRC it keeps all 32 bits. The empty key gives 0.
func GomemcacheCRC32(key []byte) uint32 {
	if len(key) > 256 {
		key = key[:256]
	}
	return crc32.ChecksumIEEE(key)
}

// Murmur2Twemproxy is twemproxy's "murmur" (twemproxy 0.5.0
// src/hashkit/nc_murmur.c, hash_murmur) and libmemcached's
// MEMCACHED_HASH_MURMUR (libmemcached 1.1.4 libhashkit): 32-bit MurmurHash2
// (m = 0x5bd1e995, r = 24) with seed 0xdeadbeef*len (mod 2^32).
//
// h = seed ^ len; for each little-endian 4-byte block k: k *= m; k ^= k>>24;
// k *= m; h *= m; h ^= k. The 1–3 tail bytes are unsigned: h ^= byte2<<16,
// h ^= byte1<<8, h ^= byte0, h *= m. Finish: h ^= h>>13; h *= m; h ^= h>>15.
// The length is taken mod 2^32 as in C's (uint32_t)length. The empty key
// gives 0.
func Murmur2Twemproxy(key []byte) uint32 {
	const m = 0x5bd1e995
	n := uint32(len(key))
	h := (0xdeadbeef * n) ^ n
	for len(key) >= 4 {
		k := binary.LittleEndian.Uint32(key)
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
		key = key[4:]
	}
	switch len(key) {
	case 3:
		h ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(key[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Murmur3Libmemcached is libmemcached's MEMCACHED_HASH_MURMUR3 (libmemcached
// 1.1.4 libhashkit): MurmurHash3 x86_32 with seed 0xdeadbeef*len (mod 2^32),
// the same seed rule as its MurmurHash2. twemproxy 0.5.0 has no murmur3.
//
// h = seed; for each little-endian 4-byte block k: k *= 0xcc9e2d51;
// k = rotl(k, 15); k *= 0x1b873593; h ^= k; h = rotl(h, 13);
// h = h*5 + 0xe6546b64. The 1–3 tail bytes are unsigned and form
// k = byte2<<16 | byte1<<8 | byte0, mixed into h like a block but without the
// rotate-and-add of h. Then h ^= len and the fmix32 finalizer: h ^= h>>16;
// h *= 0x85ebca6b; h ^= h>>13; h *= 0xc2b2ae35; h ^= h>>16. The empty key
// gives 0.
func Murmur3Libmemcached(key []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	n := uint32(len(key))
	h := 0xdeadbeef * n
	for len(key) >= 4 {
		k := binary.LittleEndian.Uint32(key)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
		key = key[4:]
	}
	var k uint32
	switch len(key) {
	case 3:
		k ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(key[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= n
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Jenkins is twemproxy's "jenkins" (twemproxy 0.5.0 src/hashkit/nc_jenkins.c,
// hash_jenkins) and libmemcached's MEMCACHED_HASH_JENKINS (libmemcached 1.1.4
// libhashkit): Bob Jenkins' lookup3 hashlittle with initval 13.
//
// a = b = c = 0xdeadbeef + len + 13 (mod 2^32). While more than 12 bytes
// remain, add three little-endian words to a, b, c and mix. The last 1–12
// bytes are zero-padded to 12, added to a, b, c (unsigned bytes), and
// followed by final; the result is c. An empty key returns c without mixing,
// 0xdeadbefc. The length is taken mod 2^32 as in C.
func Jenkins(key []byte) uint32 {
	a := 0xdeadbeef + uint32(len(key)) + 13
	b, c := a, a
	if len(key) == 0 {
		return c
	}
	for len(key) > 12 {
		a += binary.LittleEndian.Uint32(key[0:])
		b += binary.LittleEndian.Uint32(key[4:])
		c += binary.LittleEndian.Uint32(key[8:])
		// mix
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		key = key[12:]
	}
	var tail [12]byte
	copy(tail[:], key)
	a += binary.LittleEndian.Uint32(tail[0:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	// final
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}

// Hsieh is twemproxy's "hsieh" (twemproxy 0.5.0 src/hashkit/nc_hsieh.c,
// hash_hsieh): Paul Hsieh's SuperFastHash, except that the initial hash is 0
// instead of the key length. libmemcached 1.1.4 has MEMCACHED_HASH_HSIEH only
// when built with it, and the build that produced our vectors was not, so
// only twemproxy's function is reproduced and pinned here.
//
// 16-bit reads are little-endian and unsigned. For each 4-byte block:
// h += lo16; t = (hi16 << 11) ^ h; h = (h << 16) ^ t; h += h >> 11. Tail of 3:
// h += lo16; h ^= h << 16; h ^= sx(byte2) << 18 (byte 2 is sign-extended, the
// one signed byte); h += h >> 11. Tail of 2: h += lo16; h ^= h << 11;
// h += h >> 17. Tail of 1 (unsigned byte): h += byte0; h ^= h << 10;
// h += h >> 1. Finish: h ^= h<<3; h += h>>5; h ^= h<<4; h += h>>17;
// h ^= h<<25; h += h>>6. The empty key gives 0.
func Hsieh(key []byte) uint32 {
	if len(key) == 0 {
		return 0
	}
	var h uint32
	for len(key) >= 4 {
		h += uint32(binary.LittleEndian.Uint16(key))
		t := uint32(binary.LittleEndian.Uint16(key[2:]))<<11 ^ h
		h = h<<16 ^ t
		h += h >> 11
		key = key[4:]
	}
	switch len(key) {
	case 3:
		h += uint32(binary.LittleEndian.Uint16(key))
		h ^= h << 16
		h ^= hkSX32(key[2]) << 18
		h += h >> 11
	case 2:
		h += uint32(binary.LittleEndian.Uint16(key))
		h ^= h << 11
		h += h >> 17
	case 1:
		h += uint32(key[0])
		h ^= h << 10
		h += h >> 1
	}
	h ^= h << 3
	h += h >> 5
	h ^= h << 4
	h += h >> 17
	h ^= h << 25
	h += h >> 6
	return h
}

// JavaStringHashCode is Java's String.hashCode() of key, read as UTF-8,
// returned as the unsigned 32-bit value spymemcached's NATIVE_HASH keeps
// (hashCode() & 0xffffffff): h = 31*h + c over the string's UTF-16 code
// units, mod 2^32, from h = 0. A code point above U+FFFF counts as its two
// surrogates. Bytes that are not valid UTF-8 count as U+FFFD each, as Go
// decodes them (a Java String holds no such bytes; Java's decoder may map
// a malformed sequence to fewer U+FFFD). "key:0" gives 0x061389d5 (101943765);
// the empty key gives 0.
func JavaStringHashCode(key []byte) uint32 {
	var h uint32
	for len(key) > 0 {
		b := key[0]
		if b < utf8.RuneSelf {
			h = 31*h + uint32(b)
			key = key[1:]
			continue
		}
		r, size := utf8.DecodeRune(key)
		key = key[size:]
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*(31*h+uint32(hi)) + uint32(lo)
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}
