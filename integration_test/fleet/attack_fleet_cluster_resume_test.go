package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	shardedredis "github.com/shardedcache/shardedcache/redis"
)

var errDriverDied = errors.New("the driver died")

// dyingDriver is a driver's backend that dies at one step: after its
// DropStale ("drop"), after a Migrate cut short by its context ending
// 20 ms in ("migrate-mid"), or after a whole Migrate ("migrate-end").
type dyingDriver struct {
	fleet.Backend
	at string
}

func (d dyingDriver) DropStale(ctx context.Context, st fleet.State) error {
	if err := d.Backend.DropStale(ctx, st); err != nil || d.at != "drop" {
		return err
	}
	return errDriverDied
}

func (d dyingDriver) Migrate(ctx context.Context, st fleet.State, progress func(fleet.Progress)) error {
	switch d.at {
	case "migrate-mid":
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return errors.Join(errDriverDied, d.Backend.Migrate(ctx, st, progress))
	case "migrate-end":
		return errors.Join(errDriverDied, d.Backend.Migrate(ctx, st, progress))
	}
	return d.Backend.Migrate(ctx, st, progress)
}

// TestAttackFleetClusterDriverDies: a fleet's move into the shared Redis
// Cluster whose driver dies at each step (after removing stale copies, in
// the middle of the migration, after it); while no driver runs, a member
// rewrites a quarter of the keys and deletes a quarter; another process
// resumes the change (fleet.Resume). Every key then has its last value
// and absolute expiry on the cluster, deleted keys are gone, and the old
// servers hold no key.
func TestAttackFleetClusterDriverDies(t *testing.T) {
	for _, at := range []string{"drop", "migrate-mid", "migrate-end"} {
		t.Run(at, func(t *testing.T) {
			cluster := fixtures.SharedCluster(t)
			shards, list := fixtures.FleetServers(t, 3)
			store := &fleet.MemStore{}
			clients, _ := fixtures.FleetMembers(t, shards, list, store, 3) // a member, the first driver, the second
			a := clients[0]
			const n = 1500
			base := time.Now().Add(time.Hour).UnixMilli()
			want := map[string]clusterKey{}
			for i := range n {
				k := fmt.Sprint("rk:", i)
				w := clusterKey{fmt.Sprint("v0-", i), -1}
				if i%2 == 0 {
					w.expiry = base + int64(i)
				}
				want[k] = w
				args := goredis.SetArgs{}
				if w.expiry > 0 {
					args.ExpireAt = time.UnixMilli(w.expiry)
				}
				if err := a.SetArgs(ctx, k, w.value, args).Err(); err != nil {
					t.Fatal(err)
				}
			}
			target := []fleet.Shard{{Name: "cluster", Addr: strings.Join(cluster.Addrs(), ","), Cluster: true}}
			opt := shardedredis.MigrateOptions{BatchSize: 20}
			st, err := fleet.Reshard(ctx, store, dyingDriver{clients[1].FleetBackend(opt), at}, target, fleet.DriverOptions{})
			if !errors.Is(err, errDriverDied) {
				t.Fatalf("the dying driver: %+v, %v", st, err)
			}
			t.Logf("the driver died in %v (epoch %d): %v", st.Step, st.Epoch, err)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			for i := 0; i < n; i += 4 {
				k, k2 := fmt.Sprint("rk:", i), fmt.Sprint("rk:", i+1)
				if err := a.Set(wctx, k, "v1", goredis.KeepTTL).Err(); err != nil {
					t.Fatalf("SET %s with no driver: %v", k, err)
				}
				want[k] = clusterKey{"v1", want[k].expiry}
				if err := a.Del(wctx, k2).Err(); err != nil {
					t.Fatalf("DEL %s with no driver: %v", k2, err)
				}
				want[k2] = clusterKey{}
			}
			cancel()
			st, err = fleet.Resume(ctx, store, clients[2].FleetBackend(opt), fleet.DriverOptions{})
			if err != nil || st.Step != fleet.Stable || st.Epoch != 4 {
				t.Fatalf("Resume: %+v, %v", st, err)
			}
			cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
			defer cc.Close()
			wrong := 0
			for k, w := range want {
				got, err := cc.Get(ctx, k).Result()
				at, err2 := cc.Do(ctx, "pexpiretime", k).Int64()
				ok := w.value == "" && err == goredis.Nil || err == nil && err2 == nil && got == w.value && at == w.expiry
				if !ok {
					wrong++
					if wrong < 10 {
						t.Errorf("%s on the cluster: %q (%v), PEXPIRETIME %d (%v); want %q, %d", k, got, err, at, err2, w.value, w.expiry)
					}
				}
			}
			if wrong > 0 {
				t.Errorf("%d of %d keys wrong on the cluster", wrong, len(want))
			}
			for _, sh := range list {
				raw := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
				keys, err := fixtures.UserKeys(raw).Result()
				raw.Close()
				if err != nil || len(keys) != 0 {
					t.Errorf("server %s holds %d keys after the move (%v)", sh.Addr, len(keys), err)
				}
			}
		})
	}
}
