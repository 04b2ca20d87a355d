package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	shardedfleet "github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// fleetOptions are reshard's flags of the fleet mode: the fleet's store in
// etcd, where its members (JoinFleet with an etcdstore.Store) follow the
// change.
type fleetOptions struct {
	etcd    []string      // the endpoints; none: not the fleet mode
	prefix  string        // etcdstore.New's prefix
	lockTTL time.Duration // shardedfleet.DriverOptions.LockTTL; 0: 10 s
}

// storeTimeout bounds each call to etcd that the tool makes itself (the
// first read of the fleet's state, the last one after a stop).
const storeTimeout = 10 * time.Second

// on reports whether the fleet mode was asked for.
func (o fleetOptions) on() bool { return len(o.etcd) > 0 || o.prefix != "" || o.lockTTL != 0 }

// check refuses the fleet mode's bad flags, and the flags of the
// one-process mode that it has no use for, naming the flag.
func (o fleetOptions) check(opt reshardOptions) error {
	switch {
	case len(o.etcd) == 0 && o.prefix != "":
		return configErrorf("--prefix: needs --etcd (the endpoints of the fleet's etcd)")
	case len(o.etcd) == 0:
		return configErrorf("--lock-ttl: needs --etcd (the endpoints of the fleet's etcd)")
	case o.prefix == "":
		return configErrorf("--prefix: required with --etcd (the fleet's key prefix in etcd, as its members give it to etcdstore.New)")
	case slices.Contains(o.etcd, ""):
		return configErrorf("--etcd: an empty endpoint in %q", strings.Join(o.etcd, ","))
	case o.lockTTL < 0:
		return configErrorf("--lock-ttl: %v is negative", o.lockTTL)
	case o.lockTTL > 0 && o.lockTTL < time.Second:
		return configErrorf("--lock-ttl: %v is under etcd's smallest lease, 1s", o.lockTTL)
	case opt.checkpoint != "":
		return configErrorf("--checkpoint: a fleet's change keeps its state in the store (--etcd), not in a file")
	case opt.serverSide:
		return configErrorf("--server-side: a fleet's migration moves keys with the fleet's own moves, not MIGRATE")
	}
	return nil
}

// fleetShards is f's shard list as a fleet's store holds it, or an error
// naming a shard that a fleet cannot hold: one without a name (a fleet
// places keys by name), or with credentials of its own (the store holds
// none: the fleet's shards share the list's options).
func fleetShards(f *fleet) ([]shardedfleet.Shard, error) {
	l := f.list
	var out []shardedfleet.Shard
	if f.rdb != nil {
		for i, s := range f.rdb.Shards() {
			if o := l.Redis.Shards[i].Options; o.Username != "" || o.Password != "" {
				return nil, configErrorf("%s: shards[%d]: a fleet's shards share the list's options (the store holds no credentials): give the username and password in options", l.Path, i)
			}
			o := s.Client.Options()
			out = append(out, shardedfleet.Shard{Name: s.Name, Addr: o.Addr, DB: o.DB, Weight: s.Weight})
		}
	} else {
		for _, s := range l.Memcache.Shards {
			out = append(out, shardedfleet.Shard{Name: s.Name, Addr: s.Addr, Weight: s.Weight})
		}
	}
	for i, sh := range out {
		if sh.Name == "" {
			return nil, configErrorf("%s: shards[%d].name: missing; a fleet places keys by shard name", l.Path, i)
		}
	}
	return out, nil
}

// sameList reports whether a and b are the same shards in the same order,
// a weight of 0 being 1.
func sameList(a, b []shardedfleet.Shard) bool {
	return slices.EqualFunc(a, b, func(x, y shardedfleet.Shard) bool {
		x.Weight, y.Weight = max(x.Weight, 1), max(y.Weight, 1)
		return x == y
	})
}

// names lists shards by name, for messages.
func names(shards []shardedfleet.Shard) string {
	out := make([]string, len(shards))
	for i, sh := range shards {
		out[i] = sh.Name + "=" + sh.Addr
	}
	return "[" + strings.Join(out, " ") + "]"
}

// openStore connects to etcd and returns the fleet's store under prefix
// and the function that closes the connection. clientv3.New connects in
// the background: an unreachable etcd shows in the first call.
func openStore(o fleetOptions) (*etcdstore.Store, func(), error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: o.etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, configErrorf("--etcd %s: %v", strings.Join(o.etcd, ","), err)
	}
	store, err := etcdstore.New(cli, o.prefix)
	if err != nil {
		cli.Close()
		return nil, nil, configErrorf("--prefix: %v", err)
	}
	return store, func() { cli.Close() }, nil
}

// loadState reads the fleet's state, within storeTimeout.
func loadState(ctx context.Context, store shardedfleet.Store, o fleetOptions) (shardedfleet.State, shardedfleet.Revision, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	st, rev, err := store.Load(ctx)
	if err != nil {
		return st, rev, fmt.Errorf("reading the fleet's state from etcd at %s: %w", strings.Join(o.etcd, ","), err)
	}
	return st, rev, nil
}

// reshardFleet drives the fleet's change from old's list to next's
// through the store (fleet.Reshard, or fleet.Resume when the store holds
// this change unfinished), with a client of old's list as the driver's
// backend (driverBackend) and a progress bar of the migration on stderr.
// A store or list that does not match is a configError (exit 2); a change
// that stopped says at which step it stands (exit 3).
func reshardFleet(ctx context.Context, old, next *fleet, opt reshardOptions, fo fleetOptions, stdout, stderr io.Writer) error {
	if old.mc != nil && (opt.rate != 0 || opt.batch != 0) {
		return configErrorf("--rate and --batch: a memcache fleet's migration has no such settings")
	}
	from, err := fleetShards(old)
	if err != nil {
		return err
	}
	to, err := fleetShards(next)
	if err != nil {
		return err
	}
	store, closeStore, err := openStore(fo)
	if err != nil {
		return err
	}
	defer closeStore()
	st, rev, err := loadState(ctx, store, fo)
	if err != nil {
		return err
	}
	resume := st.Step != shardedfleet.Stable
	switch {
	case rev == 0:
		return configErrorf("--prefix %s: the store holds no fleet state (no member has joined a fleet under this prefix)", fo.prefix)
	case !resume && sameList(st.Shards, to):
		fmt.Fprintf(stdout, "the fleet is on NEW's list already (epoch %d): nothing to do\n", st.Epoch)
		return nil
	case !resume && !sameList(st.Shards, from):
		return configErrorf("OLD (%s): the fleet's list in the store is %s (epoch %d), not OLD's shards %s", old.list.Path, names(st.Shards), st.Epoch, names(from))
	case resume && (!sameList(st.Shards, from) || !sameList(st.Target, to)):
		return configErrorf("the store holds the change %s from %s to %s (step %s, epoch %d), not this one: finish it with those lists as OLD and NEW", st.Change, names(st.Shards), names(st.Target), st.Step, st.Epoch)
	case resume:
		fmt.Fprintf(stdout, "resuming the fleet's change %s at step %s (epoch %d)\n", st.Change, st.Step, st.Epoch)
	default:
		if err := preflight(ctx, old, next, opt.dropStale); err != nil {
			return err
		}
	}
	total, err := keyCount(ctx, old)
	if err != nil {
		return err
	}
	backend, closeBackend, err := driverBackend(old.list, opt)
	if err != nil {
		return err
	}
	defer closeBackend()
	d := &fleetDrive{run: func(ctx context.Context, do shardedfleet.DriverOptions) (shardedfleet.State, error) {
		do.LockTTL = fo.lockTTL
		if resume {
			return shardedfleet.Resume(ctx, store, backend, do)
		}
		return shardedfleet.Reshard(ctx, store, backend, to, do)
	}}
	runErr := runWithProgress(ctx, d, total, nil, stderr)
	if p := d.last.Load(); p != nil { // this run reached the migration
		fmt.Fprintf(stdout, "migration: %d keys scanned, %d moved, %d of %d sources done\n", p.Scanned, p.Moved, p.Done, p.Sources)
	}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = errors.New("interrupted")
		}
		// Where the change stopped, read again: the driver may have
		// stored a step after its last report.
		if st, _, err := loadState(context.WithoutCancel(ctx), store, fo); err == nil && st.Step != shardedfleet.Stable {
			return fmt.Errorf("%w\nthe fleet's change %s stopped at step %s (epoch %d), where the fleet is safe: run the same command again to resume it", runErr, st.Change, st.Step, st.Epoch)
		}
		return runErr
	}
	fmt.Fprintf(stdout, "\nthe fleet is on NEW's list: %d shards, epoch %d\n", len(d.final.Shards), d.final.Epoch)
	return nil
}

// driverBackend returns the driver's backend, a sharded client of l's of
// its own (every connection it makes is set up for the fleet's fences),
// and the function that closes it.
func driverBackend(l *fleetList, opt reshardOptions) (shardedfleet.Backend, func(), error) {
	if l.Redis != nil {
		c, err := shardedredis.NewShardedClient(l.Redis)
		if err != nil {
			return nil, nil, configErrorf("%s: %v", l.Path, err)
		}
		return c.FleetBackend(shardedredis.MigrateOptions{BatchSize: opt.batch, KeysPerSecond: opt.rate}), func() { _ = c.Close() }, nil
	}
	c, err := shardedmc.NewShardedClient(l.Memcache)
	if err != nil {
		return nil, nil, configErrorf("%s: %v", l.Path, err)
	}
	return c.FleetBackend(), func() { _ = c.Close() }, nil
}

// fleetDrive is a fleet's change run as a progressMigration, so that it
// shows the progress bar of reshard's migration: run is fleet.Reshard or
// fleet.Resume with the driver's options.
type fleetDrive struct {
	run   func(context.Context, shardedfleet.DriverOptions) (shardedfleet.State, error)
	last  atomic.Pointer[shardedfleet.Progress]
	final shardedfleet.State // set by Run
}

// Run runs the change to its end, or until ctx ends.
func (d *fleetDrive) Run(ctx context.Context) error {
	st, err := d.run(ctx, shardedfleet.DriverOptions{Progress: func(p shardedfleet.Progress) { d.last.Store(&p) }})
	d.final = st
	return err
}

// progress is the migration's last report (zero before the first).
func (d *fleetDrive) progress() shardedfleet.Progress {
	if p := d.last.Load(); p != nil {
		return *p
	}
	return shardedfleet.Progress{}
}

// Progress is the migration's progress as one row, over every source.
func (d *fleetDrive) Progress() []shardedredis.ShardProgress {
	p := d.progress()
	return []shardedredis.ShardProgress{{Shard: "fleet", Scanned: p.Scanned, Moved: p.Moved}}
}
