package integration_test

// The differential test of differential_test.go on real redis-server
// processes: one single server and four shards per variant. The script adds
// the commands that real Redis 7 has and miniredis lacks (SORT, LCS,
// BITFIELD, ZDIFF, ZRANGESTORE, GEOSEARCHSTORE, FUNCTION/FCALL, ...).
//
// Locally the test is skipped when redis-server is not in PATH; in CI
// (CI=true) that fails it.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
)

// redisServerPath finds redis-server, or skips the test (fails it in CI).
func redisServerPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required in CI: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	return path
}

// startRedisServer starts a redis-server on a free port of 127.0.0.1, with
// no persistence, and waits until it answers PING. t.Cleanup kills it.
func startRedisServer(t *testing.T, bin string) string {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		addr, err := tryRedisServer(t, bin)
		if err == nil {
			return addr
		}
		lastErr = err // most likely the free port was taken meanwhile
	}
	t.Fatalf("redis-server does not start: %v", lastErr)
	return ""
}

func tryRedisServer(t *testing.T, bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	dir := t.TempDir()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		// Blocking commands time out within 10 ms (the default hz 10 checks
		// timeouts every 100 ms).
		"--hz", "100",
	)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			exited <- werr
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return "", fmt.Errorf("redis-server on port %d exited (%v): %s", port, werr, lastLines(string(log), 5))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("redis-server on port %d does not answer PING: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(stop)
	return addr, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestDifferentialRealRedis(t *testing.T) {
	bin := redisServerPath(t)
	seed := diffSeed(t)
	t.Logf("seed=%d (rerun with -seed %d or DIFF_SEED=%d); %s", seed, seed, seed, redisVersion(bin))
	for _, v := range diffVariants {
		t.Run(v.name, func(t *testing.T) {
			newClient := func(addr string) *goredis.Client {
				c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			single := newClient(startRedisServer(t, bin))
			shards := make([]shardedredis.ShardOptions, 4)
			direct := make([]*goredis.Client, len(shards)) // the shards' servers, asked directly
			for i := range shards {
				addr := startRedisServer(t, bin)
				shards[i] = shardedredis.ShardOptions{Addr: addr, Options: &goredis.Options{MaxRetries: -1}}
				direct[i] = newClient(addr)
			}
			sharded, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: shards, RingOptions: v.opts})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := sharded.Close(); err != nil {
					t.Error(err)
				}
			})
			runDifferential(t, diffEnv{
				seed: seed, real: true, pipeline: v.pipeline, single: single, sharded: sharded,
				holders: func(key string) []int {
					var out []int
					for i, c := range direct {
						n, err := c.Exists(ctx, key).Result()
						if err != nil {
							t.Fatalf("seed=%d: EXISTS %q on shard %d: %v", seed, key, i, err)
						}
						if n > 0 {
							out = append(out, i)
						}
					}
					return out
				},
			})
		})
	}
}

func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}
