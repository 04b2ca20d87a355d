package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/redis/internal/commands"
)

// A sharded SCAN cursor holds, from its low bits up, the shard's index
// (scanShardBits), a check of the shard list it was made on (scanListBits:
// see listCheck), and the shard's own cursor (the 40 bits left: a server's
// cursor is below its table size, 2^33 for 4 billion keys).
const (
	scanShardBits = 12
	scanListBits  = 12
	scanInnerAt   = scanShardBits + scanListBits
)

// ErrScanListChanged is returned by SCAN (and ScanIterator) for a cursor
// made on another shard list: SetShards, BeginResharding or EndResharding
// has run since the scan began, so the shard index in the cursor may name
// another shard now, and the scan would skip or repeat shards. Start again
// from cursor 0.
var ErrScanListChanged = errors.New("shardedcache: scan: the shard list changed since this scan began; start again from cursor 0")

// listCheck is the check of v's shard list that v's cursors hold: 1 to
// 2^scanListBits-1, from the list's fingerprint (never 0, so that only
// cursor 0 starts a scan). A cursor of another list passes it by chance
// once in 4,095.
func listCheck(v *view) uint64 {
	return v.Fingerprint()%(1<<scanListBits-1) + 1
}

// walkOf builds the plan of SCAN or RANDOMKEY (route's walk), through the
// typed method (*redis.ScanCmd, *redis.StringCmd), Do (*redis.Cmd) or a
// pipeline alike: see scanOf and randomKeyOf.
func walkOf(ctx context.Context, v *view, cmd goredis.Cmder) (plan, error) {
	switch cmd.(type) {
	case *goredis.ScanCmd, *goredis.StringCmd, *goredis.Cmd:
	default:
		return nil, &UnsupportedError{Command: cmd.Name(), Reason: fmt.Sprintf("its reply cannot be stored in a %T", cmd)}
	}
	if cmd.Name() == "scan" {
		return scanOf(ctx, v, cmd)
	}
	return randomKeyOf(ctx, v, cmd), nil
}

// scanPlan is one SCAN call: page runs on shard, or is nil when every shard
// from the cursor's on is ejected (the scan has ended).
type scanPlan struct {
	v        *view
	cmd      goredis.Cmder
	shard, n int    // the shard of the page, of n
	check    uint64 // the list's check (listCheck)
	page     *goredis.ScanCmd
}

// serves reports whether shard i of v serves key, so that a key it holds
// is one of the keyspace: it owns key, or, in a resharding window, owned it
// before and holds it until it moves. A copy any other shard holds is
// stale (left by AbandonResharding, or written on a stand-in while the
// owner was ejected): no command reads it, and KEYS and SCAN leave it out.
// So do they the resharding protocol's own keys (isInternal).
// (KEYS asks the shards in parallel, not atomically: in a window, a key
// another call moves while KEYS runs may be in neither reply, or in both.)
func serves(v *view, i int, key string) bool {
	if isInternal(key) {
		return false
	}
	if oneServer(v) {
		return true
	}
	from, to, _ := v.Moved(key)
	return i == to || i == from
}

// scanOf plans SCAN over every shard in turn. The sharded cursor holds the
// shard's index in its low 12 bits, a check of the shard list above them,
// and that shard's own cursor above that, so cursor 0 starts at shard 0, a
// shard's last page leads to the next shard with cursor 0, and the last
// shard's last page returns 0. Each shard keeps Redis's SCAN guarantees, so
// a loop until cursor 0 (or ScanIterator) sees every key that exists, on
// its shard, throughout the scan; ejected shards are skipped, and so are
// stale copies (see serves): a page may hold fewer keys. A cursor made
// before the shard list changed is refused with ErrScanListChanged, since
// its shard index may name another shard now. Through Do, the reply is one
// server's: the next cursor, in decimal, and the page of keys.
func scanOf(ctx context.Context, v *view, cmd goredis.Cmder) (*scanPlan, error) {
	args := slices.Clone(cmd.Args())
	s, _ := commands.Arg(args[1])
	cursor, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("shardedcache: scan: cursor %q is not a number", s)
	}
	n := v.Len()
	if n > 1<<scanShardBits {
		return nil, fmt.Errorf("shardedcache: scan: %d shards; a sharded SCAN cursor holds at most %d", n, 1<<scanShardBits)
	}
	p := &scanPlan{v: v, cmd: cmd, shard: int(cursor & (1<<scanShardBits - 1)), n: n, check: listCheck(v)}
	args[1] = cursor >> scanInnerAt
	if cursor != 0 && cursor>>scanShardBits&(1<<scanListBits-1) != p.check {
		return nil, ErrScanListChanged
	}
	if p.shard >= n {
		return nil, fmt.Errorf("shardedcache: scan: cursor %d names shard %d of %d", cursor, p.shard, n)
	}
	for v.Ejected(p.shard) { // its keys are served by the others: skip it
		if p.shard++; p.shard == n {
			return p, nil
		}
		args[1] = uint64(0)
	}
	p.page = goredis.NewScanCmd(ctx, nil, args...)
	return p, nil
}

func (p *scanPlan) counts(counts []int) []int {
	if p.page != nil {
		counts[p.shard]++
	}
	return counts
}

func (p *scanPlan) addTo(groups [][]goredis.Cmder) {
	if p.page != nil {
		groups[p.shard] = append(groups[p.shard], p.page)
	}
}

// merge gives the command the shard's page and the sharded cursor.
func (p *scanPlan) merge() error {
	if p.page == nil {
		return setScan(p.cmd, nil, 0)
	}
	if err := p.page.Err(); err != nil {
		p.cmd.SetErr(err)
		return err
	}
	keys, next := p.page.Val()
	keys = slices.DeleteFunc(keys, func(k string) bool { return !serves(p.v, p.shard, k) })
	switch {
	case next == 0 && p.shard+1 < p.n:
		next = p.check<<scanShardBits | uint64(p.shard+1)
	case next == 0:
	case next > math.MaxUint64>>scanInnerAt:
		err := fmt.Errorf("shardedcache: scan: shard %d returned cursor %d, too large to combine with a shard index", p.shard, next)
		p.cmd.SetErr(err)
		return err
	default:
		next = next<<scanInnerAt | p.check<<scanShardBits | uint64(p.shard)
	}
	return setScan(p.cmd, keys, next)
}

// setScan stores a page of SCAN in cmd: a *redis.ScanCmd's keys and cursor,
// or a *redis.Cmd's reply as one server's reads (the cursor in decimal and
// the keys, in an array).
func setScan(cmd goredis.Cmder, keys []string, cursor uint64) error {
	switch cmd := cmd.(type) {
	case *goredis.ScanCmd:
		cmd.SetVal(keys, cursor)
	case *goredis.Cmd:
		page := make([]any, len(keys))
		for i, k := range keys {
			page[i] = k
		}
		cmd.SetVal([]any{strconv.FormatUint(cursor, 10), page})
	}
	return nil
}

// randomPlan is one RANDOMKEY call, run as one big Redis would: every live
// shard reports its DBSIZE and a random key, and a shard is drawn with
// probability in proportion to its DBSIZE, so every key is equally likely.
// Its reply is redis.Nil when every shard is empty.
type randomPlan struct {
	cmd   goredis.Cmder
	sizes []*goredis.IntCmd
	keys  []*goredis.StringCmd
}

func randomKeyOf(ctx context.Context, v *view, cmd goredis.Cmder) *randomPlan {
	n := v.Len()
	p := &randomPlan{cmd: cmd, sizes: make([]*goredis.IntCmd, n), keys: make([]*goredis.StringCmd, n)}
	for i := range n {
		p.sizes[i] = goredis.NewIntCmd(ctx, "dbsize")
		p.keys[i] = goredis.NewStringCmd(ctx, "randomkey")
		if v.Ejected(i) { // owns no key: counts as empty
			p.sizes[i].SetVal(0)
			p.keys[i].SetErr(goredis.Nil)
		}
	}
	return p
}

func (p *randomPlan) counts(counts []int) []int {
	for i := range counts {
		if p.keys[i].Err() == nil { // not ejected
			counts[i] += 2
		}
	}
	return counts
}

func (p *randomPlan) addTo(groups [][]goredis.Cmder) {
	for i := range groups {
		if p.keys[i].Err() == nil { // not ejected
			groups[i] = append(groups[i], p.sizes[i], p.keys[i])
		}
	}
}

func (p *randomPlan) merge() error {
	key, err := p.draw()
	if err != nil {
		p.cmd.SetErr(err)
		return err
	}
	switch cmd := p.cmd.(type) {
	case *goredis.StringCmd:
		cmd.SetVal(key)
	case *goredis.Cmd:
		cmd.SetVal(key)
	}
	return nil
}

func (p *randomPlan) draw() (string, error) {
	var total int64
	for i := range p.sizes {
		if err := p.sizes[i].Err(); err != nil {
			return "", err
		}
		if err := p.keys[i].Err(); err != nil && err != goredis.Nil {
			return "", err
		}
		total += p.sizes[i].Val()
	}
	if total == 0 {
		return "", goredis.Nil
	}
	pick := rand.Int64N(total)
	for i := range p.sizes {
		if pick -= p.sizes[i].Val(); pick < 0 && p.keys[i].Err() == nil {
			return p.keys[i].Val(), nil
		}
	}
	// The drawn shard emptied between DBSIZE and RANDOMKEY: take any key.
	for i := range p.keys {
		if p.keys[i].Err() == nil {
			return p.keys[i].Val(), nil
		}
	}
	return "", goredis.Nil
}
