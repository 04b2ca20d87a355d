// Package ring places keys on a consistent-hash ring of nodes: it maps a key to
// the index of one node in an ordered node list. It knows nothing of Redis or
// memcached, so it serves any key-to-target mapping (cache servers, database
// tables, queues).
//
// # Presets
//
// A ring has exactly one placement scheme, a Preset, given to New as one
// value: New(nodes, ring.Twemproxy{Hash: ring.HashMD5}). Each preset type
// has the settings of its peer and no others, and its zero value is the
// peer's default, the placement its users get when they set nothing:
//
//   - Jedis{} (also nil): Jedis's Sharded / JedisSharding ring;
//   - Twemproxy{}: a nutcracker 0.5.0 pool, "distribution: ketama",
//     "hash: fnv1a_64" unless set;
//   - Libmemcached{}: libmemcached 1.1.4, MODULA over one-at-a-time unless
//     its behaviors (KETAMA, KETAMA_WEIGHTED, KETAMA_SPY, the hash set
//     before or after them) say otherwise;
//   - Spymemcached{}: spymemcached's DefaultConnectionFactory, array-mod
//     over Java's String.hashCode(); its KetamaConnectionFactory with
//     either node key format, weighted or not;
//   - GoRedisRing{}: go-redis v9's Ring (rendezvous hashing);
//   - Gomemcache{}: gomemcache's ServerList (crc32 modulo).
//
// Two presets cannot mix: there is one value. A setting the chosen
// configuration does not use (a hash set before KETAMA_WEIGHTED, which
// resets it; a key format on spymemcached's array-mod locator; a weight on
// a preset whose peer has none) is an error at New naming it, as is a node
// that would own no key. Placement is a pure function of the preset and the
// node list. Eject gives the placement after nodes fail, as each peer
// rebuilds it.
//
// # Jedis's ring
//
// Jedis{} reproduces redis.clients.jedis.util.Sharded (Jedis 2.10.0 -
// 3.10.0, and JedisSharding 4.x - 6.x for unnamed nodes):
//
//   - node i of the list gets replicas x weight virtual nodes (vnodes),
//     n = 0 .. replicas*weight-1, 160 replicas by default;
//   - an unnamed node's vnodes are named "SHARD-<i>-NODE-<n>", a named node's
//     "<name>*<n>" (Jedis <= 2.9 used "<name>*<weight><n>": Jedis.LegacyNames);
//   - each vnode name and each key is hashed with MurmurHash64A (seed
//     0x1234ABCD) over its UTF-8 bytes, the result read as a signed Java long;
//   - a key belongs to the first vnode whose hash is >= the key's hash in
//     signed order, wrapping to the lowest vnode (Java's TreeMap.tailMap);
//   - when two vnodes hash alike, the one added later (later in the node
//     list) owns the point, as TreeMap.put overwrites.
//
// # Hashes
//
// Every hash is a Hash value named after what it computes, and a plain
// function with the exact definition. Output bits is the width of the
// values: Shares and Compare measure the key hash's whole range, so a
// 15-bit key hash on a ring of 32-bit points is measured as such. "-" means
// the peer lacks the hash.
//
//	Hash                     bits  twemproxy      libmemcached           others
//	HashMurmur64A            64    -              -                      Jedis Hashing.MURMUR_HASH (seed 0x1234ABCD)
//	HashMD5                  32    md5            MEMCACHED_HASH_MD5     Jedis Hashing.MD5, spymemcached KETAMA_HASH, ketama points
//	HashFNV1a64Low32         32    fnv1a_64       FNV1A_64               -
//	HashFNV164Low32          32    fnv1_64        FNV1_64                -
//	HashFNV1a32              32    fnv1a_32       FNV1A_32               -
//	HashFNV132               32    fnv1_32        FNV1_32                -
//	HashOneAtATime           32    one_at_a_time  ONE_AT_A_TIME, DEFAULT -
//	HashCRC32Bits16to30      15    crc32          CRC                    spymemcached CRC_HASH
//	HashCRC32                32    crc32a         -                      the standard CRC-32 (IEEE)
//	HashCRC32First256        32    -              -                      gomemcache ServerList
//	HashCRC16Twemproxy       32*   crc16          -                      -
//	HashMurmur2              32    murmur         MURMUR                 -
//	HashMurmur3              32    -              MURMUR3                -
//	HashLookup3              32    jenkins        JENKINS                -
//	HashHsiehTwemproxy       32    hsieh          -                      -
//	HashXXHash64             64    -              -                      go-redis Ring
//	HashJavaStringHashCode   32    -              -                      spymemcached NATIVE_HASH
//
// (*) twemproxy's crc16 keeps the bits a 16-bit CRC would drop, so short
// keys hash low: it has no fixed range, and Shares and Compare refuse it
// with ErrInexact. The FNV hashes, one-at-a-time and hsieh read bytes as
// the peers' signed C char does (see each function).
//
// # Identity: names versus positions
//
// An unnamed node is identified by its position in the list: its vnode names
// contain the index. Reordering the list, or inserting a node in the middle,
// renames the vnodes of every node that moved, and their keys move with them.
// Give nodes names (Node.Name) whenever the list may change other than at its
// end: a named node's vnodes depend on the name alone. Ring.Add and
// Ring.RemoveKeepingSlots keep every remaining node's vnode names, so only
// the keys of the added or removed node move; for unnamed nodes that is not
// the ring New builds over the same final list (Jedis's placement of that
// list), which is why the name says so.
//
// # Key tags
//
// Jedis{KeyTags: true} makes keys that share a tag share a node, as Jedis
// does with its DEFAULT_KEY_TAG_PATTERN: the first match of the Java regular
// expression \{(.+?)\} in the key, group 1, is hashed instead of the whole
// key. This is not Redis Cluster's hash-tag rule. Redis Cluster takes the
// text between the first '{' and the first '}' after it and hashes the whole
// key when that text is empty; the Jedis rule needs at least one character,
// so "{}}" has the tag "}" here and none in Redis Cluster, "foo{}{bar}" has
// the tag "}{bar" here and none there. A line terminator (\n, \r, U+0085,
// U+2028, U+2029) inside the braces also means no tag, as Java's '.'
// matches none of them. Byte-slice keys (LocateBytes) are hashed whole, as
// Jedis's getShardInfo(byte[]) does. Twemproxy.HashTag is twemproxy's
// two-character hash_tag rule, and GoRedisRing applies Redis Cluster's
// (ClusterHashTag) as go-redis does.
//
// # Speed
//
// Lookups take no lock and allocate nothing; a Ring is immutable once built
// and safe for concurrent use. Changing the node list builds a new Ring.
package ring
