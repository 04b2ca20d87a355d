package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardedcache/shardedcache/fleet"
)

// Register implements fleet.Store: it grants a lease of ttl rounded up to
// whole seconds (LeaseGrant; etcd may raise it to its minimum, and the
// granted TTL is the one used), puts P/members/<id> = "0" under it, and
// renews it in the background every third of its TTL (LeaseKeepAlive, one
// request at a time, each bounded by a third of the TTL). ValidUntil is the
// start of the last grant or renewal etcd confirmed plus the granted TTL;
// etcd counts the TTL from the moment it handles the request, which is
// later. The lease is lost (Lost closed) when etcd answers that it no
// longer exists, or when renewals keep failing until ValidUntil has
// passed; it is not granted again (register again).
func (s *Store) Register(ctx context.Context, id string, ttl time.Duration) (fleet.MemberLease, error) {
	if err := fleet.CheckMemberID(id); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("etcdstore: register member %q: ttl %v, want > 0", id, ttl)
	}
	key := s.members + id
	start := time.Now()
	grant, err := s.client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcdstore: register %s: grant a lease: %w", key, err)
	}
	if _, err := s.client.Put(ctx, key, "0", clientv3.WithLease(grant.ID)); err != nil {
		_ = revoke(context.WithoutCancel(ctx), s.client, grant.ID, grant.TTL)
		return nil, fmt.Errorf("etcdstore: register %s: %w", key, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	l := &memberLease{client: s.client, key: key, id: grant.ID, ttl: time.Duration(grant.TTL) * time.Second,
		lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	l.valid = start.Add(l.ttl)
	go l.renew(rctx)
	return l, nil
}

// Members implements fleet.Store with one Range of P/members/. A value
// that is not an epoch is an error naming its key.
func (s *Store) Members(ctx context.Context) (map[string]uint64, error) {
	resp, err := s.client.Get(ctx, s.members, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcdstore: list %s: %w", s.members, err)
	}
	out := make(map[string]uint64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		epoch, err := strconv.ParseUint(string(kv.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: %s holds %q, not an epoch", kv.Key, kv.Value)
		}
		out[strings.TrimPrefix(string(kv.Key), s.members)] = epoch
	}
	return out, nil
}

// memberLease is an etcd lease that holds one member's key.
type memberLease struct {
	client *clientv3.Client
	key    string
	id     clientv3.LeaseID
	ttl    time.Duration // as granted

	mu    sync.Mutex
	valid time.Time // zero once lost

	once   sync.Once
	lost   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *memberLease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, l.ttl/3)
		resp, err := l.client.KeepAliveOnce(rctx, l.id)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			l.mu.Lock()
			l.valid = start.Add(time.Duration(resp.TTL) * time.Second)
			l.mu.Unlock()
		case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.lose()
			return
		case !time.Now().Before(l.ValidUntil()):
			l.lose()
			return
		}
	}
}

func (l *memberLease) lose() {
	l.once.Do(func() {
		l.mu.Lock()
		l.valid = time.Time{}
		l.mu.Unlock()
		close(l.lost)
	})
}

// Report implements fleet.MemberLease with one Put of P/members/<id> under
// the lease; etcd refuses it once the lease has expired.
func (l *memberLease) Report(ctx context.Context, epoch uint64) error {
	select {
	case <-l.lost:
		return fmt.Errorf("%w: %s", fleet.ErrLeaseLost, l.key)
	default:
	}
	_, err := l.client.Put(ctx, l.key, strconv.FormatUint(epoch, 10), clientv3.WithLease(l.id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.lose()
		return fmt.Errorf("%w: %s: %v", fleet.ErrLeaseLost, l.key, err)
	}
	if err != nil {
		return fmt.Errorf("etcdstore: report epoch %d in %s: %w", epoch, l.key, err)
	}
	return nil
}

// ValidUntil implements fleet.MemberLease.
func (l *memberLease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.valid
}

// Lost implements fleet.MemberLease.
func (l *memberLease) Lost() <-chan struct{} { return l.lost }

// Close implements fleet.MemberLease: it stops the renewals and revokes
// the lease (LeaseRevoke deletes the member's key), giving up when ctx
// ends or after the TTL (the lease has expired by then).
func (l *memberLease) Close(ctx context.Context) error {
	l.cancel()
	<-l.done
	l.lose()
	if err := revoke(ctx, l.client, l.id, int64(l.ttl/time.Second)); err != nil {
		return fmt.Errorf("etcdstore: close %s: revoke lease %x: %w (the key goes when the lease expires, within %v)", l.key, l.id, err, l.ttl)
	}
	return nil
}
