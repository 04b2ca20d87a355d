package ring

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The files in testdata/ are routing and hash vectors produced by running
// Jedis's own classes (see testdata/README.md and testdata/NOTES.md).

// readTSV returns the header comment and the rows of a vector file.
func readTSV(t *testing.T, path string) (header string, rows [][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			if header == "" {
				header = line
			}
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows", path)
	}
	return header, rows
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("unquote %s: %v", s, err)
	}
	return u
}

func TestGoldenMurmur64A(t *testing.T) {
	_, rows := readTSV(t, "testdata/murmur64a.tsv")
	for _, row := range rows {
		data, err := hex.DecodeString(row[2])
		if err != nil {
			t.Fatal(err)
		}
		signed, _ := strconv.ParseInt(row[4], 10, 64)
		u, _ := strconv.ParseUint(row[5], 16, 64)
		got := Murmur64A(data, JedisMurmurSeed)
		if got != u || int64(got) != signed {
			t.Errorf("Murmur64A(%s) = %x (%d), want %x (%d)", row[3], got, int64(got), u, signed)
		}
		if p := HashMurmur64A.Point(data); p != u^(1<<63) {
			t.Errorf("HashMurmur64A.Point(%s) = %x, want %x", row[3], p, u^(1<<63))
		}
		if row[0] == "str" && unquote(t, row[3]) != string(data) {
			t.Errorf("row %s: quoted key and hex bytes differ", row[3])
		}
	}
	if len(rows) != 376 {
		t.Errorf("read %d vectors, want 376", len(rows))
	}
}

func TestGoldenJedisMD5(t *testing.T) {
	_, rows := readTSV(t, "testdata/md5hash.tsv")
	for _, row := range rows {
		data, err := hex.DecodeString(row[2])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseUint(row[4], 10, 64)
		if got := HashMD5.Point(data); got != want {
			t.Errorf("HashMD5.Point(%s) = %d, want %d", row[3], got, want)
		}
	}
	if len(rows) != 376 {
		t.Errorf("read %d vectors, want 376", len(rows))
	}
}

var (
	shardRE  = regexp.MustCompile(`(\d+):name=([^,]*),weight=(-?\d+)`)
	configRE = regexp.MustCompile(`hashing=(\S+) tagPattern=(\S+) shards=\[([^\]]*)\]`)
	countsRE = regexp.MustCompile(`per-shard counts=\[([^\]]*)\]`)
)

// goldenRing builds the ring a Jedis routing file's header describes.
func goldenRing(t *testing.T, path, header string) (*Ring, bool) {
	t.Helper()
	cfg := configRE.FindStringSubmatch(header)
	if cfg == nil {
		t.Fatalf("%s: no config in header %q", path, header)
	}
	var p Jedis
	switch cfg[1] {
	case "Hashing.MURMUR_HASH":
	case "Hashing.MD5":
		p.Hash = HashMD5
	default:
		t.Fatalf("%s: unknown hashing %s", path, cfg[1])
	}
	tags := cfg[2] != "none"
	if tags {
		p.KeyTags = true
	}
	if strings.Contains(filepath.Base(path), "__jedis-2.0.0-2.9") {
		p.LegacyNames = true
	}
	var nodes []Node
	for _, m := range shardRE.FindAllStringSubmatch(cfg[3], -1) {
		name := m[2]
		if name == "<none>" {
			name = ""
		}
		w, _ := strconv.Atoi(m[3])
		nodes = append(nodes, Node{Name: name, Weight: w})
	}
	r, err := New(nodes, p)
	if err != nil {
		t.Fatalf("%s: New: %v", path, err)
	}
	return r, tags
}

// TestGoldenJedisRouting checks every routing_*.tsv in testdata against the
// ring built from the configuration in its header.
func TestGoldenJedisRouting(t *testing.T) {
	files, _ := filepath.Glob("testdata/routing_*.tsv")
	if len(files) < 4 {
		t.Fatalf("found %d routing files, want at least 4", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			header, rows := readTSV(t, path)
			r, tags := goldenRing(t, path, header)
			counts := make([]int, r.Len())
			for _, row := range rows {
				key := unquote(t, row[0])
				want, _ := strconv.Atoi(row[1])
				got := r.Locate(key)
				counts[got]++
				if got != want {
					t.Errorf("Locate(%q) = %d, want %d", key, got, want)
				}
				if !tags {
					if got := r.LocateBytes([]byte(key)); got != want {
						t.Errorf("LocateBytes(%q) = %d, want %d", key, got, want)
					}
					continue
				}
				// Key-tag files: byte[] routing and the hashed string.
				wantBytes, _ := strconv.Atoi(row[2])
				if got := r.LocateBytes([]byte(key)); got != wantBytes {
					t.Errorf("LocateBytes(%q) = %d, want %d", key, got, wantBytes)
				}
				if tag, _ := KeyTag(key); tag != unquote(t, row[3]) {
					t.Errorf("KeyTag(%q) = %q, want %s", key, tag, row[3])
				}
			}
			if m := countsRE.FindStringSubmatch(header); m != nil {
				var want []string
				for _, c := range counts {
					want = append(want, strconv.Itoa(c))
				}
				if strings.Join(want, ", ") != m[1] {
					t.Errorf("per-shard counts = [%s], header says [%s]", strings.Join(want, ", "), m[1])
				}
			}
		})
	}
}
