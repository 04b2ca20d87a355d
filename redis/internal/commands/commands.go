// Package commands reads Redis's own command table (COMMAND INFO of Redis
// 7.0.15, embedded as JSON) and finds the keys of any command from its key
// specifications, as Redis Cluster clients do.
package commands

import (
	_ "embed"
	"encoding"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

//go:embed redis-7.0.15-command.json
var table []byte

// RequestPolicy says where a command runs in a sharded deployment (the
// request_policy tip of Redis 7).
type RequestPolicy uint8

const (
	// ByKeys: the shard of its keys (keys on one shard), or nowhere for a
	// keyless command (no tip).
	ByKeys RequestPolicy = iota
	// MultiShard: the keys may be split by shard and the replies merged.
	MultiShard
	// AllShards: every shard, replies merged by the response policy.
	AllShards
	// Special: needs a command-specific treatment (SCAN).
	Special
)

// ResponsePolicy says how the replies of several shards combine (the
// response_policy tip of Redis 7). Default means: for a multi-shard command,
// replies put back in key order; otherwise arrays concatenated.
type ResponsePolicy uint8

const (
	Default ResponsePolicy = iota
	AllSucceeded
	OneSucceeded
	AggSum
	AggMin
	AggMax
	AggLogicalAnd
	AggLogicalOr
	SpecialResponse
)

// Info is one command or subcommand.
type Info struct {
	Name     string // lower case; subcommands as "container|sub"
	Arity    int    // Redis arity: >0 exact argument count, <0 minimum count
	Flags    map[string]bool
	Request  RequestPolicy
	Response ResponsePolicy
	specs    []keySpec
	subs     map[string]*Info
	// sortLike: keys are found by sortKeys, not by specs (see overrides.go).
	sortLike bool
}

// keySpec is one Redis 7 key specification.
type keySpec struct {
	// begin_search
	index   int    // "index": position of the first key (negative: from the end)
	keyword string // "keyword": the key follows this keyword (upper case)
	from    int    // "keyword": where to start looking (negative: backwards from the end)
	unknown bool   // begin_search or find_keys "unknown"
	// find_keys
	keynum                  bool // "keynum" instead of "range"
	lastKey, keyStep, limit int  // "range"
	keyNumIdx, firstKey     int  // "keynum" (relative to the begin position)
	notKey                  bool // flags contain "not_key" (a channel, say)
}

var byName = map[string]*Info{}

// The tips of COMMAND INFO that set the policies. all_nodes (CONFIG SET,
// SCRIPT LOAD, ...) is all_shards here: every node of ours is a shard.
var (
	requestTips = map[string]RequestPolicy{
		"request_policy:multi_shard": MultiShard,
		"request_policy:all_shards":  AllShards,
		"request_policy:all_nodes":   AllShards,
		"request_policy:special":     Special,
	}
	responseTips = map[string]ResponsePolicy{
		"response_policy:all_succeeded":   AllSucceeded,
		"response_policy:one_succeeded":   OneSucceeded,
		"response_policy:agg_sum":         AggSum,
		"response_policy:agg_min":         AggMin,
		"response_policy:agg_max":         AggMax,
		"response_policy:agg_logical_and": AggLogicalAnd,
		"response_policy:agg_logical_or":  AggLogicalOr,
		"response_policy:special":         SpecialResponse,
	}
)

func init() {
	var raw []json.RawMessage
	if err := json.Unmarshal(table, &raw); err != nil {
		panic("commands: embedded table: " + err.Error())
	}
	for _, r := range raw {
		info, err := parse(r)
		if err != nil {
			panic("commands: embedded table: " + err.Error())
		}
		byName[info.Name] = info
	}
	applyOverrides()
}

func parse(r json.RawMessage) (*Info, error) {
	var fields []json.RawMessage
	if err := json.Unmarshal(r, &fields); err != nil || len(fields) < 10 {
		return nil, fmt.Errorf("bad entry %s", r)
	}
	var (
		info  Info
		flags []string
		tips  []string
		specs []struct {
			Flags       []string `json:"flags"`
			BeginSearch struct {
				Type string `json:"type"`
				Spec struct {
					Index     int    `json:"index"`
					Keyword   string `json:"keyword"`
					StartFrom int    `json:"startfrom"`
				} `json:"spec"`
			} `json:"begin_search"`
			FindKeys struct {
				Type string `json:"type"`
				Spec struct {
					LastKey   int `json:"lastkey"`
					KeyStep   int `json:"keystep"`
					Limit     int `json:"limit"`
					KeyNumIdx int `json:"keynumidx"`
					FirstKey  int `json:"firstkey"`
				} `json:"spec"`
			} `json:"find_keys"`
		}
		subs []json.RawMessage
	)
	for i, dst := range []any{&info.Name, &info.Arity, &flags, nil, nil, nil, nil, &tips, &specs, &subs} {
		if dst == nil {
			continue
		}
		if err := json.Unmarshal(fields[i], dst); err != nil {
			return nil, fmt.Errorf("entry %s field %d: %v", fields[0], i, err)
		}
	}
	info.Name = strings.ToLower(info.Name)
	info.Flags = map[string]bool{}
	for _, f := range flags {
		info.Flags[f] = true
	}
	for _, t := range tips {
		if p, ok := requestTips[t]; ok {
			info.Request = p
		}
		if p, ok := responseTips[t]; ok {
			info.Response = p
		}
	}
	for _, s := range specs {
		ks := keySpec{
			index: s.BeginSearch.Spec.Index, keyword: strings.ToUpper(s.BeginSearch.Spec.Keyword), from: s.BeginSearch.Spec.StartFrom,
			unknown: s.BeginSearch.Type == "unknown" || s.FindKeys.Type == "unknown",
			keynum:  s.FindKeys.Type == "keynum",
			lastKey: s.FindKeys.Spec.LastKey, keyStep: s.FindKeys.Spec.KeyStep, limit: s.FindKeys.Spec.Limit,
			keyNumIdx: s.FindKeys.Spec.KeyNumIdx, firstKey: s.FindKeys.Spec.FirstKey,
		}
		for _, f := range s.Flags {
			ks.notKey = ks.notKey || f == "not_key"
		}
		info.specs = append(info.specs, ks)
	}
	for _, sr := range subs {
		sub, err := parse(sr)
		if err != nil {
			return nil, err
		}
		if info.subs == nil {
			info.subs = map[string]*Info{}
		}
		// "object|encoding" -> key "encoding"
		info.subs[sub.Name[strings.IndexByte(sub.Name, '|')+1:]] = sub
	}
	return &info, nil
}

// Lookup returns the command that args (name first, then arguments) invoke,
// descending into subcommands (OBJECT ENCODING, XGROUP CREATE, ...). It
// fails for an unknown command or subcommand.
func Lookup(args []any) (*Info, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	name, ok := Arg(args[0])
	if !ok {
		return nil, fmt.Errorf("command name %v is not a string", args[0])
	}
	info := byName[lower(name)]
	if info == nil {
		return nil, fmt.Errorf("unknown command %q", name)
	}
	if info.subs != nil {
		if len(args) < 2 {
			return nil, fmt.Errorf("command %q needs a subcommand", name)
		}
		sub, _ := Arg(args[1])
		s := info.subs[lower(sub)]
		if s == nil {
			return nil, fmt.Errorf("unknown subcommand %q of %q", sub, name)
		}
		info = s
	}
	return info, nil
}

// lower returns s in lower case, without allocating when it already is.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// Arg returns the bytes, as a string, that go-redis's protocol writer sends
// for a command argument (proto.Writer.WriteArg of go-redis v9): strings and
// byte slices as they are, integers in decimal, floats as
// strconv.FormatFloat(float64(v), 'f', -1, 64), bools as 1 or 0, time.Time
// in RFC 3339 with nanoseconds, time.Duration as nanoseconds, nil as "", and
// encoding.BinaryMarshaler and net.IP by their bytes. ok is false for a type
// the writer does not send (pointers other than *string, structs, ...).
func Arg(a any) (s string, ok bool) {
	switch v := a.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	case *string:
		if v == nil {
			return "", true
		}
		return *v, true
	case []byte:
		return string(v), true
	case int:
		return strconv.FormatInt(int64(v), 10), true
	case int8:
		return strconv.FormatInt(int64(v), 10), true
	case int16:
		return strconv.FormatInt(int64(v), 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint8:
		return strconv.FormatUint(uint64(v), 10), true
	case uint16:
		return strconv.FormatUint(uint64(v), 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case uintptr:
		return strconv.FormatUint(uint64(v), 10), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 64), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		if v {
			return "1", true
		}
		return "0", true
	case time.Time:
		return v.Format(time.RFC3339Nano), true
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10), true
	case net.IP:
		return string(v), true
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		return string(b), err == nil
	}
	return "", false
}

// KeyPositions calls f with the position in args of each key of the
// command, in order, as Redis's key specifications define them. Arguments
// flagged not_key (channels) are keys for routing purposes. It fails when a
// key specification is "unknown" (the caller must know the command) or when
// args are too short for the specification.
func (c *Info) KeyPositions(args []any, f func(pos int)) error {
	if c.Arity > 0 && len(args) != c.Arity || c.Arity < 0 && len(args) < -c.Arity {
		return fmt.Errorf("wrong number of arguments for %q: %d", c.Name, len(args)-1)
	}
	if c.sortLike {
		return sortKeys(c, args, f)
	}
	for _, s := range c.specs {
		if s.unknown {
			return fmt.Errorf("%q: keys cannot be found from its arguments alone", c.Name)
		}
		begin, ok := s.begin(args)
		if !ok {
			continue // optional keyword absent
		}
		first, last, step, err := s.find(args, begin)
		if err != nil {
			return fmt.Errorf("%q: %v", c.Name, err)
		}
		for p := first; p <= last; p += step {
			f(p)
		}
	}
	return nil
}

// begin returns where the keys of spec s start in args.
func (s *keySpec) begin(args []any) (int, bool) {
	if s.keyword == "" {
		i := s.index
		if i < 0 {
			i += len(args)
		}
		return i, i > 0 && i < len(args)
	}
	start, end, dir := s.from, len(args), 1
	if s.from < 0 {
		start, end, dir = len(args)+s.from, 0, -1
	}
	for i := start; i != end && i > 0 && i < len(args); i += dir {
		if a, ok := Arg(args[i]); ok && strings.EqualFold(a, s.keyword) {
			return i + 1, i+1 < len(args)
		}
	}
	return 0, false
}

// find returns the first and last key positions and the step of spec s
// whose keys begin at position begin.
func (s *keySpec) find(args []any, begin int) (first, last, step int, err error) {
	if s.keynum {
		idx := begin + s.keyNumIdx
		if idx >= len(args) {
			return 0, 0, 0, fmt.Errorf("no numkeys argument at %d", idx)
		}
		a, _ := Arg(args[idx])
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return 0, 0, 0, fmt.Errorf("numkeys %v is not a count", args[idx])
		}
		first = begin + s.firstKey
		step = max(s.keyStep, 1)
		if n == 0 {
			return first, first - 1, step, nil
		}
		if n > len(args) || first+(n-1)*step >= len(args) {
			return 0, 0, 0, fmt.Errorf("numkeys %d exceeds the arguments", n)
		}
		last = first + (n-1)*step
		return first, last, step, nil
	}
	step = max(s.keyStep, 1)
	first = begin
	switch {
	case s.lastKey >= 0:
		last = begin + s.lastKey
	case s.limit <= 1:
		last = len(args) + s.lastKey
	default:
		// lastkey -1 with a limit: keys take 1/limit of the remaining args.
		last = begin + (len(args)-begin)/s.limit - 1
	}
	if last >= len(args) {
		return 0, 0, 0, fmt.Errorf("key position %d beyond the arguments", last)
	}
	return first, last, step, nil
}
