package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The planned share equals the share of 200,000 random keys that move, for
// adding, removing and re-weighting a node, on the Jedis and ketama rings.
// With 200,000 keys the standard error of a share is at most 0.0012; the
// tolerance is four of them.
func TestPlanExactness(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	keys := make([]string, 200000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%x", rng.Uint64())
	}
	base := []Node{{Name: "a", Addr: "10.0.0.1:11211"}, {Name: "b", Addr: "10.0.0.2:11211"}, {Name: "c", Addr: "10.0.0.3:11211"}, {Name: "d", Addr: "10.0.0.4:11211"}}
	for _, preset := range []struct {
		name string
		opt  Preset
	}{{"jedis", nil}, {"ketama", Libmemcached{Distribution: LibmemcachedKetamaWeighted}}} {
		before := mustNew(t, base, preset.opt)
		for _, change := range []struct {
			name  string
			nodes []Node
		}{
			{"add", append(append([]Node(nil), base...), Node{Name: "e", Addr: "10.0.0.5:11211"})},
			{"remove", []Node{base[0], base[1], base[3]}},
			{"reweight", []Node{base[0], {Name: "b", Weight: 3, Addr: base[1].Addr}, base[2], base[3]}},
		} {
			t.Run(preset.name+"/"+change.name, func(t *testing.T) {
				after := mustNew(t, change.nodes, preset.opt)
				d, err := Compare(before, after)
				if err != nil {
					t.Fatal(err)
				}
				flows := map[[2]int]int{}
				moved := 0
				for _, k := range keys {
					if from, to, m := Owners(before, after, k); m {
						moved++
						flows[[2]int{from, to}]++
					}
				}
				const tol = 0.005
				if got := float64(moved) / float64(len(keys)); got < d.Moved-tol || got > d.Moved+tol {
					t.Fatalf("plan %.4f, keys %.4f", d.Moved, got)
				}
				for _, m := range d.Moves {
					got := float64(flows[[2]int{m.From, m.To}]) / float64(len(keys))
					if got < m.Share-tol || got > m.Share+tol {
						t.Fatalf("move %d->%d: plan %.4f, keys %.4f", m.From, m.To, m.Share, got)
					}
				}
				if len(flows) != len(d.Moves) {
					t.Fatalf("keys moved along %d pairs, the plan lists %d", len(flows), len(d.Moves))
				}
			})
		}
	}
}

// CompareMatched takes the caller's matching of nodes: an unnamed ketama
// node at an address written another way has other labels, so Compare sees
// a node leave and another join, and CompareMatched, told they are one,
// sees only the arcs whose owner changes between the other nodes and it.
// Matches of the wrong length or out of range are refused.
func TestCompareMatched(t *testing.T) {
	a, err := New([]Node{{Addr: "127.0.0.1:11211"}, {Addr: "10.0.0.2:11211"}}, Libmemcached{Distribution: LibmemcachedKetamaWeighted})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New([]Node{{Addr: "localhost:11211"}, {Addr: "10.0.0.2:11211"}}, Libmemcached{Distribution: LibmemcachedKetamaWeighted})
	if err != nil {
		t.Fatal(err)
	}
	byID, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	matched, err := CompareMatched(a, b, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	share := func(d Diff, from, to int) float64 {
		for _, m := range d.Moves {
			if m.From == from && m.To == to {
				return m.Share
			}
		}
		return 0
	}
	// By ID, everything node 0 owned leaves it; matched, only the arcs that
	// change owner between the two nodes move, the same as by ID between 1
	// and 0, and node 0 keeps the rest.
	if got := share(byID, 0, 0); got == 0 || share(matched, 0, 0) != 0 {
		t.Errorf("0 -> 0: by ID %v (want > 0), matched %v (want 0)", got, share(matched, 0, 0))
	}
	if share(matched, 1, 0) != share(byID, 1, 0) || matched.Moved >= byID.Moved {
		t.Errorf("matched %+v, by ID %+v: want the arcs between the nodes only", matched, byID)
	}
	for _, same := range [][]int{{0}, {0, 2}, {0, -2}} {
		if _, err := CompareMatched(a, b, same); err == nil {
			t.Errorf("CompareMatched(%v): no error", same)
		}
	}
}
