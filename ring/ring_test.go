package ring

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testKeys returns the keys "key:0" .. "key:<n-1>".
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	return keys
}

// unnamed returns n unnamed nodes of weight 1.
func unnamed(n int) []Node { return make([]Node, n) }

// named returns nodes named "node-0" .. "node-<n-1>", weight 1.
func named(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i].Name = "node-" + strconv.Itoa(i)
	}
	return nodes
}

func mustNew(t testing.TB, nodes []Node, p Preset) *Ring {
	t.Helper()
	r, err := New(nodes, p)
	if err != nil {
		t.Fatalf("New(%v): %v", nodes, err)
	}
	return r
}

// naiveSearch is the reference lookup: the position of the first vnode whose
// point is >= p by a linear scan, or 0 (the lowest vnode) when there is none.
func naiveSearch(vnodes []vnode, p uint64) int {
	for i, v := range vnodes {
		if v.point >= p {
			return i
		}
	}
	return 0
}

// naiveLocatePoint is the owner of p by naiveSearch.
func naiveLocatePoint(r *Ring, p uint64) int {
	return int(r.vnodes[naiveSearch(r.vnodes, p)].node)
}

// word reports whether s contains w as a whole token (not part of a longer
// number or word).
func word(s, w string) bool {
	return regexp.MustCompile(`(^|[^0-9A-Za-z_-])` + regexp.QuoteMeta(w) + `($|[^0-9A-Za-z_])`).MatchString(s)
}

func TestNewErrors(t *testing.T) {
	for _, nodes := range [][]Node{nil, {}} {
		r, err := New(nodes, nil)
		if !errors.Is(err, ErrNoNodes) || r != nil {
			t.Errorf("New(%#v) = %v, %v; want nil, ErrNoNodes", nodes, r, err)
		}
	}

	t.Run("negative weight", func(t *testing.T) {
		_, err := New([]Node{{Name: "a"}, {Name: "b", Weight: -5}, {Name: "c"}}, nil)
		if err == nil {
			t.Fatal("New with weight -5: no error")
		}
		if msg := err.Error(); !word(msg, "1") || !word(msg, "-5") {
			t.Errorf("error %q does not name node 1 and weight -5", msg)
		}
		_, err = New([]Node{{}, {}, {}, {Weight: -1}}, nil)
		if err == nil || !word(err.Error(), "3") || !word(err.Error(), "-1") {
			t.Errorf("New with unnamed node 3 weight -1: error %v, want one naming 3 and -1", err)
		}
	})

	t.Run("duplicate name", func(t *testing.T) {
		_, err := New([]Node{{Name: "redis-a"}, {Name: "redis-b"}, {Name: "redis-a", Weight: 2}}, nil)
		if err == nil {
			t.Fatal("New with a duplicate name: no error")
		}
		if msg := err.Error(); !strings.Contains(msg, `"redis-a"`) || !word(msg, "0") || !word(msg, "2") {
			t.Errorf("error %q does not name \"redis-a\" and indices 0 and 2", msg)
		}
	})

	t.Run("empty names repeat", func(t *testing.T) {
		r, err := New([]Node{{}, {Name: "x"}, {}, {Weight: 2}}, nil)
		if err != nil {
			t.Fatalf("New with repeated empty names: %v", err)
		}
		if r.Len() != 4 {
			t.Errorf("Len() = %d, want 4", r.Len())
		}
	})

	t.Run("replicas", func(t *testing.T) {
		for _, n := range []int{-1, -3} {
			r, err := New(unnamed(3), Jedis{Replicas: n})
			if err == nil || r != nil {
				t.Errorf("New(Jedis{Replicas: %d}) = %v, %v; want an error", n, r, err)
				continue
			}
			if !word(err.Error(), strconv.Itoa(n)) {
				t.Errorf("Jedis{Replicas: %d}: error %q does not name %d", n, err, n)
			}
		}
	})

	t.Run("too many vnodes", func(t *testing.T) {
		big := MaxVirtualNodes/DefaultReplicas + 1
		cases := []struct {
			nodes   []Node
			p       Preset
			culprit int
			weight  int
		}{
			{[]Node{{Name: "a"}, {Name: "b", Weight: math.MaxInt}}, nil, 1, math.MaxInt},
			{[]Node{{Weight: big}}, nil, 0, big},
			{[]Node{{}, {Weight: math.MaxInt / 2}}, nil, 1, math.MaxInt / 2},
			// Each fits alone, together they do not: the second is the culprit.
			{[]Node{{Weight: big / 2}, {Weight: big / 2}, {}}, nil, 1, big / 2},
			{[]Node{{Weight: 2}}, Jedis{Replicas: MaxVirtualNodes}, 0, 2},
			{[]Node{{}}, Jedis{Replicas: math.MaxInt}, 0, 1},
		}
		for _, c := range cases {
			var r *Ring
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("New(%v) panicked: %v", c.nodes, p)
					}
				}()
				r, err = New(c.nodes, c.p)
			}()
			if err == nil || r != nil {
				t.Errorf("New(%v) = %v, %v; want an error", c.nodes, r, err)
				continue
			}
			if msg := err.Error(); !word(msg, strconv.Itoa(c.culprit)) || !word(msg, strconv.Itoa(c.weight)) {
				t.Errorf("New(%v): error %q does not name node %d and weight %d", c.nodes, msg, c.culprit, c.weight)
			}
		}
	})

	t.Run("nil preset", func(t *testing.T) {
		if _, err := New(unnamed(2), nil); err != nil {
			t.Errorf("New with a nil option: %v", err)
		}
	})
}

func TestRemoveErrors(t *testing.T) {
	r := mustNew(t, unnamed(3), nil)
	for _, i := range []int{-1, 3, 100} {
		r2, err := r.RemoveKeepingSlots(i)
		if err == nil || r2 != nil {
			t.Errorf("RemoveKeepingSlots(%d) = %v, %v; want an error", i, r2, err)
			continue
		}
		if errors.Is(err, ErrNoNodes) {
			t.Errorf("RemoveKeepingSlots(%d): got ErrNoNodes, want an index error", i)
		}
		if !word(err.Error(), strconv.Itoa(i)) {
			t.Errorf("RemoveKeepingSlots(%d): error %q does not name the index", i, err)
		}
	}
	one := mustNew(t, []Node{{Name: "only"}}, nil)
	if r2, err := one.RemoveKeepingSlots(0); !errors.Is(err, ErrNoNodes) || r2 != nil {
		t.Errorf("Remove of the only node = %v, %v; want nil, ErrNoNodes", r2, err)
	}
	// The ring removed from is unchanged.
	if r.Len() != 3 || one.Len() != 1 {
		t.Errorf("Len after failed Remove: %d, %d", r.Len(), one.Len())
	}
}

func TestWeightZeroIsOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		zero   []Node
		one    []Node
		nodeAt int
	}{
		{"unnamed", []Node{{}, {Weight: 0}, {Weight: 2}}, []Node{{Weight: 1}, {Weight: 1}, {Weight: 2}}, 1},
		{"named", []Node{{Name: "a", Weight: 3}, {Name: "b", Weight: 0}}, []Node{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := append([]Node(nil), tc.zero...)
			rz := mustNew(t, input, nil)
			ro := mustNew(t, tc.one, nil)
			if input[tc.nodeAt].Weight != 0 {
				t.Errorf("New modified its input: weight %d", input[tc.nodeAt].Weight)
			}
			for _, k := range testKeys(10000) {
				if a, b := rz.Locate(k), ro.Locate(k); a != b {
					t.Fatalf("Locate(%q): weight 0 gives %d, weight 1 gives %d", k, a, b)
				}
			}
			if rz.VirtualNodes() != ro.VirtualNodes() {
				t.Errorf("VirtualNodes: %d with weight 0, %d with weight 1", rz.VirtualNodes(), ro.VirtualNodes())
			}
			nodes := rz.Nodes()
			for i := range nodes {
				if nodes[i] != tc.one[i] {
					t.Errorf("Nodes()[%d] = %+v, want %+v", i, nodes[i], tc.one[i])
				}
			}
			// Nodes returns a copy.
			nodes[0].Name = "changed"
			if rz.Nodes()[0].Name == "changed" {
				t.Error("Nodes() returned the ring's own slice")
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	nodes := []Node{{Name: "a", Weight: 2}, {}, {Name: "c"}, {Weight: 3}}
	for _, p := range []Preset{nil, Jedis{Hash: HashMD5}, Jedis{KeyTags: true}, Jedis{Replicas: 7, LegacyNames: true}} {
		r1, r2 := mustNew(t, nodes, p), mustNew(t, nodes, p)
		for i := range 100000 {
			k := "k" + strconv.Itoa(i) + "{" + strconv.Itoa(i%97) + "}"
			if a, b := r1.Locate(k), r2.Locate(k); a != b {
				t.Fatalf("Locate(%q): %d and %d from two rings over the same input", k, a, b)
			}
		}
	}
}

// assertSameRing checks that a and b place every key alike and have the same
// points.
func assertSameRing(t *testing.T, a, b *Ring, keys []string) {
	t.Helper()
	if a.VirtualNodes() != b.VirtualNodes() {
		t.Errorf("VirtualNodes: %d and %d", a.VirtualNodes(), b.VirtualNodes())
	}
	for i := range min(len(a.vnodes), len(b.vnodes)) {
		if a.vnodes[i] != b.vnodes[i] {
			t.Errorf("vnode %d: %+v and %+v", i, a.vnodes[i], b.vnodes[i])
			break
		}
	}
	bad := 0
	for _, k := range keys {
		if x, y := a.Locate(k), b.Locate(k); x != y {
			if bad++; bad <= 5 {
				t.Errorf("Locate(%q): %d and %d", k, x, y)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d keys differ", bad, len(keys))
	}
}

func TestAdd(t *testing.T) {
	keys := testKeys(200000)
	for _, tc := range []struct {
		name  string
		nodes []Node
	}{
		{"unnamed", unnamed(4)},
		{"named", named(4)},
		{"mixed", []Node{{Name: "a"}, {}, {Name: "c", Weight: 2}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r3 := mustNew(t, tc.nodes[:3], nil)
			r4, err := r3.Add(tc.nodes[3])
			if err != nil {
				t.Fatal(err)
			}
			want := mustNew(t, tc.nodes, nil)
			assertSameRing(t, r4, want, keys)
			moved := 0
			for _, k := range keys {
				before, after := r3.Locate(k), r4.Locate(k)
				if before != after {
					moved++
					if after != 3 {
						t.Fatalf("Locate(%q) moved from %d to %d, want to 3", k, before, after)
					}
				}
			}
			if frac := float64(moved) / float64(len(keys)); frac < 0.15 || frac > 0.35 {
				t.Errorf("%.3f of the keys moved, want about 1/4", frac)
			}
			if r3.Len() != 3 || r4.Len() != 4 {
				t.Errorf("Len: %d and %d", r3.Len(), r4.Len())
			}
		})
	}
	t.Run("duplicate name", func(t *testing.T) {
		r := mustNew(t, named(3), nil)
		if _, err := r.Add(Node{Name: "node-1"}); err == nil || !strings.Contains(err.Error(), `"node-1"`) {
			t.Errorf("Add of a duplicate name: %v", err)
		}
	})
}

func TestRemove(t *testing.T) {
	keys := testKeys(200000)
	for _, tc := range []struct {
		name  string
		nodes []Node
	}{
		{"unnamed", unnamed(4)},
		{"named", named(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r4 := mustNew(t, tc.nodes, nil)
			r3, err := r4.RemoveKeepingSlots(1)
			if err != nil {
				t.Fatal(err)
			}
			if r3.Len() != 3 {
				t.Fatalf("Len() = %d, want 3", r3.Len())
			}
			wantNodes := []Node{tc.nodes[0], tc.nodes[2], tc.nodes[3]}
			for i, n := range r3.Nodes() {
				want := wantNodes[i]
				want.Weight = max(want.Weight, 1)
				if n != want {
					t.Errorf("Nodes()[%d] = %+v, want %+v", i, n, want)
				}
			}
			newIndex := []int{0, -1, 1, 2} // old index -> new index
			spread := make([]int, 3)
			for _, k := range keys {
				before, after := r4.Locate(k), r3.Locate(k)
				if before == 1 {
					spread[after]++
					continue
				}
				if after != newIndex[before] {
					t.Fatalf("Locate(%q): node %d (now %d) lost it to %d", k, before, newIndex[before], after)
				}
			}
			for i, c := range spread {
				if c == 0 {
					t.Errorf("no key of the removed node went to new node %d (spread %v)", i, spread)
				}
			}
			// Removing the last node is the inverse of Add.
			r5, err := r4.RemoveKeepingSlots(3)
			if err != nil {
				t.Fatal(err)
			}
			assertSameRing(t, r5, mustNew(t, tc.nodes[:3], nil), keys[:20000])
		})
	}
	t.Run("add after remove", func(t *testing.T) {
		// An unnamed node added after a Remove takes a fresh slot, so the
		// remaining nodes keep their keys.
		r4 := mustNew(t, unnamed(4), nil)
		r3, _ := r4.RemoveKeepingSlots(1)
		r4b, err := r3.Add(Node{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[:50000] {
			before, after := r3.Locate(k), r4b.Locate(k)
			if before != after && after != 3 {
				t.Fatalf("Locate(%q) moved from %d to %d, want to 3", k, before, after)
			}
		}
	})
}

func TestWeights(t *testing.T) {
	weights := []int{1, 2, 1, 3, 1}
	total := 8
	nodes := make([]Node, len(weights))
	for i, w := range weights {
		nodes[i].Weight = w
	}
	r := mustNew(t, nodes, nil)
	if got, want := r.VirtualNodes(), total*DefaultReplicas; got != want {
		t.Errorf("VirtualNodes() = %d, want %d", got, want)
	}
	const n = 200000
	counts := make([]int, len(weights))
	for _, k := range testKeys(n) {
		counts[r.Locate(k)]++
	}
	shares := mustShares(t, r)
	for i, w := range weights {
		got := float64(counts[i]) / n
		want := float64(w) / float64(total)
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("node %d (weight %d): %.4f of the keys, want %.4f within 10%%", i, w, got, want)
		}
		if math.Abs(got-shares[i]) > 0.01 {
			t.Errorf("node %d: %.4f of the keys, Shares() says %.4f", i, got, shares[i])
		}
	}
	t.Logf("counts %v, shares %.4f", counts, shares)
}

func TestShares(t *testing.T) {
	// One node owns the whole space: its share is exactly 1, whatever the
	// hash and the number of vnodes.
	for _, tc := range []struct {
		name  string
		nodes []Node
		p     Preset
	}{
		{"murmur unnamed", []Node{{}}, nil},
		{"murmur named weight 3", []Node{{Name: "solo", Weight: 3}}, nil},
		{"murmur 1 vnode", []Node{{}}, Jedis{Replicas: 1}},
		{"md5 unnamed", []Node{{}}, Jedis{Hash: HashMD5}},
	} {
		r := mustNew(t, tc.nodes, tc.p)
		if s := mustShares(t, r); len(s) != 1 || s[0] != 1 {
			t.Errorf("one node (%s): Shares() = %.17g, want exactly [1]", tc.name, s)
		}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		p     Preset
	}{
		{"murmur 3", unnamed(3), nil},
		{"murmur weighted", []Node{{Weight: 1}, {Weight: 2}, {Name: "x", Weight: 5}}, nil},
		{"murmur 100", unnamed(100), nil},
		{"md5 3", unnamed(3), Jedis{Hash: HashMD5}},
		{"md5 collision", []Node{{Weight: 324}, {Weight: 324}}, Jedis{Hash: HashMD5}},
		{"md5 2 vnodes", unnamed(2), Jedis{Hash: HashMD5, Replicas: 1}},
		{"murmur 2 vnodes", unnamed(2), Jedis{Replicas: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, tc.nodes, tc.p)
			s := mustShares(t, r)
			if len(s) != r.Len() {
				t.Fatalf("len(Shares()) = %d, want %d", len(s), r.Len())
			}
			sum := 0.0
			for i, x := range s {
				if x <= 0 || x > 1 {
					t.Errorf("share %d = %.17g, want in (0, 1]", i, x)
				}
				sum += x
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("Shares() sums to %.15f, want 1", sum)
			}
		})
	}
	// Two vnodes: the shares are the exact arc lengths.
	r := mustNew(t, unnamed(2), Jedis{Replicas: 1, Hash: HashMD5})
	lo, hi := r.vnodes[0], r.vnodes[1]
	s := mustShares(t, r)
	wantHi := float64(hi.point-lo.point) / (1 << 32)
	if math.Abs(s[hi.node]-wantHi) > 1e-15 || math.Abs(s[lo.node]-(1-wantHi)) > 1e-15 {
		t.Errorf("two-vnode MD5 ring: Shares() = %v, want node %d: %v, node %d: %v", s, hi.node, wantHi, lo.node, 1-wantHi)
	}
}

func TestCompare(t *testing.T) {
	keys := testKeys(200000)
	t.Run("add", func(t *testing.T) {
		a := mustNew(t, unnamed(3), nil)
		b, err := a.Add(Node{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Compare(a, b)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for i, m := range d.Moves {
			sum += m.Share
			if m.To != 3 {
				t.Errorf("move %+v: To != 3", m)
			}
			if m.Share <= 0 || m.Share > 1 {
				t.Errorf("move %+v: share out of (0, 1]", m)
			}
			if i > 0 && (d.Moves[i-1].From > m.From || d.Moves[i-1].From == m.From && d.Moves[i-1].To >= m.To) {
				t.Errorf("moves out of order: %+v then %+v", d.Moves[i-1], m)
			}
		}
		if len(d.Moves) != 3 {
			t.Errorf("%d moves, want 3 (one from each old node): %+v", len(d.Moves), d.Moves)
		}
		if math.Abs(sum-d.Moved) > 1e-12 {
			t.Errorf("Moved = %v, moves sum to %v", d.Moved, sum)
		}
		changed := 0
		for _, k := range keys {
			if a.Locate(k) != b.Locate(k) {
				changed++
			}
		}
		frac := float64(changed) / float64(len(keys))
		if math.Abs(frac-d.Moved) > 0.01 {
			t.Errorf("Moved = %.4f, but %.4f of the keys changed owner", d.Moved, frac)
		}
		if share := mustShares(t, b)[3]; math.Abs(share-d.Moved) > 1e-12 {
			t.Errorf("Moved = %v, new node's share = %v", d.Moved, share)
		}
		// The reverse diff moves the same share back.
		back, err := Compare(b, a)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(back.Moved-d.Moved) > 1e-12 {
			t.Errorf("reverse Moved = %v, want %v", back.Moved, d.Moved)
		}
		for _, m := range back.Moves {
			if m.From != 3 {
				t.Errorf("reverse move %+v: From != 3", m)
			}
		}
		if s := d.String(); !strings.Contains(s, "#3") || strings.Count(s, "\n") != 4 {
			t.Errorf("Diff.String() = %q", s)
		}
	})

	t.Run("self", func(t *testing.T) {
		for _, r := range []*Ring{mustNew(t, unnamed(3), nil), mustNew(t, named(5), Jedis{Hash: HashMD5})} {
			d, err := Compare(r, r)
			if err != nil {
				t.Fatal(err)
			}
			if d.Moved != 0 || len(d.Moves) != 0 {
				t.Errorf("Compare(r, r) = %v, %+v; want 0, no moves", d.Moved, d.Moves)
			}
			// A rebuilt ring over the same input is the same ring.
			d, err = Compare(r, mustNew(t, r.Nodes(), r.Preset()))
			if err != nil {
				t.Fatal(err)
			}
			if d.Moved != 0 || len(d.Moves) != 0 {
				t.Errorf("Compare(r, rebuilt r) = %v, %+v; want 0, no moves", d.Moved, d.Moves)
			}
		}
	})

	t.Run("different hashes", func(t *testing.T) {
		a := mustNew(t, unnamed(3), nil)
		b := mustNew(t, unnamed(3), Jedis{Hash: HashMD5})
		if a.Hash() != HashMurmur64A || b.Hash() != HashMD5 {
			t.Fatalf("Hash() = %v, %v", a.Hash(), b.Hash())
		}
		if _, err := Compare(a, b); err == nil {
			t.Error("Compare(HashMurmur64A ring, HashMD5 ring): no error")
		}
		if _, err := Compare(b, a); err == nil {
			t.Error("Compare(HashMD5 ring, HashMurmur64A ring): no error")
		}
	})

	t.Run("remove named", func(t *testing.T) {
		a := mustNew(t, named(4), nil)
		b, err := a.RemoveKeepingSlots(1)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Compare(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Moves) != 3 {
			t.Errorf("%d moves, want 3: %+v", len(d.Moves), d.Moves)
		}
		for _, m := range d.Moves {
			if m.From != 1 {
				t.Errorf("move %+v: From != 1", m)
			}
		}
		if share := mustShares(t, a)[1]; math.Abs(share-d.Moved) > 1e-12 {
			t.Errorf("Moved = %v, removed node's share = %v", d.Moved, share)
		}
	})

	t.Run("everything moves", func(t *testing.T) {
		// One unnamed node replaced by one named node: the whole space moves
		// from node 0 to node 0, as a single Move whose share is 1.
		for _, h := range []Hash{HashMurmur64A, HashMD5} {
			a := mustNew(t, []Node{{}}, Jedis{Hash: h})
			b := mustNew(t, []Node{{Name: "n"}}, Jedis{Hash: h})
			d, err := Compare(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Moves) != 1 || d.Moves[0].From != 0 || d.Moves[0].To != 0 {
				t.Fatalf("%v: moves %+v, want one move 0 -> 0", h, d.Moves)
			}
			if s := d.Moves[0].Share; s <= 0 || s > 1 {
				t.Errorf("%v: Move.Share = %.17g, want in (0, 1] (exactly 1)", h, s)
			}
			if math.Abs(d.Moved-1) > 1e-9 {
				t.Errorf("%v: Moved = %.17g, want 1", h, d.Moved)
			}
		}
	})

	t.Run("unnamed insert in the middle", func(t *testing.T) {
		// Positional identity: a fresh list with a node inserted at 1 renames
		// nodes 1 and 2, so most of the space moves.
		a := mustNew(t, unnamed(3), nil)
		b := mustNew(t, unnamed(4), nil)
		d, _ := Compare(a, b)
		if d.Moved > 0.35 {
			t.Errorf("appending an unnamed node moved %.4f", d.Moved)
		}
		c, _ := a.RemoveKeepingSlots(0)
		d, _ = Compare(c, mustNew(t, unnamed(2), nil))
		if d.Moved < 0.5 {
			t.Errorf("ring with slots {1,2} vs fresh {0,1}: moved only %.4f", d.Moved)
		}
	})
}

func TestMD5Collision(t *testing.T) {
	const point = 102940135
	for _, name := range []string{"SHARD-0-NODE-51705", "SHARD-1-NODE-16199"} {
		if p := HashMD5.Point([]byte(name)); p != point {
			t.Errorf("HashMD5.Point(%q) = %d, want %d", name, p, point)
		}
	}
	r := mustNew(t, []Node{{Weight: 324}, {Weight: 324}}, Jedis{Hash: HashMD5})
	if got := r.LocatePoint(point); got != 1 {
		t.Errorf("LocatePoint(%d) = %d, want 1 (the later node wins)", point, got)
	}
	if got := r.Locate("SHARD-0-NODE-51705"); got != 1 {
		t.Errorf(`Locate("SHARD-0-NODE-51705") = %d, want 1`, got)
	}
	if got := r.Locate("SHARD-1-NODE-16199"); got != 1 {
		t.Errorf(`Locate("SHARD-1-NODE-16199") = %d, want 1`, got)
	}
	if got, max := r.VirtualNodes(), 2*324*160; got >= max {
		t.Errorf("VirtualNodes() = %d, want < %d", got, max)
	}
	for i := 1; i < len(r.vnodes); i++ {
		if r.vnodes[i-1].point >= r.vnodes[i].point {
			t.Fatalf("vnodes %d and %d out of order or repeated: %+v %+v", i-1, i, r.vnodes[i-1], r.vnodes[i])
		}
	}
	// The point is on the ring exactly once.
	i := naiveSearch(r.vnodes, point)
	if r.vnodes[i].point != point || r.vnodes[i].node != 1 {
		t.Errorf("vnode at %d = %+v, want point %d node 1", i, r.vnodes[i], point)
	}
}

func TestJedisReplicas(t *testing.T) {
	r := mustNew(t, unnamed(3), Jedis{Replicas: 100})
	if got := r.VirtualNodes(); got != 300 {
		t.Errorf("VirtualNodes() = %d, want 300", got)
	}
	r = mustNew(t, []Node{{Weight: 2}, {Weight: 3}}, Jedis{Replicas: 7})
	if got := r.VirtualNodes(); got != 35 {
		t.Errorf("VirtualNodes() = %d, want 35", got)
	}
	if got := mustNew(t, unnamed(3), nil).VirtualNodes(); got != 480 {
		t.Errorf("default VirtualNodes() = %d, want 480", got)
	}
	// Vnode names: with 1 replica, node i's only vnode is "SHARD-<i>-NODE-0".
	r = mustNew(t, unnamed(3), Jedis{Replicas: 1})
	for i := range 3 {
		p := HashMurmur64A.Point([]byte("SHARD-" + strconv.Itoa(i) + "-NODE-0"))
		if got := r.LocatePoint(p); got != i {
			t.Errorf("LocatePoint(point of node %d's vnode) = %d", i, got)
		}
	}
	r = mustNew(t, []Node{{Name: "a"}, {Name: "b", Weight: 2}}, Jedis{Replicas: 1})
	for name, want := range map[string]int{"a*0": 0, "b*0": 1, "b*1": 1} {
		if got := r.LocatePoint(HashMurmur64A.Point([]byte(name))); got != want {
			t.Errorf("vnode %q belongs to %d, want %d", name, got, want)
		}
	}
	r = mustNew(t, []Node{{Name: "a"}, {Name: "b", Weight: 2}}, Jedis{Replicas: 1, LegacyNames: true})
	for name, want := range map[string]int{"a*10": 0, "b*20": 1, "b*21": 1} {
		if got := r.LocatePoint(HashMurmur64A.Point([]byte(name))); got != want {
			t.Errorf("legacy vnode %q belongs to %d, want %d", name, got, want)
		}
	}
}

func TestJedisLegacyNames(t *testing.T) {
	keys := testKeys(1000)
	t.Run("named", func(t *testing.T) {
		nodes := []Node{{Name: "redis-a"}, {Name: "redis-b", Weight: 2}, {Name: "redis-c"}}
		def := mustNew(t, nodes, nil)
		legacy := mustNew(t, nodes, Jedis{LegacyNames: true})
		differ := 0
		for _, k := range keys {
			if def.Locate(k) != legacy.Locate(k) {
				differ++
			}
		}
		if differ == 0 {
			t.Error("legacy names route all 1,000 keys as the default names")
		}
		t.Logf("%d of %d keys route differently", differ, len(keys))
	})
	t.Run("unnamed", func(t *testing.T) {
		nodes := []Node{{}, {Weight: 2}, {}}
		assertSameRing(t, mustNew(t, nodes, nil), mustNew(t, nodes, Jedis{LegacyNames: true}), keys)
	})
}

func TestLocatePointWrap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		p     Preset
	}{
		{"murmur", unnamed(3), nil},
		{"md5", unnamed(3), Jedis{Hash: HashMD5}},
		{"murmur 1 vnode", unnamed(1), Jedis{Replicas: 1}},
		{"md5 2 vnodes", unnamed(2), Jedis{Replicas: 1, Hash: HashMD5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, tc.nodes, tc.p)
			lowest, highest := r.vnodes[0], r.vnodes[len(r.vnodes)-1]
			owner := int(lowest.node)
			top := maxPoint(r.Hash().Bits())
			if highest.point == top {
				t.Skip("a vnode at the top of the space")
			}
			for _, p := range []uint64{highest.point + 1, top, math.MaxUint64, 0} {
				if p <= lowest.point || p > highest.point {
					if got := r.LocatePoint(p); got != owner {
						t.Errorf("LocatePoint(%#x) = %d, want %d (owner of the lowest vnode %#x)", p, got, owner, lowest.point)
					}
				}
			}
			if got := r.LocatePoint(highest.point); got != int(highest.node) {
				t.Errorf("LocatePoint(highest) = %d, want %d", got, highest.node)
			}
			if got := r.LocatePoint(lowest.point); got != owner {
				t.Errorf("LocatePoint(lowest) = %d, want %d", got, owner)
			}
			if lowest.point > 0 {
				if got := r.LocatePoint(lowest.point - 1); got != owner {
					t.Errorf("LocatePoint(lowest-1) = %d, want %d", got, owner)
				}
			}
			// Every vnode point and its neighbours agree with the naive scan.
			for _, v := range r.vnodes {
				for _, p := range []uint64{v.point - 1, v.point, v.point + 1} {
					if got, want := r.LocatePoint(p), naiveLocatePoint(r, p); got != want {
						t.Fatalf("LocatePoint(%#x) = %d, naive scan gives %d", p, got, want)
					}
				}
			}
		})
	}
}

// TestIndexSearch checks the bucket index against the naive scan on rings
// with awkward point sets: tiny, clustered, at the ends of the space.
func TestIndexSearch(t *testing.T) {
	sets := map[string][]uint64{
		"one":             {42},
		"zero":            {0},
		"top":             {math.MaxUint64},
		"ends":            {0, math.MaxUint64},
		"two close":       {1000, 1001},
		"cluster":         {1 << 40, 1<<40 + 1, 1<<40 + 2, 1<<40 + 3, 1 << 63},
		"low and cluster": {0, 1, 2, 3, 4, 5, 6, 7, math.MaxUint64 - 1},
		"32-bit":          {5, 1 << 20, 1<<32 - 1},
		"powers":          nil,
		"dense":           nil,
	}
	for i := range 64 {
		sets["powers"] = append(sets["powers"], 1<<i)
	}
	for i := range 1000 {
		sets["dense"] = append(sets["dense"], uint64(i)*3+7)
	}
	for name, pts := range sets {
		t.Run(name, func(t *testing.T) {
			vnodes := make([]vnode, len(pts))
			for i, p := range pts {
				vnodes[i] = vnode{point: p, node: int32(i)}
			}
			x := newIndex(vnodes)
			probe := func(p uint64) {
				if got, want := x.search(vnodes, p), naiveSearch(vnodes, p); got != want {
					t.Fatalf("search(%#x) = %d, want %d", p, got, want)
				}
			}
			for _, v := range vnodes {
				probe(v.point - 1)
				probe(v.point)
				probe(v.point + 1)
				probe(v.point / 2)
				probe(v.point + (math.MaxUint64-v.point)/2)
			}
			for _, p := range []uint64{0, 1, 1 << 31, 1 << 32, 1 << 63, math.MaxUint64 - 1, math.MaxUint64} {
				probe(p)
			}
			for i := range 20000 {
				probe(Murmur64A([]byte(strconv.Itoa(i)), 1))
			}
		})
	}
}

func TestLocateMatchesNaive(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		p     Preset
	}{
		{"murmur 5", unnamed(5), nil},
		{"md5 5", unnamed(5), Jedis{Hash: HashMD5}},
		{"md5 collision", []Node{{Weight: 324}, {Weight: 324}}, Jedis{Hash: HashMD5}},
		{"named 1000", named(1000), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, tc.nodes, tc.p)
			keys := testKeys(20000)
			if len(tc.nodes) >= 1000 {
				keys = keys[:2000]
			}
			for _, k := range keys {
				p := r.Hash().Point([]byte(k))
				if got, want := r.Locate(k), naiveLocatePoint(r, p); got != want {
					t.Fatalf("Locate(%q) = %d, naive scan gives %d", k, got, want)
				}
			}
		})
	}
}

func TestKeyTagsRouting(t *testing.T) {
	r := mustNew(t, unnamed(5), Jedis{KeyTags: true})
	plain := mustNew(t, unnamed(5), nil)
	for i := range 1000 {
		tag := "user" + strconv.Itoa(i)
		want := plain.Locate(tag)
		for _, k := range []string{"{" + tag + "}", "a:{" + tag + "}:b", "x{" + tag + "}{other}"} {
			if got := r.Locate(k); got != want {
				t.Fatalf("Locate(%q) = %d, want %d (the node of %q)", k, got, want, tag)
			}
		}
		// Byte keys are hashed whole.
		k := "a:{" + tag + "}:b"
		if got, want := r.LocateBytes([]byte(k)), plain.Locate(k); got != want {
			t.Fatalf("LocateBytes(%q) = %d, want %d (whole key)", k, got, want)
		}
	}
	// Untagged keys route as without tags.
	for _, k := range append(testKeys(1000), "{}", "{a\nb}", "") {
		if r.Locate(k) != plain.Locate(k) {
			t.Fatalf("Locate(%q) differs with key tags on", k)
		}
	}
}

func TestConcurrentLocate(t *testing.T) {
	r := mustNew(t, []Node{{Name: "a"}, {Weight: 2}, {Name: "c"}, {}}, Jedis{KeyTags: true})
	keys := testKeys(20000)
	want := make([]int, len(keys))
	for i, k := range keys {
		want[i] = r.Locate(k)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range keys {
				i := (j + g*2500) % len(keys)
				if got := r.Locate(keys[i]); got != want[i] {
					errs <- "Locate(" + keys[i] + ") = " + strconv.Itoa(got) + ", want " + strconv.Itoa(want[i])
					return
				}
				if i%64 == 0 {
					_, _ = r.Shares()
					_ = r.Nodes()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

var sinkInt int

func TestLocateAllocs(t *testing.T) {
	r := mustNew(t, unnamed(10), nil)
	rt := mustNew(t, unnamed(10), Jedis{KeyTags: true})
	md5r := mustNew(t, unnamed(3), Jedis{Hash: HashMD5})
	key := "user:{12345}:profile"
	bkey := []byte(key)
	for name, f := range map[string]func(){
		"Locate":          func() { sinkInt = r.Locate(key) },
		"LocateBytes":     func() { sinkInt = r.LocateBytes(bkey) },
		"Locate tags":     func() { sinkInt = rt.Locate(key) },
		"Locate tags bad": func() { sinkInt = rt.Locate("no{tag\n}here") },
		"LocatePoint":     func() { sinkInt = r.LocatePoint(12345) },
		"KeyTag":          func() { s, _ := KeyTag(key); sinkInt = len(s) },
		"Locate md5":      func() { sinkInt = md5r.Locate(key) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, n)
		}
	}
}

func TestHashString(t *testing.T) {
	if HashMurmur64A.String() != "Murmur64A" || HashMD5.String() != "MD5" || (Hash{}).String() != "none" {
		t.Errorf("String: %q, %q, %q", HashMurmur64A, HashMD5, Hash{})
	}
	for h, bits := range map[Hash]int{HashMurmur64A: 64, HashXXHash64: 64, HashMD5: 32, HashCRC32Bits16to30: 15, HashFNV1a64Low32: 32, {}: 0} {
		if h.Bits() != bits {
			t.Errorf("%v.Bits() = %d, want %d", h, h.Bits(), bits)
		}
	}
	if r := mustNew(t, unnamed(2), Jedis{}); r.Hash() != HashMurmur64A || r.Preset() != (Jedis{}) {
		t.Errorf("Jedis{}: hash %v, preset %v; want Murmur64A, Jedis{}", r.Hash(), r.Preset())
	}
	if r := mustNew(t, unnamed(2), nil); r.Preset() != (Jedis{}) {
		t.Errorf("nil preset: %v, want Jedis{}", r.Preset())
	}
	for i := range 1000 {
		if p := HashMD5.Point([]byte(strconv.Itoa(i))); p > maxPoint(32) {
			t.Fatalf("HashMD5 point %#x above 2^32", p)
		}
	}
}

// RemoveKeepingSlots equals New over the remaining list for named nodes, and
// differs from it for unnamed nodes of the Jedis ring (which its name says):
// New gives the node after the removed one the removed one's slot.
func TestRemoveKeepingSlotsAgainstNew(t *testing.T) {
	for _, named := range []bool{true, false} {
		nodes := []Node{{Addr: "a:1"}, {Addr: "b:1"}, {Addr: "c:1"}}
		if named {
			for i := range nodes {
				nodes[i].Name = string(rune('a' + i))
			}
		}
		r, err := New(nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		removed, err := r.RemoveKeepingSlots(1)
		if err != nil {
			t.Fatal(err)
		}
		rebuilt, err := New([]Node{nodes[0], nodes[2]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		differ := 0
		for i := range 10000 {
			k := "key:" + strconv.Itoa(i)
			if removed.Locate(k) != rebuilt.Locate(k) {
				differ++
			}
		}
		if named && differ != 0 {
			t.Fatalf("named: %d keys placed differently", differ)
		}
		if !named && (differ < 2000 || rebuilt.Placement(1) != "slot:1" || removed.Placement(1) != "slot:2") {
			t.Fatalf("unnamed: %d keys placed differently; placements %s and %s", differ, removed.Placement(1), rebuilt.Placement(1))
		}
	}
}

func mustShares(t testing.TB, r *Ring) []float64 {
	t.Helper()
	s, err := r.Shares()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sortByPoint is a stable sort by point: it agrees with slices.SortStableFunc
// on 64-bit, 32-bit, 15-bit and clustered points, duplicates included.
func TestSortByPointStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name string
		n    int
		gen  func() uint64
	}{
		{"64-bit", 100000, rng.Uint64},
		{"32-bit", 50000, func() uint64 { return uint64(rng.Uint32()) }},
		{"15-bit", 70000, func() uint64 { return uint64(rng.IntN(1 << 15)) }},
		{"clustered", 40000, func() uint64 { return 1<<40 + uint64(rng.IntN(3))<<30 + uint64(rng.IntN(50)) }},
		{"one value", 1000, func() uint64 { return 7 }},
		{"two", 2, rng.Uint64},
		{"33", 33, func() uint64 { return uint64(rng.IntN(4)) }},
	} {
		v := make([]vnode, c.n)
		for i := range v {
			v[i] = vnode{point: c.gen(), node: int32(i)}
		}
		want := slices.Clone(v)
		slices.SortStableFunc(want, func(a, b vnode) int { return cmp.Compare(a.point, b.point) })
		sortByPoint(v)
		if !slices.Equal(v, want) {
			t.Errorf("%s: sortByPoint differs from a stable sort", c.name)
		}
	}
}
