// Command fleet reshards a fleet of three processes from 3 to 4 Redis
// shards under load. It starts four redis-servers and an etcd (the Debian
// packages redis-server and etcd-server, or any on PATH) on 127.0.0.1, then
// runs three copies of itself as worker processes: each joins the fleet
// (JoinFleet, with the etcd store) and writes and reads keys of its own
// without pause. This process then drives the resharding (fleet.Reshard)
// with a progress bar, while every worker follows each step. At the end
// each worker reports the last value it had acknowledged for each of its
// keys, and this process checks every key on the servers: on its owner
// under the new list, with that value, and nowhere else.
//
// Run it from this directory (its own module, since it uses etcd):
//
//	go run .
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardedcache/shardedcache/fleet"
	"github.com/shardedcache/shardedcache/fleet/etcdstore"
	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

const (
	workers       = 3
	keysPerWorker = 3000
	prefix        = "/shardedcache-example/fleet"
)

func main() {
	var err error
	if len(os.Args) == 5 && os.Args[1] == "worker" {
		err = worker(os.Args[2], os.Args[3], os.Args[4])
	} else {
		err = run()
	}
	if err != nil {
		log.Fatal(err)
	}
}

// list is the fleet's shard list as a worker's argument.
func list(shards []fleet.Shard) string { b, _ := json.Marshal(shards); return string(b) }

func run() error {
	dir, err := os.MkdirTemp("", "shardedcache-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var servers []string
	for range 4 {
		addr, stop, err := startServer(dir, "redis-server", func(port int) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
		})
		if err != nil {
			return err
		}
		defer stop()
		servers = append(servers, addr)
	}
	etcdAddr, stopEtcd, err := startEtcd(dir)
	if err != nil {
		return err
	}
	defer stopEtcd()
	endpoint := "http://" + etcdAddr

	initial := []fleet.Shard{{Name: "a", Addr: servers[0]}, {Name: "b", Addr: servers[1]}, {Name: "c", Addr: servers[2]}}
	target := append(append([]fleet.Shard{}, initial...), fleet.Shard{Name: "d", Addr: servers[3]})

	// The store starts with the three shards.
	store, closeStore, err := openStore(endpoint)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx := context.Background()
	if _, err := store.Swap(ctx, 0, fleet.State{Epoch: 1, Step: fleet.Stable, Shards: initial}); err != nil {
		return err
	}

	// Three worker processes under load.
	var procs []*exec.Cmd
	var outs []*bufio.Reader
	for i := range workers {
		cmd := exec.Command(os.Args[0], "worker", strconv.Itoa(i), endpoint, list(initial))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			return fmt.Errorf("worker %d did not start: %q %v", i, line, err)
		}
		outs = append(outs, r)
	}
	fmt.Printf("3 worker processes joined the fleet and write %d keys each\n", keysPerWorker)
	time.Sleep(time.Second)

	// Drive the resharding from this process.
	driver, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: options(initial)})
	if err != nil {
		return err
	}
	defer driver.Close()
	bar := progressbar.NewOptions64(workers*keysPerWorker, progressbar.OptionSetDescription("migrating (keys scanned)"),
		progressbar.OptionSetWriter(os.Stdout), progressbar.OptionShowCount(), progressbar.OptionSetWidth(40),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("keys"))
	final, err := fleet.Reshard(ctx, store, driver.FleetBackend(shardedredis.MigrateOptions{KeysPerSecond: 5000}), target,
		fleet.DriverOptions{Progress: func(p fleet.Progress) { _ = bar.Set64(p.Scanned) }})
	_ = bar.Finish()
	fmt.Println()
	if err != nil {
		return err
	}
	fmt.Printf("the fleet is on %d shards (epoch %d)\n", len(final.Shards), final.Epoch)
	time.Sleep(time.Second)

	// Stop the workers (SIGTERM) and collect their last
	// acknowledged values.
	want := map[string]string{}
	for i, cmd := range procs {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		var last map[string]string
		if err := json.NewDecoder(outs[i]).Decode(&last); err != nil {
			return fmt.Errorf("worker %d: %w", i, err)
		}
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("worker %d: %w", i, err)
		}
		for k, v := range last {
			want[k] = v
		}
	}
	return verify(ctx, target, want)
}

// verify checks that every key of want is on its owner under target with
// its value, and that no server holds a key it does not own.
func verify(ctx context.Context, target []fleet.Shard, want map[string]string) error {
	nodes := make([]ring.Node, len(target))
	for i, sh := range target {
		nodes[i] = ring.Node{Name: sh.Name, Addr: sh.Addr}
	}
	r, err := ring.New(nodes, nil)
	if err != nil {
		return err
	}
	found, misplaced, wrong := 0, 0, 0
	for _, sh := range target {
		c := goredis.NewClient(&goredis.Options{Addr: sh.Addr})
		keys, err := c.Keys(ctx, "w*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if target[r.Locate(k)].Name != sh.Name {
				misplaced++
				continue
			}
			found++
			if v, _ := c.Get(ctx, k).Result(); v != want[k] {
				wrong++
			}
		}
		c.Close()
	}
	fmt.Printf("checked %d keys: %d on their owner with their last acknowledged value, %d wrong, %d misplaced, %d missing\n",
		len(want), found-wrong, wrong, misplaced, len(want)-found)
	if wrong > 0 || misplaced > 0 || found != len(want) {
		return errors.New("the fleet lost or misplaced keys")
	}
	return nil
}

func options(list []fleet.Shard) []shardedredis.ShardOptions {
	out := make([]shardedredis.ShardOptions, len(list))
	for i, sh := range list {
		out[i] = shardedredis.ShardOptions{Name: sh.Name, Addr: sh.Addr, Weight: sh.Weight}
	}
	return out
}

// worker joins the fleet and writes its keys in a loop until SIGTERM, then
// prints the last value it had acknowledged for each key as JSON.
func worker(id, endpoint, initial string) error {
	var shards []fleet.Shard
	if err := json.Unmarshal([]byte(initial), &shards); err != nil {
		return err
	}
	store, closeStore, err := openStore(endpoint)
	if err != nil {
		return err
	}
	defer closeStore()
	rdb, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: options(shards)})
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx := context.Background()
	member, err := rdb.JoinFleet(ctx, store, fleet.MemberOptions{})
	if err != nil {
		return err
	}
	defer member.Close()
	fmt.Println("ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	last := map[string]string{}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return json.NewEncoder(os.Stdout).Encode(last)
		default:
		}
		k := fmt.Sprintf("w%s:%d", id, n%keysPerWorker)
		v := strconv.Itoa(n)
		// A failed SET may or may not have run: it is sent again until
		// acknowledged, so that the key's last value is known.
		for err := rdb.Set(ctx, k, v, 0).Err(); err != nil; err = rdb.Set(ctx, k, v, 0).Err() {
			fmt.Fprintf(os.Stderr, "worker %s: SET %s: %v (sent again)\n", id, k, err)
		}
		last[k] = v
	}
}

// openStore connects to etcd at endpoint and returns the fleet's store
// there, and the function that closes the connection.
func openStore(endpoint string) (*etcdstore.Store, func(), error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	store, err := etcdstore.New(cli, prefix)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return store, func() { cli.Close() }, nil
}

// startServer starts bin with the arguments args gives for a free port,
// waits until it accepts connections, and returns its address and a stop
// function.
func startServer(dir, bin string, args func(port int) []string) (string, func(), error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", nil, fmt.Errorf("%s not found: install it (Debian: apt-get install redis-server etcd-server): %w", bin, err)
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(path, args(port)...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, nil
		}
		if i == 200 {
			stop()
			return "", nil, fmt.Errorf("%s on %s did not start", bin, addr)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func startEtcd(dir string) (string, func(), error) {
	peer, err := freePort()
	if err != nil {
		return "", nil, err
	}
	return startServer(dir, "etcd", func(port int) []string {
		client := fmt.Sprintf("http://127.0.0.1:%d", port)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
		return []string{"--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "default=" + peerURL}
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
