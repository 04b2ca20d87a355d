package memcache

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/internal/shardcore"
	"github.com/shardedcache/shardedcache/ring"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// ShardOptions configures one shard: one memcached server.
type ShardOptions struct {
	// Name identifies the shard on the ring; optional. Named shards keep
	// their keys when the shard list is reordered (see package ring).
	Name string
	// Weight scales the shard's share of keys; 0 means 1.
	Weight int
	// Addr is the server's "host:port", or a unix socket path (an address
	// containing "/"), resolved once by NewShardedClient and SetShards.
	Addr string
	// Timeout is the shard client's socket read/write (and dial) timeout;
	// 0 means ShardedOptions.Timeout, and when that is 0 too gomemcache's
	// DefaultTimeout (500 ms). Negative is an error.
	Timeout time.Duration
	// MaxIdleConns is the number of idle connections kept to the server;
	// 0 (or less) means ShardedOptions.MaxIdleConns, and when that is 0
	// (or less) too gomemcache's DefaultMaxIdleConns (2). Set it above the
	// expected number of concurrent calls on the shard.
	MaxIdleConns int
	// DialContext, when set, opens the shard's connections (TLS, a proxy,
	// a test double), as gomemcache's Client.DialContext; optional.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
}

// ShardedOptions configures NewShardedClient.
type ShardedOptions struct {
	// Shards lists the shards in ring order; at least one.
	Shards []ShardOptions
	// Placement is the ring's preset; nil is ring.Jedis{}, Jedis's
	// placement. ring.Libmemcached{Distribution:
	// ring.LibmemcachedKetamaWeighted} gives libketama (also PHP
	// memcached's OPT_LIBKETAMA_COMPATIBLE and twemproxy's ketama/md5),
	// ring.Spymemcached{...} spymemcached's, ring.Gomemcache{}
	// gomemcache's ServerList (crc32 % N); package ring has the other
	// peers' presets. ring.Jedis{KeyTags: true} places tagged keys by
	// their tag.
	Placement ring.Preset
	// Health says what happens when a shard fails (see Health); the
	// default, FailureMode, moves no key.
	Health Health
	// Timeout and MaxIdleConns are shared by every shard, those of this
	// list and those that SetShards and BeginResharding add later: a
	// shard whose own ShardOptions.Timeout (MaxIdleConns) is 0 gets this
	// one; a shard that sets its own keeps it. 0 leaves gomemcache's
	// defaults (500 ms, 2 connections). A negative Timeout is an error.
	Timeout      time.Duration
	MaxIdleConns int
}

// Health is the policy for failing shards (see shardedclient.Health):
// FailureMode (the default: a dead shard's keys fail until it returns) or
// EjectMode (after FailureLimit consecutive failures of the shard its keys
// go to the other shards until it answers again), retry timeout, probes,
// events. A failure of the shard is a failure to reach the server or to
// keep talking to it (refused or reset connection, the shard's Timeout);
// memcached's answers are not, nor is the caller's context ending: a call
// runs on after that, and its own outcome counts. Here Classify defaults to
// that rule, Probe to Ping (memcached's version command), and in
// EjectMode OnRejoin defaults to flushing the shard before it takes its
// keys back, so that it does not serve values that were overwritten
// elsewhere while it was out; set OnRejoin to keep them. A resharding
// window counts on that flush: a key first used while its old owner is
// ejected moves as if that owner held nothing, and a kept copy there is a
// leftover that a later shard list may serve.
type Health = shardedclient.Health[*memcache.Client]

// Shard is one shard of a ShardedClient: a gomemcache client and its place
// on the ring.
type Shard = shardedclient.Shard[*memcache.Client]

// ShardedClient is a memcached client over several servers, one gomemcache
// *memcache.Client per server. Its methods are those of *memcache.Client,
// with the same signatures and semantics; each single-key call runs on the
// shard that owns its key, and the calls that concern the whole cache reach
// every shard (see the package documentation). Every call but Close has a
// Context variant. It is safe for concurrent use.
type ShardedClient struct {
	shards *shardcore.Sharded[*memcache.Client]
	shared ShardOptions // ShardedOptions.Timeout and MaxIdleConns, for every shard

	win       atomic.Pointer[window] // the resharding window (see BeginResharding)
	reshardMu sync.Mutex             // serializes BeginResharding
	fleet     fleetState             // its part in a fleet (JoinFleet)
}

// NewShardedClient builds a ShardedClient with one gomemcache client per
// shard of opt, each with its own Timeout, MaxIdleConns and DialContext. It
// resolves the addresses and connects to nothing (gomemcache connects on
// first use). It returns an error wrapping memcache.ErrNoServers when there
// is no shard, an error naming the shard for a missing or unresolvable
// address, an address listed twice, or a negative timeout, and the errors
// of ring.New (negative weight, duplicate name) and of the health policy.
func NewShardedClient(opt *ShardedOptions) (*ShardedClient, error) {
	if opt == nil || len(opt.Shards) == 0 {
		return nil, fmt.Errorf("shardedcache: %w", memcache.ErrNoServers)
	}
	if opt.Timeout < 0 {
		return nil, fmt.Errorf("shardedcache: ShardedOptions.Timeout %v is negative", opt.Timeout)
	}
	shared := ShardOptions{Timeout: opt.Timeout, MaxIdleConns: opt.MaxIdleConns}
	shards, err := newShards(opt.Shards, nil, shared)
	if err != nil {
		return nil, err
	}
	c, err := newShardedClient(shards, opt.Health, opt.Placement)
	if err != nil {
		return nil, err
	}
	c.shared = shared
	return c, nil
}

// newShards builds the shards of opts, each shard's Timeout and
// MaxIdleConns at 0 taking shared's, and takes the client of a shard in
// reuse that has the same name, address and client settings.
func newShards(opts []ShardOptions, reuse []Shard, shared ShardOptions) ([]Shard, error) {
	shards := make([]Shard, len(opts))
	seen := make(map[addr]int, len(opts))
	for i, so := range opts {
		if so.Timeout == 0 {
			so.Timeout = shared.Timeout
		}
		if so.MaxIdleConns <= 0 {
			so.MaxIdleConns = shared.MaxIdleConns
		}
		a, err := resolve(so.Addr)
		if err == nil && so.Timeout < 0 {
			err = fmt.Errorf("timeout %v is negative", so.Timeout)
		}
		if err != nil {
			return nil, fmt.Errorf("shardedcache: shard %d (%q): %w", i, so.Name, err)
		}
		if j, dup := seen[*a]; dup {
			return nil, fmt.Errorf("shardedcache: shards %d and %d have the same address %s", j, i, a)
		}
		seen[*a] = i
		shards[i] = Shard{Name: so.Name, Weight: so.Weight, Addr: so.Addr, Client: reused(reuse, so)}
		if shards[i].Client == nil {
			client := memcache.NewFromSelector(oneServer{a})
			client.Timeout, client.MaxIdleConns, client.DialContext = so.Timeout, so.MaxIdleConns, so.DialContext
			shards[i].Client = client
		}
	}
	return shards, nil
}

// reused returns the client of the shard in reuse that so describes (same
// name, address and settings, no DialContext), or nil.
func reused(reuse []Shard, so ShardOptions) *memcache.Client {
	for _, sh := range reuse {
		c := sh.Client
		if sh.Name == so.Name && sh.Addr == so.Addr && c.Timeout == so.Timeout &&
			c.MaxIdleConns == so.MaxIdleConns && c.DialContext == nil && so.DialContext == nil {
			return c
		}
	}
	return nil
}

// NewShardedClientFromClients builds a ShardedClient over existing clients,
// one per shard, in ring order, with the default health policy; each
// client should talk to one server (its own selector decides where its
// calls go). Set Shard.Addr: gomemcache does not tell a client's address,
// errors name the shard by it, and the ketama presets label an unnamed
// shard by it. The ShardedClient takes the clients over: Close closes them.
// It returns an error wrapping memcache.ErrNoServers for an empty list, an
// error naming the shard for a nil client, and the errors of ring.New. p
// is the ring's preset (nil: ring.Jedis{}).
func NewShardedClientFromClients(shards []Shard, p ring.Preset) (*ShardedClient, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("shardedcache: %w", memcache.ErrNoServers)
	}
	return newShardedClient(slices.Clone(shards), Health{}, p)
}

func newShardedClient(shards []Shard, h Health, p ring.Preset) (*ShardedClient, error) {
	if h.Probe == nil && (h.ProbeInterval > 0 || h.Mode == shardedclient.EjectMode) {
		h.Probe = func(ctx context.Context, m *memcache.Client) error { return runErr(ctx, m.Ping) }
	}
	if h.Classify == nil {
		h.Classify = classify
	}
	if h.OnRejoin == nil && h.Mode == shardedclient.EjectMode {
		h.OnRejoin = func(ctx context.Context, m *memcache.Client) error { return runErr(ctx, m.FlushAll) }
	}
	c := &ShardedClient{}
	s, err := shardcore.New(shards, shardcore.Backend[*memcache.Client]{
		Health: h,
		Move: func(ctx context.Context, v *view, keys []shardcore.MovingKey) error {
			return c.moveKeys(ctx, v, nil, "", keys) // for GetShard
		},
		RememberMoved: true,
		ServerOf: func(sh Shard) string {
			if a, err := resolve(sh.Addr); err == nil {
				return a.network + " " + a.str
			}
			return ""
		},
	}, p)
	if err != nil {
		return nil, err // ring's and shardcore's errors carry their own prefix
	}
	c.shards = s
	return c, nil
}

// SetShards replaces the shard list at run time (add, remove, re-weight,
// move a shard to another address under the same name): atomically, each
// call running wholly on the old list or the new one, and with minimal key
// movement (a shard keeps its place on the ring when it keeps its name,
// else its address). A shard with the same name, address and settings keeps
// its client and its health record; the clients of shards that leave are
// closed once the calls using them have ended. On error (those of
// NewShardedClient) nothing changes.
func (c *ShardedClient) SetShards(opts []ShardOptions) error {
	return c.switchShards(opts, c.shards.SetShards)
}

// switchShards builds the clients of opts (reusing the current shards'
// where name, address and settings match) and hands them to install.
func (c *ShardedClient) switchShards(opts []ShardOptions, install func([]Shard) error) error {
	if len(opts) == 0 {
		return fmt.Errorf("shardedcache: %w", memcache.ErrNoServers)
	}
	shards, err := newShards(opts, c.shards.AllShards(), c.shared)
	if err != nil {
		return err
	}
	if err := install(shards); err != nil {
		return err // ring's and shardedclient's errors carry their own prefix
	}
	return nil
}

// Stats returns every shard's counters, in shard order: calls, transport
// failures, ejections, and whether it is ejected now.
func (c *ShardedClient) Stats() []shardedclient.ShardStats { return c.shards.Stats() }

// GetShard returns the client of the shard that owns key, for calls on key
// that the ShardedClient lacks. Inside a resharding window it first moves
// key to its new owner, so that a write through the returned client is not
// lost by the move. For a malformed key, or when that move fails, it
// returns a client that sends nothing: each of its calls fails with
// memcache.ErrMalformedKey, or with the move's error (a *MoveError), as the
// ShardedClient's own calls on key do; neither owner is safe to use until
// the key has moved. Use it for key only, and only until the next
// BeginResharding.
func (c *ShardedClient) GetShard(key string) *memcache.Client {
	if !legalKey(key) {
		// A shard client of NewShardedClientFromClients may let it through
		// (gomemcache's ServerList takes the empty key).
		return memcache.NewFromSelector(refusing{memcache.ErrMalformedKey})
	}
	client, err := c.shards.GetShard(context.Background(), key)
	if err != nil {
		return memcache.NewFromSelector(refusing{err})
	}
	return client
}

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

// Ring returns the ring that places keys: that of the live shards, without
// the ejected ones (see Health).
func (c *ShardedClient) Ring() *ring.Ring { return c.shards.Ring() }

// Close stops the health probes and retries, closes every shard client's
// idle connections (and those of a resharding window), and returns the
// errors joined, each a *shardedclient.ShardError naming its shard. Calls
// made afterwards still reconnect, as with gomemcache, but SetShards fails
// and health stops.
func (c *ShardedClient) Close() error {
	c.win.Load().close()
	return c.shards.Close()
}
