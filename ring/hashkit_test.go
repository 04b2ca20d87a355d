package ring

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hashkitFuncs lists every function of hashkit.go under its Go name.
var hashkitFuncs = []struct {
	name string
	fn   func([]byte) uint32
}{
	{"MD5Sum32", MD5Sum32},
	{"FNV1a64Twemproxy", FNV1a64Twemproxy},
	{"FNV164", FNV164},
	{"FNV1a32", FNV1a32},
	{"FNV132", FNV132},
	{"OneAtATime", OneAtATime},
	{"CRC16Twemproxy", CRC16Twemproxy},
	{"CRC32Twemproxy", CRC32Twemproxy},
	{"CRC32a", CRC32a},
	{"GomemcacheCRC32", GomemcacheCRC32},
	{"Murmur2Twemproxy", Murmur2Twemproxy},
	{"Murmur3Libmemcached", Murmur3Libmemcached},
	{"Jenkins", Jenkins},
	{"Hsieh", Hsieh},
}

// hashkitVectorRows is the number of keys in each vector file.
const hashkitVectorRows = 3098

type hashkitColumn struct {
	name string // the peer's name, as in the file's "# columns:" header
	fn   func([]byte) uint32
}

var hashkitVectorFiles = []struct {
	file string
	cols []hashkitColumn
}{
	{"twemproxy_hash_values.tsv", []hashkitColumn{
		{"md5", MD5Sum32},
		{"fnv1a_64", FNV1a64Twemproxy},
		{"fnv1_64", FNV164},
		{"fnv1a_32", FNV1a32},
		{"fnv1_32", FNV132},
		{"crc16", CRC16Twemproxy},
		{"crc32", CRC32Twemproxy},
		{"crc32a", CRC32a},
		{"murmur", Murmur2Twemproxy},
		{"jenkins", Jenkins},
		{"hsieh", Hsieh},
		{"one_at_a_time", OneAtATime},
	}},
	{"libmemcached_hash_values.tsv", []hashkitColumn{
		{"default", OneAtATime},
		{"md5", MD5Sum32},
		{"crc", CRC32Twemproxy},
		{"fnv1_64", FNV164},
		{"fnv1a_64", FNV1a64Twemproxy},
		{"fnv1_32", FNV132},
		{"fnv1a_32", FNV1a32},
		{"murmur", Murmur2Twemproxy},
		{"jenkins", Jenkins},
		{"murmur3", Murmur3Libmemcached},
	}},
}

type hashkitRow struct {
	key  string
	vals []uint32
}

// readHashkitVectors reads a vector file: its column names (from the
// "# columns: key<TAB>..." header, without "key") and its rows. Keys are raw
// bytes up to the first tab.
func readHashkitVectors(t *testing.T, file string) (cols []string, rows []hashkitRow) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hashkit", file))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("%s: no final newline", file)
	}
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if c, ok := strings.CutPrefix(line, "# columns: "); ok {
			cols = strings.Split(c, "<TAB>")
			if cols[0] != "key" {
				t.Fatalf("%s:%d: first column %q, want key", file, n+1, cols[0])
			}
			cols = cols[1:]
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if cols == nil {
			t.Fatalf("%s:%d: row before the columns header", file, n+1)
		}
		f := strings.Split(line, "\t")
		if len(f) != len(cols)+1 {
			t.Fatalf("%s:%d: %d fields, want %d", file, n+1, len(f), len(cols)+1)
		}
		r := hashkitRow{key: f[0]}
		for _, v := range f[1:] {
			if len(v) != 8 || strings.ToLower(v) != v {
				t.Fatalf("%s:%d: value %q is not 8 lower-case hex digits", file, n+1, v)
			}
			u, err := strconv.ParseUint(v, 16, 32)
			if err != nil {
				t.Fatalf("%s:%d: %v", file, n+1, err)
			}
			r.vals = append(r.vals, uint32(u))
		}
		rows = append(rows, r)
	}
	return cols, rows
}

// TestHashkitVectors checks every function against every key of both
// vector files (values computed by the peers' own C functions).
func TestHashkitVectors(t *testing.T) {
	var twemKeys, mcKeys []string
	var crc32aCol []uint32
	for _, vf := range hashkitVectorFiles {
		t.Run(strings.TrimSuffix(vf.file, ".tsv"), func(t *testing.T) {
			cols, rows := readHashkitVectors(t, vf.file)
			var want []string
			for _, c := range vf.cols {
				want = append(want, c.name)
			}
			if !slices.Equal(cols, want) {
				t.Fatalf("columns %q, want %q", cols, want)
			}
			if len(rows) != hashkitVectorRows {
				t.Fatalf("read %d rows, want %d", len(rows), hashkitVectorRows)
			}
			checked := make([]int, len(cols))
			for _, r := range rows {
				for i, c := range vf.cols {
					if got := c.fn([]byte(r.key)); got != r.vals[i] {
						t.Errorf("%s(%q) = %08x, want %08x", c.name, r.key, got, r.vals[i])
						continue
					}
					checked[i]++
				}
			}
			for i, c := range vf.cols {
				if checked[i] != hashkitVectorRows {
					t.Errorf("%s: %d of %d rows match", c.name, checked[i], hashkitVectorRows)
				}
				t.Logf("%-14s %d/%d rows match", c.name, checked[i], len(rows))
			}
			switch vf.file {
			case "twemproxy_hash_values.tsv":
				for _, r := range rows {
					twemKeys = append(twemKeys, r.key)
					crc32aCol = append(crc32aCol, r.vals[slices.Index(cols, "crc32a")])
				}
			case "libmemcached_hash_values.tsv":
				for _, r := range rows {
					mcKeys = append(mcKeys, r.key)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	// Both files list the same keys (golden/keys.txt), in the same order.
	if !slices.Equal(twemKeys, mcKeys) {
		t.Errorf("the two vector files list different keys")
	}
	// The vectors include non-ASCII keys, so sign extension is exercised.
	nonASCII := 0
	for _, k := range twemKeys {
		if strings.IndexFunc(k, func(r rune) bool { return r >= 0x80 }) >= 0 {
			nonASCII++
		}
	}
	if nonASCII == 0 {
		t.Errorf("no non-ASCII key in the vectors")
	}
	t.Logf("%d keys, %d with bytes >= 0x80", len(twemKeys), nonASCII)

	// GomemcacheCRC32 against twemproxy's crc32a column: equal for keys of
	// 256 bytes or fewer; longer keys hash as their first 256 bytes.
	short, long := 0, 0
	for i, k := range twemKeys {
		got := GomemcacheCRC32([]byte(k))
		if len(k) <= 256 {
			if got != crc32aCol[i] {
				t.Errorf("GomemcacheCRC32(%q) = %08x, want crc32a %08x", k, got, crc32aCol[i])
			}
			short++
		} else {
			if want := CRC32a([]byte(k[:256])); got != want {
				t.Errorf("GomemcacheCRC32(%.20q...) = %08x, want %08x", k, got, want)
			}
			long++
		}
	}
	t.Logf("GomemcacheCRC32: %d keys <= 256 bytes match crc32a, %d longer keys checked on their 256-byte prefix", short, long)
}

// hashkitFNV1a64Unsigned is FNV1a64Twemproxy without the sign extension,
// to show that the sign extension matters.
func hashkitFNV1a64Unsigned(key []byte) uint32 {
	h := uint32(0x84222325)
	for _, b := range key {
		h ^= uint32(b)
		h *= 0x1b3
	}
	return h
}

// TestHashkitSpot checks the values quoted in the NOTES.
func TestHashkitSpot(t *testing.T) {
	md5Points := func(label string) [4]uint32 {
		d := md5.Sum([]byte(label))
		var p [4]uint32
		for x := range p {
			p[x] = binary.LittleEndian.Uint32(d[4*x:])
		}
		return p
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) uint32
		key  string
		want uint32
	}{
		{"FNV1a64Twemproxy", FNV1a64Twemproxy, "café", 0xcef6bb89},
		{"fnv1a_64 unsigned (not twemproxy)", hashkitFNV1a64Unsigned, "café", 0xcfa40d89},
		{"FNV1a64Twemproxy", FNV1a64Twemproxy, "key:0", 0x962f5916},
		{"CRC16Twemproxy", CRC16Twemproxy, "key:0", 0x70128a20},
		{"MD5Sum32", MD5Sum32, "key:0", 0x82ab86df},
		{"MD5Sum32", MD5Sum32, "key:1", 0x3cb0c47a},
		{"MD5Sum32", MD5Sum32, "127.0.0.1:7001-0", 0xd057ef07},
		{"MD5Sum32", MD5Sum32, "127.0.0.1-0", 0xbdffa47f},
		{"MD5Sum32", MD5Sum32, "cache-a-0", 0x02f1ae2a},
		{"CRC32a", CRC32a, "key:0", 0x7c680b7a},
		{"CRC32Twemproxy", CRC32Twemproxy, "key:0", 0x7c68},
		{"OneAtATime", OneAtATime, "127.0.0.1-0", 0x3834014f},
		{"OneAtATime", OneAtATime, "/127.0.0.1:11211-0", 0x33d13429},
		// String.hashCode() under OpenJDK 17: 101943765, 0, 3045921, 54959989.
		{"JavaStringHashCode", JavaStringHashCode, "key:0", 101943765},
		{"JavaStringHashCode", JavaStringHashCode, "", 0},
		{"JavaStringHashCode", JavaStringHashCode, "café", 3045921},
		{"JavaStringHashCode", JavaStringHashCode, "\U0001F600x", 54959989}, // a surrogate pair, then x
	} {
		if got := c.fn([]byte(c.key)); got != c.want {
			t.Errorf("%s(%q) = %08x, want %08x", c.name, c.key, got, c.want)
		}
	}
	if got := CRC16Twemproxy([]byte("key:0")) & 0xffff; got != 0x8a20 {
		t.Errorf("CRC16Twemproxy(key:0) low 16 bits = %04x, want 8a20", got)
	}
	for label, want := range map[string][4]uint32{
		"127.0.0.1:7001-0": {0xd057ef07, 0x6bec316c, 0x993cb913, 0x2d21d8b4},
		"127.0.0.1-0":      {0xbdffa47f, 0xac7ecb6e, 0x30801bbb, 0xffe0f4b2},
		"cache-a-0":        {0x02f1ae2a, 0x20db8069, 0x5341bc30, 0xc7da8fe7},
	} {
		if got := md5Points(label); got != want {
			t.Errorf("md5 points of %q = %08x, want %08x", label, got, want)
		}
	}
	// gomemcache: the two same256 keys share their first 256 bytes, so they
	// hash alike and both go to index 3 of 4 servers.
	prefix := "same256:0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
	prefix += strings.Repeat("x", 256-len(prefix))
	a, b := []byte(prefix+"-A"), []byte(prefix+"-B-suffix")
	if ha, hb := GomemcacheCRC32(a), GomemcacheCRC32(b); ha != hb || CRC32a(a) == CRC32a(b) {
		t.Errorf("GomemcacheCRC32 of keys sharing 256 bytes: %08x, %08x", ha, hb)
	}
}

// TestHashkitSame256 checks the gomemcache truncation against the real
// same256 keys of the vectors.
func TestHashkitSame256(t *testing.T) {
	_, rows := readHashkitVectors(t, "twemproxy_hash_values.tsv")
	var same [][]byte
	for _, r := range rows {
		if strings.HasPrefix(r.key, "same256:") {
			same = append(same, []byte(r.key))
		}
	}
	if len(same) != 2 {
		t.Fatalf("%d same256 keys, want 2", len(same))
	}
	for _, k := range same {
		if h := GomemcacheCRC32(k); h%4 != 3 || h != GomemcacheCRC32(same[0]) {
			t.Errorf("GomemcacheCRC32(%.20q...) = %08x (index %d of 4), want index 3 and equal hashes", k, h, h%4)
		}
	}
}

// TestHashkitEmptyKey pins each function's value for zero bytes. The
// vectors have no empty key: these are the algorithms' own values (Jenkins
// returns c unmixed and Hsieh returns 0, as the NOTES say; the FNVs return
// their basis; MD5 is the digest of nothing).
func TestHashkitEmptyKey(t *testing.T) {
	want := map[string]uint32{
		"MD5Sum32":            0xd98c1dd4,
		"FNV1a64Twemproxy":    0x84222325,
		"FNV164":              0x84222325,
		"FNV1a32":             0x811c9dc5,
		"FNV132":              0x811c9dc5,
		"OneAtATime":          0,
		"CRC16Twemproxy":      0,
		"CRC32Twemproxy":      0,
		"CRC32a":              0,
		"GomemcacheCRC32":     0,
		"Murmur2Twemproxy":    0,
		"Murmur3Libmemcached": 0,
		"Jenkins":             0xdeadbefc,
		"Hsieh":               0,
	}
	for _, f := range hashkitFuncs {
		w, ok := want[f.name]
		if !ok {
			t.Fatalf("no empty-key value for %s", f.name)
		}
		for _, key := range [][]byte{nil, {}} {
			if got := f.fn(key); got != w {
				t.Errorf("%s(%v) = %08x, want %08x", f.name, key, got, w)
			}
		}
	}
}

// TestHashkitAllocs checks that no function allocates.
func TestHashkitAllocs(t *testing.T) {
	keys := [][]byte{nil, []byte("a"), []byte("ab€"), []byte("key:12345678901"), bytes.Repeat([]byte("ключ"), 100)}
	var sink uint32
	for _, f := range hashkitFuncs {
		for _, k := range keys {
			if n := testing.AllocsPerRun(100, func() { sink += f.fn(k) }); n != 0 {
				t.Errorf("%s on %d bytes: %v allocs per run", f.name, len(k), n)
			}
		}
	}
	_ = sink
}

// hashkitXMODEM is CRC-16/XMODEM computed bit by bit (poly 0x1021, init 0,
// MSB first, no final xor).
func hashkitXMODEM(data []byte) uint16 {
	var crc uint16
	for _, b := range data {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func FuzzHashkit(f *testing.F) {
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "key:0", "café", "ab€", "ключ", "🔑",
		"\x80", "\xff\xff\xff", "0123456789ab", "0123456789abc", strings.Repeat("z", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		cp := bytes.Clone(data)
		got := make(map[string]uint32, len(hashkitFuncs))
		for _, h := range hashkitFuncs {
			v := h.fn(data)
			if w := h.fn(data); w != v {
				t.Fatalf("%s not deterministic: %08x then %08x", h.name, v, w)
			}
			if w := h.fn(cp); w != v {
				t.Fatalf("%s depends on more than the bytes: %08x vs %08x", h.name, v, w)
			}
			got[h.name] = v
		}
		if !bytes.Equal(data, orig) {
			t.Fatalf("input modified")
		}

		// Equal to standard algorithms for every input.
		d := md5.Sum(data)
		if w := binary.LittleEndian.Uint32(d[:]); got["MD5Sum32"] != w {
			t.Errorf("MD5Sum32 = %08x, crypto/md5 gives %08x", got["MD5Sum32"], w)
		}
		ieee := crc32.ChecksumIEEE(data)
		if got["CRC32a"] != ieee {
			t.Errorf("CRC32a = %08x, ChecksumIEEE %08x", got["CRC32a"], ieee)
		}
		if w := ieee >> 16 & 0x7fff; got["CRC32Twemproxy"] != w {
			t.Errorf("CRC32Twemproxy = %08x, want %08x", got["CRC32Twemproxy"], w)
		}
		if w := crc32.ChecksumIEEE(data[:min(len(data), 256)]); got["GomemcacheCRC32"] != w {
			t.Errorf("GomemcacheCRC32 = %08x, want %08x", got["GomemcacheCRC32"], w)
		}
		if w := hashkitXMODEM(data); uint16(got["CRC16Twemproxy"]) != w {
			t.Errorf("CRC16Twemproxy low 16 bits = %04x, CRC-16/XMODEM %04x", uint16(got["CRC16Twemproxy"]), w)
		}
		// fnv1_64 keeps only the low 32 bits, which depend only on the low
		// 32 bits of the state: the same loop in 32 bits must agree.
		h32 := uint32(0x84222325)
		for _, b := range data {
			h32 *= 0x1b3
			h32 ^= uint32(int32(int8(b)))
		}
		if got["FNV164"] != h32 {
			t.Errorf("FNV164 = %08x, 32-bit loop %08x", got["FNV164"], h32)
		}
		if len(data) == 0 && (got["Jenkins"] != 0xdeadbefc || got["Hsieh"] != 0) {
			t.Errorf("empty key: Jenkins %08x, Hsieh %08x", got["Jenkins"], got["Hsieh"])
		}

		// For bytes < 0x80 the signed functions equal hash/fnv.
		if slices.ContainsFunc(data, func(b byte) bool { return b >= 0x80 }) {
			return
		}
		f32a, f32, f64a, f64 := fnv.New32a(), fnv.New32(), fnv.New64a(), fnv.New64()
		for _, w := range []interface{ Write([]byte) (int, error) }{f32a, f32, f64a, f64} {
			w.Write(data)
		}
		for _, c := range []struct {
			name string
			want uint32
		}{
			{"FNV1a32", f32a.Sum32()},
			{"FNV132", f32.Sum32()},
			{"FNV1a64Twemproxy", uint32(f64a.Sum64())},
			{"FNV164", uint32(f64.Sum64())},
		} {
			if got[c.name] != c.want {
				t.Errorf("%s(%q) = %08x, hash/fnv gives %08x", c.name, data, got[c.name], c.want)
			}
		}
	})
}

var hashkitSink uint32

func BenchmarkHashkit(b *testing.B) {
	for _, h := range hashkitFuncs {
		b.Run(h.name, func(b *testing.B) {
			for _, n := range []int{16, 256} {
				key := make([]byte, n)
				for i := range key {
					key[i] = byte('a' + i%26)
				}
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					b.SetBytes(int64(n))
					b.ReportAllocs()
					var s uint32
					for b.Loop() {
						s += h.fn(key)
					}
					hashkitSink = s
				})
			}
		})
	}
}

// TestHashkitKeyEscape checks that a []byte(string) conversion passed
// directly to a function stays on the stack (no allocation in the caller),
// except for the three hash/crc32-based functions, whose key escapes through
// hash/crc32's function-variable dispatch (see hashkit.go).
func TestHashkitKeyEscape(t *testing.T) {
	s := "key:12345€"
	var sink uint32
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"MD5Sum32", func() { sink += MD5Sum32([]byte(s)) }},
		{"FNV1a64Twemproxy", func() { sink += FNV1a64Twemproxy([]byte(s)) }},
		{"FNV164", func() { sink += FNV164([]byte(s)) }},
		{"FNV1a32", func() { sink += FNV1a32([]byte(s)) }},
		{"FNV132", func() { sink += FNV132([]byte(s)) }},
		{"OneAtATime", func() { sink += OneAtATime([]byte(s)) }},
		{"CRC16Twemproxy", func() { sink += CRC16Twemproxy([]byte(s)) }},
		{"Murmur2Twemproxy", func() { sink += Murmur2Twemproxy([]byte(s)) }},
		{"Murmur3Libmemcached", func() { sink += Murmur3Libmemcached([]byte(s)) }},
		{"Jenkins", func() { sink += Jenkins([]byte(s)) }},
		{"Hsieh", func() { sink += Hsieh([]byte(s)) }},
	} {
		if n := testing.AllocsPerRun(100, c.run); n != 0 {
			t.Errorf("%s([]byte(s)): %v allocs per run, want 0", c.name, n)
		}
	}
	crc := testing.AllocsPerRun(100, func() {
		sink += CRC32Twemproxy([]byte(s)) + CRC32a([]byte(s)) + GomemcacheCRC32([]byte(s))
	})
	t.Logf("CRC32Twemproxy+CRC32a+GomemcacheCRC32 on []byte(s): %v allocs per run (the key escapes into hash/crc32)", crc)
	_ = sink
}
