package ring

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// everyPresetAndHash lists one configuration per preset and per hash the
// preset accepts, with whether node weights count.
func everyPresetAndHash() []Preset {
	var ps []Preset
	for k := kindNone + 1; k < numKinds; k++ {
		ps = append(ps, Jedis{Hash: Hash{k}})
	}
	for _, h := range twemproxyHashes {
		ps = append(ps, Twemproxy{Hash: h}, Twemproxy{Distribution: TwemproxyModula, Hash: h})
	}
	for _, h := range libmemcachedHashes {
		ps = append(ps,
			Libmemcached{Hash: h},
			Libmemcached{Distribution: LibmemcachedKetama, Hash: h},
			Libmemcached{Distribution: LibmemcachedKetama, HashAfter: h},
			Libmemcached{Distribution: LibmemcachedKetamaWeighted, HashAfter: h},
			Libmemcached{Distribution: LibmemcachedConsistentWeighted, Hash: h},
			Libmemcached{Distribution: LibmemcachedKetamaSpy, Hash: h},
			Libmemcached{Distribution: LibmemcachedKetamaSpyWeighted, HashAfter: h})
	}
	return append(ps, Libmemcached{Distribution: LibmemcachedKetamaWeighted},
		Spymemcached{}, Spymemcached{Locator: SpymemcachedKetama},
		Spymemcached{Locator: SpymemcachedKetama, KeyFormat: LibmemcachedFormat},
		Spymemcached{Locator: SpymemcachedKetama, Weighted: true},
		GoRedisRing{}, Gomemcache{})
}

// propertyNodes returns n named nodes with addresses, weighted 1, 2, 1, 3,
// ... when the preset counts weights.
func propertyNodes(t *testing.T, p Preset, n int) []Node {
	cfg, err := p.config()
	if err != nil {
		t.Fatalf("%v: %v", p, err)
	}
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("cache-%d", i), Addr: fmt.Sprintf("10.0.0.%d:11211", i+1)}
		if cfg.weighted {
			nodes[i].Weight = []int{1, 2, 1, 3}[i%4]
		}
	}
	return nodes
}

// randomKeys returns n keys of 8 to 24 random letters and digits.
func randomKeys(n int) []string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_-"
	rng := rand.New(rand.NewPCG(13, 14))
	keys := make([]string, n)
	for i := range keys {
		b := make([]byte, 8+rng.IntN(17))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		keys[i] = string(b)
	}
	return keys
}

// within reports whether a fraction counted over n keys agrees with an exact
// probability p: within 6 standard deviations of the binomial count (and
// 0.002, for p near 0 or 1).
func within(counted, p float64, n int) bool {
	return math.Abs(counted-p) <= 6*math.Sqrt(p*(1-p)/float64(n))+0.002
}

// TestSharesAgainstCountedKeys: for every preset and every hash it accepts,
// Shares agrees with the fraction of random keys each node gets, and
// Compare's moved share (3 nodes to 4) with the fraction of keys that
// change owner; a hash with no fixed range is refused with ErrInexact by
// both.
func TestSharesAgainstCountedKeys(t *testing.T) {
	keys := randomKeys(12000)
	for _, p := range everyPresetAndHash() {
		t.Run(p.String(), func(t *testing.T) {
			nodes := propertyNodes(t, p, 4)
			a, b := mustNew(t, nodes[:3], p), mustNew(t, nodes, p)
			shares, err := b.Shares()
			d, cerr := Compare(a, b)
			if !hashes[b.Hash().kind].uniform {
				if !errors.Is(err, ErrInexact) || !errors.Is(cerr, ErrInexact) {
					t.Fatalf("%v: Shares %v, Compare %v; want ErrInexact", b.Hash(), err, cerr)
				}
				return
			}
			if err != nil || cerr != nil {
				t.Fatalf("Shares: %v; Compare: %v", err, cerr)
			}
			counts := make([]int, b.Len())
			moved := 0
			for _, k := range keys {
				counts[b.Locate(k)]++
				if _, _, m := Owners(a, b, k); m {
					moved++
				}
			}
			for i, c := range counts {
				if got := float64(c) / float64(len(keys)); !within(got, shares[i], len(keys)) {
					t.Errorf("node %d: %.4f of the keys, Shares says %.4f (all: %v)", i, got, shares[i], shares)
				}
			}
			if got := float64(moved) / float64(len(keys)); !within(got, d.Moved, len(keys)) {
				t.Errorf("%.4f of the keys move, Compare says %.4f", got, d.Moved)
			}
		})
	}
}

// Shares of a 15-bit key hash on a 32-bit ketama ring: the owner of the
// lowest point owns every key below it (the twemproxy crc32 pool).
func TestSharesShortHashRange(t *testing.T) {
	nodes := localNodes([]int{7001, 7002, 7003, 7004}, nil, nil)
	r := mustNew(t, nodes, Twemproxy{Hash: HashCRC32Bits16to30})
	shares := mustShares(t, r)
	if fmt.Sprint(shares) != "[0 0 1 0]" {
		t.Fatalf("Shares() = %v, want [0 0 1 0]", shares)
	}
	// The same pool with crc32a: every node owns some of the range.
	for i, s := range mustShares(t, mustNew(t, nodes, Twemproxy{Hash: HashCRC32})) {
		if s < 0.1 {
			t.Errorf("crc32a: node %d owns %.4f", i, s)
		}
	}
	// Modula over a 15-bit hash: 2^15 values over 3 slots, exactly.
	m := mustNew(t, nodes[:3], Libmemcached{Hash: HashCRC32Bits16to30})
	want := []float64{10923.0 / 32768, 10923.0 / 32768, 10922.0 / 32768}
	if got := mustShares(t, m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("modula crc: Shares() = %v, want %v", got, want)
	}
}
