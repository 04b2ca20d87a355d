// Package fleet reshards a fleet as one: every process that shares a list
// of shards goes through a resharding (add, remove, re-weight or replace
// shards, data moved, no cold cache) with no lost acknowledged write, no
// resurrected delete, no stale read after an acknowledged write, and no
// copy left behind — whether processes start in the middle, crash, or
// pause past every timeout.
//
// # Vocabulary
//
// A resharding changes the fleet's shard list from L to T. A key whose
// owner under T differs from its owner under L is a moving key; its owner
// under L is its source (old owner), its owner under T its destination
// (new owner). A move takes one key off its source onto its destination.
// The migration is the driver's scan of every source that moves every
// moving key not yet moved. The driver is the process (or the command-line
// tool) that runs the resharding; every process of the fleet is a member.
// A step is one state of the fleet in the coordination store; the epoch
// numbers the steps. A fence is a server's refusal of connections named
// with an older epoch.
//
// # Where the truth is
//
// The servers decide where a key lives while it moves, never a process's
// memory (after Redis Cluster's MIGRATING/IMPORTING slots, where a source
// answers for a key while it holds it and the destination once it does
// not, and MIGRATE's atomic per-key move):
//
//   - A moving key's source holds the truth while it holds the key; once
//     the source no longer holds it, the destination does.
//   - Nothing ever writes a moving key on its source once moves have begun
//     (the fence below makes sure of that), so a key that has left its
//     source never comes back there.
//   - A move is three server-side steps, each one atomic on its server
//     (scripts): on the source, mark the key with a move token and read
//     it (DUMP, and its absolute expiry, PEXPIRETIME); on the destination,
//     unless the token was revoked, RESTORE it with that absolute expiry
//     (ABSTTL, REPLACE: a copy there while the source holds the key is
//     stale) and record the token as restored; on the source, if the mark
//     is still that token, delete the key and the mark. While a key is
//     marked, no command uses it: a command that finds the mark waits for
//     the move to end, or settles it.
//   - A move the client stopped waiting for (a timeout, a hung server, a
//     process that died or paused) may still run later: its mark stays on
//     the source until someone settles it. The client never sends a step
//     of a move a second time by itself (no retry after a timeout: a copy
//     that runs late is settled, a second one could run after that). To settle a token, ask its
//     destination — once it answers again — to revoke the token unless it
//     was restored, in one atomic step: restored, the move is finished
//     (the source's copy goes); revoked, a RESTORE that arrives later is
//     refused, and the mark goes (the source's copy stays the truth). An
//     attempt's token goes to every destination of its keys, so the
//     outcome is the key's own destination's. Revocations are kept (no
//     clock bounds how late a RESTORE may arrive); restored tokens are
//     dropped once the migration has settled every move.
//
// One process alone runs the same moves (package redis, BeginResharding):
// it is the whole fleet, so it has no step to announce and no fence to
// raise, and the first move's check that the source is fenced is left out.
//
// # The steps
//
// A resharding from L to T goes through four states of the fleet's one
// record in the store, each with its epoch; e is the epoch of Stable(L):
//
//	step            epoch  moving keys are sent              other keys   the driver, during the step
//	--------------  -----  --------------------------------  -----------  -----------------------------------------
//	Stable(L)       e      to their source (owner under L)   by L         -
//	Preparing(L→T)  e+1    to their source                   by L         removes stale copies from the shards that
//	                                                                      gain keys; then fences every source at e+2
//	                                                                      and marks every server moved
//	Moving(L→T)     e+2    moved first (the move above),     by T (= L)   migration: moves the rest, settles every
//	                       then to their destination                      unsettled move
//	Stable(T)       e+3    to their destination (owner       by T         -
//	                       under T)
//
// The fence of a source at epoch m (e+2) is two operations on the server:
// raise the server's fence epoch to m (new connections named with an
// older epoch are refused when they connect: the name is set, then the
// fence checked, in that order), then close every connection of the
// fleet named with an older epoch. After both, no command routed under L
// can run on a source: it was sent on a connection now closed, or it would
// need a new one, which is refused. A member gets connections of the
// Moving epoch to a source only in the switch that stops routing by L (a
// process that applies Moving opens its window and renames its sources'
// connections at once): a command routed by L, begun before or still
// running, never reaches a source through its fence.
//
// Why every pair of adjacent steps is safe, and why a process that is
// behind cannot do harm:
//
//   - Stable(L) and Preparing: the same routing.
//   - Preparing and Moving: no key moves and no process writes a moving
//     key on its destination before every source is fenced (the driver
//     stores Moving only after Fence returned, and a move's first step
//     refuses to run on a server not marked moved for this resharding).
//     From then on a process still in Stable(L) or Preparing reaches no
//     source (fenced); its commands on a source fail with a typed error,
//     or wait within their context for the process to apply Moving. A
//     command in flight on a connection that the fence closes fails as one
//     whose reply was lost (the redis backend: a *FenceClosedError
//     wrapping the connection's EOF, not counted against the shard): it
//     ran before the fence or not at all.
//     Removing stale copies happens before the fence: nothing writes a
//     moving key on its destination then; a removal that arrives late
//     (a driver paused past its lease) is refused by the destination,
//     marked moved.
//   - Moving and Stable(T): Stable(T) is stored only once the migration
//     found no moving key on any source and no unsettled mark. A process
//     in Moving asks the source first and finds the key gone; it then
//     uses the destination, as Stable(T) does. Neither writes a source.
//   - A process two or more steps behind, with a command in flight (it
//     paused, or its reply was lost): if the command is for a source, it
//     runs only on a connection named with an epoch the source accepts,
//     so it ran before the fence or never runs. If it is for a
//     destination under L's rule (a key that does not move), that shard
//     owns the key under T too.
//   - The driver: the state moves on by compare-and-swap only; a driver
//     that lost its lock (a pause, a crash) and comes back cannot store a
//     step, and every server-side operation it may still have in flight
//     is one of the atomic steps above, each safe whenever it lands.
//
// With a fenced backend (redis), the epoch-fence makes safety independent
// of clocks and leases: the
// coordination store orders the steps and tells the members, and its
// lease only decides who drives. A member that cannot reach the store
// keeps serving with the state it has; if a resharding fences it, its
// commands on the fenced shards fail with a typed error (or wait within
// their context) until it reaches the store again and applies the state.
// Outside a resharding a command costs what it costs without a fleet: no
// round trip and no store call on the command path (a connection costs
// one more command when it is set up: the fence check).
//
// # The move into a Redis Cluster
//
// A fleet moves into a Redis Cluster as it reshards, by the same steps,
// fence and moves: the target is one shard marked as a cluster
// (Shard.Cluster, its seed addresses in Addr), the whole new list, so
// every shard of L is a source. What differs:
//
//   - Preparing: the cluster gains every key, so every key its masters
//     hold is a stale copy (the protocol's own keys, "__shardedcache:...",
//     aside): the driver removes them all, in one script per hash slot
//     that checks the slot's fence record, and Fence then marks the
//     fence record of each of the 16384 slots moved (a removal that lands
//     late is refused, as on a server).
//   - Moving: a move marks and reads a key on its source, as always; its
//     restoring script runs on the cluster master that serves the key's
//     hash slot, and records the token in that slot's records (internal
//     keys whose hash tag puts them in the slot: a script's keys must share
//     one slot); settling a move asks that slot's master. A move's outcome
//     is therefore its slot's, decided atomically on one master, as on a
//     server, and the safety argument above holds slot by slot.
//   - Stable(cluster): every process sends every command to the cluster
//     through a cluster client (MOVED and ASK followed).
//
// What holds is what a resharding promises: no lost acknowledged write, no
// resurrected delete, no stale read after an acknowledged write, no copy
// left on the old servers, for any number of processes, crashes and
// pauses. It needs of the cluster: no slot migration during the move (a
// move decides its outcome on the master that serves the slot when it
// runs); no failover during the move (replication is asynchronous: a
// master that fails over may lose a RESTORE it acknowledged, after the
// source's copy was deleted); DB 0; and no data of another application
// (Preparing removes every key). After it, commands whose keys are in
// several hash slots fail (Redis Cluster's rule; package redis's
// PlanClusterMove lists the key groups it would split), and the fleet
// stays on the cluster: State.Validate refuses a step out of a cluster,
// since no migration can scan keys out of one. The cluster keeps the
// protocol's records: the 16384 slots' fence records, and the revoked
// moves' records (one per slot that had one).
//
// # Without fences: memcache (Unfenced backends)
//
// memcached has no scripts and no CLIENT KILL: a server cannot refuse a
// process that is behind, so the fence above does not exist. A backend
// whose servers cannot fence implements Unfenced, and the fleet protects
// it with member leases and compare-and-set moves instead (package
// memcache; its meta commands have an add that stores only over nothing
// and a delete that compares a CAS token):
//
//   - Every member registers in the store under a lease (Store.Register,
//     MemberOptions.LeaseTTL) and reports each epoch it applied, after
//     Apply returned; Apply returns only once the process's commands
//     routed by the previous step have ended.
//   - The driver starts the work of Preparing and of Moving (and so stores
//     the next step) only once every member the store lists has reported
//     the step's epoch; a member whose lease expired in the store is no
//     longer listed.
//   - A member refuses every command, with a *LeaseExpiredError and
//     nothing sent, from the instant its lease is not surely valid
//     (MemberLease.ValidUntil: the start of the last renewal the store
//     confirmed plus the TTL, earlier than the store's own expiry) until
//     it has registered again, applied the store's state and reported it.
//     Every command, not only those of moving keys: a member cut off from
//     the store cannot know what a change it missed moves.
//
// The steps, for such a backend:
//
//	step            moving keys                                   other keys  the driver, once every member reported the step
//	--------------  --------------------------------------------  ----------  ----------------------------------------------
//	Stable(L)       on their source                               by L        -
//	Preparing       nothing sent: a command waits for Moving      by L (= T)  removes stale copies from the shards that gain
//	                (at most a bound, then a typed error)                     keys
//	Moving          moved first, then on their destination; a     by T        migration: lists the sources, moves every
//	                delete stores a tombstone there                           moving key, then waits until every move begun
//	                                                                          before its end has landed
//	Stable(T)       on their destination                          by T        -
//
// A move of a key (each step one command on one server): read the
// destination; if it holds the key (a value or a tombstone), the
// destination is the truth, and a copy left on the source is deleted.
// Else read the source's item (value, flags, TTL, CAS token); a miss
// means the key is on neither server, or already on the destination.
// Else, within a bound of that read (memcache.MoveWindow) and with a
// valid lease, add the item to the destination (stored only over
// nothing: a newer write or tombstone there wins), then delete the
// source's copy if its CAS token is unchanged.
//
// Why every pair of adjacent steps is safe:
//
//   - Stable(L) and Preparing: a Preparing member sends nothing for a
//     moving key; the other keys have one owner in both lists. Nothing
//     writes a moving key on its destination, so removing stale copies
//     there removes only leftovers.
//   - Preparing and Moving: Moving is stored only once no live member
//     routes by L (each reported Preparing, or its lease ran out and it
//     refuses every command). From then on nothing writes a source: a
//     Moving member writes a key on its destination after moving it, and
//     a Preparing one sends nothing. So a source's copy, while there, is
//     the truth unless the destination holds the key, which only a move
//     (of the source's value) or a later write put there: reads ask the
//     destination first, and an add never overwrites.
//   - A delete racing with a move: a move that read the source before the
//     delete would bring the value back with its add. So a delete of a
//     moving key in Moving stores a tombstone on the destination
//     (memcache.TombstoneTTL) instead of deleting: the late add finds the
//     key taken. A tombstone reads as a miss and expires after longer
//     than a move may take.
//   - Moving and Stable(T): Stable(T) is stored once a pass of the
//     migration over every source found no moving key, plus the time for
//     every move begun before to land (an add is sent within MoveWindow of
//     its read). A key that has left its source never comes back there,
//     so both steps find the truth on the destination, and a plain delete
//     in Stable(T) races with no move.
//   - A move whose process died between its add and its delete leaves the
//     same value on both servers: the next use of the key, or the
//     migration, finds it on the destination and deletes the source's.
//   - The driver: steps are stored by compare-and-swap, as above; the
//     driver's server work (removing stale copies, the migration's
//     moves) runs under a context that ends when its lock's lease is
//     lost, so a driver that paused past that lease sends nothing more,
//     under the same assumption as the members' commands below.
//
// What is promised, and the assumption: no lost acknowledged write, no
// resurrected delete, no stale read after an acknowledged write, and no
// copy left behind (tombstones aside, which expire), for processes that
// start mid-change, crash, or pause past their lease — provided that no
// process pauses between its lease check and its command reaching
// memcached for longer than the rest of its lease (at least two thirds of
// the TTL while renewals succeed), and that clocks run at the same rate
// within that margin. A lease system without fencing tokens cannot do
// better: memcached accepts whatever reaches it. Two more limits, of
// memcached itself: a value evicted from its destination is a miss (a
// cache's normal outcome), and a write the client stopped waiting for (a
// hung server) may land after a later write of the same key sent on
// another connection, in or out of a change.
//
// The price of no fence: outside a change a command costs one clock read
// and a lease check, no round trip; but a member that cannot renew its
// lease (the store unreachable for LeaseTTL) stops serving until it can,
// where a fenced fleet keeps serving outside a change. Inside a change, a
// moving key's first use in a process costs up to four round trips (the
// move), and a delete of a moving key two; moving keys wait during
// Preparing.
//
// # Stores
//
// The store is an interface (Store): MemStore for one process and tests;
// etcd in the separate module github.com/shardedcache/shardedcache/fleet/etcdstore,
// so that an application that uses no store pulls in no etcd or gRPC.
package fleet
