// Package ring places keys on a consistent-hash ring of nodes: it maps a key to
// the index of one node in an ordered node list. It knows nothing of Redis or
// memcached, so it serves any key-to-target mapping (cache servers, database
// tables, queues).
//
// # Placement (Jedis-compatible)
//
// By default the ring reproduces Jedis's redis.clients.jedis.util.Sharded
// (Jedis 2.10.0 - 3.10.0, and JedisSharding 4.x - 6.x for unnamed nodes):
//
//   - node i of the list gets replicas x weight virtual nodes (vnodes),
//     n = 0 .. replicas*weight-1, 160 replicas by default;
//   - an unnamed node's vnodes are named "SHARD-<i>-NODE-<n>", a named node's
//     "<name>*<n>" (Jedis <= 2.9 used "<name>*<weight><n>": WithJedisLegacyNames);
//   - each vnode name and each key is hashed with MurmurHash64A (seed
//     0x1234ABCD) over its UTF-8 bytes, the result read as a signed Java long;
//   - a key belongs to the first vnode whose hash is >= the key's hash in
//     signed order, wrapping to the lowest vnode (Java's TreeMap.tailMap);
//   - when two vnodes hash alike, the one added later (later in the node
//     list) owns the point, as TreeMap.put overwrites.
//
// # Other peers' placements
//
// Options select the placement of other clients, key for key, so that a Go
// service can share servers with them or replace them without a cold cache:
// WithKetama (libketama: libmemcached KETAMA_WEIGHTED, PHP memcached,
// twemproxy with md5), WithKetamaSpymemcached, WithLibmemcachedKetama,
// WithLibmemcachedKetamaSpy, WithLibmemcachedModula, WithTwemproxy (ketama
// or modula with any of its hashes, WithHashTag for its hash_tag),
// WithGoRedisRing (rendezvous hashing) and WithGomemcache (crc32 modulo).
// Every hash is a Hash value (HashFNV1a64, HashOneAtATime, ...) and a plain
// function (FNV1a64Twemproxy, OneAtATime, ...). Eject gives the placement
// after nodes fail, as each peer rebuilds it.
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
// WithKeyTags makes keys that share a tag share a node, as Jedis does with its
// DEFAULT_KEY_TAG_PATTERN: the first match of the Java regular expression
// \{(.+?)\} in the key, group 1, is hashed instead of the whole key. This is
// not Redis Cluster's hash-tag rule. Redis Cluster takes the text between the
// first '{' and the first '}' after it and hashes the whole key when that
// text is empty; the Jedis rule needs at least one character, so "{}}" has
// the tag "}" here and none in Redis Cluster, "foo{}{bar}" has the tag "}{bar"
// here and none there. A line terminator (\n, \r, U+0085, U+2028, U+2029)
// inside the braces also means no tag, as Java's '.' matches none of them.
// Byte-slice keys (LocateBytes) are hashed whole, as Jedis's
// getShardInfo(byte[]) does.
//
// # Speed
//
// Lookups take no lock and allocate nothing; a Ring is immutable once built
// and safe for concurrent use. Changing the node list builds a new Ring.
package ring
