package ring

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

const benchKeys = 4096 // a power of two: the key index is i & (benchKeys-1)

// benchKeySet returns benchKeys random keys of the given length, as strings
// and as byte slices, from a fixed seed.
func benchKeySet(length int) ([]string, [][]byte) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_-"
	rng := rand.New(rand.NewPCG(1, uint64(length)))
	strs := make([]string, benchKeys)
	bytes := make([][]byte, benchKeys)
	for i := range strs {
		b := make([]byte, length)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		bytes[i] = b
		strs[i] = string(b)
	}
	return strs, bytes
}

var benchNodes = []int{3, 10, 100, 1000}
var benchKeyLens = []int{16, 64}

func benchName(nodes, keyLen int) string {
	return "nodes=" + strconv.Itoa(nodes) + "/keylen=" + strconv.Itoa(keyLen)
}

func BenchmarkLocate(b *testing.B) {
	for _, nodes := range benchNodes {
		r := mustNew(b, unnamed(nodes), nil)
		for _, keyLen := range benchKeyLens {
			keys, _ := benchKeySet(keyLen)
			b.Run(benchName(nodes, keyLen), func(b *testing.B) {
				b.ReportAllocs()
				sum := 0
				i := 0
				for b.Loop() {
					sum += r.Locate(keys[i&(benchKeys-1)])
					i++
				}
				sinkInt = sum
			})
		}
	}
}

// BenchmarkLocateBinarySearch locates the same keys with the same hash but a
// plain binary search over the sorted vnodes instead of the bucket index.
func BenchmarkLocateBinarySearch(b *testing.B) {
	for _, nodes := range benchNodes {
		r := mustNew(b, unnamed(nodes), nil)
		vnodes := r.vnodes
		h := r.Hash()
		for _, keyLen := range benchKeyLens {
			_, keys := benchKeySet(keyLen)
			// The two lookups must agree.
			for _, k := range keys[:256] {
				p := h.Point(k)
				j := sort.Search(len(vnodes), func(i int) bool { return vnodes[i].point >= p })
				if j == len(vnodes) {
					j = 0
				}
				if int(vnodes[j].node) != r.LocateBytes(k) {
					b.Fatalf("binary search and Locate disagree on %q", k)
				}
			}
			b.Run(benchName(nodes, keyLen), func(b *testing.B) {
				b.ReportAllocs()
				sum := 0
				i := 0
				for b.Loop() {
					p := h.Point(keys[i&(benchKeys-1)])
					j := sort.Search(len(vnodes), func(i int) bool { return vnodes[i].point >= p })
					if j == len(vnodes) {
						j = 0
					}
					sum += int(vnodes[j].node)
					i++
				}
				sinkInt = sum
			})
		}
	}
}

func BenchmarkNew1000(b *testing.B) {
	nodes := unnamed(1000)
	b.ReportAllocs()
	for b.Loop() {
		r, err := New(nodes, Jedis{Replicas: 160})
		if err != nil {
			b.Fatal(err)
		}
		sinkInt = r.VirtualNodes()
	}
}

var sinkU64 uint64

func benchHash(b *testing.B, f func([]byte) uint64) {
	for _, n := range []int{16, 256} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		b.Run("bytes="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sum uint64
			for b.Loop() {
				sum += f(data)
			}
			sinkU64 = sum
		})
	}
}

func BenchmarkMurmur64A(b *testing.B) {
	benchHash(b, func(d []byte) uint64 { return Murmur64A(d, JedisMurmurSeed) })
}

func BenchmarkJedisMD5(b *testing.B) {
	benchHash(b, func(d []byte) uint64 { return uint64(MD5Sum32(d)) })
}

// BenchmarkLocatePreset is Locate of 16-byte keys for every peer preset at
// 10 and 100 named nodes (with addresses, for the ketama labels).
func BenchmarkLocatePreset(b *testing.B) {
	presets := []struct {
		name string
		opt  Preset
	}{
		{"jedis", nil},
		{"ketama", Libmemcached{Distribution: LibmemcachedKetamaWeighted}},
		{"spymemcached", Spymemcached{Locator: SpymemcachedKetama}},
		{"libmemcached-ketama", Libmemcached{Distribution: LibmemcachedKetama, Hash: HashOneAtATime, HashAfter: HashOneAtATime}},
		{"libmemcached-modula", Libmemcached{Hash: HashOneAtATime}},
		{"twemproxy-ketama-fnv1a_64", Twemproxy{Hash: HashFNV1a64Low32}},
		{"twemproxy-modula-fnv1a_64", Twemproxy{Distribution: TwemproxyModula, Hash: HashFNV1a64Low32}},
		{"goredis-ring", GoRedisRing{}},
		{"gomemcache", Gomemcache{}},
		{"spymemcached-arraymod", Spymemcached{}},
	}
	keys, _ := benchKeySet(16)
	for _, p := range presets {
		for _, n := range []int{10, 100} {
			nodes := make([]Node, n)
			for i := range nodes {
				nodes[i] = Node{Name: "cache-" + strconv.Itoa(i), Addr: "10.0.0." + strconv.Itoa(i) + ":11211"}
			}
			r := mustNew(b, nodes, p.opt)
			b.Run(p.name+"/nodes="+strconv.Itoa(n), func(b *testing.B) {
				b.ReportAllocs()
				sum, i := 0, 0
				for b.Loop() {
					sum += r.Locate(keys[i&(benchKeys-1)])
					i++
				}
				sinkInt = sum
			})
		}
	}
}
