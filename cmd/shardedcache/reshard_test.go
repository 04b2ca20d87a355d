package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/rediscluster"
)

// reshard from 3 shards to 4, killed with SIGKILL midway (the checkpoint
// file then holds a migration under way) and run again: it resumes from
// the checkpoint, and every key ends on its new owner alone with its
// value, and the file is gone. A third run of the finished change is
// refused (exit 2) rather than deleting the moved keys as stale.
func TestReshardKilledAndResumed(t *testing.T) {
	needServers(t)
	flushRedis(t)
	old := redisList(t, "old.yaml", redisAddrs[:3]...)
	next := redisList(t, "new.yaml", redisAddrs...)
	cp := filepath.Join(t.TempDir(), "cp.json")
	f := openTestFleet(t, next)
	db := make([]*goredis.Client, len(redisAddrs))
	for i, a := range redisAddrs {
		db[i] = redisClient(t, a, 0)
	}
	before := openTestFleet(t, old)
	const n = 6000
	want := []map[string]string{{}, {}, {}, {}}
	pipes := make([]goredis.Pipeliner, 3)
	for i := range pipes {
		pipes[i] = db[i].Pipeline()
	}
	for i := range n {
		k, v := "k:"+itoa(i), "value "+itoa(i)
		pipes[before.ring.Locate(k)].Set(ctx, k, v, 0)
		want[f.ring.Locate(k)][k] = v
	}
	for _, p := range pipes {
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// plan --scan counts the keys that move, per pair of shards.
	r := cli(t, "plan", old, next, "--scan").wantCode(t, exitOK)
	perPair := map[int]int{}
	for k := range want[3] {
		perPair[before.ring.Locate(k)]++
	}
	for from := range 3 {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f.shards[from].String()) + `\s+` + regexp.QuoteMeta(f.shards[3].String()) + `\s+[0-9.]+%\s+(\d+)\s+(\d+)`)
		m := row.FindStringSubmatch(r.stdout)
		if m == nil || m[1] != itoa(perPair[from]) || m[2] == "0" {
			t.Errorf("plan --scan, shard %d to 3: %q, want %d keys and their bytes:\n%s", from, m, perPair[from], r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "scanned: "+itoa(len(want[3]))+" keys move (") || !strings.Contains(r.stdout, ", "+itoa(n-len(want[3]))+" stay (") {
		t.Errorf("plan --scan totals:\n%s", r.stdout)
	}

	// 6000 keys at 1500 keys/s: killed once the new shard holds some.
	cmd := exec.Command(binary, "reshard", old, next, "--checkpoint", cp, "--rate", "1500", "--batch", "50")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); db[3].DBSize(ctx).Val() < 200; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the new shard got no key in 20 s:\n%s", out.String())
		}
	}
	time.Sleep(1100 * time.Millisecond) // a checkpoint saved after some moves
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("reshard ended before it was killed (%v):\n%s", err, out.String())
	}
	onNew := db[3].DBSize(ctx).Val()
	if onNew == 0 || onNew >= int64(len(want[3])) {
		t.Fatalf("killed with %d of %d keys on the new shard: not midway", onNew, len(want[3]))
	}
	var saved checkpointFile
	if b, err := os.ReadFile(cp); err != nil || json.Unmarshal(b, &saved) != nil || saved.Checkpoint == nil {
		t.Fatalf("the checkpoint file after the kill: %v %+v", err, saved)
	}
	moving := false
	for _, s := range saved.Checkpoint.Shards {
		moving = moving || s.Cursor != 0 || s.Swept
	}
	if !moving {
		t.Fatalf("the checkpoint shows no progress: %+v", saved.Checkpoint)
	}

	r = cli(t, "reshard", old, next, "--checkpoint", cp).wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "every key moved; the window is ended") {
		t.Fatalf("the resumed reshard:\n%s", r.stdout)
	}
	for i := range db {
		if got := userKeysOf(t, db[i]); !maps.Equal(got, want[i]) {
			t.Errorf("shard %d holds %d keys, want %d (its own, with their values)", i, len(got), len(want[i]))
		}
	}
	if _, err := os.Stat(cp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkpoint file is still there: %v", err)
	}
	r = cli(t, "reshard", old, next, "--checkpoint", cp).wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "NEW's shards already hold "+itoa(len(want[3]))+" keys that NEW places there and OLD does not") {
		t.Errorf("a second run:\n%s", r.stderr)
	}
	if got := len(userKeysOf(t, db[3])); got != len(want[3]) {
		t.Errorf("the refused run left %d keys on the new shard, want %d", got, len(want[3]))
	}
}

// to-cluster prints the cluster plan, and moves every key of a 2-shard
// list into a 3-master Redis Cluster, where each is then read back.
func TestToCluster(t *testing.T) {
	needServers(t)
	flushRedis(t)
	cluster, err := rediscluster.Start(ctx, 3, 0, 5*time.Second)
	if err != nil {
		if errors.Is(err, rediscluster.ErrNoBinaries) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer cluster.Stop()
	list := redisList(t, "two.yaml", redisAddrs[0], redisAddrs[1])
	f := openTestFleet(t, list)
	const n = 500
	for i := range n {
		k := "k:" + itoa(i)
		f.rdb.Shards()[f.ring.Locate(k)].Client.Set(ctx, k, i, 0)
	}
	addr := cluster.Nodes[0].Addr
	r := cli(t, "to-cluster", "--dry-run", list, addr).wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, itoa(n)+" keys scanned; the cluster's masters:\n") {
		t.Fatalf("to-cluster --dry-run:\n%s", r.stdout)
	}
	if got := f.rdb.Shards()[0].Client.DBSize(ctx).Val() + f.rdb.Shards()[1].Client.DBSize(ctx).Val(); got != n {
		t.Fatalf("the dry run changed the shards: %d keys, want %d", got, n)
	}
	r = cli(t, "to-cluster", list, addr).wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "every key moved; the window is ended") {
		t.Fatalf("to-cluster:\n%s", r.stdout)
	}
	r = cli(t, "to-cluster", list, addr).wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "keys, which the move would delete as stale") {
		t.Errorf("a second to-cluster:\n%s", r.stderr)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}})
	defer cc.Close()
	for i := range n {
		if v := cc.Get(ctx, "k:"+itoa(i)).Val(); v != itoa(i) {
			t.Fatalf("k:%d in the cluster = %q, want %d", i, v, i)
		}
	}
	for i := range 2 {
		if got := f.rdb.Shards()[i].Client.DBSize(ctx).Val(); got != 0 {
			t.Errorf("shard %d still holds %d keys", i, got)
		}
	}
}

// reshard of a memcache list from two servers to three: every key whose
// owner changes is read in the window, which moves it with its flags and
// TTL; each key then lives on its new owner alone.
func TestReshardMemcache(t *testing.T) {
	needServers(t)
	old, next := memcacheList(t, mcAddrs[:2]...), memcacheList(t, mcAddrs...)
	before, f := openTestFleet(t, old), openTestFleet(t, next)
	mc := make([]*gomemcache.Client, len(mcAddrs))
	for i, a := range mcAddrs {
		mc[i] = gomemcache.New(a)
		if err := mc[i].FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 2000
	for i := range n {
		k := "k:" + itoa(i)
		if err := mc[before.ring.Locate(k)].Set(&gomemcache.Item{Key: k, Value: []byte(itoa(i)), Flags: 7, Expiration: 3600}); err != nil {
			t.Fatal(err)
		}
	}
	r := cli(t, "reshard", old, next).wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "every key moved (") {
		t.Fatalf("reshard:\n%s", r.stdout)
	}
	movedKeys := 0
	for i := range n {
		k := "k:" + itoa(i)
		owner := f.ring.Locate(k)
		if owner != before.ring.Locate(k) {
			movedKeys++
		}
		for j, c := range mc {
			it, err := c.Get(k)
			if j == owner && (err != nil || string(it.Value) != itoa(i) || it.Flags != 7) {
				t.Fatalf("%s on its owner %d: %+v, %v", k, j, it, err)
			}
			if j != owner && err == nil {
				t.Fatalf("%s is still on shard %d (owner %d)", k, j, owner)
			}
		}
	}
	if movedKeys == 0 || !strings.Contains(r.stdout, "every key moved ("+itoa(movedKeys)+" values, 0 dropped") {
		t.Errorf("%d keys moved; reshard says:\n%s", movedKeys, r.stdout)
	}
}
