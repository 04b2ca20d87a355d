package main

// A decision is a change of ours to what Redis's specs say, for a sharded
// client, or the entry of a command that no published spec covers. Its
// label is kept in the Source of each entry it touches.
type decision struct {
	label  string
	names  []string     // commands, subcommands ("client|setname") or family prefixes ("ft.")
	define func(*entry) // the facts of a command that no source has
	apply  func(*entry)
}

var decisions = []decision{
	// MSETEX with NX or XX sets all its keys or none. Redis tips it
	// multi_shard, but split across shards it could set some keys and not
	// others (and its numkeys would not fit the parts). Redis dropped the
	// same tip from MSETNX after 7.0.
	{label: "all keys on one shard, as it sets all or none", names: []string{"msetex"}, apply: byKeys},
	// PUBLISH has no key in Redis's table: its channel routes it, as
	// SPUBLISH's does, so that a message reaches the channel's shard, where
	// the sharded client subscribes to it. PUBSUB NUMSUB counts the
	// subscribers of channels, so they route it as well.
	{label: "its channel routes it", names: []string{"publish"}, apply: routeBy(spec{index: 1, keyStep: 1, notKey: true})},
	{label: "its channels route it", names: []string{"pubsub|numsub", "pubsub|shardnumsub"}, apply: routeBy(spec{index: 2, lastKey: -1, keyStep: 1, notKey: true})},
	// Each channel is subscribed on its own shard and each time series is
	// on one shard, so the lists of every shard, concatenated, are the
	// list of one server (whose order Redis does not define).
	{label: "every shard, lists concatenated", names: []string{"pubsub|channels", "pubsub|shardchannels", "ts.queryindex"}, apply: allShards},
	// RANDOMKEY is tipped all_shards with no response policy: one shard's
	// random key, or nil from an empty shard while others hold keys, is not
	// the answer for the whole keyspace. The client draws a shard by DBSIZE
	// (ShardedClient.RandomKey).
	{label: "a shard drawn by its DBSIZE", names: []string{"randomkey"}, apply: special},
	// SORT and SORT_RO have "unknown" key specifications (STORE may stand
	// anywhere; BY and GET name keys by pattern): their keys are found by
	// scanning the arguments (sortKeys), and patterns that read other keys
	// are refused.
	{label: "keys found by sortKeys", names: []string{"sort", "sort_ro"}, apply: func(e *entry) { e.sortLike = true }},
	// RedisJSON registers JSON.MGET with keys (1, 1, 1), which names its
	// first key only: its keys are every argument but the last (the path).
	{label: "keys are all arguments but the path", names: []string{"json.mget"}, apply: routeBy(spec{index: 1, lastKey: -2, keyStep: 1})},
	// Modules register a command "readonly" or "write" as a whole, and
	// their legacy key triples (and RedisTimeSeries's key specifications)
	// carry no RO flag: these are the ones registered "readonly"
	// (RedisJSON's lib.rs, RedisTimeSeries's module.c, the vector sets'
	// vset.c), so that a client-side cache does not drop their keys as
	// written (see Info.WrittenKeys).
	{label: "registered readonly", names: []string{
		"json.arrindex", "json.arrlen", "json.debug", "json.get", "json.objkeys", "json.objlen", "json.resp", "json.strlen", "json.type",
		"ts.get", "ts.info", "ts.range", "ts.revrange",
		"vcard", "vdim", "vemb", "vgetattr", "vinfo", "vismember", "vlinks", "vrandmember", "vsim",
	}, apply: readOnly},

	// Commands that go-redis v9.23 sends and no published spec covers:
	// their syntax, from go-redis's argument builders.
	{label: "no published spec: TS.NRANGE numkeys key [key ...] from to ...", names: []string{"ts.nrange", "ts.nrevrange"},
		define: command(-5, spec{index: 1, keynum: true, firstKey: 1, keyStep: 1})},
	{label: "no published spec: TS.READ key timestamp ...", names: []string{"ts.read"}, define: command(-3, spec{index: 1, keyStep: 1})},
	{label: "no published spec: VRANGE key start end [count]", names: []string{"vrange"}, define: command(-4, spec{index: 1, keyStep: 1})},
	{label: "no published spec: TS.QUERYLABELS LABELS|VALUES ... FILTER ...", names: []string{"ts.querylabels"}, define: command(-3),
		apply: refuseSharded("label lists of several shards overlap, so they do not merge into one server's list", "")},
	{label: "no published spec: CLIENT MAINT_NOTIFICATIONS", names: []string{"client|maint_notifications"}, define: command(-3),
		apply: refuse("maintenance notifications are set per connection", "set MaintNotificationsConfig in the shards' Options")},
	{label: "no published spec: HIMPORT (Redis 8.10)", names: []string{"himport"}, define: command(-2),
		apply: refuse("HIMPORT fieldsets live on one connection of one server", "run HIMPORT on the client of the key's shard (GetShard)")},

	// Connection state: set for every connection by the shards' Options.
	{label: "refused: connection state", names: []string{"select"},
		apply: refuse("the database is a setting of each connection", "set DB in the shards' Options")},
	{label: "refused: connection state", names: []string{"auth"},
		apply: refuse("authentication is per connection", "set Username and Password (or a CredentialsProvider) in the shards' Options")},
	{label: "refused: connection state", names: []string{"hello"},
		apply: refuse("the protocol and authentication are set per connection", "set Protocol, Username and Password in the shards' Options")},
	{label: "refused: connection state", names: []string{"client|setname"},
		apply: refuse("a connection's name is set per connection", "set ClientName in the shards' Options")},
	{label: "refused: connection state", names: []string{"client|setinfo"},
		apply: refuse("the library's name and version are set per connection", "go-redis sets them on every connection (Options.DisableIdentity, IdentitySuffix)")},
	{label: "refused: connection state", names: []string{"client|tracking", "client|caching", "client|getredir", "client|trackinginfo"},
		apply: refuse("client-side caching is set per connection", "set ClientSideCache in the shards' Options")},
	{label: "refused: connection state", names: []string{"client|reply", "client|no-evict", "reset", "script|debug"},
		apply: refuse("it sets a mode of the one pooled connection it runs on", "set it on every connection with OnConnect in the shards' Options")},
	{label: "refused: connection state", names: []string{"quit"},
		apply: refuse("it closes the one pooled connection it runs on", "use Close")},
	{label: "refused: not a cluster", names: []string{"cluster", "readonly", "readwrite", "asking"},
		apply: refuse("the shards are independent servers, not a Redis Cluster", "use a redis.ClusterClient for a Redis Cluster")},

	// Transactions and subscriptions hold one connection: the client's own
	// methods place them.
	{label: "refused: transaction", names: []string{"multi", "exec", "discard"},
		apply: refuse("a transaction must stay on one connection of one shard", "use TxPipelined, TxPipeline or Watch")},
	{label: "refused: transaction", names: []string{"watch", "unwatch"},
		apply: refuse("WATCH holds one connection of one shard", "use Watch")},
	{label: "refused: subscription", names: []string{"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"},
		apply: refuse("a subscription holds its connection", "use Subscribe, PSubscribe or SSubscribe")},
	{label: "refused: one server's stream", names: []string{"monitor", "sync", "psync", "replconf"},
		apply: refuse("it streams one server's traffic on its connection", "call it on the client of each shard (Shards)")},

	// Reports on one server that Redis tips all_shards or all_nodes but
	// whose replies do not merge into one server's reply. Over one shard,
	// they are that server's reply.
	{label: "refused: one server's report", names: []string{
		"info", "latency|latest", "latency|history", "latency|doctor", "latency|graph", "latency|histogram",
		"memory|stats", "memory|doctor", "memory|malloc-stats", "function|stats",
	}, apply: refuseSharded("each server reports on itself, and the reports of several do not merge into one server's reply", "")},
	{label: "refused: one server's report", names: []string{"slowlog|get"},
		apply: refuseSharded("each server's slow log has its own entry ids and count, so the logs of several do not merge into one", "")},

	// Administration of one server. Redis gives them no request policy, so
	// they would run on an arbitrary shard and act on that shard alone.
	// Over one shard, they act on its server.
	{label: "refused: administration of one server", names: []string{
		"shutdown", "replicaof", "slaveof", "failover", "bgsave", "save", "bgrewriteaof", "swapdb",
		"module|load", "module|loadex", "module|unload", "acl|load",
		"client|kill", "client|pause", "client|unpause", "client|unblock",
	}, apply: refuseSharded("it acts on one server, and Redis names no shard for it", "")},
	{label: "refused: administration of one server", names: []string{"debug"},
		apply: refuseSharded("it acts on one server, and Redis names no shard for it", "run it on a shard's client (GetShard(key) for DEBUG OBJECT key)")},

	// Modules. Over one shard, an index covers every key, and FILTER
	// selects the series of one server.
	{label: "refused: FT (search) family", names: []string{"ft."},
		apply: refuseSharded("a search index covers only the keys of its own shard, so its queries have no sharded meaning", "run FT commands on each shard with ForEachShard")},
	{label: "refused: TS filter queries", names: []string{"ts.mget", "ts.mrange", "ts.mrevrange"},
		apply: refuseSharded("FILTER selects series on every shard, and go-redis's maps of series do not merge", "")},
}

// readOnly marks every key of a command read, not written.
func readOnly(e *entry) {
	for i := range e.specs {
		e.specs[i].write = false
	}
}

func byKeys(e *entry)    { e.request, e.response = "ByKeys", "Default" }
func special(e *entry)   { e.request = "Special" }
func allShards(e *entry) { e.request, e.response = "AllShards", "Default" }

// routeBy replaces the key specifications of a command with s.
func routeBy(s spec) func(*entry) {
	return func(e *entry) { e.specs = []spec{s} }
}

// command sets the arity and key specifications of a command.
func command(arity int, specs ...spec) func(*entry) {
	return func(e *entry) { e.arity, e.specs = arity, specs }
}

// refuse refuses a command: why it has no sharded meaning, and what to use
// instead (empty: ForEachShard or GetShard).
func refuse(why, instead string) func(*entry) {
	return func(e *entry) { e.refused, e.instead = why, instead }
}

// refuseSharded refuses a command over several shards only: over one
// shard, which is one server, it runs there (Info.OneServer).
func refuseSharded(why, instead string) func(*entry) {
	return func(e *entry) { e.refused, e.instead, e.oneServer = why, instead, true }
}
