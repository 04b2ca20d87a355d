package fleet_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"
)

// TestFleetFenceClosesCommandInFlight: a command in flight on a source
// when the driver's fence closes its connection (a BLPOP waiting there,
// alone on one source and in a pipeline on the other)
// fails with a *FenceClosedError: it may have run, so it is not sent again,
// and it is the caller's, not the shard's failure: a process in EjectMode
// with a FailureLimit of 1 counts no error and ejects no shard.
func TestFleetFenceClosesCommandInFlight(t *testing.T) {
	f := newSwitchFleet(t, 3, 2, &shardedredis.ShardedOptions{
		Health: shardedredis.Health{Mode: shardedclient.EjectMode, FailureLimit: 1}})
	// One key on each source.
	keys := map[int]string{}
	for i := 0; len(keys) < 2; i++ {
		k := "inflight:" + string(rune('a'+i))
		keys[f.victim.GetShardInfo(k).Index] = k
	}
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
	// Both BLPOPs wait on their servers before the fence.
	for _, sh := range f.list[:2] {
		admin := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
		defer admin.Close()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			list, err := admin.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(list, "cmd=blpop") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no BLPOP waits on %s:\n%s", sh.Addr, list)
			}
		}
	}
	h := holdChange(t, f.store, f.driver, f.list[:3]) // returns once the sources are fenced
	for range keys {
		select {
		case err := <-errs:
			var closed *shardedredis.FenceClosedError
			var shardErr *shardedclient.ShardError
			if !errors.As(err, &closed) || !errors.Is(err, shardedredis.ErrFenced) || !errors.Is(err, io.EOF) || !errors.As(err, &shardErr) || closed.Fenced == nil || closed.Fenced.Fence != h.moving.Epoch {
				t.Fatalf("BLPOP in flight at the fence: %v (%T); want a *FenceClosedError of fence %d wrapping io.EOF, in a *ShardError", err, err, h.moving.Epoch)
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
}
