package integration_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/rediscluster"
)

// clusterNodeTimeout is the shared cluster's cluster-node-timeout: a
// replica takes over an unreachable master after about twice that.
const clusterNodeTimeout = 1000 * time.Millisecond

// sharedClusterState is the package's real Redis Cluster (three masters,
// a replica each), started once, on the first sharedCluster call, and
// stopped by TestMain.
var sharedClusterState struct {
	mu sync.Mutex
	c  *rediscluster.Cluster
}

// sharedCluster returns the package's Redis Cluster, every node running
// (a node a test killed is restarted and rejoins as a replica), every slot
// served, and every master emptied (FLUSHALL). Tests that use it do not
// run in parallel with each other. It skips the test without redis-server
// and redis-cli (fails it under CI=true).
func sharedCluster(t testing.TB) *rediscluster.Cluster {
	t.Helper()
	realRedisBin(t)
	s := &sharedClusterState
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.c == nil {
		c, err := rediscluster.Start(ctx, 3, 1, clusterNodeTimeout)
		switch {
		case errors.Is(err, rediscluster.ErrNoBinaries) && os.Getenv("CI") != "true":
			t.Skip(err)
		case err != nil:
			t.Fatal(err)
		}
		s.c = c
	}
	for _, n := range s.c.Nodes {
		if !n.Alive() {
			if err := n.Restart(ctx, clusterNodeTimeout); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: s.c.Addrs()})
	defer cc.Close()
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error { return m.FlushAll(ctx).Err() })
	if err != nil {
		t.Fatalf("emptying the shared cluster: %v", err)
	}
	return s.c
}

func stopSharedCluster() {
	s := &sharedClusterState
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.Stop()
		s.c = nil
	}
}
