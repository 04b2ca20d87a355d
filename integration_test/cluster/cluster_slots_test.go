package cluster_test

import (
	"errors"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// Slot agrees with the server's CLUSTER KEYSLOT, at the edges of hash tags
// too, where Jedis key tags differ.
func TestClusterSlotMatchesServer(t *testing.T) {
	cl := fixtures.SharedCluster(t)
	c := goredis.NewClient(&goredis.Options{Addr: cl.Nodes[0].Addr})
	defer c.Close()
	for _, key := range []string{"", "a", "foo", "{user:42}:name", "{user:42}:cart", "{}}x", "{}{x}", "{}", "{", "}{a}", "a{b}c{d}", "{{a}}", "\x00\xff{\r\n}"} {
		want, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := shardedredis.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT = %d", key, got, want)
		}
	}
}

// During the window and after it, a command whose keys are in different
// hash slots is refused before anything is sent (*CrossSlotError naming
// the slots), inside transactions too; keys with one hash tag work.
func TestClusterCrossSlotRefused(t *testing.T) {
	m := fixtures.NewClusterMove(t, 100, ring.Jedis{KeyTags: true}, nil)
	for _, k := range []string{"{u1}a", "{u1}b", "x", "y"} {
		if err := m.C.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(phase string) {
		t.Helper()
		var cs *shardedredis.CrossSlotError
		err := m.C.MGet(ctx, "x", "y").Err()
		if !errors.As(err, &cs) || !errors.Is(err, shardedredis.ErrCrossSlot) || len(cs.Slots) != 2 ||
			cs.Slots[0] != min(shardedredis.Slot("x"), shardedredis.Slot("y")) || cs.Slots[1] != max(shardedredis.Slot("x"), shardedredis.Slot("y")) {
			t.Fatalf("%s: MGET x y = %v; want a *CrossSlotError naming slots %d and %d", phase, err, shardedredis.Slot("x"), shardedredis.Slot("y"))
		}
		_, err = m.C.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Incr(ctx, "{u1}n")
			p.Incr(ctx, "x")
			return nil
		})
		if !errors.As(err, &cs) || cs.Command != "multi" {
			t.Fatalf("%s: MULTI INCR {u1}n INCR x EXEC = %v; want a *CrossSlotError", phase, err)
		}
		plain := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: m.Cluster.Addrs()})
		n, _ := plain.Exists(ctx, "{u1}n").Result()
		plain.Close()
		if n != 0 {
			t.Fatalf("%s: the refused transaction wrote {u1}n", phase)
		}
		if got, err := m.C.MGet(ctx, "{u1}a", "{u1}b").Result(); err != nil || got[0] != "{u1}a" || got[1] != "{u1}b" {
			t.Fatalf("%s: MGET {u1}a {u1}b = %v, %v", phase, got, err)
		}
	}
	if err := m.C.BeginClusterMove(m.ClusterShard(false)); err != nil {
		t.Fatal(err)
	}
	check("in the window")
	mig, err := m.C.NewMigration(shardedredis.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Run(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the move")
}

// The key tags of Jedis and the hash tags of Redis Cluster differ at the
// edges that Slot's documentation names.
func TestClusterTagEdges(t *testing.T) {
	for key, want := range map[string]string{"{}}x": "}", "{}{x}": "}{x", "{a}b": "a"} {
		if tag, _ := ring.KeyTag(key); tag != want {
			t.Errorf("ring.KeyTag(%q) = %q, want %q", key, tag, want)
		}
	}
	if shardedredis.Slot("{}}x") == shardedredis.Slot("{}}y") {
		t.Error(`Slot("{}}x") = Slot("{}}y"): Redis Cluster gives them no common tag`)
	}
}
