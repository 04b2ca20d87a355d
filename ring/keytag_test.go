package ring

import (
	"regexp"
	"sync"
	"testing"
)

// keyTagCases are exact Jedis expectations (DEFAULT_KEY_TAG_PATTERN
// \{(.+?)\}, group 1 of the first find()); tag "" with ok false means no tag.
var keyTagCases = []struct {
	key string
	tag string
	ok  bool
}{
	{"{}", "", false},
	{"{}}", "}", true},
	{"foo{}{bar}", "}{bar", true},
	{"{{a}}", "{a", true},
	{"a{b}c{d}", "b", true},
	{"{a\rb}", "", false},
	{"{\u0085}", "", false},
	{"{\u2028}", "", false},
	{"{\u2029}", "", false},
	{"{a\nb}{c}", "c", true},
	{"{😀}", "😀", true},
	{"plain", "", false},
	{"user:{42}:name", "42", true},
	// More shapes.
	{"", "", false},
	{"{", "", false},
	{"}", "", false},
	{"}{a}", "a", true},
	{"{a", "", false},
	{"{a}", "a", true},
	{"{{}", "{", true},
	{"{\n}}", "", false},
	{"{\n}{x}", "x", true},
	{"{a\r}{b}", "b", true},
	{"{\r\n}{b}", "b", true},
	{"{{\n}{b}", "b", true},
	{"{ }", " ", true},
	{"{\t}", "\t", true},
	{"{\x00}", "\x00", true},
	{"{\xff}", "\xff", true},
	{"{\xc2}", "\xc2", true}, // a lone lead byte of U+0085 is no terminator
	{"{\x85}", "\x85", true}, // nor is its lone continuation byte
	{"{\xe2\x80}", "\xe2\x80", true},
	{"{\u0084}", "\u0084", true}, // the neighbours of the terminators are fine
	{"{\u2027}", "\u2027", true},
	{"{\u202a}", "\u202a", true},
	{"{\v}", "\v", true}, // \v and \f are not Java line terminators
	{"{\f}", "\f", true},
	{"{a}}", "a", true},
	{"{}a}", "}a", true},
	{"a{\u2028b}c{d}e", "d", true},
	{"{é}", "é", true},
}

func TestKeyTag(t *testing.T) {
	for _, c := range keyTagCases {
		tag, ok := KeyTag(c.key)
		want := c.tag
		if !c.ok {
			want = c.key // the key is returned unchanged
		}
		if tag != want || ok != c.ok {
			t.Errorf("KeyTag(%q) = %q, %v; want %q, %v", c.key, tag, ok, want, c.ok)
		}
		// The reference regexp agrees with the table.
		rtag, rok := refKeyTag(c.key)
		if rtag != want || rok != c.ok {
			t.Errorf("reference(%q) = %q, %v; want %q, %v", c.key, rtag, rok, want, c.ok)
		}
	}
}

// refKeyTagRE is Java's \{(.+?)\} with Java's '.' (no DOTALL) spelled out.
var refKeyTagRE = regexp.MustCompile(`\{([^\n\r\x{85}\x{2028}\x{2029}]+?)\}`)

func refKeyTag(key string) (string, bool) {
	if m := refKeyTagRE.FindStringSubmatch(key); m != nil {
		return m[1], true
	}
	return key, false
}

func FuzzKeyTag(f *testing.F) {
	for _, c := range keyTagCases {
		f.Add(c.key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		tag, ok := KeyTag(key)
		want, wantOK := refKeyTag(key)
		if tag != want || ok != wantOK {
			t.Fatalf("KeyTag(%q) = %q, %v; reference gives %q, %v", key, tag, ok, want, wantOK)
		}
	})
}

// fuzzRings caches the rings FuzzLocate uses, one per configuration.
var fuzzRings struct {
	sync.Mutex
	m map[[3]int]*Ring
}

func fuzzRing(t *testing.T, nodes int, tags, md5 bool) *Ring {
	key := [3]int{nodes, 0, 0}
	var p Jedis
	if tags {
		key[1] = 1
		p.KeyTags = true
	}
	if md5 {
		key[2] = 1
		p.Hash = HashMD5
	}
	fuzzRings.Lock()
	defer fuzzRings.Unlock()
	if r := fuzzRings.m[key]; r != nil {
		return r
	}
	list := make([]Node, nodes)
	for i := range list {
		if i%3 == 1 {
			list[i].Name = "node-" + string(rune('a'+i))
		}
		list[i].Weight = i % 4 // 0 (means 1), 1, 2, 3
	}
	r, err := New(list, p)
	if err != nil {
		t.Fatalf("New(%v): %v", list, err)
	}
	if fuzzRings.m == nil {
		fuzzRings.m = make(map[[3]int]*Ring)
	}
	fuzzRings.m[key] = r
	return r
}

func FuzzLocate(f *testing.F) {
	for i, c := range keyTagCases {
		f.Add([]byte(c.key), byte(i), i%2 == 0, i%3 == 0)
	}
	f.Add([]byte("SHARD-0-NODE-51705"), byte(1), false, true)
	f.Add([]byte("key:0"), byte(2), false, false)
	f.Add([]byte(nil), byte(19), true, false)
	f.Fuzz(func(t *testing.T, key []byte, n byte, tags, md5 bool) {
		nodes := 1 + int(n)%20
		r := fuzzRing(t, nodes, tags, md5)
		if r.Len() != nodes {
			t.Fatalf("Len() = %d, want %d", r.Len(), nodes)
		}
		s := string(key)
		got := r.Locate(s)
		if got < 0 || got >= r.Len() {
			t.Fatalf("Locate(%q) = %d, out of [0, %d)", s, got, r.Len())
		}
		gotBytes := r.LocateBytes(key)
		if gotBytes < 0 || gotBytes >= r.Len() {
			t.Fatalf("LocateBytes(%q) = %d, out of [0, %d)", key, gotBytes, r.Len())
		}
		// LocateBytes hashes the whole key, tags or not.
		if want := naiveLocatePoint(r, r.Hash().Point(key)); gotBytes != want {
			t.Fatalf("LocateBytes(%q) = %d, naive scan gives %d", key, gotBytes, want)
		}
		hashed := s
		if tags {
			hashed, _ = KeyTag(s)
		} else if got != gotBytes {
			t.Fatalf("Locate(%q) = %d, LocateBytes = %d", s, got, gotBytes)
		}
		if want := naiveLocatePoint(r, r.Hash().Point([]byte(hashed))); got != want {
			t.Fatalf("Locate(%q) = %d, naive scan over the hash of %q gives %d", s, got, hashed, want)
		}
		// The key read as a big-endian point (its last 8 bytes) also agrees.
		var p uint64
		for _, b := range key {
			p = p<<8 | uint64(b)
		}
		if got, want := r.LocatePoint(p), naiveLocatePoint(r, p); got != want {
			t.Fatalf("LocatePoint(%#x) = %d, naive scan gives %d", p, got, want)
		}
	})
}

// ClusterHashTag follows Redis Cluster's rule (cluster.c keyHashSlot): the
// text between the first '{' and the first '}' after it, unless empty.
func TestClusterHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"user:{42}:name": "42",
		"{a}{b}":         "a",
		"{}}x":           "{}}x",
		"{}{x}":          "{}{x}",
		"x{":             "x{",
		"}{y}":           "y",
		"{{y}}":          "{y",
		"":               "",
	} {
		if got := ClusterHashTag(key); got != want {
			t.Errorf("ClusterHashTag(%q) = %q, want %q", key, got, want)
		}
	}
}
