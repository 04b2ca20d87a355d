package mcmeta

import (
	"context"
	"sync"
)

// Pool keeps idle connections to one server for reuse.
type Pool struct {
	dial    func(ctx context.Context) (*Conn, error)
	maxIdle int

	mu     sync.Mutex
	idle   []*Conn
	closed bool
}

// NewPool returns a Pool that opens connections with dial and keeps up to
// maxIdle of them idle (at least 1).
func NewPool(maxIdle int, dial func(ctx context.Context) (*Conn, error)) *Pool {
	return &Pool{dial: dial, maxIdle: max(maxIdle, 1)}
}

// Get returns an idle connection, or a new one.
func (p *Pool) Get(ctx context.Context) (*Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return p.dial(ctx)
}

// Put gives c back: kept idle when it is not broken, the pool is open and
// has room, else closed.
func (p *Pool) Put(c *Conn) {
	p.mu.Lock()
	if c.err == nil && !p.closed && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Close closes the idle connections; those in use are closed when put back.
// Get still works (it dials).
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}
