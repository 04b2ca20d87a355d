package ring

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// readRouting reads a vector file of raw UTF-8 keys: key, then one or more
// integer columns.
func readRouting(t *testing.T, path string) (keys []string, cols [][]int) {
	t.Helper()
	_, rows := readTSV(t, path)
	for _, row := range rows {
		var ints []int
		for _, c := range row[1:] {
			n, err := strconv.Atoi(c)
			if err != nil {
				t.Fatalf("%s: row %q: %v", path, row, err)
			}
			ints = append(ints, n)
		}
		keys = append(keys, row[0])
		cols = append(cols, ints)
	}
	return keys, cols
}

func localNodes(ports []int, weights []int, names []string) []Node {
	nodes := make([]Node, len(ports))
	for i, p := range ports {
		nodes[i] = Node{Addr: fmt.Sprintf("127.0.0.1:%d", p), Weight: 1}
		if weights != nil {
			nodes[i].Weight = weights[i]
		}
		if names != nil {
			nodes[i].Name = names[i]
		}
	}
	return nodes
}

func TestGoldenKetama(t *testing.T) {
	cases := []struct {
		file  string
		nodes []Node
		opt   Preset
		want  []int // per-node key counts from the file's header
	}{
		{"libmemcached_ketama_weighted", localNodes([]int{11211, 11212, 11213, 11214}, nil, nil), Libmemcached{Distribution: LibmemcachedKetamaWeighted}, []int{698, 801, 766, 833}},
		{"spymemcached_ketama_default", localNodes([]int{11211, 11212, 11213, 11214}, nil, nil), Spymemcached{Locator: SpymemcachedKetama}, []int{799, 735, 813, 751}},
		{"twemproxy_ketama_md5", localNodes([]int{7001, 7002, 7003, 7004}, nil, nil), Libmemcached{Distribution: LibmemcachedKetamaWeighted}, []int{746, 705, 845, 802}},
		{"twemproxy_ketama_named_md5", localNodes([]int{7003, 7001, 7004, 7002}, nil, []string{"cache-a", "cache-b", "cache-c", "cache-d"}), Libmemcached{Distribution: LibmemcachedKetamaWeighted}, []int{826, 762, 761, 749}},
		{"twemproxy_ketama_weighted_md5", localNodes([]int{7001, 7002, 7003, 7004}, []int{1, 2, 1, 3}, nil), Libmemcached{Distribution: LibmemcachedKetamaWeighted}, []int{411, 846, 431, 1410}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			checkRouting(t, "testdata/ketama/"+c.file+".tsv", mustNew(t, c.nodes, c.opt), c.want)
		})
	}
}

// checkRouting checks r against a vector file of raw keys and indices, and,
// when want is set, the per-node counts its header gives.
func checkRouting(t *testing.T, path string, r *Ring, want []int) {
	t.Helper()
	keys, cols := readRouting(t, path)
	counts := make([]int, r.Len())
	for i, k := range keys {
		got := r.Locate(k)
		counts[got]++
		if got != cols[i][0] {
			t.Errorf("Locate(%q) = %d, want %d", k, got, cols[i][0])
		}
	}
	if want != nil && fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// twemproxy ejects a dead server by rebuilding ketama over the live ones;
// with equal weights the live servers keep their points, so Remove gives
// the same placement (indices above the removed one shift down by one).
func TestGoldenKetamaEject(t *testing.T) {
	r, err := New(localNodes([]int{7001, 7002, 7003, 7004}, nil, nil), Libmemcached{Distribution: LibmemcachedKetamaWeighted})
	if err != nil {
		t.Fatal(err)
	}
	after, err := r.RemoveKeepingSlots(2)
	if err != nil {
		t.Fatal(err)
	}
	keys, cols := readRouting(t, "testdata/ketama/twemproxy_eject_ketama_md5.tsv")
	for i, k := range keys {
		want := cols[i][1]
		if want > 2 {
			want--
		}
		if got := r.Locate(k); got != cols[i][0] {
			t.Errorf("before: Locate(%q) = %d, want %d", k, got, cols[i][0])
		}
		if got := after.Locate(k); got != want {
			t.Errorf("after ejecting 2: Locate(%q) = %d, want %d (old index %d)", k, got, want, cols[i][1])
		}
	}
}

// Point counts computed in float32, as libmemcached and twemproxy do.
func TestKetamaPointCounts(t *testing.T) {
	for _, c := range []struct {
		n       int
		weights []int
		want    int
	}{
		{4, nil, 640},
		{25, nil, 3900}, // 39 digests each, not 40
		{24, nil, 3840},
		{4, []int{1, 2, 1, 3}, 88 + 180 + 88 + 272},
	} {
		nodes := make([]Node, c.n)
		for i := range nodes {
			nodes[i] = Node{Name: "s" + strconv.Itoa(i), Weight: 1}
			if c.weights != nil {
				nodes[i].Weight = c.weights[i]
			}
		}
		r, err := New(nodes, Libmemcached{Distribution: LibmemcachedKetamaWeighted})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.VirtualNodes(); got != c.want {
			t.Errorf("%d nodes %v: %d points, want %d", c.n, c.weights, got, c.want)
		}
	}
}

func TestKetamaErrors(t *testing.T) {
	for _, c := range []struct {
		nodes []Node
		p     Preset
		want  string
	}{
		{[]Node{{Addr: "a:1"}, {}}, nil, "node 1: ketama needs a name or an address"},
		{[]Node{{Addr: "h:11211"}, {Name: "h"}}, nil, `nodes 0 and 1 have the same ketama label "h"`},
		{[]Node{{Name: "a"}}, Libmemcached{Distribution: LibmemcachedKetamaWeighted, Hash: HashCRC32}, "the peer has no hash CRC32"},
		{[]Node{{Name: "a"}}, Libmemcached{Distribution: LibmemcachedKetamaWeighted, Hash: HashMurmur3}, "KETAMA_WEIGHTED sets the hash to MD5"},
		{[]Node{{Name: "a"}}, Twemproxy{Hash: HashMurmur64A}, "the peer has no hash Murmur64A"},
		{[]Node{{Name: "a", Weight: 1 << 25}}, nil, "total weight exceeds"},
		{[]Node{{Name: "a", Weight: 1000}, {Name: "b"}}, nil, `node 1 ("b"): weight 1 of 1001 in all gives it no ketama point`},
		{[]Node{{Name: "a", Weight: 2}}, Libmemcached{Distribution: LibmemcachedKetama}, `node 0 ("a"): weight 2, but Libmemcached{distribution: KETAMA} ignores weights`},
	} {
		p := c.p
		if p == nil {
			p = Libmemcached{Distribution: LibmemcachedKetamaWeighted}
		}
		_, err := New(c.nodes, p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%v): %v, want %q", c.nodes, err, c.want)
		}
	}
	// Labels: port 11211 dropped for libketama, kept for spymemcached.
	if _, err := New([]Node{{Addr: "h:11211"}, {Addr: "h"}}, Libmemcached{Distribution: LibmemcachedKetamaWeighted}); err == nil {
		t.Error("h:11211 and h share the label h under libketama")
	}
	if _, err := New([]Node{{Addr: "h:11211"}, {Addr: "h"}}, Spymemcached{Locator: SpymemcachedKetama}); err != nil {
		t.Errorf("spymemcached labels h:11211 and h differ: %v", err)
	}
}
