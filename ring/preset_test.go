package ring

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGoldenPresets checks each peer preset against the peer's own vectors.
func TestGoldenPresets(t *testing.T) {
	mc := localNodes([]int{11211, 11212, 11213, 11214}, nil, nil)
	tw := localNodes([]int{7001, 7002, 7003, 7004}, nil, nil)
	cases := []struct {
		file  string
		nodes []Node
		opt   Preset
		want  []int // per-node key counts from the file's header
	}{
		{"twemproxy_ketama_fnv1a_64", tw, Twemproxy{Hash: HashFNV1a64Low32}, []int{994, 887, 330, 887}},
		{"twemproxy_modula_fnv1a_64", tw, Twemproxy{Distribution: TwemproxyModula, Hash: HashFNV1a64Low32}, []int{774, 772, 773, 779}},
		{"libmemcached_modula_default", mc, Libmemcached{Hash: HashOneAtATime}, nil},
		{"gomemcache_default_serverlist", mc, Gomemcache{}, []int{769, 770, 776, 783}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			checkRouting(t, "testdata/presets/"+c.file+".tsv", mustNew(t, c.nodes, c.opt), c.want)
		})
	}
}

// TestGoldenPeerDefaults checks the presets against vectors produced here
// by libmemcached 1.1.4 and spymemcached 2.12.3 themselves (see
// testdata/presets/README.md); the per-node counts come from each file's
// header.
func TestGoldenPeerDefaults(t *testing.T) {
	mc := localNodes([]int{11211, 11212, 11213, 11214}, nil, nil)
	weighted := localNodes([]int{11211, 11212, 11213, 11214}, []int{1, 2, 1, 3}, nil)
	mc25 := make([]Node, 25)
	for i := range mc25 {
		mc25[i] = Node{Addr: "127.0.0.1:" + strconv.Itoa(11211+i)}
	}
	localhost := []Node{{Addr: "localhost:11211"}, {Addr: "localhost:11212"}, {Addr: "localhost:11213"}, {Addr: "localhost:11214"}}
	for _, c := range []struct {
		file  string
		nodes []Node
		p     Preset
	}{
		{"libmemcached_modula_crc", mc, Libmemcached{Hash: HashCRC32Bits16to30}},
		{"libmemcached_ketama", mc, Libmemcached{Distribution: LibmemcachedKetama}},
		{"libmemcached_ketama_then_hash_md5", mc, Libmemcached{Distribution: LibmemcachedKetama, HashAfter: HashMD5}},
		{"libmemcached_hash_md5_then_ketama", mc, Libmemcached{Distribution: LibmemcachedKetama, Hash: HashMD5}},
		{"libmemcached_ketama_weighted_then_hash_murmur", mc, Libmemcached{Distribution: LibmemcachedKetamaWeighted, HashAfter: HashMurmur2}},
		{"libmemcached_ketama_spy", mc, Libmemcached{Distribution: LibmemcachedKetamaSpy}},
		{"libmemcached_ketama_weighted_then_spy", mc, Libmemcached{Distribution: LibmemcachedKetamaSpyWeighted}},
		{"libmemcached_consistent_weighted", weighted, Libmemcached{Distribution: LibmemcachedConsistentWeighted}},
		{"spymemcached_default_arraymod", mc, Spymemcached{}},
		{"spymemcached_ketama_libmemcached_format", localhost, Spymemcached{Locator: SpymemcachedKetama, KeyFormat: LibmemcachedFormat}},
		{"spymemcached_ketama_weighted", weighted, Spymemcached{Locator: SpymemcachedKetama, Weighted: true}},
		{"spymemcached_ketama_25servers", mc25, Spymemcached{Locator: SpymemcachedKetama}},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := "testdata/presets/" + c.file + ".tsv"
			checkRouting(t, path, mustNew(t, c.nodes, c.p), headerCounts(t, path))
		})
	}
}

// headerCounts returns the per-node counts a vector file's header gives
// ("# per-node counts [a, b, ...]").
func headerCounts(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^# per-node counts \[([0-9, ]+)\]$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s: no per-node counts in the header", path)
	}
	var counts []int
	for _, f := range strings.Split(string(m[1]), ", ") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, n)
	}
	return counts
}

// go-redis Ring: rendezvous over the shard names, keys by name.
func TestGoldenGoRedisRing(t *testing.T) {
	names := []string{"shard-a", "shard-b", "shard-c"}
	r, err := New([]Node{{Name: names[0]}, {Name: names[1]}, {Name: names[2]}}, GoRedisRing{})
	if err != nil {
		t.Fatal(err)
	}
	_, rows := readTSV(t, "testdata/presets/goredis_ring3.tsv")
	counts := map[string]int{}
	for _, row := range rows {
		key := unquote(t, row[0])
		got := names[r.Locate(key)]
		counts[got]++
		if got != row[1] {
			t.Errorf("Locate(%q) = %s, want %s", key, got, row[1])
		}
	}
	if fmt.Sprint(counts) != "map[shard-a:1024 shard-b:953 shard-c:1037]" {
		t.Errorf("counts %v", counts)
	}
	if _, err := New([]Node{{Name: "a"}, {}}, GoRedisRing{}); err == nil || !strings.Contains(err.Error(), "node 1: rendezvous hashing needs a name") {
		t.Errorf("unnamed rendezvous node: %v", err)
	}
}

// Ejection per preset: indices keep referring to the full list; only the
// ejected node's keys move where the peer keeps the other nodes' places.
func TestEject(t *testing.T) {
	keys := make([]string, 20000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%d", i)
	}
	named := []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	for _, c := range []struct {
		name       string
		opt        Preset
		onlyEjects bool // only the ejected node's keys move
	}{
		{"jedis", nil, true},
		{"ketama", Libmemcached{Distribution: LibmemcachedKetamaWeighted}, true},
		{"rendezvous", GoRedisRing{}, true},
		{"modula", Libmemcached{Hash: HashOneAtATime}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := New(named, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			e, err := r.Eject(2)
			if err != nil {
				t.Fatal(err)
			}
			if !e.Ejected(2) || e.Ejected(1) || e.Len() != 4 {
				t.Fatal("Ejected reports the wrong nodes")
			}
			movedOthers := 0
			for _, k := range keys {
				before, after := r.Locate(k), e.Locate(k)
				if after == 2 {
					t.Fatalf("%s still goes to the ejected node", k)
				}
				if before != 2 && before != after {
					movedOthers++
				}
			}
			if c.onlyEjects && movedOthers != 0 {
				t.Fatalf("%d keys of live nodes moved", movedOthers)
			}
			if !c.onlyEjects && movedOthers == 0 {
				t.Fatal("modula over the live nodes moved no live node's key")
			}
			back, err := e.Rejoin(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if back.Locate(k) != r.Locate(k) {
					t.Fatalf("after Rejoin %s goes to %d, before Eject to %d", k, back.Locate(k), r.Locate(k))
				}
			}
			if _, err := e.Eject(0, 1, 3); err == nil {
				t.Fatal("ejecting every node succeeded")
			}
			if _, err := r.Eject(4); err == nil {
				t.Fatal("ejecting node 4 of 4 succeeded")
			}
		})
	}
}

// Weighted ketama ejection rescales the live weights (twemproxy): keys move
// between live nodes too, as in twemproxy's observed 305 of 3098.
func TestEjectWeightedKetamaRescales(t *testing.T) {
	r, err := New(localNodes([]int{7001, 7002, 7003, 7004}, []int{1, 2, 1, 3}, nil), Twemproxy{Hash: HashMD5})
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Eject(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.VirtualNodes(); got != 80+160+240 {
		t.Fatalf("live points %d, want 80+160+240", got)
	}
}

func TestHashTagPairs(t *testing.T) {
	tag := tagRule{kind: tagPair, open: '{', close: '}'}
	for key, want := range map[string]string{
		"{user1000}.following": "user1000", "foo{bar}": "bar", "{a}{b}": "a", "a{b}c{d}e": "b",
		"{{a}}": "{a", "x}y{z}": "z", "{}": "{}", "{}bar": "{}bar", "foo{}{bar}": "foo{}{bar}",
		"x{y": "x{y", "}{": "}{", "": "",
	} {
		if got := tag.pair(key); got != want {
			t.Errorf("pair(%q) = %q, want %q", key, got, want)
		}
		if got := string(tag.pairBytes([]byte(key))); got != want {
			t.Errorf("pairBytes(%q) = %q, want %q", key, got, want)
		}
	}
	dollar := tagRule{kind: tagPair, open: '$', close: '$'}
	if got := dollar.pair("a$b$c"); got != "b" {
		t.Errorf("$$ tag of a$b$c = %q", got)
	}
	r, err := New([]Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Twemproxy{Hash: HashMD5, HashTag: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Locate("{user1000}.following") != r.Locate("user1000") || r.LocateBytes([]byte("x{user1000}")) != r.Locate("user1000") {
		t.Error("tagged keys are not placed by their tag")
	}
	if _, err := New([]Node{{Name: "a"}}, Twemproxy{HashTag: "{"}); err == nil {
		t.Error(`hash tag "{" accepted`)
	}
}

// Compare's exact shares for modulo and rendezvous presets agree with
// sampled keys; so do Shares.
func TestCompareNonRingPresets(t *testing.T) {
	keys := make([]string, 200000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	nodes := func(n int, p Preset) []Node {
		out := make([]Node, n)
		for i := range out {
			out[i] = Node{Name: fmt.Sprintf("n%d", i)}
			if _, ok := p.(Twemproxy); ok {
				out[i].Weight = 1 + i%2
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		opt  Preset
	}{
		{"twemproxy-modula", Twemproxy{Distribution: TwemproxyModula, Hash: HashMurmur2}},
		{"gomemcache", Gomemcache{}},
		{"goredis-ring", GoRedisRing{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(nodes(3, c.opt), c.opt)
			if err != nil {
				t.Fatal(err)
			}
			b, err := New(nodes(4, c.opt), c.opt)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Compare(a, b)
			if err != nil {
				t.Fatal(err)
			}
			moved := 0
			counts := make([]int, 3)
			for _, k := range keys {
				if a.Locate(k) != b.Locate(k) {
					moved++
				}
				counts[a.Locate(k)]++
			}
			if got := float64(moved) / float64(len(keys)); got < d.Moved-0.01 || got > d.Moved+0.01 {
				t.Fatalf("Compare says %.4f moves, keys say %.4f", d.Moved, got)
			}
			for i, s := range mustShares(t, a) {
				if got := float64(counts[i]) / float64(len(keys)); got < s-0.01 || got > s+0.01 {
					t.Fatalf("node %d: share %.4f, keys %.4f", i, s, got)
				}
			}
		})
	}
	if _, err := Compare(mustNew(t, nodes(3, nil), Gomemcache{}), mustNew(t, nodes(3, nil), Libmemcached{Distribution: LibmemcachedKetamaWeighted})); err == nil {
		t.Fatal("compared a modulo preset with a ring")
	}
}

// libmemcached's unweighted ketama: 100 points per node, valued with the
// point hash of "<label>-<i>" (values from libmemcached's notes).
func TestLibmemcachedKetamaPlain(t *testing.T) {
	nodes := localNodes([]int{11211, 11212, 11213, 11214}, nil, nil)
	for _, c := range []struct {
		pointHash Hash
		want      uint64
	}{{HashOneAtATime, 0x3834014f}, {HashMD5, 0xbdffa47f}} {
		r := mustNew(t, nodes, Libmemcached{Distribution: LibmemcachedKetama, Hash: c.pointHash, HashAfter: HashMD5})
		if got := r.VirtualNodes(); got != 400 {
			t.Fatalf("%v: %d points, want 400 (weights ignored)", c.pointHash, got)
		}
		if got := r.LocatePoint(c.want); got != 0 {
			t.Fatalf("%v: point %x of 127.0.0.1-0 owned by %d, want 0", c.pointHash, c.want, got)
		}
		if got := c.pointHash.Point([]byte("127.0.0.1-0")); got != c.want {
			t.Fatalf("%v(127.0.0.1-0) = %x, want %x", c.pointHash, got, c.want)
		}
	}
	spy := mustNew(t, nodes, Libmemcached{Distribution: LibmemcachedKetamaSpyWeighted})
	if spy.id(0) != "label:/127.0.0.1:11211" {
		t.Fatalf("KETAMA_SPY label %q", spy.id(0))
	}
	if _, err := New(nodes, Libmemcached{Distribution: LibmemcachedKetama, Hash: HashMurmur64A, HashAfter: HashMD5}); err == nil {
		t.Fatal("a 64-bit point hash was accepted")
	}
}

// A preset is one value, so two cannot mix; a setting the preset's
// configuration does not use, or a weight a preset ignores, is an error
// naming it.
func TestPresetSettingErrors(t *testing.T) {
	one := []Node{{Name: "a", Addr: "10.0.0.1:11211"}}
	for _, c := range []struct {
		p     Preset
		nodes []Node
		want  string
	}{
		{Jedis{Replicas: -1}, one, "replicas -1"},
		{Jedis{Hash: Hash{kind: numKinds}}, one, "unknown hash"},
		{Twemproxy{Hash: HashXXHash64}, one, "the peer has no hash XXHash64"},
		{Twemproxy{Hash: HashMurmur3}, one, "the peer has no hash Murmur3"},
		{Twemproxy{HashTag: "{"}, one, `hash_tag "{": must be two characters`},
		{Twemproxy{Distribution: 7}, one, "unknown distribution 7"},
		{Libmemcached{Hash: HashCRC16Twemproxy}, one, "the peer has no hash CRC16Twemproxy"},
		{Libmemcached{HashAfter: HashMD5}, one, "MODULA has no ring to keep an older hash"},
		{Libmemcached{Distribution: LibmemcachedKetamaWeighted, Hash: HashMD5}, one, "a hash set before it (MD5) has no effect"},
		{Libmemcached{Distribution: LibmemcachedKetamaSpyWeighted, Hash: HashLookup3}, one, "a hash set before it (Lookup3) has no effect"},
		{Libmemcached{Distribution: LibmemcachedConsistentWeighted, Hash: HashMD5, HashAfter: HashLookup3}, one, "Hash (MD5) has no effect beside HashAfter"},
		{Libmemcached{Distribution: 9}, one, "unknown distribution 9"},
		{Spymemcached{KeyFormat: LibmemcachedFormat}, one, "apply to the ketama locator only"},
		{Spymemcached{Weighted: true}, one, "apply to the ketama locator only"},
		{Spymemcached{Locator: SpymemcachedKetama, KeyFormat: 5}, one, "unknown key format 5"},
		{Spymemcached{Locator: 3}, one, "unknown locator 3"},
		{GoRedisRing{}, []Node{{Name: "a"}, {Name: "b", Weight: 2}}, `node 1 ("b"): weight 2, but GoRedisRing{} ignores weights`},
		{Gomemcache{}, []Node{{Name: "a", Weight: 3}}, `node 0 ("a"): weight 3, but Gomemcache{} ignores weights`},
		{Spymemcached{}, []Node{{Name: "a", Weight: 2}}, "ignores weights"},
		{Spymemcached{Locator: SpymemcachedKetama}, []Node{{Name: "a", Weight: 2}}, "ignores weights"},
		{Libmemcached{}, []Node{{Name: "a", Weight: 2}}, "Libmemcached{distribution: MODULA} ignores weights"},
		{Libmemcached{Distribution: LibmemcachedKetamaSpy}, []Node{{Name: "a", Weight: 2}}, "ignores weights"},
	} {
		r, err := New(c.nodes, c.p)
		if err == nil || r != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%v, %v) = %v, %v; want an error containing %q", c.nodes, c.p, r, err, c.want)
		}
	}
	// Weights count where the peer counts them.
	w := []Node{{Name: "a", Addr: "10.0.0.1:11211"}, {Name: "b", Addr: "10.0.0.2:11211", Weight: 3}}
	for _, p := range []Preset{Jedis{}, Twemproxy{}, Twemproxy{Distribution: TwemproxyModula},
		Libmemcached{Distribution: LibmemcachedKetamaWeighted}, Libmemcached{Distribution: LibmemcachedConsistentWeighted},
		Libmemcached{Distribution: LibmemcachedKetamaSpyWeighted}, Spymemcached{Locator: SpymemcachedKetama, Weighted: true}} {
		if s := mustShares(t, mustNew(t, w, p)); s[1] < 0.6 {
			t.Errorf("%v: weight 3 of 4 owns %.4f", p, s[1])
		}
	}
}

// A node that would own no key is an error naming it, on every preset that
// can produce one.
func TestNodeWithoutPoints(t *testing.T) {
	// Jedis, one vnode each over a 15-bit hash: find a name whose vnode
	// "<name>*0" hashes like "a*0"; the later node takes the point.
	p := Jedis{Hash: HashCRC32Bits16to30, Replicas: 1}
	target := p.Hash.Point([]byte("a*0"))
	clash := ""
	for i := 0; clash == ""; i++ {
		if name := "n" + strconv.Itoa(i); p.Hash.Point([]byte(name+"*0")) == target {
			clash = name
		}
	}
	_, err := New([]Node{{Name: "a"}, {Name: clash}}, p)
	if err == nil || !strings.Contains(err.Error(), `node 0 ("name:a"): every one of its points is another node's`) {
		t.Errorf("Jedis clash of %q with a: %v", clash, err)
	}
	// Libketama: a weight too small for one digest.
	_, err = New([]Node{{Name: "big", Weight: 500}, {Name: "small"}}, Twemproxy{})
	if err == nil || !strings.Contains(err.Error(), `node 1 ("small"): weight 1 of 501 in all gives it no ketama point`) {
		t.Errorf("libketama small weight: %v", err)
	}
	// Labels that collide after the preset's labelling: KETAMA_SPY's
	// "/host:port" and a node named so.
	_, err = New([]Node{{Addr: "h:11211"}, {Name: "/h:11211"}}, Libmemcached{Distribution: LibmemcachedKetamaSpy})
	if err == nil || !strings.Contains(err.Error(), `nodes 0 and 1 have the same ketama label "/h:11211"`) {
		t.Errorf("KETAMA_SPY labels: %v", err)
	}
	// spymemcached's LIBMEMCACHED format drops port 11211, as libketama.
	_, err = New([]Node{{Addr: "h:11211"}, {Addr: "h"}}, Spymemcached{Locator: SpymemcachedKetama, KeyFormat: LibmemcachedFormat})
	if err == nil || !strings.Contains(err.Error(), `same ketama label "h"`) {
		t.Errorf("LIBMEMCACHED format labels: %v", err)
	}
}

// Placement is a pure function of (preset, nodes): the same arguments give
// the same ring whatever was built before, and Preset returns the value.
func TestPresetPure(t *testing.T) {
	keys := randomKeys(2000)
	for _, p := range everyPresetAndHash() {
		nodes := propertyNodes(t, p, 5)
		a := mustNew(t, nodes, p)
		mustNew(t, propertyNodes(t, p, 3), p) // another ring in between
		b := mustNew(t, nodes, p)
		if b.Preset() != p {
			t.Fatalf("Preset() = %v, want %v", b.Preset(), p)
		}
		for _, k := range keys {
			if a.Locate(k) != b.Locate(k) {
				t.Fatalf("%v: %q placed on %d, then on %d", p, k, a.Locate(k), b.Locate(k))
			}
		}
	}
}

// libmemcached rebuilds its ring with the hash in force: after an ejection
// (or a rejoin, or an added server) the unweighted points of a ring whose
// hash was set after the distribution take that hash.
func TestLibmemcachedRebuildRehashes(t *testing.T) {
	nodes := localNodes([]int{11211, 11212, 11213, 11214}, nil, nil)
	r := mustNew(t, nodes, Libmemcached{Distribution: LibmemcachedKetama, HashAfter: HashMD5})
	e, err := r.Eject(3)
	if err != nil {
		t.Fatal(err)
	}
	back, err := e.Rejoin(3)
	if err != nil {
		t.Fatal(err)
	}
	md5First := mustNew(t, nodes, Libmemcached{Distribution: LibmemcachedKetama, Hash: HashMD5})
	differs := 0
	for _, k := range randomKeys(3000) {
		if back.Locate(k) != md5First.Locate(k) {
			t.Fatalf("after a rebuild %q goes to %d, with MD5 points to %d", k, back.Locate(k), md5First.Locate(k))
		}
		if back.Locate(k) != r.Locate(k) {
			differs++
		}
	}
	if differs == 0 {
		t.Fatal("the rebuilt ring places every key as the one-at-a-time points did")
	}
}
