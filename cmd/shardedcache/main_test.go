package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/shardedcache/shardedcache/internal/etcdtest"
	"github.com/shardedcache/shardedcache/internal/rediscluster"
	"github.com/shardedcache/shardedcache/internal/serverproc"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The package's fixtures, set up once by TestMain: the tool's binary and
// the servers (redisAddrs, mcAddrs), or why the servers are missing.
var (
	binary     string
	redisAddrs []string
	mcAddrs    []string
	noServers  error
)

// secret is the password the golden lists name (password_env): no output
// may show it.
const secret = "s3cret-Pa55word"

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "shardedcache-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "shardedcache")
	// Built without the race detector even under -race, which makes the
	// ring's construction ~10 times slower in every run: the tool's own
	// concurrency (the progress loop) reads Migration.Progress, which is
	// made for it, and the functions of check run in-process in
	// TestFixRacesWriters.
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	os.Setenv("SHARDEDCACHE_TEST_PASSWORD", secret)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := func() int {
		if servers, err := rediscluster.StartServers(ctx, 4); err != nil {
			noServers = err
		} else {
			defer servers.Stop()
			for _, n := range servers.Nodes {
				redisAddrs = append(redisAddrs, n.Addr)
			}
		}
		for range 3 {
			addr, stop, err := startMemcached()
			if err != nil {
				noServers = errors.Join(noServers, err)
				break
			}
			defer stop()
			mcAddrs = append(mcAddrs, addr)
		}
		defer etcdtest.StopShared() // if a test started it
		return m.Run()
	}()
	if code == 0 { // the servers are stopped, and their goroutines ended
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// startMemcached starts a memcached on a free loopback port, dying with
// the test binary (serverproc).
func startMemcached() (string, func(), error) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	cmd := serverproc.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("memcached on %s does not answer", addr)
		}
	}
}

// needServers skips t when the servers could not be started, and fails it
// under CI=true.
func needServers(t *testing.T) {
	t.Helper()
	if noServers == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("real servers are required under CI=true: %v", noServers)
	}
	t.Skipf("no real servers: %v", noServers)
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs the binary with args and returns its output and exit code.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	r := result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("shardedcache %v printed the password:\n%s%s", args, r.stdout, r.stderr)
	}
	return r
}

// wantCode fails t unless r exited with code.
func (r result) wantCode(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// golden compares got with testdata/name.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, path, got)
	}
}

// shares, locate and plan need no server: their outputs on the fixed
// lists of testdata are golden.
func TestGoldenOutputs(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "ring.svg")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"shares-three", []string{"shares", "testdata/three.yaml", "--svg", svg}},
		{"shares-twemproxy", []string{"shares", "testdata/twemproxy.yaml"}},
		{"locate-three", []string{"locate", "testdata/three.yaml", "user:1", "user:2", "cart:{user:1}", "session:42"}},
		{"locate-tags", []string{"locate", "testdata/tags.json", "user:1", "cart:{user:1}", "{user:1}:orders", "{}x"}},
		{"locate-twemproxy", []string{"locate", "testdata/twemproxy.yaml", "user:1", "cart:{user:1}", "{}x"}},
		{"plan-three-four", []string{"plan", "testdata/three.yaml", "testdata/four.yaml"}},
		{"plan-twemproxy", []string{"plan", "testdata/twemproxy.yaml", "testdata/twemproxy-more.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, cli(t, tc.args...).wantCode(t, exitOK).stdout)
		})
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	// One arc per run of segments with one owner, and a legend line each.
	if got := strings.Count(string(b), "<path "); got < 3 || !strings.Contains(string(b), `2 &quot;c&quot; (10.0.0.3:6379/2): `) {
		t.Errorf("ring.svg has %d arcs and no legend for shard c:\n%.600s", got, b)
	}
}

// Bad input: exit code 2 and a message that names the field or argument,
// never the password.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		args       []string
		want       string
	}{
		{"inline password", "shards:\n  - {addr: 10.0.0.1:6379, password: " + secret + "}\n", nil,
			"shards[0].password: a password written in the list is refused"},
		{"shared inline password", "options: {password: " + secret + "}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil,
			"options.password: a password written in the list is refused"},
		{"password in a URL", "shards:\n  - {addr: \"redis://u:" + secret + "@10.0.0.1:6379\"}\n", nil,
			"shards[0].addr: give host:port only"},
		{"unset variable", "options: {password_env: SHARDEDCACHE_NO_SUCH_VAR}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil,
			"options.password_env: the environment variable SHARDEDCACHE_NO_SUCH_VAR is not set"},
		{"unknown field", "shards:\n  - {adress: 10.0.0.1:6379}\n", nil, `unknown field "adress"`},
		{"no address", "shards:\n  - {name: a}\n", nil, "shards[0].addr: missing"},
		{"no shards", "backend: redis\n", nil, "shards: the list has no shard"},
		{"backend", "backend: mongo\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil, `backend: "mongo" is neither redis nor memcache`},
		{"preset", "placement: {preset: ketama}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil, `placement.preset: unknown preset "ketama"`},
		{"hash", "placement: {hash: sha1}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil, `placement.hash: unknown hash "sha1"`},
		{"setting of another preset", "placement: {preset: gomemcache, key_tags: true}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil,
			"placement.key_tags: the gomemcache preset has no such setting"},
		{"duration", "options: {dial_timeout: 5}\nshards:\n  - {addr: 10.0.0.1:6379}\n", nil, `a duration is a string such as "500ms"`},
		{"duplicate shard", "shards:\n  - {addr: 10.0.0.1:6379}\n  - {addr: 10.0.0.1:6379}\n", nil, "10.0.0.1:6379"},
		{"memcache db", "backend: memcache\nshards:\n  - {addr: 10.0.0.1:11211, db: 1}\n", nil, "shards[0]: db and passwords are redis settings"},
		{"arguments", "shards:\n  - {addr: 10.0.0.1:6379}\n", []string{"plan"}, "shardedcache plan: want 2 arguments ([OLD NEW]), got 1"},
		{"flag", "shards:\n  - {addr: 10.0.0.1:6379}\n", []string{"shares", "--bogus"}, "unknown flag: --bogus"},
		{"negative sample", "shards:\n  - {addr: 10.0.0.1:6379}\n", []string{"check", "--sample", "-1"}, "--sample: -1 is negative"},
		{"negative rate", "shards:\n  - {addr: 10.0.0.1:6379}\n", []string{"reshard", "--rate", "-5", "old.yaml"}, "--rate: -5 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := writeFile(t, "list.yaml", tc.list)
			args := append(tc.args, list)
			if tc.args == nil {
				args = []string{"shares", list}
			}
			r := cli(t, args...).wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
		})
	}
}

// redisList writes a redis shard list over addrs (each "host:port" or
// "host:port/db") and returns its path.
func redisList(t *testing.T, name string, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("backend: redis\nshards:\n")
	for i, a := range addrs {
		addr, db, _ := strings.Cut(a, "/")
		fmt.Fprintf(&b, "  - {name: %c, addr: %q", 'a'+i, addr)
		if db != "" {
			fmt.Fprintf(&b, ", db: %s", db)
		}
		b.WriteString("}\n")
	}
	return writeFile(t, name, b.String())
}

// writeFile writes body to a new file name in a temporary directory.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// redisClient is a client of one server's DB, closed when t ends.
func redisClient(t *testing.T, addr string, db int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// flushRedis empties every DB of the test's redis-servers.
func flushRedis(t *testing.T) {
	t.Helper()
	for _, a := range redisAddrs {
		if err := redisClient(t, a, 0).FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// keysOf returns the keys of one server's DB with their values
// (strings only).
func keysOf(t *testing.T, c *goredis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, k := range keys {
		m[k] = c.Get(ctx, k).Val()
	}
	return m
}

// userKeysOf is keysOf without the resharding protocol's own records
// ("__shardedcache:...": a move that a kill cut short leaves one).
func userKeysOf(t *testing.T, c *goredis.Client) map[string]string {
	t.Helper()
	m := keysOf(t, c)
	maps.DeleteFunc(m, func(k, _ string) bool { return strings.HasPrefix(k, "__shardedcache:") })
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }
