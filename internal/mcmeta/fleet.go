package mcmeta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// The commands a fleet's moves need (memcached 1.6.10 and later): an add
// that returns the stored item's CAS token, a delete that compares a CAS
// token, and the list of the server's keys.

// Add stores it (Key, Value, Flags, Expiration) only if the server holds
// no item of its key ("ms <key> <size> F<flags> T<exptime> ME c"). It
// returns stored false when the server holds one ("NS", with flags), else the stored
// item's CAS token. A refusal of the value (too large) is a *ServerError.
func (c *Conn) Add(ctx context.Context, it Item) (stored bool, cas uint64, err error) {
	if !c.meta {
		return false, 0, errNoMeta("ms")
	}
	if !LegalKey(it.Key) {
		return false, 0, fmt.Errorf("%w: %q", ErrMalformedKey, it.Key)
	}
	err = c.exchange(ctx, func() {
		fmt.Fprintf(c.w, "ms %s %d F%d T%d ME c\r\n", it.Key, len(it.Value), it.Flags, it.Expiration)
		c.w.Write(it.Value)
		c.w.WriteString("\r\n")
	}, func() error {
		line, err := c.line()
		switch {
		case err != nil:
			return err
		case line == "HD" || strings.HasPrefix(line, "HD "):
			stored, cas = true, replyCAS(line)
		case line == "NS" || strings.HasPrefix(line, "NS "):
		default:
			return &ServerError{Line: line}
		}
		return nil
	})
	return stored, cas, err
}

// DeleteIf deletes key only if its item's CAS token is cas ("md <key>
// C<cas>"). It returns "deleted", "changed" (the token differs: EX) or
// "absent" (NF).
func (c *Conn) DeleteIf(ctx context.Context, key string, cas uint64) (string, error) {
	if !c.meta {
		return "", errNoMeta("md")
	}
	if !LegalKey(key) {
		return "", fmt.Errorf("%w: %q", ErrMalformedKey, key)
	}
	var outcome string
	err := c.exchange(ctx, func() { fmt.Fprintf(c.w, "md %s C%d\r\n", key, cas) }, func() error {
		line, err := c.line()
		if err != nil {
			return err
		}
		switch code, _, _ := strings.Cut(line, " "); code { // a code may come with flags
		case "HD":
			outcome = "deleted"
		case "EX":
			outcome = "changed"
		case "NF":
			outcome = "absent"
		default:
			return &ServerError{Line: line}
		}
		return nil
	})
	return outcome, err
}

// Keys lists the server's keys ("lru_crawler metadump all", one line per
// item, "key=<URL-encoded key> exp=... ..."), handing them to fn in pages
// of at most MaxBatch, until "END" or fn's error. The dump has no timeout
// of its own but ctx's: the connection's per-round-trip timeout applies
// to each page. A server that refuses (BUSY, ERROR) gives a *ServerError.
func (c *Conn) Keys(ctx context.Context, fn func(keys []string) error) error {
	first := true
	for {
		var page []string
		done := false
		err := c.exchange(ctx, func() {
			if first {
				c.w.WriteString("lru_crawler metadump all\r\n")
			}
		}, func() error {
			for len(page) < MaxBatch {
				line, err := c.dumpLine()
				if err != nil {
					return err
				}
				if line == "END" {
					done = true
					return nil
				}
				enc, ok := strings.CutPrefix(strings.Fields(line + " ")[0], "key=")
				if !ok {
					return &ServerError{Line: line}
				}
				k, err := url.QueryUnescape(enc)
				if err != nil {
					return fmt.Errorf("mcmeta: metadump key %q: %v", enc, err)
				}
				page = append(page, k)
			}
			return nil
		})
		first = false
		if err != nil {
			return err
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// dumpLine reads one line of a metadump, which memcached ends with LF
// alone (its "END" with CRLF).
func (c *Conn) dumpLine() (string, error) {
	b, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("mcmeta: metadump line too long")
		}
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func errNoMeta(cmd string) error {
	return fmt.Errorf("mcmeta: %s needs meta commands (memcached 1.6.10 or later)", cmd)
}

// DialTCP is Dial to a "host:port" address, resolved first (for tests and
// tools; a sharded client resolves its shards' addresses itself).
func DialTCP(ctx context.Context, hostport string, timeout time.Duration) (*Conn, error) {
	a, err := net.ResolveTCPAddr("tcp", hostport)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, nil, a, timeout)
}
