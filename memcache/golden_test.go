package memcache_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/memcache"
	"github.com/shardedcache/shardedcache/ring"
)

// goldenServers are the four servers of both vectors, in list order.
var goldenServers = []string{"127.0.0.1:11211", "127.0.0.1:11212", "127.0.0.1:11213", "127.0.0.1:11214"}

// readGolden reads a KEY<TAB>INDEX vector (raw UTF-8 keys, '#' comments).
func readGolden(t *testing.T, path string) (keys []string, index []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		key, idx, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s: bad line %q", path, line)
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			t.Fatalf("%s: bad index in %q", path, line)
		}
		keys, index = append(keys, key), append(index, i)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, index
}

// The vector files are the ring package's copies of the peers' golden sets
// (one copy each in the repository; see ring/testdata/README.md).

// TestMemcacheGoldenSelector: the Selector picks, for every key of the peers'
// vectors, the server the peer itself picked: libmemcached's ketama,
// spymemcached's, and gomemcache's own ServerList (crc32 % N). Keys longer
// than 250 bytes are included: PickServer refuses them with
// memcache.ErrMalformedKey, and the ring places them where the peers did.
func TestMemcacheGoldenSelector(t *testing.T) {
	for _, tc := range []struct {
		file string
		opt  ring.Preset
	}{
		{"../ring/testdata/ketama/libmemcached_ketama_weighted.tsv", ring.Libmemcached{Distribution: ring.LibmemcachedKetamaWeighted}},
		{"../ring/testdata/ketama/spymemcached_ketama_default.tsv", ring.Spymemcached{Locator: ring.SpymemcachedKetama}},
		{"../ring/testdata/presets/gomemcache_default_serverlist.tsv", ring.Gomemcache{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			srvs := make([]memcache.Server, len(goldenServers))
			for i, a := range goldenServers {
				srvs[i] = memcache.Server{Addr: a}
			}
			sel := mustSelector(t, srvs, tc.opt)
			keys, index := readGolden(t, tc.file)
			if len(keys) != 3098 {
				t.Fatalf("%d keys, want 3098", len(keys))
			}
			long := 0
			for i, k := range keys {
				if len(k) > 250 {
					long++
				}
				if got, want := pick(t, sel, k), goldenServers[index[i]]; got != want {
					t.Errorf("PickServer(%q) = %s, want %s (server %d)", k, got, want, index[i])
				}
			}
			if long != 6 {
				t.Fatalf("%d keys longer than 250 bytes, want 6", long)
			}
		})
	}
}

// TestMemcacheSelectorGomemcachePresetMatchesServerList: with ring.Gomemcache{}
// the Selector picks what gomemcache's own ServerList picks, key for key,
// long keys included, for 1 to 30 servers.
func TestMemcacheSelectorGomemcachePresetMatchesServerList(t *testing.T) {
	keys := append(testKeys(10_000), "", strings.Repeat("a", 256)+"-x", strings.Repeat("a", 256)+"-y", strings.Repeat("é", 300))
	for _, n := range []int{1, 2, 3, 4, 30} {
		srvs := servers(n, "")
		addrs := make([]string, n)
		for i, s := range srvs {
			addrs[i] = s.Addr
		}
		var list gomemcache.ServerList
		if err := list.SetServers(addrs...); err != nil {
			t.Fatal(err)
		}
		sel := mustSelector(t, srvs, ring.Gomemcache{})
		for _, k := range keys {
			want, err := list.PickServer(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := pick(t, sel, k); got != want.String() {
				t.Fatalf("%d servers, key %q: Selector %s, ServerList %s", n, k, got, want)
			}
		}
	}
}
