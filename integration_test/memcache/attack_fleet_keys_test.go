package memcache_test

import (
	"errors"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// TestAttackFleetOddKeys: keys with the characters that memcached's
// metadump URL-encodes ("+", "%", "/", "&", "=", "?", non-ASCII), written
// on their old owners, are found and moved by a memcache fleet's
// migration: each is then on its new owner with its value, and on no old
// owner.
func TestAttackFleetOddKeys(t *testing.T) {
	a, _, moving, servers, finish := mcFleetInMoving(t, "odd+%25é/&=?~", 150)
	_, old := fixtures.NamedMemcache(t, servers, 3)
	for _, k := range moving {
		if err := old.Set(&gomemcache.Item{Key: k, Value: []byte(k)}); err != nil {
			t.Fatal(err)
		}
	}
	finish()
	for _, k := range moving {
		if it, err := a.Get(k); err != nil || string(it.Value) != k {
			t.Errorf("Get(%q) after the change = %v, %v", k, it, err)
		}
		if _, err := old.Get(k); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("%q still on its old owner: %v", k, err)
		}
	}
}
