package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// hungConn delivers its first write that contains marker only when release
// is closed (a node that hangs with the command in its buffers), while the
// client is told it was sent: the client's read times out (and a client
// that resends commands would send it again on another connection). The
// real connection is closed only after the late delivery.
type hungConn struct {
	net.Conn
	h *hungWrite
}

// hungWrite is the one write that hungConns hold, shared by them.
type hungWrite struct {
	marker  []byte
	once    sync.Once
	held    chan struct{} // closed once a write is held
	release chan struct{}
	done    chan struct{} // closed once the held write was delivered
	sent    atomic.Int64  // writes with marker
	reply   string        // the late copy's delivery and reply
}

func (c hungConn) Write(p []byte) (int, error) {
	hold := false
	if bytes.Contains(p, c.h.marker) {
		c.h.sent.Add(1)
		c.h.once.Do(func() { hold = true })
	}
	if !hold {
		return c.Conn.Write(p)
	}
	late := bytes.Clone(p)
	close(c.h.held)
	go func() {
		<-c.h.release
		_ = c.Conn.SetWriteDeadline(time.Time{}) // go-redis's has passed
		_, werr := c.Conn.Write(late)
		_ = c.Conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		n, rerr := c.Conn.Read(buf)
		c.h.reply = fmt.Sprintf("write %v, reply %q (%v)", werr, buf[:n], rerr)
		close(c.h.done)
	}()
	return len(p), nil
}

func (c hungConn) Close() error {
	select {
	case <-c.h.held:
		go func() {
			<-c.h.done
			_ = c.Conn.Close()
		}()
		return nil
	default:
		return c.Conn.Close()
	}
}

// TestAttackFleetLateRestoreCopy: the move of one key into a Redis
// Cluster, or onto another server when the shared options let go-redis
// resend a command (MaxRetries 3: an option users set); the first copy of
// its restoring script hangs on the destination (held in the network).
// Before the fix, go-redis sent the script again after its read timeout,
// that copy restored the key, the migration ended (its clean-up dropping
// the restored tokens), the key was rewritten, and then the first copy
// ran: the moved value came back over an acknowledged write (with a DEL,
// a resurrected delete). Now the moves' scripts are never resent
// (scriptCmd): the copy that got no answer is settled (revoked: the
// destination answers), the run fails that key, a resume moves it with a
// new token, the key is rewritten, and the late copy, revoked, changes
// nothing.
func TestAttackFleetLateRestoreCopy(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		cluster := fixtures.SharedCluster(t)
		shards, list := fixtures.FleetServers(t, 1)
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
		defer cc.Close()
		target := []fleet.Shard{{Name: "cluster", Addr: strings.Join(cluster.Addrs(), ","), Cluster: true}}
		lateRestore(t, shards, list, target, 0, cc)
	})
	t.Run("server, MaxRetries 3", func(t *testing.T) {
		shards, list := fixtures.FleetServers(t, 2)
		dest := goredis.NewClient(&goredis.Options{Addr: list[1].Addr})
		defer dest.Close()
		lateRestore(t, shards[:1], list[:1], list[1:], 3, dest)
	})
}

// lateRestore moves a key from the one shard of list (its options shards)
// to target, with the first restoring script sent to target held until
// after the change and a write of the key; dest reads the key there.
func lateRestore(t *testing.T, shards []shardedredis.ShardOptions, list, target []fleet.Shard, maxRetries int, dest goredis.Cmdable) {
	h := &hungWrite{marker: []byte("redis.call('RESTORE'"), held: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	driver, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards, Options: &goredis.Options{
		ReadTimeout: time.Second,
		MaxRetries:  maxRetries,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil || addr == list[0].Addr {
				return cn, err
			}
			return hungConn{cn, h}, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer driver.Close()
	released := false
	defer func() {
		if !released {
			close(h.release)
		}
	}()
	store := &fleet.MemStore{}
	m, err := driver.JoinFleet(ctx, store, fleet.MemberOptions{Initial: list})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const key = "late-restore:k"
	if err := driver.Set(ctx, key, "moved", 0).Err(); err != nil {
		t.Fatal(err)
	}
	backend := driver.FleetBackend(shardedredis.MigrateOptions{})
	if _, err := fleet.Reshard(ctx, store, backend, target, fleet.DriverOptions{}); err == nil {
		t.Fatal("the change ended though its one key's restoring script got no answer (was it sent again?)")
	}
	if n := h.sent.Load(); n != 1 {
		t.Fatalf("the restoring script was written %d times before the resume, want 1 (held, never resent)", n)
	}
	if _, err := fleet.Resume(ctx, store, backend, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := driver.Set(ctx, key, "newer", 0).Err(); err != nil {
		t.Fatal(err)
	}
	close(h.release)
	released = true
	<-h.done
	t.Logf("the held copy, late: %s", h.reply)
	got, err := dest.Get(ctx, key).Result()
	if errors.Is(err, goredis.Nil) {
		got, err = "", nil
	}
	if err != nil || got != "newer" {
		t.Fatalf("after the late copy of the restoring script, %s = %q (%v); want the write made since, %q", key, got, err, "newer")
	}
}
