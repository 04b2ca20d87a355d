package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// ejectAtOnce is a victim's options that eject a shard at its first
// failure: a fence's closing counted against a source would eject it.
func ejectAtOnce(o *goredis.Options) *shardedredis.ShardedOptions {
	return &shardedredis.ShardedOptions{Options: o, Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1}}
}

// keyOn returns a key of c's shard i.
func keyOn(c *shardedredis.ShardedClient, i int, prefix string) string {
	for n := 0; ; n++ {
		if k := prefix + string(rune('a'+n)); c.GetShardInfo(k).Index == i {
			return k
		}
	}
}

// waitBLPOPs returns once n BLPOPs wait on the server at addr.
func waitBLPOPs(t *testing.T, addr string, n int) {
	t.Helper()
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(list, "cmd=blpop") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d BLPOPs wait on %s, want %d:\n%s", strings.Count(list, "cmd=blpop"), addr, n, list)
		}
	}
}

// wrappedConn hides its *net.TCPConn, as a *tls.Conn does: go-redis's pool
// then cannot tell that an idle connection was closed by the server.
type wrappedConn struct{ net.Conn }

func wrappingDialer(ctx context.Context, network, addr string) (net.Conn, error) {
	cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return wrappedConn{cn}, nil
}

// TestFleetFenceClosesCommandInFlight: a command in flight on a source
// when the driver's fence closes its connection (a BLPOP waiting there,
// alone on one source and in a pipeline on the other) fails with a
// *FenceClosedError: it may have run, so it is not sent again, and it is
// the caller's, not the shard's failure: a process in EjectMode with a
// FailureLimit of 1 counts no error and ejects no shard. The same with
// idle connections in the sources' pools that the fence closed too, over
// connections whose close go-redis's pool cannot see (as with TLS): the
// server is asked on a connection of its own.
func TestFleetFenceClosesCommandInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  *goredis.Options
		idle int
	}{
		{"plain", nil, 0},
		{"idle connections closed too, TLS-like", &goredis.Options{Dialer: wrappingDialer}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSwitchFleet(t, 3, 2, ejectAtOnce(tc.opt))
			keys := []string{keyOn(f.victim, 0, "inflight:"), keyOn(f.victim, 1, "inflight:")}
			errs := make(chan error, len(keys))
			go func() { errs <- f.victim.BLPop(ctx, 30*time.Second, keys[0]).Err() }()
			go func() { // in a pipeline, on the other source
				var blpop *goredis.StringSliceCmd
				_, _ = f.victim.Pipelined(ctx, func(p goredis.Pipeliner) error {
					p.Set(ctx, keys[1]+":before", "1", 0)
					blpop = p.BLPop(ctx, 30*time.Second, keys[1])
					return nil
				})
				errs <- blpop.Err()
			}()
			for i, k := range keys {
				waitBLPOPs(t, f.list[i].Addr, 1)
				var wg sync.WaitGroup
				for range tc.idle { // connections made after the BLPOP's, idle in the pool at the fence
					wg.Go(func() { _ = f.victim.GetShard(k).Get(ctx, k+":idle").Err() })
				}
				wg.Wait()
			}
			h := holdChange(t, f.store, f.driver, f.list[:3]) // returns once the sources are fenced
			for range keys {
				select {
				case err := <-errs:
					var closed *shardedredis.FenceClosedError
					var shardErr *shardedclient.ShardError
					if !errors.As(err, &closed) || !errors.Is(err, shardedredis.ErrFenceClosed) || errors.Is(err, shardedredis.ErrFenced) || !errors.Is(err, io.EOF) || !errors.As(err, &shardErr) || closed.Fenced == nil || closed.Fenced.Fence != h.moving.Epoch {
						t.Fatalf("BLPOP in flight at the fence: %v (%T); want a *FenceClosedError of fence %d wrapping io.EOF, in a *ShardError, matching ErrFenceClosed, not ErrFenced (not sent)", err, err, h.moving.Epoch)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a BLPOP in flight at the fence did not return")
				}
			}
			for _, st := range f.victim.Stats() {
				if st.Errors != 0 || st.Ejected || st.Ejections != 0 {
					t.Errorf("shard %s: %d errors, ejected %v (%d times); want none: the fence's closing is not the shard's failure", st.Name, st.Errors, st.Ejected, st.Ejections)
				}
			}
			h.finish(t)
		})
	}
}

// replyEater is a connection that loses every reply once a write holding
// marker went through it (armed once, for all connections): the command
// ran on the server, its reply did not come back before the fence closed
// the connection.
type replyEater struct {
	net.Conn
	marker []byte
	armed  *atomic.Bool
	eating atomic.Bool
}

func (c *replyEater) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.marker) && c.armed.CompareAndSwap(true, false) {
		c.eating.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *replyEater) Read(p []byte) (int, error) {
	for c.eating.Load() {
		if _, err := c.Conn.Read(p); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(p)
}

// TestFleetFenceClosedNotRetried: an INCR that ran on a source, its reply
// lost when the fence closed the connection, is not run again, even with
// MaxRetries set in the options: a fleet's shard clients do not retry (a
// retry would meet the fence, be taken for a command never sent, and run
// on the new list once the process applied it). It fails with a
// *FenceClosedError and the counter stays at 1.
func TestFleetFenceClosedNotRetried(t *testing.T) {
	const key = "notretried:counter"
	var armed atomic.Bool
	armed.Store(true)
	f := newSwitchFleet(t, 3, 2, &shardedredis.ShardedOptions{Options: &goredis.Options{MaxRetries: 2, ReadTimeout: 20 * time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &replyEater{Conn: cn, marker: []byte(key), armed: &armed}, nil
		}}})
	errc := make(chan error, 1)
	go func() { errc <- f.victim.Incr(ctx, key).Err() }()
	admin := goredis.NewClient(&goredis.Options{Addr: f.list[f.victim.GetShardInfo(key).Index].Addr})
	defer admin.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, _ := admin.Get(ctx, key).Result(); v == "1" {
			break // the INCR ran; its reply is lost
		}
		if time.Now().After(deadline) {
			t.Fatal("the INCR did not run")
		}
	}
	h := holdChange(t, f.store, f.driver, f.list[:3])
	f.apply(t, h.moving) // the victim follows the fleet, within FleetWait
	select {
	case err := <-errc:
		var closed *shardedredis.FenceClosedError
		if !errors.As(err, &closed) {
			t.Errorf("INCR in flight at the fence: %v (%T); want a *FenceClosedError", err, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the INCR did not return")
	}
	h.finish(t)
	if v, err := f.member.Get(ctx, key).Result(); err != nil || v != "1" {
		t.Errorf("after one INCR whose reply the fence lost, the counter is %q (%v); want 1: it was sent again", v, err)
	}
}

// TestFleetConnLossWithoutFenceIsShardFailure: a fleet client's BLPOP that
// loses its connection to an admin's CLIENT KILL (no fence), or to its
// server's SHUTDOWN, fails with the shard's failure, counted: never a
// *FenceClosedError.
func TestFleetConnLossWithoutFenceIsShardFailure(t *testing.T) {
	f := newSwitchFleet(t, 3, 2, ejectAtOnce(nil))
	for i, kill := range []string{"CLIENT KILL TYPE normal SKIPME yes", "SHUTDOWN NOSAVE"} {
		errc := make(chan error, 1)
		go func() { errc <- f.victim.BLPop(ctx, 30*time.Second, keyOn(f.victim, i, "lost:")).Err() }()
		waitBLPOPs(t, f.list[i].Addr, 1)
		admin := goredis.NewClient(&goredis.Options{Addr: f.list[i].Addr})
		var args []any
		for _, a := range strings.Fields(kill) {
			args = append(args, a)
		}
		_ = admin.Do(ctx, args...).Err() // SHUTDOWN answers with the lost connection
		admin.Close()
		err := <-errc
		var closed *shardedredis.FenceClosedError
		if err == nil || errors.As(err, &closed) {
			t.Errorf("%s: BLPOP = %v (%T); want the shard's failure", kill, err, err)
		}
		if st := f.victim.Stats()[i]; st.Errors != 1 {
			t.Errorf("%s: shard %s counts %d errors; want the loss, 1", kill, st.Name, st.Errors)
		}
	}
}

// TestFleetFenceProbedOnce: thirty commands in flight on one source when
// the fence closes their connections cost one probe of the server, shared
// (the victim dials the source once after the fence), and all fail with a
// *FenceClosedError.
func TestFleetFenceProbedOnce(t *testing.T) {
	var dials atomic.Int64
	f := newSwitchFleet(t, 3, 2, ejectAtOnce(&goredis.Options{PoolSize: 40,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}))
	const n = 30
	key := keyOn(f.victim, 0, "probed:")
	errs := make(chan error, n)
	for range n {
		go func() { errs <- f.victim.BLPop(ctx, 30*time.Second, key).Err() }()
	}
	waitBLPOPs(t, f.list[0].Addr, n)
	before := dials.Load()
	h := holdChange(t, f.store, f.driver, f.list[:3])
	for range n {
		if err := <-errs; !errors.Is(err, shardedredis.ErrFenceClosed) {
			t.Fatalf("BLPOP in flight at the fence: %v; want a *FenceClosedError", err)
		}
	}
	if got := dials.Load() - before; got != 1 {
		t.Errorf("the victim dialed %d times after the fence for %d commands in flight; want 1 (one probe)", got, n)
	}
	h.finish(t)
}

// TestFleetFenceClosesRawClientCommand: the same holds for a command sent
// on a shard's own client (GetShard): the shard client's hook, not the
// router, tells the fence's closing apart.
func TestFleetFenceClosesRawClientCommand(t *testing.T) {
	f := newSwitchFleet(t, 3, 2, nil)
	key := keyOn(f.victim, 0, "raw:")
	errc := make(chan error, 1)
	go func() { errc <- f.victim.GetShard(key).BLPop(ctx, 30*time.Second, key).Err() }()
	waitBLPOPs(t, f.list[0].Addr, 1)
	h := holdChange(t, f.store, f.driver, f.list[:3])
	select {
	case err := <-errc:
		var closed *shardedredis.FenceClosedError
		if !errors.As(err, &closed) || !errors.Is(err, io.EOF) || closed.Fenced.Fence != h.moving.Epoch {
			t.Fatalf("BLPOP on the shard's client at the fence: %v (%T); want a *FenceClosedError of fence %d wrapping io.EOF", err, err, h.moving.Epoch)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the BLPOP did not return")
	}
	h.finish(t)
}
