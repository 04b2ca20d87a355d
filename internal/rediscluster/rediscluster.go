// Package rediscluster starts a real Redis Cluster on loopback ports, for
// the tests and examples of the move into Redis Cluster: redis-server
// processes with --cluster-enabled yes, joined by
// `redis-cli --cluster create ... --cluster-yes --cluster-replicas R`.
// It is not a cluster manager: nodes are started, killed, restarted and
// stopped, and Wait waits until every slot is served.
package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// Node is one redis-server of the cluster.
type Node struct {
	Addr   string // "127.0.0.1:<port>"
	dir    string // its working directory: nodes.conf and its log
	bin    string
	plain  bool // a standalone server, not a cluster node
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is a running Redis Cluster.
type Cluster struct {
	Nodes []*Node // the masters first (as created), then the replicas
	dir   string
}

// ErrNoBinaries is matched (errors.Is) by Start's error when redis-server
// or redis-cli is not in PATH.
var ErrNoBinaries = errors.New("redis-server and redis-cli are needed in PATH (Debian: apt-get install redis-server redis-tools)")

// Start starts masters×(1+replicas) redis-server nodes of Redis 7 under a
// new temporary directory and joins them into one cluster (masters get the
// slots, each with replicas replicas), then waits until every slot is
// served (Wait). Node timeout is nodeTimeout (the time after which a
// replica of an unreachable master takes over). On error every node
// started is stopped.
func Start(ctx context.Context, masters, replicas int, nodeTimeout time.Duration) (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	c, err := startNodes(ctx, masters*(1+replicas), false, nodeTimeout)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.Wait(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartServers starts n standalone redis-servers (no cluster), as the
// Nodes of the returned Cluster value: Stop stops them. Each reads an
// empty configuration file of its own (so that CONFIG REWRITE works), and
// gets args after the defaults ("--enable-debug-command", "local", ...).
func StartServers(ctx context.Context, n int, args ...string) (*Cluster, error) {
	return startNodes(ctx, n, true, 0, args...)
}

// startNodes starts n redis-servers under a new temporary directory.
func startNodes(ctx context.Context, count int, plain bool, nodeTimeout time.Duration, args ...string) (*Cluster, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	dir, err := os.MkdirTemp("", "shardedcache-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	for i := range count {
		n := &Node{dir: filepath.Join(dir, strconv.Itoa(i)), bin: bin, plain: plain, args: args}
		if err := os.Mkdir(n.dir, 0o755); err != nil {
			c.Stop()
			return nil, err
		}
		if n.Addr, err = freeAddr(); err != nil {
			c.Stop()
			return nil, err
		}
		if err := n.start(ctx, nodeTimeout); err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs n's redis-server and waits until it answers PING.
func (n *Node) start(ctx context.Context, nodeTimeout time.Duration) error {
	_, port, _ := net.SplitHostPort(n.Addr)
	args := []string{"--port", port, "--bind", "127.0.0.1", "--daemonize", "no",
		"--save", "", "--appendonly", "no", "--dir", n.dir, "--logfile", "redis.log"}
	if n.plain {
		conf := filepath.Join(n.dir, "redis.conf")
		if err := os.WriteFile(conf, nil, 0o644); err != nil {
			return err
		}
		args = append([]string{conf}, args...)
	} else {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10))
	}
	n.cmd = serverproc.Command(n.bin, append(args, n.args...)...)
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		return err
	}
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(n.cmd, n.exited)
	c := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-n.exited:
			b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited: %s", n.Addr, b)
		case <-ctx.Done():
			n.Kill()
			return fmt.Errorf("redis-server on %s does not answer PING: %w", n.Addr, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Kill kills n's process (SIGKILL) and waits until it exited; its data
// is lost (no persistence), its cluster identity kept for Restart.
func (n *Node) Kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// Pause stops n's process (SIGSTOP) until Continue: it keeps its
// connections open and answers nothing, as a hung server does.
func (n *Node) Pause() {
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Continue resumes n's process after Pause (SIGCONT).
func (n *Node) Continue() {
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Alive reports whether n's process runs.
func (n *Node) Alive() bool { return n.cmd != nil }

// Restart starts n again on its address with its nodes.conf: it rejoins
// the cluster (as a replica, when its master role was taken over).
func (n *Node) Restart(ctx context.Context, nodeTimeout time.Duration) error {
	return n.start(ctx, nodeTimeout)
}

// Masters returns the addresses of the nodes that are masters now, as
// CLUSTER NODES of a live node says, in the order of c.Nodes.
func (c *Cluster) Masters(ctx context.Context) ([]string, error) {
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
		out, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err != nil {
			continue
		}
		var masters []string
		for _, m := range c.Nodes {
			for line := range strings.Lines(out) {
				f := strings.Fields(line)
				if len(f) > 2 && strings.HasPrefix(f[1], m.Addr+"@") && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
					masters = append(masters, m.Addr)
				}
			}
		}
		return masters, nil
	}
	return nil, errors.New("no node of the cluster answers")
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Addrs returns every node's address: the seeds of a ClusterClient.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Wait waits until every live node says cluster_state:ok, every live node
// agrees on who serves the 16384 slots, and every live replica's link to
// its master is up, or ctx ends.
func (c *Cluster) Wait(ctx context.Context) error {
	for {
		err := c.check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster is not ready: %v (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) check(ctx context.Context) error {
	var first string
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := cl.ClusterInfo(ctx).Result()
		var slots []goredis.ClusterSlot
		var repl string
		if err == nil {
			slots, err = cl.ClusterSlots(ctx).Result()
		}
		if err == nil {
			repl, err = cl.Info(ctx, "replication").Result()
		}
		cl.Close()
		switch {
		case err != nil:
			return err
		case !strings.Contains(info, "cluster_state:ok"):
			return fmt.Errorf("%s: cluster_state is not ok", n.Addr)
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return fmt.Errorf("%s: the replica's link to its master is not up", n.Addr)
		}
		var b strings.Builder
		for _, s := range slots {
			fmt.Fprintf(&b, "%d-%d@%s,%d;", s.Start, s.End, s.Nodes[0].Addr, len(s.Nodes))
		}
		if first == "" {
			first = b.String()
		} else if b.String() != first {
			return fmt.Errorf("%s does not agree on the slots yet", n.Addr)
		}
	}
	return nil
}

// Stop kills every node and removes the cluster's directory.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	_ = os.RemoveAll(c.dir)
}
