package mcmeta

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Expiration gives a moved item the TTL it had: none for -1, the seconds
// themselves up to 30 days, a Unix time beyond (memcached reads a larger
// exptime as one), and 1 for a TTL of 0 rather than 0, which means none.
func TestExpiration(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct{ ttl, want int32 }{
		{-1, 0},
		{0, 1},
		{1, 1},
		{2, 2},
		{maxRelative, maxRelative},
		{maxRelative + 1, 1_800_000_000 + maxRelative + 1},
		{40 * 24 * 3600, 1_800_000_000 + 40*24*3600},
	} {
		if got := Expiration(c.ttl, now); got != c.want {
			t.Errorf("Expiration(%d) = %d, want %d", c.ttl, got, c.want)
		}
	}
}

// Only memcached's refusal of an item as too large is ErrTooLarge.
func TestServerErrorTooLarge(t *testing.T) {
	for line, want := range map[string]bool{
		"SERVER_ERROR object too large for cache":   true,
		"SERVER_ERROR out of memory storing object": false,
		"NS": false,
	} {
		if got := errors.Is(&ServerError{Line: line}, ErrTooLarge); got != want {
			t.Errorf("errors.Is(%q, ErrTooLarge) = %v, want %v", line, got, want)
		}
	}
}

// Dial uses the meta commands only on a server that answers "mn" and
// reports memcached 1.6.10 or later: 1.6.0 to 1.6.9 answer "mn" too but
// refuse "ms <key> <size> ..." before reading its value, which would then
// run as commands. A version it cannot read gets the classic commands.
func TestDialMetaNeedsFinalSyntax(t *testing.T) {
	for _, c := range []struct {
		mn, version string
		meta        bool
	}{
		{"MN", "VERSION 1.6.18", true},
		{"MN", "VERSION 1.6.10", true},
		{"MN", "VERSION 1.7.0", true},
		{"MN", "VERSION 2.0.1", true},
		{"MN", "VERSION 1.6.10-rc1", true},
		{"MN", "VERSION 1.6.9", false},
		{"MN", "VERSION 1.6.0", false},
		{"MN", "VERSION 1.5.22", false},
		{"MN", "VERSION unknown", false},
		{"MN", "ERROR", false},
		{"ERROR", "", false},
	} {
		addr := scriptedServer(t, map[string]string{"mn": c.mn, "version": c.version})
		conn, err := Dial(context.Background(), nil, addr, time.Second)
		if err != nil {
			t.Fatalf("%q, %q: %v", c.mn, c.version, err)
		}
		if conn.Meta() != c.meta {
			t.Errorf("%q, %q: Meta() = %v, want %v", c.mn, c.version, conn.Meta(), c.meta)
		}
		conn.Close()
	}
}

// scriptedServer listens on 127.0.0.1 and answers each request line found
// in replies with its reply line; it stops with the test.
func scriptedServer(t *testing.T, replies map[string]string) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(nc, replies[strings.TrimSpace(line)]+"\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr()
}
