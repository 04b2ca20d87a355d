package main

import (
	"testing"

	"github.com/shardedcache/shardedcache/ring"
)

// Every preset by name, with each of its settings, gives the ring value
// its fields name (the enumerations in the ring package's order).
func TestPresetByName(t *testing.T) {
	for _, tc := range []struct {
		spec placementSpec
		want ring.Preset
	}{
		{placementSpec{}, ring.Jedis{}},
		{placementSpec{Preset: "Jedis", Hash: "md5", Replicas: 100, KeyTags: true, LegacyNames: true},
			ring.Jedis{Hash: ring.HashMD5, Replicas: 100, KeyTags: true, LegacyNames: true}},
		{placementSpec{Preset: "twemproxy"}, ring.Twemproxy{}},
		{placementSpec{Preset: "twemproxy", Distribution: "modula", Hash: "CRC32", HashTag: "{}"},
			ring.Twemproxy{Distribution: ring.TwemproxyModula, Hash: ring.HashCRC32, HashTag: "{}"}},
		{placementSpec{Preset: "libmemcached"}, ring.Libmemcached{}},
		{placementSpec{Preset: "libmemcached", Distribution: "ketama"}, ring.Libmemcached{Distribution: ring.LibmemcachedKetama}},
		{placementSpec{Preset: "libmemcached", Distribution: "ketama-weighted", HashAfter: "FNV1a32"},
			ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted, HashAfter: ring.HashFNV1a32}},
		{placementSpec{Preset: "libmemcached", Distribution: "consistent-weighted", Hash: "Murmur3"},
			ring.Libmemcached{Distribution: ring.LibmemcachedConsistentWeighted, Hash: ring.HashMurmur3}},
		{placementSpec{Preset: "libmemcached", Distribution: "ketama-spy"}, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaSpy}},
		{placementSpec{Preset: "libmemcached", Distribution: "ketama-spy-weighted"}, ring.Libmemcached{Distribution: ring.LibmemcachedKetamaSpyWeighted}},
		{placementSpec{Preset: "spymemcached"}, ring.Spymemcached{Locator: ring.SpymemcachedArrayMod}},
		{placementSpec{Preset: "spymemcached", Locator: "ketama", KeyFormat: "libmemcached", Weighted: true},
			ring.Spymemcached{Locator: ring.SpymemcachedKetama, KeyFormat: ring.LibmemcachedFormat, Weighted: true}},
		{placementSpec{Preset: "go-redis-ring"}, ring.GoRedisRing{}},
		{placementSpec{Preset: "gomemcache"}, ring.Gomemcache{}},
	} {
		got, err := tc.spec.preset()
		if err != nil || got != tc.want {
			t.Errorf("%+v: %v (%v), want %v", tc.spec, got, err, tc.want)
		}
	}
	for _, h := range hashes {
		if got, err := hashByName("hash", h.String()); err != nil || got != h {
			t.Errorf("hash %s by name: %v, %v", h, got, err)
		}
	}
}
