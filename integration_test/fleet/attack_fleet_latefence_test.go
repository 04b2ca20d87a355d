package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardedcache/shardedcache/fleet"
	shardedredis "github.com/shardedcache/shardedcache/redis"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// attackReleaseBeforeMigrate releases a held write, waits for its driver
// to end, then migrates.
type attackReleaseBeforeMigrate struct {
	fleet.Backend
	release chan struct{}
	done    chan error
}

func (b attackReleaseBeforeMigrate) Migrate(ctx context.Context, st fleet.State, p func(fleet.Progress)) error {
	close(b.release)
	<-b.done
	return b.Backend.Migrate(ctx, st, p)
}

// TestAttackFleetLateFence: driver D1 of change X (2 -> 3) has its Fence's
// raise of the moved mark on s2 delayed (paused, lease lost). D2 resumes X to
// its end and starts Y (3 -> 4, s2 loses keys to s3). D1's HSET lands once
// Y is Moving: s2 is marked moved for X again, so every move off s2 is
// refused (NOTMOVED) and the migration of Y cannot finish, nor can Resume
// finish it (it does not fence again).
func TestAttackFleetLateFence(t *testing.T) {
	shards, list := fixtures.FleetServers(t, 4)
	store := &fleet.MemStore{}
	cs, _ := fixtures.FleetMembers(t, shards[:2], list[:2], store, 1)
	c := cs[0]
	for i := range 300 {
		if err := c.Set(ctx, fmt.Sprint("lf:", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	release, d1done := fixtures.AttackHeldDriver(t, shards, list, store, "\r\nmoved\r\n", "D1's fence of s2 was not sent")
	backend := c.FleetBackend(shardedredis.MigrateOptions{})
	if _, err := fleet.Resume(ctx, store, backend, fleet.DriverOptions{}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := fleet.Reshard(rctx, store, attackReleaseBeforeMigrate{backend, release, d1done}, list, fleet.DriverOptions{})
	if err != nil {
		rctx2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
		defer cancel2()
		_, err2 := fleet.Resume(rctx2, store, backend, fleet.DriverOptions{})
		var users []string
		for i := range 300 {
			if err := c.Get(ctx, fmt.Sprint("lf:", i)).Err(); err != nil {
				users = append(users, err.Error())
			}
		}
		t.Fatalf("change Y after D1's late fence: %v; Resume: %v; %d of 300 user GETs fail, e.g. %v", err, err2, len(users), users[:min(1, len(users))])
	}
}
