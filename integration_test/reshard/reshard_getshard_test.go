package reshard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	shardedmc "github.com/shardedcache/shardedcache/memcache"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// GetShard in a window moves the key first. Here the move's RESTORE ran on
// the new owner b but its reply was lost. The move is settled at once (b
// answers that it restored the move's token), so the key ends on b alone
// and GetShard hands out b. When the settling fails too (b does not
// answer it), the move stays unsettled: neither owner is safe, so GetShard
// hands out a client that sends nothing, each call failing with the move's
// error, and the key's value stays v1; a later command settles the move
// (once its mark is old enough) and the key moves to b.
func TestGetShardAfterFailedMoveSendsNothing(t *testing.T) {
	for _, settleFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("settle-fails=%v", settleFails), func(t *testing.T) {
			shards, direct, c := fixtures.SafetyFixture(t, 2, 1, shardedredis.Health{})
			if err := c.BeginResharding(shards); err != nil {
				t.Fatal(err)
			}
			k := fixtures.ByOwner(c, fixtures.Keys(100))[1][0] // moves from a to b
			if err := direct[0].Set(ctx, k, "v1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			var armed, refuseSettle atomic.Bool
			lost := errors.New("i/o timeout (the reply of an applied RESTORE, lost by the test)")
			c.OnNewShardNode(func(sh shardedredis.Shard, node *goredis.Client) {
				if sh.Name == "b" {
					node.AddHook(loseReply{lose: func(cmd goredis.Cmder) bool {
						return fixtures.IsStep(cmd, "restore") && cmd.Err() == nil && armed.CompareAndSwap(true, false)
					}, err: lost})
					node.AddHook(fixtures.BeforeSend(func(_ context.Context, cmds []goredis.Cmder) error {
						if refuseSettle.Load() && slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return fixtures.IsStep(c, "settle") }) {
							return errors.New("injected: the settling is not answered")
						}
						return nil
					}))
				}
			})
			armed.Store(true)
			refuseSettle.Store(settleFails)
			cl := c.GetShard(k)
			if got := direct[1].Get(ctx, k).Val(); got != "v1" {
				t.Fatalf("b holds %q after the move whose reply was lost, want v1 (the test's premise)", got)
			}
			if !settleFails {
				if cl.Options().Addr != shards[1].Addr {
					t.Fatalf("GetShard after the settled move = the client of %s, want b's", cl.Options().Addr)
				}
				if n := direct[0].Exists(ctx, k).Val(); n != 0 {
					t.Errorf("a still holds %s after the settled move", k)
				}
			} else {
				var moveErr *shardedredis.MoveError
				if err := cl.Set(ctx, k, "v2", 0).Err(); !errors.As(err, &moveErr) || !errors.Is(err, lost) {
					t.Errorf("Set through GetShard's client after the unsettled move: %v, want the *MoveError", err)
				}
				if _, err := cl.Pipelined(ctx, func(p goredis.Pipeliner) error { p.Get(ctx, k); return nil }); !errors.As(err, &moveErr) {
					t.Errorf("a pipeline through GetShard's client: %v, want the *MoveError", err)
				}
				ps := cl.Subscribe(ctx, "ch")
				if _, err := ps.Receive(ctx); !errors.As(err, &moveErr) {
					t.Errorf("a subscription through GetShard's client: %v, want the *MoveError", err)
				}
				ps.Close()
				if got := direct[0].Get(ctx, k).Val(); got != "v1" {
					t.Errorf("a holds %q, want v1: GetShard's client wrote", got)
				}
				refuseSettle.Store(false)
				// The next command waits for the mark to age, settles the
				// move (restored: it finishes) and reads b.
				if got, err := c.Get(ctx, k).Result(); got != "v1" || err != nil {
					t.Errorf("Get = %q, %v; want v1", got, err)
				}
				if cl = c.GetShard(k); cl.Options().Addr != shards[1].Addr {
					t.Fatalf("GetShard once the key moved = the client of %s, want b's (%s)", cl.Options().Addr, shards[1].Addr)
				}
			}
			if err := cl.Set(ctx, k, "v2", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if got, err := c.Get(ctx, k).Result(); got != "v2" || err != nil {
				t.Errorf("Get after the write through GetShard's client = %q, %v; want v2", got, err)
			}
			if n := direct[0].Exists(ctx, k).Val(); n != 0 {
				t.Errorf("a still holds %s", k)
			}
		})
	}
}

// loseReply fails each command that lose picks, after it ran, with err: the
// server applied it, the client never saw the reply.
type loseReply struct {
	lose func(goredis.Cmder) bool
	err  error
}

func (h loseReply) DialHook(n goredis.DialHook) goredis.DialHook { return n }

func (h loseReply) ProcessHook(n goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		return h.ProcessPipelineHook(func(ctx context.Context, cmds []goredis.Cmder) error { return n(ctx, cmds[0]) })(ctx, []goredis.Cmder{cmd})
	}
}

func (h loseReply) ProcessPipelineHook(n goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := n(ctx, cmds)
		for _, cmd := range cmds {
			if h.lose(cmd) {
				cmd.SetErr(h.err)
				err = h.err
			}
		}
		return err
	}
}

// The same for memcache: the move's set on the new owner b succeeds and
// the delete of the old copy on a fails, so b's copy is the value and the
// window remembers the key as moved. GetShard hands out a client that sends
// nothing (a write on a would be lost); the value is v1, and once the key
// has moved GetShard hands out b.
func TestMemcacheGetShardAfterFailedMoveSendsNothing(t *testing.T) {
	servers := []*fixtures.MCServer{fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)}
	var armed atomic.Bool
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return failMetaDelete{Conn: conn, armed: &armed}, nil
	}
	list := []shardedmc.ShardOptions{{Name: "a", Addr: servers[0].Addr, DialContext: dial}, {Name: "b", Addr: servers[1].Addr}}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: list[:1]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := ""
	for _, key := range fixtures.MCKeys("gs:", 100) {
		if placeMC(t, list, key) == 1 {
			k = key
			break
		}
	}
	if err := c.Set(&gomemcache.Item{Key: k, Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(list, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	cl := c.GetShard(k)
	var moveErr *shardedmc.MoveError
	if err := cl.Set(&gomemcache.Item{Key: k, Value: []byte("v2")}); !errors.As(err, &moveErr) {
		t.Errorf("Set through GetShard's client after the failed move: %v, want the *MoveError", err)
	}
	if _, err := cl.GetMulti([]string{k}); !errors.As(err, &moveErr) {
		t.Errorf("GetMulti through GetShard's client: %v, want the *MoveError", err)
	}
	if it, err := c.Get(k); err != nil || string(it.Value) != "v1" {
		t.Errorf("Get = %v, %v; want v1", it, err)
	}
	if err := c.GetShard(k).Set(&gomemcache.Item{Key: k, Value: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(k); err != nil || string(it.Value) != "v2" {
		t.Errorf("Get after the write through GetShard's client = %v, %v; want v2", it, err)
	}
	// A malformed key: a client that refuses it, whatever the shard clients.
	if err := c.GetShard("").Set(&gomemcache.Item{Key: "", Value: []byte("flush_all")}); err != gomemcache.ErrMalformedKey {
		t.Errorf("GetShard(\"\").Set: %v, want memcache.ErrMalformedKey", err)
	}
}

// failMetaDelete fails the window's meta delete ("md ...") when armed, by
// closing the connection before the request is sent.
type failMetaDelete struct {
	net.Conn
	armed *atomic.Bool
}

func (c failMetaDelete) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("md ")) && c.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, errors.New("connection reset (test)")
	}
	return c.Conn.Write(b)
}

// placeMC returns the index of the shard of list that owns key.
func placeMC(t *testing.T, list []shardedmc.ShardOptions, key string) int {
	t.Helper()
	probe, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: list})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	return probe.GetShardInfo(key).Index
}
