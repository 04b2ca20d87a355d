package pubsub

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// maxQueued bounds the replies queued for a receiver that does not read
// (32 MiB, Redis's hard client-output-buffer-limit for pub/sub clients).
// Past it the fan-in closes the connection, as Redis closes a slow
// subscriber's: go-redis then dials again and resubscribes.
const maxQueued = 32 << 20

// errOverflow closes a connection whose receiver fell maxQueued behind.
var errOverflow = errors.New("shardedcache: pub/sub receiver too slow: more than 32 MiB of messages queued")

// conn is go-redis's end of a fan-in: what go-redis writes is read by the
// fan-in's serve loop (an io.Pipe: writes never wait long, serve only
// parses and queues); what go-redis reads comes from the fan-in's queue of
// replies, which never blocks the fan-in.
type conn struct {
	cmds    *io.PipeWriter
	replies *replies
	ended   <-chan struct{} // closed once the fan-in has closed its shard connections
}

func (c *conn) Read(p []byte) (int, error)  { return c.replies.read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.cmds.Write(p) }

// Close ends the fan-in and returns once it has closed its connections to
// the shards (their servers drop its subscriptions as they see them close).
func (c *conn) Close() error {
	c.replies.close()
	err := c.cmds.Close()
	<-c.ended
	return err
}

func (c *conn) LocalAddr() net.Addr  { return addr{} }
func (c *conn) RemoteAddr() net.Addr { return addr{} }

func (c *conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *conn) SetReadDeadline(t time.Time) error {
	c.replies.setDeadline(t)
	return nil
}

// SetWriteDeadline does nothing: a write waits only for serve to parse it.
func (c *conn) SetWriteDeadline(time.Time) error { return nil }

type addr struct{}

func (addr) Network() string { return "shardedcache" }
func (addr) String() string  { return "pubsub-fan-in" }

// replies is the queue from the fan-in to go-redis: RESP bytes, and shard
// failures, each read as the error of a Read call.
type replies struct {
	mu       sync.Mutex
	items    []reply
	queued   int           // bytes in items
	wake     chan struct{} // closed and replaced when items, deadline or closed change
	deadline time.Time
	closed   bool
	// reads is how many consecutive Read calls a failure is returned to:
	// 2 when the receiver peeks before each reply (see errorReads).
	reads int
}

// reply is RESP bytes, or a failure returned by reads Read calls.
type reply struct {
	b     []byte
	err   error
	reads int
}

func newReplies() *replies { return &replies{wake: make(chan struct{}), reads: 1} }

// signal wakes a waiting reader; q.mu is held.
func (q *replies) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// push queues RESP bytes. It reports false, queueing nothing, once the
// receiver has fallen maxQueued behind or the queue is closed.
func (q *replies) push(b []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.queued+len(b) > maxQueued {
		return false
	}
	q.items = append(q.items, reply{b: b})
	q.queued += len(b)
	q.signal()
	return true
}

// pushErr queues a shard's failure.
func (q *replies) pushErr(err *shardedclient.ShardError) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, reply{err: shardFailure{err}, reads: q.reads})
	q.signal()
}

// errorReads sets how many consecutive Read calls return each failure: go-redis
// (v9, RESP3 requested) peeks at the next reply for push notifications
// before reading it, and that peek's Read would swallow the error.
func (q *replies) errorReads(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reads = n
}

func (q *replies) read(p []byte) (int, error) {
	for {
		q.mu.Lock()
		n, ok, err := q.take(p)
		deadline, wake := q.deadline, q.wake
		q.mu.Unlock()
		if ok {
			return n, err
		}
		if !wait(deadline, wake) {
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// take reads the head of the queue into p; ok is false when there is
// nothing to read. q.mu is held.
func (q *replies) take(p []byte) (n int, ok bool, err error) {
	switch {
	case q.closed:
		return 0, true, io.EOF
	case len(q.items) == 0:
		return 0, false, nil
	}
	head := &q.items[0]
	if head.err != nil {
		if head.reads--; head.reads <= 0 {
			q.items = q.items[1:]
		}
		return 0, true, head.err
	}
	n = copy(p, head.b)
	head.b = head.b[n:]
	q.queued -= n
	if len(head.b) == 0 {
		q.items = q.items[1:]
	}
	return n, true, nil
}

// wait waits until wake is closed or the deadline (none when zero) passes,
// and reports false once it has passed.
func wait(deadline time.Time, wake <-chan struct{}) bool {
	if deadline.IsZero() {
		<-wake
		return true
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return true
	case <-t.C:
		return false
	}
}

func (q *replies) setDeadline(t time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deadline = t
	q.signal()
}

func (q *replies) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed, q.items, q.queued = true, nil, 0
		q.signal()
	}
}

// shardFailure carries a *shardedclient.ShardError to the receiver as the
// error of Receive: errors.As finds the ShardError. Its RedisError method
// makes it a reply error for go-redis (redis.Error), which keeps the
// connection instead of dialing a new fan-in.
type shardFailure struct{ err *shardedclient.ShardError }

func (e shardFailure) Error() string { return e.err.Error() }
func (e shardFailure) Unwrap() error { return e.err }
func (shardFailure) RedisError()     {}
