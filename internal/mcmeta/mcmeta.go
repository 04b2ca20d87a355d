// Package mcmeta is the small memcached client with which package memcache
// moves keys from one shard to another during a resharding window, where
// gomemcache falls short: it reads an item's remaining time to live, sends
// many commands per round trip, and stops when the caller's context ends. It
// is not a general client: a Conn reads, stores and deletes batches of keys
// on one connection to one server, and nothing else.
//
// On a server with memcached's meta commands in their final syntax
// (memcached 1.6.10 and later: Dial asks with "mn", which such a server
// answers "MN", then checks "version"), a batch of up to MaxBatch keys is
// one pipelined round trip:
//
//	mg <key> v f t c O<i> q  per key, i its place in the batch; a hit is answered "VA <size> f<flags> t<ttl> c<cas> O<i>"
//	mn                       ends the batch: "MN" (misses are not answered, q)
//	ms <key> <size> F<flags> T<exptime> c   per item, answered in order "HD c<cas>"
//	md <key>                 per key, answered in order "HD" or "NF"
//
// A hit is matched to its key by the opaque token O<i>, not by the key the
// server returns (which it would encode in base64 for an item stored with a
// binary key). memcached 1.6.0 to 1.6.9 answer "mn" too, but read "ms" with
// its size in a flag, so that "ms <key> <size> ..." is refused before the
// value is read and the value would run as commands; they, and servers whose
// version Dial cannot read, get the classic commands.
//
// On a server without them (it answers "mn" with "ERROR": memcached before
// 1.6, minimemcached), the classic text commands are used: "gets k1 k2 ..."
// for a batch, then one "set" or "delete" per key, each waiting for its reply
// (not every server of the classic protocol reads pipelined commands), and
// items carry no TTL.
//
// Every round trip has a deadline: the earlier of the Conn's timeout from
// now and the context's deadline; a context canceled meanwhile cuts it
// short. After any failure but a server's refusal of one item, the Conn is
// broken: every later call returns the same error, and a Pool discards it.
package mcmeta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// MaxBatch is the largest number of commands sent in one round trip; a
// batch of stores also ends after MaxBatchBytes of values.
const (
	MaxBatch      = 256
	MaxBatchBytes = 1 << 20
)

// maxRelative is the largest exptime memcached reads as seconds from now (30
// days); a larger one is a Unix time.
const maxRelative = 30 * 24 * 3600

// Item is one memcached item. Keys must be valid memcached keys (1 to 250
// bytes, no whitespace or control character): they are sent as they are.
type Item struct {
	Key   string
	Value []byte
	Flags uint32
	// CAS is, from Get, the item's CAS token; after Set on a server with
	// meta commands, the token the stored item got (else 0).
	CAS uint64
	// TTL is, from Get on a server with meta commands, the item's remaining
	// time to live in seconds, -1 for none; 0 when the server does not tell
	// it (Meta is false).
	TTL int32
	// Expiration is, for Set, memcached's exptime: 0 for none, seconds from
	// now up to 30 days, else a Unix time (see Expiration).
	Expiration int32
}

// Expiration converts ttl, a remaining time to live as Get reports it, to
// the exptime that gives an item the same time to live from now: 0 for -1
// (none); ttl itself up to 30 days, and now plus ttl as a Unix time beyond,
// since memcached reads a larger exptime as a Unix time. A ttl of 0 (not
// reported by memcached, which expires an item whose time is up) gives 1, the
// shortest life, rather than 0, which would mean none.
func Expiration(ttl int32, now time.Time) int32 {
	switch {
	case ttl < 0:
		return 0
	case ttl == 0:
		return 1
	case ttl <= maxRelative:
		return ttl
	default:
		return int32(now.Unix() + int64(ttl))
	}
}

// ServerError is a reply by which the server refused a command (ERROR,
// CLIENT_ERROR ..., SERVER_ERROR ..., NS, NOT_STORED), or one this package
// did not expect.
type ServerError struct {
	Line string // the reply, without its line end
}

func (e *ServerError) Error() string { return "memcached replied " + strconv.Quote(e.Line) }

// ErrTooLarge matches (errors.Is) the refusal of an item larger than the
// server stores (memcached's -I, 1 MiB by default). memcached also deletes
// the value the key held.
var ErrTooLarge = errors.New("mcmeta: item larger than the server stores")

// ErrMalformedKey is returned, with nothing sent, for a key that LegalKey
// refuses: memcached's text and meta protocols carry the key in the command
// line, where such a key would let the rest of the line run as commands.
var ErrMalformedKey = errors.New("mcmeta: malformed key")

// LegalKey reports whether key is safe on memcached's text and meta
// protocols: 1 to 250 bytes, none of them a space, a control character or
// DEL (gomemcache's rule, plus the empty key, which gomemcache lets
// through).
func LegalKey(key string) bool {
	if len(key) == 0 || len(key) > 250 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// legalKeys returns ErrMalformedKey if a key of keys is not LegalKey.
func legalKeys[T any](keys []T, key func(T) string) error {
	for _, k := range keys {
		if !LegalKey(key(k)) {
			return ErrMalformedKey
		}
	}
	return nil
}

func self(k string) string { return k }

// Is reports whether e is the refusal of an item as too large.
func (e *ServerError) Is(target error) bool {
	return target == ErrTooLarge && e.Line == "SERVER_ERROR object too large for cache"
}

// DialFunc opens a connection, as net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Conn is one connection to a memcached server. It is not safe for
// concurrent use.
type Conn struct {
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
	meta    bool
	err     error // the failure that broke the connection
}

// Dial connects to addr with dial (a net.Dialer when nil), within timeout
// and ctx, as gomemcache dials, and asks the server whether it has meta
// commands ("mn"). timeout also bounds each later round trip; 0 means
// gomemcache's DefaultTimeout, 500 ms.
func Dial(ctx context.Context, dial DialFunc, addr net.Addr, timeout time.Duration) (*Conn, error) {
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: timeout}).DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := dial(dctx, addr.Network(), addr.String())
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), timeout: timeout}
	err = c.exchange(ctx, func() { c.w.WriteString("mn\r\n") }, func() error {
		switch line, err := c.line(); {
		case err != nil:
			return err
		case line == "MN":
			c.meta = true
		case line != "ERROR":
			return &ServerError{Line: line}
		}
		return nil
	})
	if err == nil && c.meta {
		err = c.exchange(ctx, func() { c.w.WriteString("version\r\n") }, func() error {
			line, err := c.line()
			c.meta = err == nil && finalMeta(line)
			return err
		})
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// finalMeta reports whether line, a server's answer to "version", names
// memcached 1.6.10 or later, whose meta commands have the syntax this
// package writes ("VERSION 1.6.18"; a suffix after the patch number is
// ignored).
func finalMeta(line string) bool {
	v, ok := strings.CutPrefix(line, "VERSION ")
	if !ok {
		return false
	}
	var n [3]int
	for i, part := range strings.SplitN(v, ".", 3) {
		digits := len(part) - len(strings.TrimLeft(part, "0123456789"))
		num, err := strconv.Atoi(part[:digits])
		if err != nil {
			return false
		}
		n[i] = num
	}
	return n[0] > 1 || n[0] == 1 && (n[1] > 6 || n[1] == 6 && n[2] >= 10)
}

// Meta reports whether the server has meta commands (and so tells TTLs).
func (c *Conn) Meta() bool { return c.meta }

// Broken returns the failure that made c unusable, or nil.
func (c *Conn) Broken() error { return c.err }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Get returns the items that the server holds of keys (misses are left
// out), reading at most MaxBatch keys per round trip. On error it returns
// the items read so far.
func (c *Conn) Get(ctx context.Context, keys []string) ([]Item, error) {
	if err := legalKeys(keys, self); err != nil {
		return nil, err
	}
	var items []Item
	for start := 0; start < len(keys); start += MaxBatch {
		chunk := keys[start:min(start+MaxBatch, len(keys))]
		err := c.exchange(ctx, func() {
			if c.meta {
				for i, k := range chunk {
					c.w.WriteString("mg ")
					c.w.WriteString(k)
					c.w.WriteString(" v f t c q O")
					c.w.WriteString(strconv.Itoa(i))
					c.w.WriteString("\r\n")
				}
				c.w.WriteString("mn\r\n")
				return
			}
			c.w.WriteString("gets")
			for _, k := range chunk {
				c.w.WriteString(" ")
				c.w.WriteString(k)
			}
			c.w.WriteString("\r\n")
		}, func() error {
			for {
				line, err := c.line()
				if err != nil || line == "MN" || line == "END" {
					return err
				}
				it, err := c.item(line, chunk)
				if err != nil {
					return err
				}
				items = append(items, it)
			}
		})
		if err != nil {
			return items, err
		}
	}
	return items, nil
}

// item reads the item whose header line is line: "VA <size> <flags>*" (mg,
// the key keys[i] for the opaque token O<i>) or "VALUE <key> <flags> <size>
// <cas>" (gets).
func (c *Conn) item(line string, keys []string) (Item, error) {
	f := strings.Fields(line)
	var it Item
	var size int
	var err error
	switch {
	case c.meta && len(f) >= 2 && f[0] == "VA":
		size, err = strconv.Atoi(f[1])
		for _, tok := range f[2:] {
			if err != nil {
				break
			}
			var n uint64
			switch tok[0] {
			case 'O':
				var i int
				if i, err = strconv.Atoi(tok[1:]); err == nil && i >= 0 && i < len(keys) {
					it.Key = keys[i]
				}
			case 'f':
				n, err = strconv.ParseUint(tok[1:], 10, 32)
				it.Flags = uint32(n)
			case 'c':
				it.CAS, err = strconv.ParseUint(tok[1:], 10, 64)
			case 't':
				var ttl int64
				ttl, err = strconv.ParseInt(tok[1:], 10, 32)
				it.TTL = int32(ttl)
			}
		}
	case !c.meta && len(f) == 5 && f[0] == "VALUE":
		it.Key = f[1]
		var n uint64
		n, err = strconv.ParseUint(f[2], 10, 32)
		it.Flags = uint32(n)
		if err == nil {
			size, err = strconv.Atoi(f[3])
		}
		if err == nil {
			it.CAS, err = strconv.ParseUint(f[4], 10, 64)
		}
	default:
		return it, &ServerError{Line: line}
	}
	if err != nil || it.Key == "" || size < 0 {
		return it, fmt.Errorf("mcmeta: malformed item header %q", line)
	}
	buf := make([]byte, size+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return it, err
	}
	if string(buf[size:]) != "\r\n" {
		return it, fmt.Errorf("mcmeta: item %q does not end with CRLF", it.Key)
	}
	it.Value = buf[:size]
	return it, nil
}

// Set stores items (Key, Value, Flags, Expiration), unconditionally, in
// round trips of at most MaxBatch items and about MaxBatchBytes of values
// (one item per round trip without meta commands). It returns the outcome
// of each item answered, in order: nil once stored (then, with meta
// commands, items[i].CAS is its token), or the server's refusal (a
// *ServerError; errors.Is(err, ErrTooLarge) for an item too large). If the
// connection fails, fewer outcomes than items come back, with the error.
func (c *Conn) Set(ctx context.Context, items []Item) ([]error, error) {
	if err := legalKeys(items, func(it Item) string { return it.Key }); err != nil {
		return nil, err
	}
	outcomes := make([]error, 0, len(items))
	for start := 0; start < len(items); {
		end, bytes := start, 0
		for end < len(items) && end-start < c.batch() && bytes < MaxBatchBytes {
			bytes += len(items[end].Value)
			end++
		}
		chunk := items[start:end]
		err := c.exchange(ctx, func() {
			for _, it := range chunk {
				if c.meta {
					fmt.Fprintf(c.w, "ms %s %d F%d T%d c\r\n", it.Key, len(it.Value), it.Flags, it.Expiration)
				} else {
					fmt.Fprintf(c.w, "set %s %d %d %d\r\n", it.Key, it.Flags, it.Expiration, len(it.Value))
				}
				c.w.Write(it.Value)
				c.w.WriteString("\r\n")
			}
		}, func() error {
			for i := range chunk {
				line, err := c.line()
				switch {
				case err != nil:
					return err
				case line == "STORED" || line == "HD" || strings.HasPrefix(line, "HD "):
					chunk[i].CAS = replyCAS(line)
					outcomes = append(outcomes, nil)
				case strings.HasPrefix(line, "SERVER_ERROR") || line == "NS" || line == "NOT_STORED":
					// The server read and dropped the value: the
					// connection is still in step.
					outcomes = append(outcomes, &ServerError{Line: line})
				default:
					return &ServerError{Line: line}
				}
			}
			return nil
		})
		if err != nil {
			return outcomes, err
		}
		start = end
	}
	return outcomes, nil
}

// replyCAS returns the token of an "HD c<cas>" reply, 0 if it has none.
func replyCAS(line string) uint64 {
	for _, tok := range strings.Fields(line)[1:] {
		if tok[0] == 'c' {
			n, _ := strconv.ParseUint(tok[1:], 10, 64)
			return n
		}
	}
	return 0
}

// Delete deletes keys, in round trips of at most MaxBatch keys (one key per
// round trip without meta commands), and returns how many the server held.
func (c *Conn) Delete(ctx context.Context, keys []string) (int, error) {
	if err := legalKeys(keys, self); err != nil {
		return 0, err
	}
	deleted := 0
	for start := 0; start < len(keys); start += c.batch() {
		chunk := keys[start:min(start+c.batch(), len(keys))]
		err := c.exchange(ctx, func() {
			for _, k := range chunk {
				if c.meta {
					c.w.WriteString("md ")
				} else {
					c.w.WriteString("delete ")
				}
				c.w.WriteString(k)
				c.w.WriteString("\r\n")
			}
		}, func() error {
			for range chunk {
				switch line, err := c.line(); {
				case err != nil:
					return err
				case line == "HD" || line == "DELETED":
					deleted++
				case line != "NF" && line != "NOT_FOUND":
					return &ServerError{Line: line}
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// batch is the number of stores or deletes sent per round trip.
func (c *Conn) batch() int {
	if c.meta {
		return MaxBatch
	}
	return 1
}

// exchange is one round trip: send writes the requests (buffered), which
// are flushed; recv reads the replies. Its deadline is the earlier of the
// timeout from now and ctx's deadline, and it is cut short if ctx is
// canceled. Any error breaks c (the refusal of one item is an outcome,
// not an error), as does a cancel that came after the replies.
func (c *Conn) exchange(ctx context.Context, send func(), recv func() error) error {
	if c.err != nil {
		return c.err
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	err := c.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	if err == nil {
		send()
		err = c.w.Flush()
	}
	if err == nil {
		err = recv()
	}
	stopped := stop()
	switch {
	case err != nil:
		c.err = err
	case !stopped:
		// ctx ended once the replies were in: they stand, but the
		// connection's deadline may now be in the past.
		c.err = ctx.Err()
	}
	return err
}

// line reads one reply line, without its CRLF.
func (c *Conn) line() (string, error) {
	b, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("mcmeta: reply line too long")
		}
		return "", err
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return "", fmt.Errorf("mcmeta: reply line %q does not end with CRLF", b)
	}
	return string(b[:len(b)-2]), nil
}
