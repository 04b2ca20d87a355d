package reshard_test

import (
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
	"github.com/shardedcache/shardedcache/internal/serverproc"
)

// TestAttackServerSideLongHang: TestReshardHungDestination's ServerSide
// run with a hang longer than MIGRATE's own timeout (2 s), of the new
// owner (5 s: MIGRATEs fail with IOERR while it is still stopped, and its
// drain waits), and of an old owner (5 s: its transaction's reply is lost
// and settled once it answers). No deleted key is back, every value is
// the last acknowledged one, every TTL the key's absolute expiry.
func TestAttackServerSideLongHang(t *testing.T) {
	t.Run("new owner", func(t *testing.T) { hungShard(t, true, 3, nil, hangFor(5*time.Second)) })
	t.Run("old owner", func(t *testing.T) { hungShard(t, true, 0, nil, hangFor(5*time.Second)) })
}

// TestAttackServerSideKilledDestination: the same, the new owner killed
// (SIGKILL) mid-migration and restarted a second later on its port from
// its append-only file (fsync always: every write it acknowledged is
// kept). Its drain first finds it gone (the run fails, naming it); the
// resumed runs drain it, settle the keys whose MIGRATE it may have run,
// and finish. Same checks.
func TestAttackServerSideKilledDestination(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	aof := []string{"--appendonly", "yes", "--appendfsync", "always"}
	hungShard(t, true, 3, aof, func(p *fixtures.RedisProc) {
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
		<-p.Exited
		time.Sleep(time.Second)
		_, port, _ := net.SplitHostPort(p.Addr)
		p.Cmd = serverproc.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--daemonize", "no",
			"--dir", p.Dir, "--logfile", filepath.Join(p.Dir, "redis-restarted.log")}, aof...)...)
		p.Exited = make(chan struct{})
		if err := p.Cmd.Start(); err != nil {
			return // the checks fail
		}
		exited := p.Exited
		go func() {
			_ = p.Cmd.Wait()
			close(exited)
		}()
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr, MaxRetries: -1})
		defer c.Close()
		for deadline := time.Now().Add(10 * time.Second); c.Ping(ctx).Err() != nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
}
