package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardedcache/shardedcache/internal/mcmeta"
)

// mcServer is a memcached shard, spoken to in memcached's text protocol:
// its meta commands (memcached 1.6.10 and later) for reads, adds and
// deletes that compare a CAS token, "lru_crawler metadump" for the scan,
// "stats" for the counters. gomemcache has none of add-with-TTL read from
// the server, delete-if-unchanged or the metadump.
type mcServer struct {
	addr    string
	timeout time.Duration // per round trip; 0: mcTimeout

	mu   sync.Mutex
	idle []*mcConn // connections free for a round trip, at most mcIdle
}

// mcConn is one connection and its reader.
type mcConn struct {
	net.Conn
	rd *bufio.Reader
}

// mcIdle bounds the idle connections kept per server (fixes run
// fixParallelism round trips at once).
const mcIdle = fixParallelism

const mcTimeout = 5 * time.Second

// dial opens a connection.
func (s *mcServer) dial(ctx context.Context) (*mcConn, error) {
	network := "tcp"
	if strings.Contains(s.addr, "/") {
		network = "unix"
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, s.addr)
	if err != nil {
		return nil, err
	}
	return &mcConn{c, bufio.NewReader(c)}, nil
}

// roundTrip sends req on an idle connection (or a new one) and reads the
// reply with read, within the round trip timeout and ctx's deadline; a
// failure closes the connection, a success keeps it for the next.
func (s *mcServer) roundTrip(ctx context.Context, req string, read func(*bufio.Reader) error) error {
	s.mu.Lock()
	var c *mcConn
	if n := len(s.idle); n > 0 {
		c, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if c == nil {
		var err error
		if c, err = s.dial(ctx); err != nil {
			return err
		}
	}
	t := s.timeout
	if t <= 0 {
		t = mcTimeout
	}
	deadline := time.Now().Add(t)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	_, err := io.WriteString(c, req)
	if err == nil {
		err = read(c.rd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || len(s.idle) >= mcIdle {
		_ = c.Close()
		return err
	}
	s.idle = append(s.idle, c)
	return nil
}

// line reads one reply line without its "\r\n".
func line(rd *bufio.Reader) (string, error) {
	l, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(l, "\r\n"), nil
}

// legal refuses a key the text protocol cannot carry.
func legal(key string) error {
	if !mcmeta.LegalKey(key) {
		return fmt.Errorf("memcached: key %q cannot be sent in the text protocol", key)
	}
	return nil
}

// Scan reads "lru_crawler metadump all" on a connection of its own (the
// dump can be long): one line per item, "key=<url-encoded> exp=... size=N".
func (s *mcServer) Scan(ctx context.Context, _ bool, fn func([]scanned) error) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rd := c.rd
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(c, "lru_crawler metadump all\r\n"); err != nil {
		return err
	}
	var page []scanned
	for {
		l, err := line(rd)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if l == "END" {
			break
		}
		if strings.HasPrefix(l, "ERROR") || strings.HasPrefix(l, "BUSY") || strings.HasPrefix(l, "CLIENT_ERROR") || strings.HasPrefix(l, "SERVER_ERROR") {
			return fmt.Errorf("memcached %s: lru_crawler metadump: %s", s.addr, l)
		}
		var it scanned
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "key":
				it.Key, err = url.QueryUnescape(v)
				if err != nil {
					return fmt.Errorf("memcached %s: metadump key %q: %v", s.addr, v, err)
				}
			case "size":
				it.Size, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if page = append(page, it); len(page) == scanCount {
			if err := fn(page); err != nil {
				return err
			}
			page = nil
		}
	}
	if len(page) > 0 {
		return fn(page)
	}
	return nil
}

func (s *mcServer) Count(ctx context.Context) (int64, error) {
	st, err := s.stats(ctx)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(st["curr_items"], 10, 64)
}

// Get sends "mg <key> v f t c": value, flags, remaining TTL (-1: none),
// CAS token.
func (s *mcServer) Get(ctx context.Context, key string) (c copyOf, ok bool, err error) {
	if err := legal(key); err != nil {
		return c, false, err
	}
	err = s.roundTrip(ctx, "mg "+key+" v f t c\r\n", func(rd *bufio.Reader) error {
		l, err := line(rd)
		if err != nil || l == "EN" {
			return err
		}
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "VA" {
			return fmt.Errorf("memcached %s: mg %s: %s", s.addr, key, l)
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return fmt.Errorf("memcached %s: mg %s: %s", s.addr, key, l)
		}
		for _, flag := range f[2:] {
			v := flag[1:]
			switch flag[0] {
			case 'f':
				u, _ := strconv.ParseUint(v, 10, 32)
				c.Flags = uint32(u)
			case 't':
				if t, _ := strconv.ParseInt(v, 10, 64); t > 0 {
					c.TTLms = t * 1000
				}
			case 'c':
				c.CAS, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		c.Payload = make([]byte, n+2)
		if _, err := io.ReadFull(rd, c.Payload); err != nil {
			return err
		}
		c.Payload, ok = c.Payload[:n], true
		return nil
	})
	return c, ok, err
}

// Add sends "ms <key> <size> ME F<flags> T<exptime>" (mode E: add): stored only if the
// server has no copy ("HD"; "NS" when it has one).
func (s *mcServer) Add(ctx context.Context, key string, c copyOf) (bool, error) {
	if err := legal(key); err != nil {
		return false, err
	}
	ttl := int32(-1)
	if c.TTLms > 0 {
		ttl = int32(max(c.TTLms/1000, 1))
	}
	req := fmt.Sprintf("ms %s %d ME F%d T%d\r\n%s\r\n", key, len(c.Payload), c.Flags, mcmeta.Expiration(ttl, time.Now()), c.Payload)
	var stored bool
	err := s.roundTrip(ctx, req, func(rd *bufio.Reader) error {
		l, err := line(rd)
		switch {
		case err != nil:
			return err
		case l == "HD":
			stored = true
		case l != "NS":
			return fmt.Errorf("memcached %s: ms %s ME: %s", s.addr, key, l)
		}
		return nil
	})
	return stored, err
}

// DeleteIf sends "md <key> C<cas>": "HD" deleted, "EX" the item changed
// since it was read, "NF" it is gone.
func (s *mcServer) DeleteIf(ctx context.Context, key string, c copyOf) (bool, error) {
	if err := legal(key); err != nil {
		return false, err
	}
	var deleted bool
	err := s.roundTrip(ctx, fmt.Sprintf("md %s C%d\r\n", key, c.CAS), func(rd *bufio.Reader) error {
		l, err := line(rd)
		switch {
		case err != nil:
			return err
		case l == "HD":
			deleted = true
		case l != "EX" && l != "NF":
			return fmt.Errorf("memcached %s: md %s: %s", s.addr, key, l)
		}
		return nil
	})
	return deleted, err
}

// stats reads "stats": "STAT <name> <value>" lines up to "END".
func (s *mcServer) stats(ctx context.Context) (map[string]string, error) {
	st := map[string]string{}
	err := s.roundTrip(ctx, "stats\r\n", func(rd *bufio.Reader) error {
		for {
			l, err := line(rd)
			if err != nil || l == "END" {
				return err
			}
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "STAT" {
				return fmt.Errorf("memcached %s: stats: %s", s.addr, l)
			}
			st[f[1]] = f[2]
		}
	})
	return st, err
}

func (s *mcServer) Stats(ctx context.Context) (serverStats, error) {
	st, err := s.stats(ctx)
	if err != nil {
		return serverStats{}, err
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(st[k], 10, 64); return n }
	return serverStats{Keys: num("curr_items"), Memory: num("bytes"), OpsPerSec: -1,
		Hits: num("get_hits"), Misses: num("get_misses"), Clients: num("curr_connections"),
		ops: num("cmd_get") + num("cmd_set") + num("cmd_touch") + num("delete_hits") + num("delete_misses") +
			num("incr_hits") + num("incr_misses") + num("decr_hits") + num("decr_misses")}, nil
}

func (s *mcServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.idle {
		_ = c.Close()
	}
	s.idle = nil
	return nil
}
