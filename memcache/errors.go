package memcache

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardedcache/shardedcache/shardedclient"
)

// MultiShardError is the failure of a call that reached several shards
// (GetMulti, DeleteAll, FlushAll, Ping) on one or more of them; its Op is
// the method. See shardedclient.MultiShardError.
type MultiShardError = shardedclient.MultiShardError

// multiErr collects the errors of a fan-out over shards (errs[j] is
// shards[j]'s) into a *MultiShardError, or nil when none failed.
func multiErr(v *view, op string, shards []int, errs []error) error {
	return v.MultiErr(op, shards, errs)
}

// finish reports a gomemcache call on shard i to the shard's health and
// returns its error as the caller sees it (shardcore.View.Finish): a
// failure as a *shardedclient.ShardError naming the shard, memcached's
// answers unchanged. gomemcache takes no context, so the call's outcome is
// its own, whatever the caller's context did meanwhile: it is judged under
// context.Background().
func finish(v *view, i int, err error) error { return v.Finish(context.Background(), i, err) }

// classify tells what err, the error of a gomemcache call on a shard, says
// about the shard (the memcache backend's Health.Classify): Failed for a
// failure to reach the server or to keep talking to it (refused or reset
// connection, timeout, end of stream, no server); Answered for success and
// for every answer of the server: ErrCacheMiss, ErrNotStored,
// ErrCASConflict, a CLIENT_ERROR or SERVER_ERROR reply, a reply gomemcache
// did not expect.
func classify(err error) shardedclient.Class {
	switch err {
	case nil, memcache.ErrCacheMiss, memcache.ErrNotStored, memcache.ErrCASConflict, memcache.ErrMalformedKey:
		return shardedclient.Answered
	}
	var netErr net.Error
	var connectTimeout *memcache.ConnectTimeoutError
	if errors.As(err, &netErr) || errors.As(err, &connectTimeout) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, memcache.ErrNoServers) {
		return shardedclient.Failed
	}
	return shardedclient.Answered
}
