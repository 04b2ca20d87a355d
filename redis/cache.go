package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/redis/internal/commands"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// Client-side caching, in one place. go-redis caches the replies of its
// read commands (GET, MGET, HGET, ...) in a shard client's own cache and
// drops an entry when the server's invalidation for its key arrives (CLIENT
// TRACKING, RESP3 pushes). It applies invalidations asynchronously: on the
// next read of the connection that carries one, or at the next tick of its
// drainer (ClientSideCacheConfig.DrainInterval, 5 ms by default). So a
// process that writes a key and reads it back can be served the value it
// replaced until the invalidation of its own write arrives.
//
// The sharded client adds read-your-writes on top of go-redis's cache,
// without a cache of its own:
//
//   - Each shard gets its own go-redis cache (built from
//     ClientSideCacheConfig by redis.NewLocalCache), which the sharded
//     client keeps a handle on (the shard options' ClientSideCache). One
//     cache shared by several shards is refused: a key on one server would
//     answer for the key of the same name on another.
//   - shardHook, on every shard client, drops from the caches of the
//     shard's server (serverCaches: every cache of this process's shard
//     clients of that server, most often one; two while a change replaces a
//     shard's client and the old one finishes its commands) every key that
//     a command writes, after the server answered and before the command
//     returns to its caller: the keys of the command table's key
//     specifications flagged RW, OW or RM (commands.WrittenKeys), for single
//     commands, pipelines and transactions alike; all of it for FLUSHDB,
//     FLUSHALL and SWAPDB. The drop is the one that go-redis applies for an
//     invalidation (Cache.DeleteByRedisKey), which also drops a fetch in
//     flight for the key, so that a read sent before the write cannot store
//     the old value after it. A read that starts after the drop reserves
//     anew and is sent after the server applied the write. The hook is on
//     the shard's client, not on the router: writes through GetShard, Watch,
//     ForEachShard, Shards, the movers of resharding and the parts of a
//     split command are covered as well.
//   - A move made by the servers themselves (MIGRATE, see serverSide.move)
//     drops its keys from both owners' caches before the keys' locks are
//     released; a shard that rejoins after an ejection starts with an empty
//     cache (its connections, and the invalidations they carried, may have
//     been lost while it was out).
//
// A shard client's cache always answers for its own server: routing is the
// same with or without caching, so what a read returns differs from an
// uncached read only by the invalidations not yet applied for writes made
// elsewhere (another process, a script writing keys it did not declare).

// ownCache returns o with a cache of the shard's own: when o enables
// caching by ClientSideCacheConfig only, ClientSideCache is set to a new
// go-redis LocalCache built from it, so that the sharded client holds the
// cache whose entries it drops (go-redis hands out no handle on the cache it
// builds itself).
func ownCache(o goredis.Options) goredis.Options {
	if o.ClientSideCache == nil && o.ClientSideCacheConfig != nil {
		o.ClientSideCache = goredis.NewLocalCache(*o.ClientSideCacheConfig)
	}
	return o
}

// sharedCacheErr refuses a Cache that two shards of shards hold, or that
// a shard client of another server of this process holds (heldElsewhere;
// the clients of shards are counted already, so of two lists built at once
// with one cache for two servers, neither is accepted alone): the servers
// are different, so one key name would share one entry across them.
func sharedCacheErr(shards []Shard) error {
	seen := make(map[goredis.Cache]int, len(shards))
	for i, sh := range shards {
		cache := cacheOf(sh.Client)
		if cache == nil {
			continue
		}
		if j, dup := seen[cache]; dup {
			return fmt.Errorf("shardedcache: shards %d (%q, %s) and %d (%q, %s) share one ClientSideCache; "+
				"give each shard its own (or set ClientSideCacheConfig: each shard then gets its own cache)",
				j, shards[j].Name, shards[j].Addr, i, sh.Name, sh.Addr)
		}
		seen[cache] = i
	}
	for i, sh := range shards {
		if cache := cacheOf(sh.Client); cache != nil && heldElsewhere(cache, joinedCaches(sh.Client)) {
			return fmt.Errorf("shardedcache: shard %d (%q, %s): its ClientSideCache is the cache of a client of another server; "+
				"give each server's clients their own cache", i, sh.Name, sh.Addr)
		}
	}
	return nil
}

// errUnreachableCache is the refusal of a client given to
// NewShardedClientFromClients whose cache the sharded client cannot reach.
var errUnreachableCache = errors.New("its options enable client-side caching by ClientSideCacheConfig, and go-redis gives no handle on " +
	"the cache it builds from it: build the client with ClientSideCache: redis.NewLocalCache(config), so that the sharded " +
	"client can drop the keys it writes")

// reachableCache returns errUnreachableCache for a client whose cache the
// sharded client could not drop entries of.
func reachableCache(c *goredis.Client) error {
	if o := c.Options(); o.ClientSideCacheConfig != nil && o.ClientSideCache == nil && o.Protocol != 2 {
		return errUnreachableCache
	}
	return nil
}

// cacheOf returns the go-redis cache of a shard's client, or nil when it
// does not cache (or is nil: NewShardedClientFromClients refuses it).
// go-redis caches over RESP3, on DB 0, without a credentials provider
// (attachCSC of go-redis v9.23); elsewhere it leaves the cache unused.
func cacheOf(c *goredis.Client) goredis.Cache {
	if c == nil {
		return nil
	}
	o := c.Options()
	if o.Protocol == 2 || o.DB != 0 || o.CredentialsProvider != nil || o.CredentialsProviderContext != nil || o.StreamingCredentialsProvider != nil {
		return nil
	}
	return o.ClientSideCache
}

// joinServer returns the serverCaches of shard client c's server, with c
// counted among its clients, and c's cache, if it has one, among its
// caches, until leaveServer: as many times as it joins (one client given
// to several sharded clients, or twice in one list). A write through any shard client (one that
// does not cache, another user's, another DB's) replaces values that the
// process's caches of the server may hold: shardHook drops them.
func joinServer(c *goredis.Client) *serverCaches {
	addr := serverAddr(c.Options()) // before the lock: it may resolve a name
	serversMu.Lock()
	defer serversMu.Unlock()
	var s *serverCaches
	if j, ok := joined.Load(c); ok { // a client given to several sharded clients
		s = j.(*joining).caches
	} else {
		s = cachesAt(addr)
	}
	s.clients++
	if cache := cacheOf(c); cache != nil {
		s.add(serverCache{cache, cacheKeyPrefix(c.Options())})
	}
	j, _ := joined.LoadOrStore(c, &joining{caches: s})
	j.(*joining).times++
	return s
}

// joining is a shard client's entry in joined: the serverCaches it joined,
// and how many times (once per sharded client, or shard, it serves) it has
// not left yet.
type joining struct {
	caches *serverCaches
	times  int
}

// leaveServer counts c, a shard client that closed (or that a refused
// NewShardedClientFromClients hands back), and its cache out of its
// server's serverCaches once, undoing one joinServer; the process forgets
// them once no client holds them. A client that did not join, or left as
// many times as it joined, changes nothing.
func leaveServer(c *goredis.Client) {
	serversMu.Lock()
	defer serversMu.Unlock()
	v, ok := joined.Load(c)
	if !ok {
		return
	}
	j := v.(*joining)
	if j.times--; j.times == 0 {
		joined.Delete(c)
	}
	s := j.caches
	if cache := cacheOf(c); cache != nil {
		s.remove(serverCache{cache, cacheKeyPrefix(c.Options())})
	}
	if s.clients--; s.clients == 0 && s != anyServer {
		cachesByServer.CompareAndDelete(s.server, s)
	}
}

// joinedCaches returns the serverCaches that shard client c joined
// (joinServer), or none (an empty serverCaches of no server: a write then
// drops its keys from anyServer's caches alone) when it has left.
func joinedCaches(c *goredis.Client) *serverCaches {
	if j, ok := joined.Load(c); ok {
		return j.(*joining).caches
	}
	return &serverCaches{}
}

// serverCaches are the caches of this process's shard clients of one
// server (all DBs and users: a user's write replaces the value another
// user's cache holds): those of every sharded client and, during a change,
// those of a shard's old client, still finishing the commands of an older
// view, and of its new one (SetShards with new options, a fleet's next
// epoch), each with a cache of its own. A write through any client of the
// server drops the keys it writes from all of them: a read through the new
// client may have cached, from the server, the value that a write through
// the old one then replaced.
type serverCaches struct {
	server  string // its key in cachesByServer ("" for anyServer)
	clients int    // the shard clients that joined them (under serversMu)

	mu   sync.Mutex
	refs map[serverCache]int // the clients holding each cache
	// all is the caches of refs, read without the lock.
	all atomic.Pointer[[]serverCache]
}

// serverCache is a cache of a server and the prefix of its Redis keys (its
// client's DB and user: cacheKeyPrefix).
type serverCache struct {
	cache  goredis.Cache
	prefix string
}

// cachesByServer holds the serverCaches of each server that shard clients
// of the process joined (see cachesAt), until the last leaves.
// joined maps each shard client that joined to its serverCaches; serversMu
// orders joins and leaves, so that serverCaches are forgotten only when no
// client holds them.
var (
	cachesByServer sync.Map
	joined         sync.Map // *goredis.Client -> *joining
	serversMu      sync.Mutex
)

// anyServer are the caches of the clients whose server the address does
// not tell: a Unix socket (the server may be one that TCP clients reach
// too) or a Sentinel group's master (whichever it is now). A write through
// any client drops its keys from them, and a write through such a client
// drops its keys from every cache of the process.
var anyServer = &serverCaches{}

// serverAddr names the server of o: its host resolved (resolveServer), so
// that "localhost:6379" and "127.0.0.1:6379" name one server; "" for a Unix
// socket or a Sentinel group (go-redis names the address of a failover
// client "FailoverClient"), whose server the address does not tell.
func serverAddr(o *goredis.Options) string {
	if o.Network == "unix" || o.Addr == "FailoverClient" {
		return ""
	}
	if srv, ok := resolveServer(o.Addr); ok {
		return srv
	}
	return o.Addr
}

// cachesAt returns the serverCaches of the server named addr (serverAddr),
// anyServer for "".
func cachesAt(addr string) *serverCaches {
	if addr == "" {
		return anyServer
	}
	caches, _ := cachesByServer.LoadOrStore(addr, &serverCaches{server: addr})
	return caches.(*serverCaches)
}

func (s *serverCaches) add(c serverCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == nil {
		s.refs = map[serverCache]int{}
	}
	s.refs[c]++
	s.publish()
}

func (s *serverCaches) remove(c serverCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs[c]--; s.refs[c] <= 0 {
		delete(s.refs, c)
	}
	s.publish()
}

func (s *serverCaches) publish() {
	all := slices.Collect(maps.Keys(s.refs))
	s.all.Store(&all)
}

// heldElsewhere reports whether a client of a server other than own's
// holds cache (anyServer's clients count as another server's).
func heldElsewhere(cache goredis.Cache, own *serverCaches) bool {
	for s := range everyServer {
		if s != own && slices.ContainsFunc(s.caches(), func(c serverCache) bool { return c.cache == cache }) {
			return true
		}
	}
	return false
}

// everyServer yields the serverCaches of every server of the process, and
// anyServer's last.
func everyServer(yield func(*serverCaches) bool) {
	more := true
	cachesByServer.Range(func(_, s any) bool {
		more = yield(s.(*serverCaches))
		return more
	})
	if more {
		yield(anyServer)
	}
}

// caches returns every cache of the server, nil for none.
func (s *serverCaches) caches() []serverCache {
	if all := s.all.Load(); all != nil {
		return *all
	}
	return nil
}

// dropKey drops key from every cache of the server (see each).
func (s *serverCaches) dropKey(key string) {
	s.each(func(c serverCache) { c.cache.DeleteByRedisKey(c.prefix + key) })
}

// each calls f with every cache that a write through a client of the
// server may leave stale: the server's and anyServer's, or, for anyServer,
// every cache of the process.
func (s *serverCaches) each(f func(serverCache)) {
	servers := []*serverCaches{s, anyServer}
	if s == anyServer {
		servers = slices.Collect(everyServer)
	}
	for _, server := range servers {
		for _, c := range server.caches() {
			f(c)
		}
	}
}

// none reports whether no cache may hold a value that a write through a
// client of the server replaces: the cheap test before a command's keys
// are looked at.
func (s *serverCaches) none() bool {
	return s != anyServer && len(s.caches()) == 0 && len(anyServer.caches()) == 0
}

// cacheKeyPrefix is the prefix of the Redis keys in a go-redis cache: its
// namespace of DB and user name, as go-redis v9.23's cscNamespacePrefix
// writes it ("<db>\x00<len(user)>:<user>\x00"). The read-your-writes tests
// fail if a later go-redis spells it otherwise.
func cacheKeyPrefix(o *goredis.Options) string {
	return strconv.Itoa(o.DB) + "\x00" + strconv.Itoa(len(o.Username)) + ":" + o.Username + "\x00"
}

// dropWritten removes the keys that cmd writes from the caches that a
// write through a client of the server may leave stale (see each): every
// entry for FLUSHDB, FLUSHALL and SWAPDB (whatever their DBs: the caches
// hold DB 0 only, as go-redis caches nothing else).
func (s *serverCaches) dropWritten(cmd goredis.Cmder) {
	if s.none() {
		return
	}
	args := cmd.Args()
	info, err := commands.Lookup(args)
	switch {
	case err != nil:
		return
	case info.Name == "flushdb" || info.Name == "flushall" || info.Name == "swapdb":
		s.each(func(c serverCache) { c.cache.Flush() })
		return
	case !info.Writes():
		return
	}
	_ = info.WrittenKeys(args, func(pos int) {
		if key, ok := commands.Arg(args[pos]); ok {
			s.dropKey(key)
		}
	})
}

// dropKeys drops the moving keys from the caches of both their owners'
// servers.
func dropKeys(v *view, keys []shardcore.MovingKey) {
	for _, k := range keys {
		for _, i := range [2]int{k.From, k.To} {
			joinedCaches(v.Client(i)).dropKey(k.Key)
		}
	}
}

// flushOnRejoin returns a Health.OnRejoin that empties the cache of a
// shard that rejoins, then runs next (the policy's own, if any).
func flushOnRejoin(next func(context.Context, *goredis.Client) error) func(context.Context, *goredis.Client) error {
	return func(ctx context.Context, c *goredis.Client) error {
		if cache := cacheOf(c); cache != nil {
			cache.Flush()
		}
		if next == nil {
			return nil
		}
		return next(ctx, c)
	}
}

// ShardCacheStats is one shard's client-side cache statistics: go-redis's
// CSCStats of the shard's client (hits and misses since the client was
// made, entries and their estimated bytes now), all zero for a shard that
// does not cache.
type ShardCacheStats struct {
	shardedclient.ShardRef
	goredis.CSCStats
}

// CacheStats returns every shard's client-side cache statistics, in ring
// order (see ShardCacheStats). A shard's counters start again from zero when
// it gets a new client (SetShards with new options or a new address).
func (c *ShardedClient) CacheStats() []ShardCacheStats {
	shards := c.shards.AllShards()
	out := make([]ShardCacheStats, len(shards))
	for i, sh := range shards {
		out[i] = ShardCacheStats{ShardRef: shardedclient.ShardRef{Index: i, Name: sh.Name, Addr: sh.Addr}, CSCStats: sh.Client.CSCStats()}
	}
	return out
}
