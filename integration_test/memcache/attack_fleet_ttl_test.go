package memcache_test

import (
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	"github.com/shardedcache/shardedcache/internal/mcmeta"
)

// TestAttackFleetMoveTTL: keys of a memcache fleet moved by the migration
// keep their expiry and flags: no expiry (0), 100 s, and a Unix time 40
// days ahead (memcached reads an exptime over 30 days as a Unix time).
// The keys are written on their old owners (by a client outside the fleet,
// as before the change) and moved by the migration; read on the new
// owner directly, the TTL is -1 for none, else what was set less at most
// the seconds the test took.
func TestAttackFleetMoveTTL(t *testing.T) {
	a, _, moving, servers, finish := mcFleetInMoving(t, "ttl", 120)
	_, old := fixtures.NamedMemcache(t, servers, 3)
	start := time.Now()
	far := start.Add(40 * 24 * time.Hour).Unix()
	want := map[string]int64{}
	for i, k := range moving {
		exp := []int32{0, 100, int32(far)}[i%3]
		want[k] = []int64{-1, 100, far - start.Unix()}[i%3]
		if err := old.Set(&gomemcache.Item{Key: k, Value: []byte(k), Flags: uint32(i + 1), Expiration: exp}); err != nil {
			t.Fatal(err)
		}
	}
	finish()
	took := int64(time.Since(start).Seconds()) + 1
	conn, err := mcmeta.DialTCP(ctx, servers[3].Addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	items, err := conn.Get(ctx, moving)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(moving) {
		t.Fatalf("the new owner holds %d of the %d moved keys", len(items), len(moving))
	}
	for _, it := range items {
		w, got := want[it.Key], int64(it.TTL)
		if w == -1 && got != -1 || w != -1 && (got > w || got < w-took-1) {
			t.Errorf("%s on its new owner: TTL %d s; want %d (less at most %d s)", it.Key, got, w, took+1)
		}
	}
	for i, k := range moving {
		if it, err := a.Get(k); err != nil || string(it.Value) != k || it.Flags != uint32(i+1) {
			t.Errorf("Get(%s) = %v, %v; want its value and flags %d", k, it, err, i+1)
		}
	}
}
