package integration_test

// The differential test: one seeded script of commands runs on a single
// server (a plain *goredis.Client) and on a ShardedClient over four servers;
// every reply and, every 500 commands, the whole keyspace must agree, and
// every key must be on the server the ring names.
//
//	go test -race -run Differential ./integration_test -seed 42
//	DIFF_SEED=42 go test -run Differential ./integration_test
//
// Here the servers are miniredis; realredis_test.go runs the same script on
// redis-server processes.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

var (
	seedFlag = flag.Int64("seed", 0, "seed of the differential tests' script (default: $DIFF_SEED, else time-based)")
	cmdsFlag = flag.Int("diff.cmds", 10000, "commands in the differential tests' script")
)

// clockSeed is the seed when neither -seed nor DIFF_SEED gives one: the
// same for every differential test of the process.
var clockSeed = time.Now().UnixNano()

// diffSeed is the script's seed: -seed, else $DIFF_SEED, else the clock.
func diffSeed(t *testing.T) int64 {
	t.Helper()
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("DIFF_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("DIFF_SEED=%q: %v", s, err)
		}
		return n
	}
	return clockSeed
}

// diffVariants: the ring with plain Jedis placement, and with key tags
// (the "{t}:..." keys share a shard); commands one at a time, or pipelined.
var diffVariants = []struct {
	name     string
	p        ring.Preset
	pipeline bool
	ap       bool // autopipelined: every command through go-redis's engine (see withAP)
}{
	{"plain", nil, false, false},
	{"keytags", ring.Jedis{KeyTags: true}, false, false},
	// The same script in pipelines: the sharded client splits each one by
	// shard and runs the parts in parallel; every reply must still equal
	// the single server's.
	{"keytags_pipelined", ring.Jedis{KeyTags: true}, true, false},
	// Both again, autopipelined.
	{"keytags_autopipelined", ring.Jedis{KeyTags: true}, false, true},
	{"keytags_pipelined_autopipelined", ring.Jedis{KeyTags: true}, true, true},
}

// diffEnv is what the differential test runs on.
type diffEnv struct {
	seed     int64
	real     bool // real redis-server: add the commands miniredis lacks
	pipeline bool // run the script in pipelines of up to 40 commands
	single   *goredis.Client
	sharded  *shardedredis.ShardedClient
	// holders returns the shards whose server holds key, asked directly.
	holders func(key string) []int
}

func TestDifferentialMiniredis(t *testing.T) {
	seed := diffSeed(t)
	t.Logf("seed=%d (rerun with -seed %d or DIFF_SEED=%d)", seed, seed, seed)
	for _, v := range diffVariants {
		t.Run(v.name, func(t *testing.T) {
			single := miniredis.RunT(t)
			sc := goredis.NewClient(&goredis.Options{Addr: single.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = sc.Close() })
			servers, sharded := startShardsAP(t, 4, v.p, v.ap)
			runDifferential(t, diffEnv{
				seed: seed, pipeline: v.pipeline, single: sc, sharded: sharded,
				holders: func(key string) []int { return holders(servers, key) },
			})
		})
	}
}

// diffStats counts what the script did.
type diffStats struct {
	total, compared, cross int
	values, nils, errs     int            // replies of the compared commands
	names                  map[string]int // every command name run, with its count
	crossNames             map[string]int
	errNames               map[string]int // commands that returned an error reply
}

// runDifferential runs the script of e.seed on both clients and compares.
func runDifferential(t *testing.T, e diffEnv) {
	start := time.Now()
	ops := script(e.seed, *cmdsFlag, e.real)
	st := diffStats{names: map[string]int{}, crossNames: map[string]int{}, errNames: map[string]int{}}
	var recent []string // the last commands, for failure messages
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed=%d command #%d: %s\nlast commands:\n  %s", e.seed, i, fmt.Sprintf(format, args...), strings.Join(recent, "\n  "))
	}
	batches := rand.New(rand.NewPCG(uint64(e.seed), 0xba7c4))
	for i := 0; i < len(ops); {
		// The next batch: one command, or in pipeline mode up to 40, cut
		// before a command that must run alone and after one with a
		// follow-up.
		n, batch := 1, []int{}
		if e.pipeline {
			n = 1 + batches.IntN(40)
		}
		for j := i; j < len(ops) && len(batch) < n; j++ {
			if ops[j].solo && len(batch) > 0 {
				break
			}
			batch = append(batch, j)
			if ops[j].solo || ops[j].after != nil {
				break
			}
		}
		i = batch[len(batch)-1] + 1

		gots := runBatch(e.sharded, ops, batch, e.pipeline)
		var sent []int // the commands of batch that the sharded client ran
		for k, j := range batch {
			o, got := ops[j], gots[k]
			if len(got.Args()) == 0 {
				fail(j, "go-redis built no command: %v", got.Err())
			}
			name, line := cmdName(got), cmdString(got)
			recent = append(recent, fmt.Sprintf("#%d %s", j, line))
			if len(recent) > 8 {
				recent = recent[1:]
			}
			st.total++
			st.names[name]++
			shards := shardsOf(e.sharded, o.keys)
			err := got.Err()
			if errors.Is(err, shardedredis.ErrCrossShard) {
				if multiShard[name] {
					fail(j, "%s: %v, but %s is split across shards", line, err, name)
				}
				if len(shards) < 2 {
					fail(j, "%s: %v, but its keys %q are all on shard %v", line, err, o.keys, shards)
				}
				st.cross++
				st.crossNames[name]++
				continue // not sent anywhere: the single server skips it too
			}
			if len(shards) > 1 && !multiShard[name] {
				fail(j, "%s: keys %q are on shards %v, yet the sharded client ran it (err=%v) instead of ErrCrossShard", line, o.keys, shards, err)
			}
			if errors.Is(err, shardedredis.ErrUnsupported) {
				fail(j, "%s: sharded client refused it: %v", line, err)
			}
			sent = append(sent, k)
		}
		wants := runBatch(e.single, ops, pickIdx(batch, sent), e.pipeline)
		if o := ops[batch[len(batch)-1]]; o.after != nil {
			o.after(e.sharded)
			o.after(e.single)
		}
		for n, k := range sent {
			j, o, got, want := batch[k], ops[batch[k]], gots[k], wants[n]
			name, line := cmdName(got), cmdString(got)
			if ws, gs, same := compareReplies(o, want, got); !same {
				var keys strings.Builder
				for _, key := range o.keys {
					fmt.Fprintf(&keys, "\n  key %q now: single server %s, sharded %s", key, render(dumpKey(e.single, key)), render(dumpKey(e.sharded, key)))
				}
				fail(j, "%s\n  single server: %s\n  sharded:       %s%s", line, ws, gs, keys.String())
			}
			st.compared++
			switch err := want.Err(); {
			case err == nil:
				st.values++
			case err == goredis.Nil:
				st.nils++
			default:
				st.errs++
				st.errNames[name]++
			}
		}
		if i/500 > batch[0]/500 {
			checkState(t, e, fmt.Sprintf("after command #%d", i-1))
		}
	}
	checkState(t, e, "at the end")
	distinct := len(st.names)
	t.Logf("seed=%d: %d commands run (%d compared, %d ErrCrossShard), %d distinct commands, %s",
		e.seed, st.total, st.compared, st.cross, distinct, time.Since(start).Round(time.Millisecond))
	t.Logf("seed=%d: compared replies: %d values, %d nil, %d errors", e.seed, st.values, st.nils, st.errs)
	t.Logf("seed=%d: cross-shard refusals by command: %v", e.seed, st.crossNames)
	if testing.Verbose() {
		t.Logf("seed=%d: commands: %v", e.seed, st.names)
		t.Logf("seed=%d: error replies by command: %v", e.seed, st.errNames)
	}
	compared := 0
	for n, c := range st.names {
		if c > st.crossNames[n] {
			compared++
		}
	}
	if distinct < 100 || compared < 100 {
		t.Errorf("seed=%d: %d distinct commands, %d of them compared; want at least 100", e.seed, distinct, compared)
	}
	if st.total < 10000 && *cmdsFlag >= 10000 {
		t.Errorf("seed=%d: %d commands, want at least 10000", e.seed, st.total)
	}
}

// runBatch runs ops[idx...] on c: one by one, or as one pipeline. A
// command that must run alone (op.solo) is always alone in its batch.
func runBatch(c client, ops []op, idx []int, pipeline bool) []goredis.Cmder {
	out := make([]goredis.Cmder, len(idx))
	if !pipeline || len(idx) == 1 && ops[idx[0]].solo {
		for k, j := range idx {
			out[k] = ops[j].run(c)
		}
		return out
	}
	p := c.Pipeline()
	for k, j := range idx {
		out[k] = ops[j].run(p)
	}
	_, _ = p.Exec(ctx) // each command keeps its own error
	return out
}

func pickIdx(batch, ks []int) []int {
	out := make([]int, len(ks))
	for i, k := range ks {
		out[i] = batch[k]
	}
	return out
}

// shardsOf returns the distinct shards of keys, sorted.
func shardsOf(c *shardedredis.ShardedClient, keys []string) []int {
	var out []int
	for _, k := range keys {
		if s := c.GetShardInfo(k).Index; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// compareReplies reports whether the replies agree, and renders them.
func compareReplies(o op, want, got goredis.Cmder) (w, g string, same bool) {
	we, ge := errText(want.Err()), errText(got.Err())
	if we != ge {
		return "error " + we, "error " + ge, false
	}
	if want.Err() != nil && want.Err() != goredis.Nil {
		return "", "", true
	}
	wv, gv := value(want), value(got)
	if o.norm != nil {
		wv, gv = o.norm(wv), o.norm(gv)
	}
	if o.approx {
		same = closeDurations(wv.(time.Duration), gv.(time.Duration))
	} else {
		same = reflect.DeepEqual(wv, gv)
	}
	return render(wv), render(gv), same
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strconv.Quote(err.Error())
}

// closeDurations: TTLs and expire times agree when both are the same
// marker (-1, -2) or both are set and within two seconds.
func closeDurations(a, b time.Duration) bool {
	if a <= 0 || b <= 0 {
		return a == b
	}
	return (a - b).Abs() <= 2*time.Second
}

func render(v any) string {
	if s, ok := v.(string); ok {
		return "string " + strconv.Quote(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return fmt.Sprintf("%T %s", v, b)
}

// keyDump is everything a key holds, read through one client.
type keyDump struct {
	Type  string
	Value any
	TTL   time.Duration
}

// dumpKey reads key's type, value and TTL; errors are part of the dump.
func dumpKey(c client, key string) keyDump {
	d := keyDump{Type: c.Type(ctx, key).Val()}
	d.TTL = c.PTTL(ctx, key).Val()
	res := func(v any, err error) any {
		if err != nil {
			return "error: " + err.Error()
		}
		return v
	}
	switch d.Type {
	case "string":
		d.Value = res(c.Get(ctx, key).Result())
	case "list":
		d.Value = res(c.LRange(ctx, key, 0, -1).Result())
	case "set":
		m, err := c.SMembers(ctx, key).Result()
		slices.Sort(m)
		d.Value = res(m, err)
	case "hash":
		d.Value = res(c.HGetAll(ctx, key).Result())
	case "zset":
		d.Value = res(c.ZRangeWithScores(ctx, key, 0, -1).Result())
	case "stream":
		entries, err := c.XRange(ctx, key, "-", "+").Result()
		groups, gerr := c.XInfoGroups(ctx, key).Result()
		type group struct {
			Name, LastDelivered string
			Consumers           int64
			Pending             any
		}
		var gs []group
		for _, g := range groups {
			gs = append(gs, group{g.Name, g.LastDeliveredID, g.Consumers, res(c.XPending(ctx, key, g.Name).Result())})
		}
		slices.SortFunc(gs, func(a, b group) int { return strings.Compare(a.Name, b.Name) })
		d.Value = []any{res(entries, err), res(gs, gerr)}
	}
	return d
}

// checkState compares the whole keyspace through both clients, the
// placement of every key on the shards' servers, and DBSIZE.
func checkState(t *testing.T, e diffEnv, when string) {
	t.Helper()
	present := 0
	for _, k := range allKeys {
		want, got := dumpKey(e.single, k), dumpKey(e.sharded, k)
		if want.Type != got.Type || !reflect.DeepEqual(want.Value, got.Value) || !closeDurations(want.TTL, got.TTL) {
			t.Fatalf("seed=%d %s: key %q differs:\n  single server: %s\n  sharded:       %s", e.seed, when, k, render(want), render(got))
		}
		var placed []int
		if want.Type != "none" {
			present++
			placed = []int{e.sharded.GetShardInfo(k).Index}
		}
		if h := e.holders(k); !slices.Equal(h, placed) {
			t.Fatalf("seed=%d %s: key %q (type %s) is on shard servers %v, the ring names %v", e.seed, when, k, want.Type, h, placed)
		}
	}
	ws, werr := e.single.DBSize(ctx).Result()
	gs, gerr := e.sharded.DBSize(ctx).Result()
	if werr != nil || gerr != nil || ws != gs || ws != int64(present) {
		t.Fatalf("seed=%d %s: DBSIZE single=%d (%v) sharded=%d (%v); %d keys of the keyspace exist", e.seed, when, ws, werr, gs, gerr, present)
	}
	wk, _ := e.single.Keys(ctx, "*").Result()
	gk, err := e.sharded.Keys(ctx, "*").Result()
	slices.Sort(wk)
	slices.Sort(gk)
	if err != nil || !slices.Equal(wk, gk) {
		t.Fatalf("seed=%d %s: KEYS * single=%q sharded=%q (%v)", e.seed, when, wk, gk, err)
	}
}

// Raw keyless commands (Do) that the sharded client runs on every shard:
// the merged reply must be the single server's, or the command must be
// refused with ErrUnsupported before any shard sees it, as the typed
// methods are. The random script found the first case (seeds whose raw
// KEYS matches nothing); the others are the same fan-out path with other
// response policies.
func TestDifferentialRawFanOut(t *testing.T) {
	single := miniredis.RunT(t)
	sc := goredis.NewClient(&goredis.Options{Addr: single.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = sc.Close() })
	servers, sharded := startShards(t, 4, nil)
	for _, c := range []client{sc, sharded} {
		if err := c.ScriptLoad(ctx, "return 1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	sent := func() int {
		n := 0
		for _, s := range servers {
			n += s.CommandCount()
		}
		return n
	}
	for _, args := range [][]any{
		{"keys", "nomatch:*"}, // response policy: default (concatenate)
		{"script", "exists", sha("return 1"), sha("not loaded")}, // agg_logical_and
		{"info"}, // special
	} {
		before := sent()
		want, got := sc.Do(ctx, args...), sharded.Do(ctx, args...)
		if errors.Is(got.Err(), shardedredis.ErrUnsupported) {
			if n := sent() - before; n != 0 {
				t.Errorf("%s: refused (%v), but %d commands reached the shards", cmdString(got), got.Err(), n)
			}
			continue
		}
		if ws, gs, same := compareReplies(op{}, want, got); !same {
			t.Errorf("%s: not refused (%d commands reached the shards), and the merged reply differs from one server's:\n  single server: %s\n  sharded:       %s (%#v)",
				cmdString(got), sent()-before, ws, gs, got.Val())
		}
	}
}
