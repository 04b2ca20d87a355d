package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// ShardOptions configures one shard.
type ShardOptions struct {
	// Name identifies the shard on the ring; optional. Named shards keep
	// their keys when the shard list is reordered (see package ring).
	Name string
	// Weight scales the shard's share of keys; 0 means 1.
	Weight int
	// Addr is the server's "host:port" (or socket path with Options.Network
	// "unix"). It overrides Options.Addr. A URL or an address with user
	// information ("user:pw@host:port") is refused, with the password
	// redacted in the error.
	//
	// The shard's address and DB are its identity: its Shard.Addr, which
	// names it in errors, events and Stats, is Addr, followed by "/<DB>"
	// when Options.DB is not 0 ("10.0.0.1:6379/3"). Two shards of one list
	// may not share it (an error names both); two DBs of one server are two
	// shards. A shard that keeps its name but changes address or DB is
	// another shard to SetShards and BeginResharding: its keys are those of
	// the new address and DB (BeginResharding moves them there). On the
	// ketama presets an unnamed shard's label is its Shard.Addr: name a
	// shard on a DB other than 0 to give it its peer's label.
	Addr string
	// Options are the shard's go-redis options (pool size, timeouts,
	// password, DB, TLS, ...); optional. A field left at its zero value
	// takes the value of ShardedOptions.Options (see there). MaxRetries and DialerRetries left
	// at 0 mean no retry and one dial, not go-redis's 3 and 5, so that a
	// dead shard fails within one DialTimeout (refused: at once), or one
	// WriteTimeout and ReadTimeout on an open connection; set them to
	// retry inside a command (a fleet's shard clients never retry: see
	// JoinFleet). A change of options (SetShards,
	// BeginResharding) gives the shard a new client; options holding a
	// function (Dialer, OnConnect, a credentials provider, ...) cannot be
	// compared, so such a shard gets a new client at every change.
	// MaintNotificationsConfig left nil means maintenance notifications
	// disabled (maintnotifications.ModeDisabled), not go-redis's ModeAuto:
	// see maintDefault.
	//
	// AutoPipelineOptions set (here, in Failover's options, or for every
	// shard in ShardedOptions.Options) turns on autopipelining for the
	// shard: what the sharded client sends to it is coalesced with other
	// goroutines' commands for it, in batches of go-redis's engine
	// (Client.AutoPipeline) configured by these options
	// (redis.DefaultBlockingAutoPipelineOptions() is a good start), once
	// ShardedOptions.AutoPipelineFrom commands are on the shard at once.
	// Off by default: it pays at many concurrent callers, and a batch runs
	// under go-redis's context, not the caller's (see the package
	// documentation, "Autopipelining"). Invalid options are refused with
	// AutoPipelineOptions.Validate's error. A cluster shard keeps its
	// cluster client's plain path.
	Options *goredis.Options
	// Failover makes the shard a Sentinel-managed master/replica group
	// (redis.NewFailoverClient): a dead master is replaced by promotion
	// inside the shard, and no key moves to another shard. Exclusive with
	// Addr and Options. The shard's address (its identity, as for Addr) is
	// "sentinel:<MasterName>", followed by "/<DB>" when DB is not 0. Its
	// retries are go-redis's (MaxRetries 0 means 3), so that a command
	// rides over a promotion.
	Failover *goredis.FailoverOptions
	// Cluster makes the shard a Redis Cluster (see ClusterShard and
	// BeginClusterMove): its commands go to a *redis.ClusterClient, which
	// routes them by hash slot. Exclusive with Addr, Options and Failover.
	// Its address (its identity) is "cluster:" and its seed addresses,
	// sorted, joined by ",".
	Cluster *ClusterShard
}

// Health is the policy for failing shards: FailureMode (default) or
// EjectMode, failure limit, retry timeout, probes, events. Its Probe
// defaults to PING, and its Classify to this package's rule: a failure to
// reach the server or to set up a connection (refused or reset connection,
// timeout, authentication) is the shard's failure; the server's replies, a
// pool full of the caller's own commands and a closed client are not, nor
// is the caller's cancel or deadline.
type Health = shardedclient.Health[*goredis.Client]

// ShardedOptions configures NewShardedClient.
type ShardedOptions struct {
	// Shards lists the shards in ring order; at least one.
	Shards []ShardOptions
	// Placement is the ring's preset: ring.Jedis (with KeyTags, Hash,
	// Replicas, LegacyNames), or another peer's (ring.GoRedisRing{},
	// ring.Twemproxy{...}, ...). nil is ring.Jedis{}, Jedis's ShardedJedis
	// placement.
	Placement ring.Preset
	// Health says what happens when a shard fails (see Health).
	Health Health
	// Options are go-redis options shared by every shard, as
	// redis.RingOptions has them: Username, Password, DB, Protocol,
	// ClientName, pool size and pool options, timeouts, retries, TLSConfig,
	// Dialer, OnConnect, ...; optional. They apply to the shards of this
	// list and to every shard that SetShards, BeginResharding or
	// BeginClusterMove adds or changes later. Addr may not be set (each
	// shard has its own).
	//
	// Each shard's options are built as a copy of its own (ShardOptions.
	// Options, Failover's options or Cluster's options; none: the zero
	// value) in which every exported field left at its zero value (0, "",
	// nil, false) takes the value of the field of the same name and type
	// in Options: a field the shard sets wins, field by field, and the
	// shard's own options are never modified. A Failover shard takes the
	// fields its redis.FailoverOptions shares with redis.Options
	// (Username, Password, DB, pool, timeouts, TLSConfig, ...), a Cluster
	// shard those of its redis.ClusterOptions (no DB). A shard cannot
	// override a shared value with a zero value (no password, DB 0): set
	// such a field on the shards instead of here. The result counts as
	// the shard's options everywhere: its DB is part of its identity
	// (ShardOptions.Addr), it decides whether a shard keeps its client
	// across a list change, and this package's retry defaults apply to it
	// (see ShardOptions.Options; a fleet's shard clients never retry: see
	// JoinFleet). ShardOptions() shows the result, the password redacted.
	Options *goredis.Options
	// AutoPipelineFrom is, for the shards that autopipeline (see
	// ShardOptions.Options), how many of this client's commands must be
	// on a shard at once for a command to join a batch of go-redis's
	// engine: below it the command takes the plain path, as fast as with
	// autopipelining off. A pipeline's part on a shard counts as one. 0
	// means 4; 1 sends every command through the engine. Negative is an
	// error.
	AutoPipelineFrom int
}

// Shard is one shard of a ShardedClient: a go-redis client and its place on
// the ring.
type Shard = shardedclient.Shard[*goredis.Client]

var _ goredis.UniversalClient = (*ShardedClient)(nil)

// ShardedClient is a Redis client over several servers. Its command methods
// are go-redis's own (every method of redis.Cmdable), with the same
// signatures and result types; each command runs where the package
// documentation says, and each method's doc says where its command runs.
// They are generated (cmdable_gen.go) from redis.Cmdable and the command
// table; what they say is for several shards: over one shard (outside a
// resharding window) every known command runs there as sent, as on one
// server, connection state excepted. It is safe for concurrent use.
//
//go:generate go run ./internal/methods/gen -o cmdable_gen.go
type ShardedClient struct {
	// cmdable is the router (a go-redis client that never connects
	// anywhere: every command and pipeline it builds is handed to the hook,
	// which runs it on the shards). The generated methods call the router
	// directly; it gives the method of redis.Cmdable that a newer go-redis
	// adds before go generate declares it (TestCmdableMethodsGenerated fails
	// until then).
	cmdable

	shards *shardcore.Sharded[*goredis.Client]
	router *goredis.Client // its hook runs every command on the shards
	pubsub *goredis.Client // no hook: its connections are pub/sub fan-ins

	// mu serializes shard-list changes with AddHook and OnNewNode, so that
	// every client the sharded client creates gets every hook.
	mu    sync.Mutex
	build builder
	state serverState // function libraries and CONFIG SET, kept in step

	closed atomic.Bool  // set by Close: every call returns redis.ErrClosed
	apFrom atomic.Int64 // ShardedOptions.AutoPipelineFrom, its default filled in

	fleet fleetState // JoinFleet
}

// errIfClosed returns redis.ErrClosed once Close has been called: the
// client's own error, as a closed *redis.Client returns, not a shard's.
func (c *ShardedClient) errIfClosed() error {
	if c.closed.Load() {
		return goredis.ErrClosed
	}
	return nil
}

// errRouterDial is what a go-redis code path that bypasses the router's
// hook would get; none is reachable through ShardedClient's methods.
var errRouterDial = errors.New("shardedcache: the router client has no connection of its own")

// cmdable names the embedded go-redis command set without exporting the
// router behind it.
type cmdable = goredis.Cmdable

// NewShardedClient connects (lazily, as go-redis does) to every shard of opt.
// It returns an error naming the shard for a missing or unparseable address
// (a URL's password redacted), an error naming both shards for two shards
// with the same address and DB or one ClientSideCache, an error naming the
// shard whose ClientSideCache a client of another server of the process
// holds, and the errors of ring.New (no shards, negative weight, duplicate
// name) and of the health policy.
func NewShardedClient(opt *ShardedOptions) (*ShardedClient, error) {
	if opt == nil || len(opt.Shards) == 0 {
		return nil, errors.New("shardedcache: no shards")
	}
	apFrom, err := autoPipelineFrom(opt.AutoPipelineFrom)
	if err != nil {
		return nil, err
	}
	var b builder
	if opt.Options != nil {
		if opt.Options.Addr != "" {
			return nil, fmt.Errorf("shardedcache: ShardedOptions.Options.Addr %q is set; give each shard its Addr", redactAddr(opt.Options.Addr))
		}
		shared := *opt.Options
		b.shared = &shared
	}
	shards, err := b.shards(opt.Shards, nil)
	if err != nil {
		return nil, err
	}
	c, err := newShardedClient(shards, opt.Health, opt.Placement)
	if err != nil {
		closeClients(shards, nil)
		return nil, err
	}
	c.build = b
	c.apFrom.Store(apFrom)
	return c, nil
}

// builder makes the clients of shards. It remembers the options each client
// was built from, so that a shard keeps its client across a list change
// only when its address, DB and options are unchanged, and it hands every
// client it makes, with its shard, to the functions of AddHook, OnNewNode
// and OnNewShardNode, in the order they were given, before the client
// serves a command.
type builder struct {
	onNew  []func(Shard, *goredis.Client)
	from   map[*goredis.Client]any // a goredis.Options or goredis.FailoverOptions
	shared *goredis.Options        // ShardedOptions.Options, copied
	// fence: a client whose ClientName carries a fleet epoch checks, as it
	// sets up each connection, that the server accepts that epoch
	// (fenceCheck; see JoinFleet).
	fence bool
}

// withShared returns so with a copy of its options in which every exported
// field at its zero value has the value of the field of the same name and
// type in the shared options (see ShardedOptions.Options).
func (b *builder) withShared(so ShardOptions) ShardOptions {
	if b.shared == nil {
		return so
	}
	switch {
	case so.Cluster != nil:
		cs := *so.Cluster
		if cs.Options != nil {
			o := *cs.Options
			inherit(&o, b.shared)
			cs.Options = &o
		}
		so.Cluster = &cs
	case so.Failover != nil:
		fo := *so.Failover
		inherit(&fo, b.shared)
		so.Failover = &fo
	default:
		var o goredis.Options
		if so.Options != nil {
			o = *so.Options
		}
		inherit(&o, b.shared)
		so.Options = &o
	}
	return so
}

// inherit sets each exported field of *dst, a struct, that is at its zero
// value to the field of *shared with the same name and type, if any.
func inherit[D, S any](dst *D, shared *S) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(shared).Elem()
	for i := range d.NumField() {
		f := d.Type().Field(i)
		sf, ok := s.Type().FieldByName(f.Name)
		if f.IsExported() && ok && sf.Type == f.Type && d.Field(i).IsZero() {
			d.Field(i).Set(s.FieldByIndex(sf.Index))
		}
	}
}

// shards builds the shard of every option, taking the client of a shard in
// reuse when it has the same address, DB and options; on error it closes
// the clients it made.
func (b *builder) shards(opts []ShardOptions, reuse []Shard) ([]Shard, error) {
	shards := make([]Shard, 0, len(opts))
	for i, so := range opts {
		sh, err := b.shard(so, reuse)
		if err != nil {
			closeClients(shards, reuse)
			b.prune(reuse)
			return nil, fmt.Errorf("shardedcache: shard %d (%q): %w", i, so.Name, err)
		}
		shards = append(shards, sh)
	}
	if err := cmp.Or(sameServer(shards), sharedCacheErr(shards)); err != nil {
		closeClients(shards, reuse)
		b.prune(reuse)
		return nil, err
	}
	return shards, nil
}

// sameServer returns an error naming two shards whose addresses differ as
// written but reach one server and DB ("localhost:6379" and
// "127.0.0.1:6379"): one server listed twice would hold keys twice and be
// counted twice by DBSIZE and SCAN. Host names are resolved once, as the
// memcache backend does; an address that does not resolve is left to go-redis.
func sameServer(shards []Shard) error {
	seen := make(map[string]int, len(shards))
	for i, sh := range shards {
		key := serverKey(sh)
		if key == "" {
			continue
		}
		if j, dup := seen[key]; dup && shards[j].Addr != sh.Addr { // the same string: shardedclient names it
			return fmt.Errorf("shardedcache: shards %d (%q, %s) and %d (%q, %s) are the same server (%s)",
				j, shards[j].Name, shards[j].Addr, i, sh.Name, sh.Addr, key)
		}
		seen[key] = i
	}
	return nil
}

// serverKey returns the server and DB that sh reaches, its host name
// resolved ("127.0.0.1:6379/0"), or "" for a Sentinel group or a Redis
// Cluster (their string is their identity), a Unix socket, or a name that
// does not resolve now. BeginResharding takes two shards with one
// serverKey for the same shard (see shardcore.Backend.ServerOf).
func serverKey(sh Shard) string {
	addr, db, _ := strings.Cut(sh.Addr, "/")
	if srv, ok := resolveServer(addr); ok {
		return srv + "/" + db
	}
	return ""
}

// resolved keeps resolveServer's answers: address as written -> resolved.
var resolved sync.Map

// resolveServer returns addr, a shard's "host:port", with its host
// resolved ("127.0.0.1:6379" for "localhost:6379"), and whether it did
// resolve: not a Sentinel group, a Redis Cluster, a Unix socket or a name
// that does not resolve now. An address is resolved once per process.
func resolveServer(addr string) (string, bool) {
	if srv, ok := resolved.Load(addr); ok {
		return srv.(string), true
	}
	if strings.HasPrefix(addr, "sentinel:") || strings.HasPrefix(addr, "cluster:") {
		return "", false
	}
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return "", false
	}
	resolved.Store(addr, tcp.String())
	return tcp.String(), true
}

func (b *builder) shard(so ShardOptions, reuse []Shard) (Shard, error) {
	so = b.withShared(so)
	if so.Cluster != nil {
		return b.clusterShard(so, reuse)
	}
	sh := Shard{Name: so.Name, Weight: so.Weight, Addr: addrOf(so)}
	if so.Failover != nil {
		if so.Addr != "" || so.Options != nil {
			return Shard{}, errors.New("give either Failover or Addr and Options")
		}
		if so.Failover.MasterName == "" || len(so.Failover.SentinelAddrs) == 0 {
			return Shard{}, errors.New("Failover needs a MasterName and SentinelAddrs")
		}
		if err := checkAutoPipeline(so.Failover.AutoPipelineOptions); err != nil {
			return Shard{}, err
		}
		fo := *so.Failover
		sh.Client = b.client(reuse, sh, fo, func() *goredis.Client {
			built := fo
			return goredis.NewFailoverClient(&built)
		})
		return sh, nil
	}
	var o goredis.Options
	if so.Options != nil {
		o = *so.Options
	}
	if so.Addr != "" {
		o.Addr = so.Addr
	}
	retryDefaults(&o)
	maintDefault(&o)
	if err := cmp.Or(checkAddr(&o), checkAutoPipeline(o.AutoPipelineOptions)); err != nil {
		return Shard{}, err
	}
	sh.Client = b.client(reuse, sh, o, func() *goredis.Client {
		built := ownCache(o) // go-redis fills in its defaults
		if epoch, ok := connEpoch(o.ClientName); ok && b.fence {
			// No retry, whatever the options say: a command retried after
			// its connection was lost could meet the fence and be taken for
			// one never sent, and run again (see FenceClosedError).
			built.OnConnect, built.MaxRetries = fenceCheck(epoch, o.OnConnect), -1
		}
		return goredis.NewClient(&built)
	})
	return sh, nil
}

// client returns the client of the shard in reuse at sh's address and DB
// that was built from the same options (from), else a new client from
// create, prepared (shardClient) and handed, with sh, to every function of
// onNew.
func (b *builder) client(reuse []Shard, sh Shard, from any, create func() *goredis.Client) *goredis.Client {
	for _, old := range reuse {
		if old.Addr == sh.Addr && reflect.DeepEqual(b.from[old.Client], from) {
			return old.Client
		}
	}
	c := shardClient(create())
	sh.Client = c
	for _, fn := range b.onNew {
		onNode(c, func(node *goredis.Client) { fn(sh, node) })
	}
	if b.from == nil {
		b.from = map[*goredis.Client]any{}
	}
	b.from[c] = from
	return c
}

// prune forgets the options of the clients that shards do not hold.
func (b *builder) prune(shards []Shard) {
	for c := range b.from {
		if !slices.ContainsFunc(shards, func(sh Shard) bool { return sh.Client == c }) {
			delete(b.from, c)
		}
	}
}

// addrOf returns the address that identifies the shard so describes (its
// Shard.Addr): its server's address, or "sentinel:<MasterName>", followed
// by "/<DB>" for a DB other than 0.
func addrOf(so ShardOptions) string {
	if so.Cluster != nil {
		return clusterAddr(so.Cluster)
	}
	if so.Failover != nil {
		return "sentinel:" + so.Failover.MasterName + dbSuffix(so.Failover.DB)
	}
	addr, db := so.Addr, 0
	if so.Options != nil {
		addr, db = cmp.Or(addr, so.Options.Addr), so.Options.DB
	}
	return addr + dbSuffix(db)
}

// dbSuffix is what a shard's address gets for its DB: "/<DB>", or nothing
// for DB 0.
func dbSuffix(db int) string {
	if db == 0 {
		return ""
	}
	return "/" + strconv.Itoa(db)
}

// server returns what names shard sh's server whatever its DB: its address
// without the DB that addrOf adds, the host resolved when it resolves (see
// resolveServer), so that "localhost:6379" and "127.0.0.1:6379" name one
// server. A server's function libraries, script cache, configuration and
// pub/sub are shared by its shards.
func server(sh Shard) string {
	addr := strings.TrimSuffix(sh.Addr, dbSuffix(sh.Client.Options().DB))
	if srv, ok := resolveServer(addr); ok {
		return srv
	}
	return addr
}

// shardClient prepares a shard's client: a refusal to set up its
// connections is the shard's failure, and its writes drop what the
// process's caches of its server hold of their keys (see shardHook).
func shardClient(c *goredis.Client) *goredis.Client {
	c.AddHook(shardHook{caches: joinServer(c), fence: newFenceWatch(c)})
	return c
}

// retryDefaults gives a shard's options this package's retry defaults where
// the user set none: MaxRetries 0 becomes -1 (no retry) and DialerRetries 0
// (or less) 1 (one dial), instead of go-redis's 3 retries of 5 dials each.
// A command for a dead shard then fails after one attempt: at once when the
// server refuses connections, else within one DialTimeout, or one
// WriteTimeout and ReadTimeout on an open connection; with go-redis's
// defaults a killed shard took 1.7 s against 300 ms timeouts, and a probe
// waited out its ProbeTimeout. Retrying a dead shard is the health
// policy's business (probes, ejection, rejoining), not each command's.
func retryDefaults(o *goredis.Options) {
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialerRetries <= 0 {
		o.DialerRetries = 1
	}
}

// maintDefault disables go-redis's maintenance notifications
// (maintnotifications.ModeDisabled) on a shard whose options leave
// MaintNotificationsConfig nil. With go-redis's default, ModeAuto, every
// client starts a handoff worker manager (two goroutines and their
// channels, some 10 KiB per client) and every new connection sends CLIENT
// MAINT_NOTIFICATIONS ON, which Redis open source (7.x, 8.0) refuses as an
// unknown subcommand: a round trip per connection and, at 1,000 shards,
// 2,000 goroutines for nothing. The notifications serve Redis Enterprise
// and Redis Cloud endpoints that move under the client; set
// MaintNotificationsConfig (Mode ModeAuto or ModeEnabled) to use them.
func maintDefault(o *goredis.Options) {
	if o.MaintNotificationsConfig == nil {
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
}

// closeClients closes the clients of shards that keep does not hold.
func closeClients(shards, keep []Shard) {
	for _, sh := range shards {
		if !slices.ContainsFunc(keep, func(k Shard) bool { return k.Client == sh.Client }) {
			_ = closeShardClient(sh.Client)
		}
	}
}

func checkAddr(o *goredis.Options) error {
	if o.Addr == "" {
		return errors.New("no address")
	}
	if o.Network == "unix" {
		return nil
	}
	if strings.ContainsAny(o.Addr, "@/") {
		return fmt.Errorf("address %q is not host:port (for a URL, give its host:port as Addr and its password in Options.Password)", redactAddr(o.Addr))
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return fmt.Errorf("address %q: %w", o.Addr, err)
	}
	return nil
}

// redacted replaces a password wherever one would be shown, as in net/url.
const redacted = "xxxxx"

// redactAddr hides the password of an address given as a URL
// ("redis://user:xxxxx@host:6379", url.URL.Redacted), or all that precedes
// the "@" of another address with user information.
func redactAddr(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.User != nil {
		if _, ok := u.User.Password(); !ok {
			// A lone user information may be a password (Lettuce reads
			// redis://password@host so).
			u.User = url.User(redacted)
		}
		return u.Redacted()
	}
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return redacted + addr[i:]
	}
	return addr
}

// NewShardedClientFromClients builds a ShardedClient over existing clients,
// one per shard, in ring order, with the default health policy. Shard.Addr
// defaults to the client's address and DB, as ShardOptions.Addr says. The
// ShardedClient takes them over (SetShards replaces them by clients built
// from ShardOptions):
// Close closes them, and a hook of its own is added to each, which marks a
// server's refusal to set up a connection as the shard's failure. It
// returns the errors of ring.New, and an error naming a shard with a nil
// client, whose cache it cannot reach (caching by ClientSideCacheConfig
// alone), whose ClientSideCache another shard's client holds too, or a
// client of another server of the process. p is the ring's preset (nil:
// ring.Jedis{}).
func NewShardedClientFromClients(shards []Shard, p ring.Preset) (*ShardedClient, error) {
	shards = append([]Shard(nil), shards...)
	for i := range shards {
		if shards[i].Client == nil {
			continue // refused by shardedclient, naming the shard
		}
		if err := reachableCache(shards[i].Client); err != nil {
			return nil, fmt.Errorf("shardedcache: shard %d (%q): %w", i, shards[i].Name, err)
		}
		if shards[i].Addr == "" {
			o := shards[i].Client.Options()
			shards[i].Addr = o.Addr + dbSuffix(o.DB)
		}
	}
	for _, sh := range shards {
		if sh.Client != nil {
			shardClient(sh.Client)
		}
	}
	// Checked once the caches are counted: of two calls at once that give
	// one cache to clients of two servers, the second is refused.
	err := sharedCacheErr(shards)
	var c *ShardedClient
	if err == nil {
		c, err = newShardedClient(shards, Health{}, p)
	}
	if err != nil {
		for _, sh := range shards {
			leaveServer(sh.Client) // the caller keeps its clients
		}
		return nil, err
	}
	return c, nil
}

func newShardedClient(shards []Shard, h Health, p ring.Preset) (*ShardedClient, error) {
	if h.Probe == nil && (h.ProbeInterval > 0 || h.Mode == shardedclient.EjectMode) {
		h.Probe = func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() }
	}
	if h.Classify == nil {
		h.Classify = classify
	}
	h.OnRejoin = flushOnRejoin(h.OnRejoin)
	c := &ShardedClient{state: newServerState()}
	s, err := shardcore.New(shards, shardcore.Backend[*goredis.Client]{Health: h, Move: c.moveKeys,
		Close: closeShardClient, ClosedErr: goredis.ErrClosed, ServerOf: serverKey}, p)
	if err != nil {
		return nil, err // ring's and shardcore's errors carry their own prefix
	}
	c.shards = s
	c.apFrom.Store(defaultAutoPipelineFrom)
	c.router = newRouter(func(context.Context, string, string) (net.Conn, error) { return nil, errRouterDial })
	c.pubsub = newRouter(c.dialFanIn)
	c.router.AddHook(hook{c})
	c.cmdable = c.router
	return c, nil
}

// SetShards replaces the shard list at run time (add, remove, re-weight,
// change a shard's address, DB or options under the same name): atomic,
// with minimal key movement (shards are placed by name, else position). A
// shard with the same address, DB and options keeps its client; a shard
// whose options change gets a new client, with every hook (AddHook,
// OnNewNode); the clients of shards that leave or change are closed once
// the commands using them have ended. A shard at a new address or DB is a
// new shard, cold: its keys are those already there (BeginResharding moves
// them). Before a shard that joins serves a command, it gets the function
// libraries and CONFIG SET parameters set through the client (see package
// documentation, "Server state").
//
// On error nothing changes in the shard list. It returns the errors of
// NewShardedClient, a *shardedclient.PlacementShiftError, ErrMoveInProgress
// inside a resharding window, and the failure to bring a joining shard in
// step (a *shardedclient.ShardError naming the shard and what failed).
func (c *ShardedClient) SetShards(opts []ShardOptions) error {
	return c.switchShards(opts, c.shards.SetShardsPrepared)
}

// switchShards builds the clients of opts (reusing the current shards'
// where address, DB and options match) and hands them to install with the
// step that brings the shards that join in step (serverState); on error the
// new clients are closed and nothing changes.
func (c *ShardedClient) switchShards(opts []ShardOptions, install func([]Shard, func(*view) error) error) error {
	if len(opts) == 0 {
		return errors.New("shardedcache: no shards")
	}
	if err := c.errIfClosed(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.shards.AllShards()
	shards, err := c.build.shards(opts, cur)
	if err != nil {
		return err
	}
	if err := c.state.carry(c.shards, cur, shards, install); err != nil {
		closeClients(shards, cur)
		c.build.prune(cur)
		return err // shardedclient's errors pass through, as in NewShardedClient
	}
	c.build.prune(c.shards.AllShards())
	return nil
}

// String describes c by its shards (index, name, address), never by its
// options: printing a client with %v or %+v shows no password.
func (c *ShardedClient) String() string {
	var b strings.Builder
	b.WriteString("shardedcache.ShardedClient{")
	for i, sh := range c.shards.AllShards() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(shardedclient.ShardRef{Index: i, Name: sh.Name, Addr: sh.Addr}.String())
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, for %#v.
func (c *ShardedClient) GoString() string { return c.String() }

// Stats returns every shard's counters: requests, failures (transport
// errors and refusals to set up a connection), ejections, and whether it is
// ejected now.
// CacheStats returns each shard's client-side cache statistics.
func (c *ShardedClient) Stats() []shardedclient.ShardStats { return c.shards.Stats() }

// newRouter returns a go-redis client that connects only through dial.
func newRouter(dial func(context.Context, string, string) (net.Conn, error)) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                     "shardedcache-router:0",
		Dialer:                   dial,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// GetShard returns the client of the shard that owns key, for a command the
// sharded client refuses. Inside a resharding window it first moves key to
// its new owner, so that a write through the returned client cannot be
// overwritten or lost by the move. If that move fails, it returns a client
// that sends nothing: every command, pipeline and subscription of it fails
// with the move's error (a *MoveError), as the sharded client's own
// commands on key do, since neither owner is safe to use until the key has
// moved (a move whose reply was lost may have left a copy on the new owner
// that would win over a write to the old one). Use the client for key (and
// keys that share its key tag) only, and only until the next
// BeginResharding.
func (c *ShardedClient) GetShard(key string) *goredis.Client {
	client, err := c.shards.GetShard(context.Background(), key)
	if err != nil {
		return refusingClient(err)
	}
	return client
}

// soloClient returns a client of shard client c's server with c's options
// (its Dialer, OnConnect and fence check included) and a connection of its
// own, without c's cache or autopipelining engines, that never retries: to
// ask the server something that c's pooled connections (closed by a fence,
// or to a server that died and came back) must not answer. Close it after
// use.
func soloClient(c *goredis.Client) *goredis.Client {
	o := *c.Options()
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.MaxRetries = 1, 0, 1, 0, -1
	o.ClientSideCache, o.ClientSideCacheConfig = nil, nil
	o.ClientSideCacheCoalesceMisses, o.ClientSideCacheRefreshOnInvalidate = false, false
	o.AutoPipelineOptions = nil
	return goredis.NewClient(&o)
}

// refusingClient returns a client that sends nothing: its Limiter refuses
// every command, pipeline and transaction with err before any connection
// is taken, and its dialer, which a subscription would use, fails with err.
// It starts no goroutine and holds no connection, so it needs no Close.
func refusingClient(err error) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                     "shardedcache-refused:0",
		Limiter:                  refuse{err},
		Dialer:                   func(context.Context, string, string) (net.Conn, error) { return nil, err },
		MaxRetries:               -1,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// refuse is the Limiter of refusingClient.
type refuse struct{ err error }

func (r refuse) Allow() error     { return r.err }
func (refuse) ReportResult(error) {}

// GetShardInfo returns the index, name and weight of the shard that owns key.
func (c *ShardedClient) GetShardInfo(key string) shardedclient.Info {
	return c.shards.GetShardInfo(key)
}

// Shards returns the shards in ring order. Their clients bypass the
// client's rules: inside a resharding window, a key that has not moved yet
// is on its old owner, and a write through the new owner's client would be
// overwritten or lost by the move. Use GetShard(key), which moves the key
// first.
func (c *ShardedClient) Shards() []Shard { return c.shards.AllShards() }

// Ring returns the ring that places keys.
func (c *ShardedClient) Ring() *ring.Ring { return c.shards.Ring() }

// Process runs cmd where the package documentation says and returns its
// error.
func (c *ShardedClient) Process(ctx context.Context, cmd goredis.Cmder) error {
	return c.router.Process(ctx, cmd)
}

// Do runs a raw command (name first), classified like every other command:
// an unknown command is an *UnsupportedError.
func (c *ShardedClient) Do(ctx context.Context, args ...any) *goredis.Cmd {
	return c.router.Do(ctx, args...)
}

// Watch runs fn in an optimistic transaction (WATCH keys, then fn) on the
// shard that owns keys. Every key must be on that shard (key tags help),
// else it returns a *CrossShardError. With no keys it runs fn on the one
// shard of a client of one shard (outside a resharding window), and is an
// *UnsupportedError on several. Commands that fn sends through its
// *redis.Tx run on that shard: one whose keys are on another shard fails
// with a *CrossShardError, sent nowhere. During resharding, every key is
// moved to its new owner before a command uses it, inside fn too. fn may run
// commands through the ShardedClient itself; for that, a resharding that
// begins while fn runs does not wait for fn's transaction, whose writes then
// go to the shard fn started on: do not begin a resharding under long
// transactions.
func (c *ShardedClient) Watch(ctx context.Context, fn func(*goredis.Tx) error, keys ...string) error {
	if err := c.errIfClosed(); err != nil {
		return err
	}
	// Pinned, not acquired: fn may run commands of its own through c, and
	// moves must not wait for fn (that would deadlock).
	v := c.shards.Pin()
	defer v.Unpin()
	if len(keys) == 0 {
		if !oneServer(v) {
			return &UnsupportedError{Command: "watch", Reason: "no keys, so no shard"}
		}
		return c.watch(ctx, v, 0, fn)
	}
	args := make([]any, 0, len(keys)+1)
	args = append(args, "watch")
	for _, k := range keys {
		args = append(args, k)
	}
	var ks keyShards
	if err := keysOf(v, goredis.NewStatusCmd(ctx, args...), &ks); err != nil {
		return err
	}
	if ks.shard == manyShard {
		return crossShard(v, "watch", ks.all)
	}
	if err := v.Prepare(ctx, &ks.pending, nil); err != nil {
		return err
	}
	return c.watch(ctx, v, ks.shard, fn, keys...)
}

// watch runs fn in a transaction on shard, watching keys, its commands
// guarded.
func (c *ShardedClient) watch(ctx context.Context, v *view, shard int, fn func(*goredis.Tx) error, keys ...string) error {
	var fnErr error
	err := watchOn(v.Client(shard))(ctx, func(tx *goredis.Tx) error {
		tx.AddHook(guard{c: c, v: v, shard: shard})
		fnErr = fn(tx)
		return fnErr
	}, keys...)
	if err != nil && err == fnErr {
		return err // fn's own error, unchanged
	}
	return v.Finish(ctx, shard, err)
}

// ForEachShard calls fn with every shard's client, in parallel, and returns
// a *shardedclient.MultiShardError (Op "ForEachShard") naming each shard
// whose fn failed, or nil.
// Inside a resharding window it returns ErrReshardingWindow and calls
// nothing: a raw shard client could write keys that have not moved yet.
func (c *ShardedClient) ForEachShard(ctx context.Context, fn func(ctx context.Context, client *goredis.Client) error) error {
	if err := c.errIfClosed(); err != nil {
		return err
	}
	v := c.shards.Pin() // fn may run commands through c (see Watch)
	defer v.Unpin()
	if v.Moving() {
		return ErrReshardingWindow
	}
	errs := make([]error, v.Len())
	all := make([]int, v.Len())
	var wg sync.WaitGroup
	for i := range v.Len() {
		all[i] = i
		wg.Go(func() { errs[i] = fn(ctx, v.Client(i)) })
	}
	wg.Wait()
	return v.MultiErr("ForEachShard", all, errs)
}

// AddHook adds hook to the client of every shard, now and later: to those
// that SetShards, BeginResharding or a change of a shard's options create,
// Sentinel shards included, before they serve a command. Instrumentation
// then sees each shard's own commands, pipelines and dials: a command once,
// on the shard that runs it; a command split over shards once per shard.
// As on a *redis.Client, add hooks before commands run concurrently.
func (c *ShardedClient) AddHook(hook goredis.Hook) {
	c.OnNewNode(func(client *goredis.Client) { client.AddHook(hook) })
}

// OnNewNode calls fn with the client of every shard: at once for the
// shards in use (a resharding window's old shards included), and later for
// every client the sharded client creates (SetShards, BeginResharding, a
// change of a shard's options, Sentinel shards), before it serves a
// command. It has the name and signature of go-redis's Ring.OnNewNode and
// ClusterClient.OnNewNode, so per-node instrumentation written for them
// works here (see the package documentation, "Observability"). fn runs
// while the shard list changes: it must not call AddHook, OnNewNode,
// SetShards or BeginResharding. A client whose shard leaves is closed, with
// no call.
func (c *ShardedClient) OnNewNode(fn func(rdb *goredis.Client)) {
	c.OnNewShardNode(func(_ Shard, node *goredis.Client) { fn(node) })
}

// OnNewShardNode is OnNewNode with the shard that node serves, for
// instrumentation that names it (redisotel.WithAttributes, a Prometheus
// label): fn gets the shard's name, weight and address (Shard.Addr, its
// identity) as they were when its client was made, and node, the client
// that runs the shard's commands: Shard.Client itself, or for a cluster
// shard the client of each cluster node. A shard renamed with the same
// address, DB and options keeps its client, and what fn gave it under the
// old name. The rules of OnNewNode apply.
func (c *ShardedClient) OnNewShardNode(fn func(shard Shard, node *goredis.Client)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.build.onNew = append(c.build.onNew, fn)
	for _, sh := range c.shards.AllShards() {
		onNode(sh.Client, func(node *goredis.Client) { fn(sh, node) })
	}
}

// PoolStats returns the connection pool statistics of every shard, summed.
func (c *ShardedClient) PoolStats() *goredis.PoolStats {
	sum := &goredis.PoolStats{}
	for _, s := range c.shards.AllShards() {
		addStats(sum, s.Client.PoolStats())
	}
	return sum
}

func addStats(dst, s *goredis.PoolStats) {
	dst.Hits += s.Hits
	dst.Misses += s.Misses
	dst.Timeouts += s.Timeouts
	dst.WaitCount += s.WaitCount
	dst.Unusable += s.Unusable
	dst.WaitDurationNs += s.WaitDurationNs
	dst.TotalConns += s.TotalConns
	dst.IdleConns += s.IdleConns
	dst.StaleConns += s.StaleConns
	dst.PendingRequests += s.PendingRequests
	dst.PubSubStats.Created += s.PubSubStats.Created
	dst.PubSubStats.Untracked += s.PubSubStats.Untracked
	dst.PubSubStats.Active += s.PubSubStats.Active
	if s.PipelineStats != nil {
		if dst.PipelineStats == nil {
			dst.PipelineStats = zeroOf(s.PipelineStats)
		}
		addStats((*goredis.PoolStats)(dst.PipelineStats), (*goredis.PoolStats)(s.PipelineStats))
	}
}

// zeroOf returns a new zero value of p's type (go-redis's internal pool
// statistics type, which cannot be named here).
func zeroOf[T any](*T) *T { return new(T) }

// ErrAutoPipelineUnsupported is returned by AsyncAutoPipeline and
// AsyncAutoPipelineWithOptions (see there).
var ErrAutoPipelineUnsupported = errors.New("shardedcache: AsyncAutoPipeline is not supported on a sharded client; use AutoPipeline, or AutoPipelineOptions in the shards' options")

// AutoPipeline returns the client's blocking autopipeliner (go-redis's
// *redis.AutoPipeliner, as Client.AutoPipeline): each command call blocks
// until its command has run, while commands that other goroutines send
// through it meanwhile are sent with it as one pipeline of the sharded
// client (Pipelined): split by shard, one round trip per shard, the shards
// in parallel, each command with its own reply and error. Its options are
// those of AutoPipelineWithOptions(nil). One instance is kept and shared;
// Close closes it. Its typed commands, Do, Pipelined, TxPipelined and
// Process run as the sharded client's do (its Watch is refused with an
// *UnsupportedError: use the sharded client's); its Subscribe, PSubscribe
// and SSubscribe fail (they would need a connection of its own: use the
// sharded client's), and its PoolStats are empty.
//
// To coalesce commands per shard without changing the calls, set
// AutoPipelineOptions in the shards' options instead (see
// ShardOptions.Options): then every command of the sharded client is
// autopipelined, with no autopipeliner to hold.
func (c *ShardedClient) AutoPipeline() (*goredis.AutoPipeliner, error) {
	return c.AutoPipelineWithOptions(nil)
}

// AutoPipelineWithOptions is AutoPipeline with opt, which nil makes
// ShardedOptions.Options.AutoPipelineOptions, or go-redis's
// DefaultBlockingAutoPipelineOptions. The first call's options win. It
// returns redis.ErrClosed after Close, an error for FullDuplex (the
// sharded client has no connection of its own to hold) and
// AutoPipelineOptions.Validate's error.
//
// Its batches are the sharded client's pipelines, and a pipeline waits for
// its slowest shard: a hung shard holds up, until its ReadTimeout, the
// commands of the other shards that share its batches, which the shards'
// own autopipelining (ShardOptions.Options) does not.
func (c *ShardedClient) AutoPipelineWithOptions(opt *goredis.AutoPipelineOptions) (*goredis.AutoPipeliner, error) {
	return c.routerEngine(opt)
}

// AsyncAutoPipeline is not supported: it returns ErrAutoPipelineUnsupported.
// A command of go-redis's deferred autopipeliner waits, when its result is
// read, for the batch that carries it; the sharded client reads the
// commands of a batch on other goroutines while it runs the batch's parts
// on the shards in parallel, and would wait for itself. Use AutoPipeline,
// or set AutoPipelineOptions in the shards' options (ShardOptions.Options),
// which autopipelines every command of the client, pipelines included.
func (c *ShardedClient) AsyncAutoPipeline() (*goredis.AutoPipeliner, error) {
	return nil, ErrAutoPipelineUnsupported
}

// AsyncAutoPipelineWithOptions is not supported: it returns
// ErrAutoPipelineUnsupported (see AsyncAutoPipeline).
func (c *ShardedClient) AsyncAutoPipelineWithOptions(*goredis.AutoPipelineOptions) (*goredis.AutoPipeliner, error) {
	return nil, ErrAutoPipelineUnsupported
}

// ShardOptions returns a copy of the go-redis options of every shard's
// client, in ring order (each shard's own with the shared ones of
// ShardedOptions.Options filled in, as built), safe to print or log: a Password that is set is
// replaced by "xxxxx" (as net/url's Redacted does), so %v, %+v and %#v show
// no secret. (TLSConfig and the credentials callbacks are shared, and print
// as pointers.) The real password is not handed out: a client built from
// these options fails to authenticate. A Sentinel shard's options are those
// of its master connections; its SentinelPassword is not among them.
func (c *ShardedClient) ShardOptions() []*goredis.Options {
	shards := c.shards.AllShards()
	out := make([]*goredis.Options, len(shards))
	for i, s := range shards {
		o := *s.Client.Options()
		if o.Password != "" {
			o.Password = redacted
		}
		out[i] = &o
	}
	return out
}

// Close closes every shard's client and returns their errors joined. From
// then on every call returns redis.ErrClosed itself (errors.Is and ==):
// commands, Do, pipelines, TxPipelined, Watch, ForEachShard, the pub/sub
// methods, a ScanIterator, SetShards, BeginResharding, BeginClusterMove,
// EndResharding, AbandonResharding and NewMigration. A command under way
// while Close runs may fail with the shard's *shardedclient.ShardError
// wrapping redis.ErrClosed (errors.Is holds too). Close again does nothing
// and returns redis.ErrClosed, as a *redis.Client's does.
func (c *ShardedClient) Close() error {
	if c.closed.Swap(true) {
		return goredis.ErrClosed
	}
	return errors.Join(c.pubsub.Close(), c.shards.Close(), c.router.Close())
}
