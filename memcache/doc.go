// Package memcache is the gomemcache backend of shardedcache
// (github.com/bradfitz/gomemcache): it spreads keys over several memcached
// servers on a consistent-hash ring, so that adding or removing a server
// moves only the keys that must move. It offers two things:
//
//   - Selector, a gomemcache memcache.ServerSelector: memcache.NewFromSelector
//     of it is a plain *memcache.Client whose keys are placed by the ring
//     instead of by gomemcache's crc32 % N;
//   - ShardedClient, one gomemcache client per server behind the method set of
//     *memcache.Client (Get, Set, GetMulti, ...), with per-shard errors,
//     per-shard settings and context-taking variants of every call.
//
// Code written against *memcache.Client switches by changing its
// constructor:
//
//	mc, err := memcache.NewShardedClient(&memcache.ShardedOptions{
//		Shards: []memcache.ShardOptions{{Addr: "10.0.0.1:11211"}, {Addr: "10.0.0.2:11211"}},
//	})
//	mc.Set(&gomemcache.Item{Key: "user:42", Value: []byte("ada")}) // on the shard that owns "user:42"
//
// # No client-side cache
//
// memcached has no server-assisted invalidation (nothing like Redis's
// CLIENT TRACKING): a copy of a value kept in this process could not learn
// that another client changed it, so this package keeps none, and every
// Get goes to its server. (The redis backend caches through go-redis's
// own server-assisted cache: see its package documentation.)
//
// # Where a call goes
//
//   - Get, GetAndTouch, Set, Add, Replace, Append, Prepend, CompareAndSwap,
//     Delete, Touch, Increment and Decrement run on the one shard that owns
//     the key (item.Key for the storage calls), one request, one reply.
//   - GetMulti splits its keys by shard and sends one multi-get ("gets k1
//     k2 ...") to each shard that owns some of them, in parallel. It returns
//     every hit it got; if some shards failed, the error is a
//     *MultiShardError listing each failed shard as a
//     *shardedclient.ShardError, and the map holds the other shards' hits.
//   - DeleteAll, FlushAll (both flush_all) and Ping (version) reach every
//     shard of the list, ejected ones included, in parallel, and return a
//     *MultiShardError naming each shard that failed; the others did their
//     part. gomemcache's own DeleteAll
//     reaches only the server of the empty key, and its FlushAll and Ping
//     stop at the first failing server.
//   - Close closes every shard client's idle connections.
//
// # Keys are checked before anything is sent
//
// memcached's text protocol puts the key in the command line and the value
// after it, so a key that is not one word lets the value run as a command:
// gomemcache sends the empty key as "set  0 0 N", memcached answers ERROR
// and then reads the value ("flush_all", "set admin 0 0 4\r\nroot") as a
// command of its own. gomemcache's check lets the empty key through; this
// package does not. A key that is empty, longer than 250 bytes, or holds a
// space, a control character or DEL gives memcache.ErrMalformedKey before
// any byte is sent, on every call of the ShardedClient (the Context
// variants and GetMulti too), and from Selector.PickServer, so that a
// *memcache.Client built by memcache.NewFromSelector, and a shard's client
// from GetShard, stop there too. Values are sent length-prefixed and cannot
// be read as commands. For the same reason gomemcache's DeleteAll, which
// picks the empty key's server, returns memcache.ErrMalformedKey over a
// Selector; ShardedClient.DeleteAll and FlushAll flush every shard.
//
// # Errors
//
// memcached's answers are returned as gomemcache returns them:
// memcache.ErrCacheMiss, ErrNotStored and ErrCASConflict unchanged (so
// err == memcache.ErrCacheMiss keeps working), and a CLIENT_ERROR or
// SERVER_ERROR reply (Increment of a value that is not a number, say) as
// gomemcache's own error. A failure to reach a shard or to keep talking to
// it (refused or reset connection, timeout, end of stream) is a
// *shardedclient.ShardError that names the shard (index, name, address)
// and wraps gomemcache's error; the other shards' connections are not
// touched. The calls that reach several shards return a *MultiShardError
// that lists each shard that failed, whatever the cause, as a
// *shardedclient.ShardError; a write to several shards (DeleteAll,
// FlushAll) that fails on one was still applied on the others.
//
// # Failing shards and changing the shard list
//
// Each call reports its shard's transport failures to the shard's health
// (ShardedOptions.Health, Stats). In FailureMode, the default, as
// libmemcached and gomemcache, a dead shard's keys fail until it returns and
// nothing moves. In EjectMode, as twemproxy's auto_eject_hosts, a shard
// that fails FailureLimit times in a row is taken off the ring and its keys
// go to the others (where the placement puts them; on the Jedis ring, to the
// next node clockwise) until, after RetryTimeout, it answers a version
// probe; it is flushed before it takes its keys back, so that it does not
// serve values overwritten elsewhere meanwhile. SetShards changes the shard
// list at run time, moving only the keys of the shards added or removed;
// each call runs on one shard list, old or new, from start to end.
//
// # A fleet of processes
//
// BeginResharding serves one process. Processes that share the servers
// reshard as one through package fleet: each joins the fleet's
// coordination store (JoinFleet; etcd through the module
// github.com/shardedcache/shardedcache/fleet/etcdstore), and one of them,
// or the command-line tool, drives the change (fleet.Reshard with
// FleetBackend). memcached cannot refuse a process that is behind (no
// scripts, no CLIENT KILL: no fence, unlike the redis backend), so a
// memcache fleet promises what member leases and memcached's
// compare-and-set commands give (package fleet, "Without fences", has the
// steps and the argument):
//
//   - no lost acknowledged write, no resurrected delete, no stale read
//     after an acknowledged write, no copy left on a shard that does not
//     own the key (tombstones of deleted moving keys aside: they read as
//     misses and expire after TombstoneTTL seconds), for processes that
//     join mid-change, crash, or pause past their lease, and for a driver
//     killed and resumed elsewhere;
//   - under one assumption: no process pauses between its lease check and
//     its command reaching memcached for longer than the rest of its lease
//     (MemberOptions.LeaseTTL; at least two thirds of it while renewals
//     succeed), with clocks running at the same rate within that margin.
//
// What a member does: every call checks the member's lease (a clock read,
// no round trip) and fails with a *fleet.LeaseExpiredError, sending
// nothing, once the lease is not surely valid — the store unreachable for
// the lease's TTL, or the process paused — until the member has registered
// again and applied the fleet's state. Outside that, a call outside a
// change costs what it costs without a fleet. During a change, a call on a
// key that moves waits while the fleet prepares (at most FleetWait, then
// an error matching ErrFleetPreparing), then moves the key with meta
// commands (memcached 1.6.10 or later) before its first use in the
// process; a Delete of such a key stores a tombstone on the new owner
// (see TombstoneFlags: that flags-and-value pair is reserved) rather than
// deleting, so that a move racing with it cannot bring the value back. The
// driver's migration lists the old owners' keys (lru_crawler metadump).
// A tombstone is a key that holds nothing: Get, GetAndTouch and GetMulti
// read it as a miss, Set overwrites it, Add replaces it (compare-and-swap),
// Append, Prepend and Replace fail with memcache.ErrNotStored and Touch,
// Increment and Decrement with memcache.ErrCacheMiss, sending nothing more;
// an Append or Prepend that races with the Delete lands on it and is read as
// deleted after it. A Delete during the change reports
// memcache.ErrCacheMiss for it; one after the change removes it. Its
// flags, TombstoneFlags, are reserved.
// Beyond a change, memcached's own limits stay: an evicted value is a
// miss, and a write the client stopped waiting for (a hung server) may
// land after a later write of the same key.
//
// # Contexts
//
// Every call but Close has a Context variant (GetContext, SetContext,
// GetMultiContext, ...). gomemcache takes no context, so the call runs in a
// goroutine of its own and the variant returns ctx.Err() as soon as ctx
// ends; the request itself goes on until it completes or the shard's socket
// timeout (ShardOptions.Timeout) expires, and a write abandoned this way may
// still be applied. For GetMulti, DeleteAll, FlushAll and Ping, the shards
// that had not answered count as failed with ctx.Err() as cause, and the
// answers of the others are kept. A context that is already done sends
// nothing; with context.Background() the call runs in the caller's
// goroutine, as the variants without a context do. A shard's health counts
// the outcome of the request itself, not the caller's context.
//
// # Placement
//
// Keys are placed by package ring, checked key for key against the peers'
// own vectors:
//
//   - by default, Jedis's ShardedJedis ring (ring.HashMurmur64A, 160 virtual
//     nodes per unit of weight), the same placement as this module's Redis
//     backend: name the servers (Server.Name, ShardOptions.Name) so that
//     the list can be reordered; an unnamed server is known by its position;
//   - ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}:
//     libketama as libmemcached 1.1.4 does it with
//     MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, which is also PHP memcached's
//     Memcached::OPT_LIBKETAMA_COMPATIBLE and twemproxy's "distribution:
//     ketama, hash: md5". An unnamed server is labelled by its address,
//     "host" for port 11211 and "host:port" otherwise, exactly as given
//     (a host name is not replaced by its IP), so a Go service shares a
//     pool with those clients when it lists the servers as they do;
//   - ring.Spymemcached{Locator: ring.SpymemcachedKetama}: spymemcached's
//     KetamaNodeLocator (2.5 and later), whose labels keep ":11211";
//     ring.Spymemcached{} is its default, array-mod over String.hashCode();
//   - ring.Gomemcache{}: gomemcache's own ServerList, crc32(key) % N, key
//     for key (weights ignored), for a service that must keep the placement
//     of memcache.New while it moves to the sharded client.
//
// gomemcache's ServerList is not consistent hashing: going from 3 servers
// to 4 moves about three keys in four, and the order of the list decides
// everything. On a ring, adding a fourth server moves about a quarter of the
// keys, all of them to the new server (ring.Compare gives the exact share
// before the change), and removing a named server moves only its own keys.
// Switching a running cache from memcache.New to a ring starts it mostly
// cold: only about one key in N stays on its server.
package memcache
