package memcache_test

import (
	"bufio"
	"cmp"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	shardedmc "github.com/shardedcache/shardedcache/memcache"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// An item stored by another meta client with a binary key ("ms <base64> b")
// is the key itself to gomemcache and to this client. Moving it in a window
// reads it with a meta get, to which memcached returns the key in base64:
// the move must keep the key asked for, not take the base64 text for the
// key (which stored the value under the base64 text on the new owner and
// deleted an unrelated key of that name from the old one), and GetMulti
// must return the key it was asked.
func TestReshardMovesItemStoredWithBinaryKey(t *testing.T) {
	a, b := fixtures.StartRealMemcached(t), fixtures.StartRealMemcached(t)
	first := []shardedmc.ShardOptions{{Name: "a", Addr: a.Addr}}
	next := []shardedmc.ShardOptions{{Name: "a", Addr: a.Addr}, {Name: "b", Addr: b.Addr}}
	plan, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: next})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	// key and key2 move to b; the base64 text of key stays on a.
	var moving []string
	var enc string
	for i := 0; len(moving) < 2; i++ {
		k := "user:" + strconv.Itoa(i)
		e := base64.StdEncoding.EncodeToString([]byte(k))
		if plan.GetShardInfo(k).Index == 1 && (len(moving) == 1 || plan.GetShardInfo(e).Index == 0) {
			moving = append(moving, k)
			enc = cmp.Or(enc, e)
		}
	}
	c, err := shardedmc.NewShardedClient(&shardedmc.ShardedOptions{Shards: first})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, k := range moving {
		v := "binary-" + strconv.Itoa(i)
		line := metaRaw(t, a.Addr, "ms "+base64.StdEncoding.EncodeToString([]byte(k))+" "+strconv.Itoa(len(v))+" b\r\n"+v+"\r\n")
		if line != "HD" {
			t.Fatalf("ms of %q in base64: %q", k, line)
		}
	}
	if err := c.Set(&gomemcache.Item{Key: enc, Value: []byte("unrelated")}); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginResharding(next, shardedmc.ReshardOptions{}); err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(moving[0]); err != nil || string(it.Value) != "binary-0" {
		t.Errorf("Get(%q) in the window = %v, %v; want binary-0", moving[0], it, err)
	}
	items, err := c.GetMulti([]string{moving[1], enc})
	if err != nil || len(items) != 2 || items[moving[1]] == nil || string(items[moving[1]].Value) != "binary-1" ||
		items[enc] == nil || string(items[enc].Value) != "unrelated" {
		t.Errorf("GetMulti(%q, %q) in the window = %d items %v, %v; want binary-1 and unrelated", moving[1], enc, len(items), items, err)
	}
	onB := gomemcache.New(b.Addr)
	defer onB.Close()
	for _, k := range moving {
		if it, err := onB.Get(k); err != nil {
			t.Errorf("new owner: Get(%q) = %v, %v", k, it, err)
		}
	}
	if it, err := onB.Get(enc); err != gomemcache.ErrCacheMiss {
		t.Errorf("new owner holds %q (the base64 text of a moved key) = %v, %v; want a miss", enc, it, err)
	}
}

// metaRaw sends text to the memcached at addr on a connection of its own
// and returns the first reply line, without its CRLF.
func metaRaw(t *testing.T, addr, text string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(line, "\r\n")
}
