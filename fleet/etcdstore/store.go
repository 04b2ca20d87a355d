// Package etcdstore is the fleet.Store of a fleet of processes that share
// an etcd cluster (etcd API v3, servers 3.4 and later; the client is
// go.etcd.io/etcd/client/v3).
//
// It is a Go module of its own so that an application that keeps its
// fleet in a fleet.MemStore, or does not reshard, pulls in neither etcd's
// client nor gRPC.
//
// A Store with prefix P uses two places in etcd's key space:
//
//	P/state     the fleet.State as JSON; its ModRevision is the fleet.Revision
//	P/driver/   the driver lock: one key per holder or waiter, each attached
//	            to the lease of its holder (etcd's concurrency.Mutex)
//	P/members/  one key per registered member (Store.Register), its value
//	            the epoch it reported, attached to the member's own lease
//
// Revisions are etcd's: the store's cluster-wide revision at the Swap that
// wrote the state, so they grow by more than one when other keys change.
package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shardedcache/shardedcache/fleet"
)

// Store is a fleet.Store kept in etcd. It is safe for concurrent use; it
// does not own its client (closing the client ends the Store's watches and
// leases).
type Store struct {
	client  *clientv3.Client
	key     string // prefix + "/state"
	lock    string // prefix + "/driver"
	members string // prefix + "/members/"
}

var _ fleet.Store = (*Store)(nil)

// New returns a Store under prefix (for example "/shardedcache/sessions":
// one prefix per fleet) that calls etcd through client. prefix must be
// non-empty and must not end with "/"; client must not be nil. New makes no
// call to etcd.
func New(client *clientv3.Client, prefix string) (*Store, error) {
	switch {
	case client == nil:
		return nil, errors.New("etcdstore: nil etcd client")
	case prefix == "":
		return nil, errors.New(`etcdstore: empty prefix (want one such as "/shardedcache/myfleet")`)
	case prefix[len(prefix)-1] == '/':
		return nil, fmt.Errorf("etcdstore: prefix %q ends with %q (the store appends \"/state\", \"/driver\" and \"/members/\")", prefix, "/")
	}
	return &Store{client: client, key: prefix + "/state", lock: prefix + "/driver", members: prefix + "/members/"}, nil
}

// Load implements fleet.Store with one linearizable Range (Get) of
// P/state. It returns the zero State and Revision 0 when the key does not
// exist, and an error naming the key when etcd fails or the value is not a
// valid State (then wrapping fleet.ErrInvalidState or the JSON error).
func (s *Store) Load(ctx context.Context) (fleet.State, fleet.Revision, error) {
	resp, err := s.client.Get(ctx, s.key)
	if err != nil {
		return fleet.State{}, 0, fmt.Errorf("etcdstore: load %s: %w", s.key, err)
	}
	if len(resp.Kvs) == 0 {
		return fleet.State{}, 0, nil
	}
	kv := resp.Kvs[0]
	st, err := s.decode(kv.Value, kv.ModRevision)
	return st, fleet.Revision(kv.ModRevision), err
}

// Swap implements fleet.Store with one Txn: if P/state's ModRevision is rev
// (for rev 0: if its CreateRevision is 0, the key does not exist) then Put
// next as JSON, else Get the key (only to name its revision in the error).
// It returns the etcd revision of the Put. Errors: next invalid (matching
// fleet.ErrInvalidState; nothing is sent), the revision differs (matching
// fleet.ErrConflict), or etcd's error. An error from etcd (a timeout, ctx
// ending) leaves unknown whether next was stored: Load to find out.
func (s *Store) Swap(ctx context.Context, rev fleet.Revision, next fleet.State) (fleet.Revision, error) {
	if err := next.Validate(); err != nil {
		return 0, err
	}
	value, err := json.Marshal(next)
	if err != nil {
		return 0, fmt.Errorf("etcdstore: encode the state: %w", err)
	}
	cmp := clientv3.Compare(clientv3.ModRevision(s.key), "=", int64(rev))
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(s.key), "=", 0)
	}
	resp, err := s.client.Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(s.key, string(value))).
		Else(clientv3.OpGet(s.key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcdstore: swap %s at revision %d: %w", s.key, rev, err)
	}
	if !resp.Succeeded {
		var stored int64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			stored = kvs[0].ModRevision
		}
		return 0, fmt.Errorf("%w: %s is at revision %d, not %d", fleet.ErrConflict, s.key, stored, rev)
	}
	return fleet.Revision(resp.Header.Revision), nil
}

// Watch implements fleet.Store with one etcd Watch of P/state from revision
// rev+1, made with clientv3.WithRequireLeader (so that a member cut off
// from its cluster's leader ends the watch rather than going quiet). It
// delivers every Put of the key in order, none merged. The watch ends with
// a last Update whose Err names the key when:
//   - etcd has compacted revision rev+1 away (Err matches
//     rpctypes.ErrCompacted: Load, then Watch from the loaded revision);
//   - the member loses its leader, or the watch fails otherwise;
//   - the key is deleted, or holds a value that is not a valid State;
//   - the client is closed;
//   - rev < 0.
//
// It ends without an error when ctx ends. In every case the channel is
// closed and the Store's goroutine for it returns.
func (s *Store) Watch(ctx context.Context, rev fleet.Revision) <-chan fleet.Update {
	out := make(chan fleet.Update, 1)
	if rev < 0 {
		out <- fleet.Update{Err: fmt.Errorf("etcdstore: watch %s from revision %d < 0", s.key, rev)}
		close(out)
		return out
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	events := s.client.Watch(wctx, s.key, clientv3.WithRev(int64(rev)+1))
	go func() {
		defer close(out)
		defer cancel()
		err := s.relay(ctx, events, out)
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- fleet.Update{Err: err}:
		case <-ctx.Done():
		}
	}()
	return out
}

// relay hands the states of events to out until the watch ends, and
// returns why it ended (meaningless when ctx ended).
func (s *Store) relay(ctx context.Context, events clientv3.WatchChan, out chan<- fleet.Update) error {
	for resp := range events {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcdstore: watch %s: %w", s.key, err)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return fmt.Errorf("etcdstore: watch %s: the key was deleted at revision %d", s.key, ev.Kv.ModRevision)
			}
			st, err := s.decode(ev.Kv.Value, ev.Kv.ModRevision)
			if err != nil {
				return err
			}
			select {
			case out <- fleet.Update{State: st, Revision: fleet.Revision(ev.Kv.ModRevision)}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return fmt.Errorf("etcdstore: watch %s: the watch channel closed (etcd client closed)", s.key)
}

// decode parses the value of P/state stored at revision rev.
func (s *Store) decode(value []byte, rev int64) (fleet.State, error) {
	var st fleet.State
	if err := json.Unmarshal(value, &st); err != nil {
		return fleet.State{}, fmt.Errorf("etcdstore: %s at revision %d is not a state: %w", s.key, rev, err)
	}
	if err := st.Validate(); err != nil {
		return fleet.State{}, fmt.Errorf("etcdstore: %s at revision %d: %w", s.key, rev, err)
	}
	return st, nil
}

// Lock implements fleet.Store with etcd's concurrency.Mutex on P/driver/.
// It grants a lease of ttl rounded up to whole seconds (LeaseGrant; the
// server may raise it to its minimum, 1.5 election timeouts), keeps it
// alive from then on in the background (LeaseKeepAlive, every third of the
// TTL, on the client's context, not ctx), puts the holder's key under that
// lease and waits until the keys created before it are deleted (Txn, then
// a Watch per older key). ttl must be > 0.
//
// When ctx ends first, Lock returns ctx.Err(); on any failure it revokes
// the lease it granted, so a waiter that gave up never holds up the next
// one. The returned Lease's Lost is closed when the client stops renewing
// the lease: Unlock, the client closed, or etcd unreachable for the TTL
// (etcd then expires the lease and deletes the key on its side).
func (s *Store) Lock(ctx context.Context, ttl time.Duration) (fleet.Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("etcdstore: lock %s: ttl %v, want > 0", s.lock, ttl)
	}
	seconds := int64((ttl + time.Second - 1) / time.Second)
	grant, err := s.client.Grant(ctx, seconds)
	if err != nil {
		return nil, s.lockError(ctx, err)
	}
	// The session takes the lease granted above with ctx: a session that
	// grants its own lease does it on the client's context, which would
	// make Lock deaf to ctx while etcd does not answer.
	session, err := concurrency.NewSession(s.client, concurrency.WithLease(grant.ID))
	if err != nil {
		revoke(context.WithoutCancel(ctx), s.client, grant.ID, seconds)
		return nil, s.lockError(ctx, err)
	}
	l := &lease{client: s.client, session: session, seconds: seconds, key: s.lock}
	if err := concurrency.NewMutex(session, s.lock).Lock(ctx); err != nil {
		l.Unlock(context.WithoutCancel(ctx))
		return nil, s.lockError(ctx, err)
	}
	return l, nil
}

// lockError is ctx.Err() once ctx ended (as fleet.Store.Lock promises),
// else err named.
func (s *Store) lockError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return fmt.Errorf("etcdstore: lock %s: %w", s.lock, err)
}

// revoke revokes the lease id of the given TTL, giving up after the TTL
// (the lease has expired by then).
func revoke(ctx context.Context, client *clientv3.Client, id clientv3.LeaseID, seconds int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	_, err := client.Revoke(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // expired or revoked already
	}
	return err
}

// lease is a held driver lock: a concurrency.Session whose lease holds
// the lock's key.
type lease struct {
	client  *clientv3.Client
	session *concurrency.Session
	seconds int64  // the lease's TTL
	key     string // the lock's prefix, for errors
}

// Lost implements fleet.Lease: it is the session's Done.
func (l *lease) Lost() <-chan struct{} { return l.session.Done() }

// Unlock implements fleet.Lease: it stops renewing the lease (Lost is closed
// when Unlock returns, whatever the outcome) and revokes it (LeaseRevoke,
// which deletes the lock's key: the next waiter takes the lock at once),
// giving up when ctx ends or after the lease's TTL. Unlock is idempotent.
// An error (etcd did not answer) means the lock stays taken until the
// lease expires, within its TTL.
func (l *lease) Unlock(ctx context.Context) error {
	l.session.Orphan()
	if err := revoke(ctx, l.client, l.session.Lease(), l.seconds); err != nil {
		return fmt.Errorf("etcdstore: unlock %s: revoke lease %x: %w (the lock is free once the lease expires, within %d s)", l.key, l.session.Lease(), err, l.seconds)
	}
	return nil
}
