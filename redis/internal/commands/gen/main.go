// Command gen writes table.go, the command table of package commands, from
// Redis's own command specs and our decisions. Run it from the directory of
// package commands (go generate does):
//
//	go run ./gen [-o table.go]
//
// Its inputs, in that directory:
//
//   - redis-7.0.15-command.json: COMMAND of Redis 7.0.15, every command it
//     has (see README.md);
//   - redis-src-commands.json: the arity, tips and key specifications of the
//     commands added since, copied from src/commands/*.json of redis/redis,
//     each with the commit and file it comes from; and of the Redis 7.0
//     commands whose spec changed since in what the table holds (ZRANK's
//     arity with WITHSCORE, ACL SETUSER tipped all_nodes, ...), which the
//     newer spec updates;
//   - modules.json: the same for the module commands that go-redis sends
//     (RedisJSON, RedisTimeSeries, vector sets), from each module's source;
//   - decisions.go (in this directory): what a sharded client does
//     differently from Redis's tables, and commands that no published spec
//     covers.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strings"

	"github.com/shardedcache/shardedcache/redis/internal/genmain"
)

// commandReply is the capture of COMMAND, Redis 7.0.15's table.
const commandReply = "redis-7.0.15-command.json"

// entry is one command, subcommand or refused family, as table.go writes it.
type entry struct {
	name             string
	arity            int
	request          string // a RequestPolicy constant of package commands
	response         string // a ResponsePolicy constant
	refused, instead string
	oneServer        bool
	source           string
	specs            []spec
	subs             []*entry
	sortLike         bool
}

// spec mirrors package commands' keySpec.
type spec struct {
	index                   int
	keyword                 string
	from                    int
	unknown, keynum         bool
	lastKey, keyStep, limit int
	keyNumIdx, firstKey     int
	notKey                  bool
	write                   bool // see writes
}

// The tips of Redis 7 that set the policies. all_nodes (CONFIG SET, SCRIPT
// LOAD, ...) is AllShards: every node of a sharded client is a shard.
var (
	requestTips = map[string]string{
		"request_policy:multi_shard": "MultiShard",
		"request_policy:all_shards":  "AllShards",
		"request_policy:all_nodes":   "AllShards",
		"request_policy:special":     "Special",
	}
	responseTips = map[string]string{
		"response_policy:all_succeeded":   "AllSucceeded",
		"response_policy:one_succeeded":   "OneSucceeded",
		"response_policy:agg_sum":         "AggSum",
		"response_policy:agg_min":         "AggMin",
		"response_policy:agg_max":         "AggMax",
		"response_policy:agg_logical_and": "AggLogicalAnd",
		"response_policy:agg_logical_or":  "AggLogicalOr",
		"response_policy:special":         "SpecialResponse",
	}
)

func main() { genmain.Run("gen", "table.go", generate) }

// generate reads the inputs and returns table.go.
func generate() ([]byte, error) {
	t := table{}
	if err := t.readCommandReply(commandReply); err != nil {
		return nil, err
	}
	for _, f := range []string{"redis-src-commands.json", "modules.json"} {
		if err := t.readSpecs(f); err != nil {
			return nil, err
		}
	}
	var families []*entry
	for _, d := range decisions {
		for _, name := range d.names {
			e := t.find(name)
			family := strings.HasSuffix(name, ".")
			switch {
			case e != nil && d.define != nil:
				return nil, fmt.Errorf("decision %q defines %q, which a source has", d.label, name)
			case e != nil:
				e.source += "; decisions.go: " + d.label
			case !family && d.define == nil:
				return nil, fmt.Errorf("decision %q: no command %q", d.label, name)
			default:
				e = &entry{name: name, request: "ByKeys", response: "Default", source: "decisions.go: " + d.label}
				if family {
					families = append(families, e)
				} else if err := t.add(e); err != nil {
					return nil, err
				}
				if d.define != nil {
					d.define(e)
				}
			}
			if d.apply != nil {
				d.apply(e)
			}
		}
	}
	return t.write(families)
}

// table holds the commands by name; subcommands are in their container.
type table map[string]*entry

// find returns the command or subcommand ("container|sub") name, or nil.
func (t table) find(name string) *entry {
	container, _, ok := strings.Cut(name, "|")
	e := t[container]
	if !ok || e == nil {
		return e
	}
	for _, s := range e.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// add adds e, a command or a subcommand of a known container; a command the
// table already has is an error (each comes from one source).
func (t table) add(e *entry) error {
	if t.find(e.name) != nil {
		return fmt.Errorf("%s: %q is already in the table", e.source, e.name)
	}
	container, _, ok := strings.Cut(e.name, "|")
	switch {
	case !ok:
		t[e.name] = e
	case t[container] == nil:
		return fmt.Errorf("%s: no container for %q", e.source, e.name)
	default:
		t[container].subs = append(t[container].subs, e)
	}
	return nil
}

// readCommandReply reads the reply of COMMAND: an array of COMMAND INFO
// entries [name, arity, flags, first, last, step, acl, tips, key specs,
// subcommands].
func (t table) readCommandReply(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	for _, r := range raw {
		e, err := parseCommandInfo(r, file)
		if err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
		if err := t.add(e); err != nil {
			return err
		}
	}
	return nil
}

// replySpec is a key specification as COMMAND INFO gives it.
type replySpec struct {
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

func parseCommandInfo(r json.RawMessage, source string) (*entry, error) {
	var fields []json.RawMessage
	if err := json.Unmarshal(r, &fields); err != nil || len(fields) < 10 {
		return nil, fmt.Errorf("bad entry %s", r)
	}
	e := &entry{source: source}
	var (
		tips  []string
		specs []replySpec
		subs  []json.RawMessage
	)
	for i, dst := range []any{&e.name, &e.arity, nil, nil, nil, nil, nil, &tips, &specs, &subs} {
		if dst == nil {
			continue
		}
		if err := json.Unmarshal(fields[i], dst); err != nil {
			return nil, fmt.Errorf("entry %s field %d: %v", fields[0], i, err)
		}
	}
	e.name = strings.ToLower(e.name)
	e.request, e.response = policies(tips)
	for _, s := range specs {
		e.specs = append(e.specs, spec{
			index: s.BeginSearch.Spec.Index, keyword: strings.ToUpper(s.BeginSearch.Spec.Keyword), from: s.BeginSearch.Spec.StartFrom,
			unknown: s.BeginSearch.Type == "unknown" || s.FindKeys.Type == "unknown",
			keynum:  s.FindKeys.Type == "keynum",
			lastKey: s.FindKeys.Spec.LastKey, keyStep: s.FindKeys.Spec.KeyStep, limit: s.FindKeys.Spec.Limit,
			keyNumIdx: s.FindKeys.Spec.KeyNumIdx, firstKey: s.FindKeys.Spec.FirstKey,
			notKey: slices.Contains(s.Flags, "not_key"), write: writes(s.Flags),
		})
	}
	for _, sr := range subs {
		sub, err := parseCommandInfo(sr, source)
		if err != nil {
			return nil, err
		}
		e.subs = append(e.subs, sub)
	}
	return e, nil
}

// policies returns the request and response policies that tips set.
func policies(tips []string) (request, response string) {
	request, response = "ByKeys", "Default"
	for _, tip := range tips {
		tip = strings.ToLower(tip)
		if p, ok := requestTips[tip]; ok {
			request = p
		}
		if p, ok := responseTips[tip]; ok {
			response = p
		}
	}
	return request, response
}

// srcEntry is one command of redis-src-commands.json or modules.json: the
// facts of a src/commands/*.json file of Redis (its key specifications in
// that file's form), or of a module's registration, whose legacy (first
// key, last key, step) is Keys.
type srcEntry struct {
	Name     string    `json:"name"`
	Arity    int       `json:"arity"`
	Tips     []string  `json:"tips"`
	KeySpecs []srcSpec `json:"key_specs"`
	Keys     []int     `json:"keys"`
	Source   string    `json:"source"`
}

type srcSpec struct {
	Flags       []string `json:"flags"`
	BeginSearch struct {
		Index *struct {
			Pos int `json:"pos"`
		} `json:"index"`
		Keyword *struct {
			Keyword   string `json:"keyword"`
			StartFrom int    `json:"startfrom"`
		} `json:"keyword"`
	} `json:"begin_search"`
	FindKeys struct {
		Range *struct {
			LastKey int `json:"lastkey"`
			Step    int `json:"step"`
			Limit   int `json:"limit"`
		} `json:"range"`
		KeyNum *struct {
			KeyNumIdx int `json:"keynumidx"`
			FirstKey  int `json:"firstkey"`
			Step      int `json:"step"`
		} `json:"keynum"`
	} `json:"find_keys"`
}

func (t table) readSpecs(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var entries []srcEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	for _, se := range entries {
		e, err := se.entry()
		if err != nil {
			return fmt.Errorf("%s: %s: %v", file, se.Name, err)
		}
		if old := t.find(e.name); old != nil && old.source == commandReply {
			old.arity, old.request, old.response, old.specs = e.arity, e.request, e.response, e.specs
			old.source += "; updated by " + e.source
			continue
		}
		if err := t.add(e); err != nil {
			return err
		}
	}
	return nil
}

func (se srcEntry) entry() (*entry, error) {
	if se.Source == "" || se.Name != strings.ToLower(se.Name) {
		return nil, errors.New("needs a lower-case name and a source")
	}
	e := &entry{name: se.Name, arity: se.Arity, source: se.Source}
	e.request, e.response = policies(se.Tips)
	if se.Keys != nil {
		if len(se.Keys) != 3 || se.KeySpecs != nil {
			return nil, errors.New("keys is (first, last, step), instead of key_specs")
		}
		e.specs = []spec{legacy(se.Keys[0], se.Keys[1], se.Keys[2])} // a module's: see writes
	}
	for _, s := range se.KeySpecs {
		var k spec
		switch bs := s.BeginSearch; {
		case bs.Index != nil:
			k.index = bs.Index.Pos
		case bs.Keyword != nil:
			k.keyword, k.from = strings.ToUpper(bs.Keyword.Keyword), bs.Keyword.StartFrom
		default:
			k.unknown = true
		}
		switch fk := s.FindKeys; {
		case fk.Range != nil:
			k.lastKey, k.keyStep, k.limit = fk.Range.LastKey, fk.Range.Step, fk.Range.Limit
		case fk.KeyNum != nil:
			k.keynum, k.keyNumIdx, k.firstKey, k.keyStep = true, fk.KeyNum.KeyNumIdx, fk.KeyNum.FirstKey, fk.KeyNum.Step
		default:
			k.unknown = true
		}
		k.notKey = slices.Contains(s.Flags, "not_key")
		k.write = writes(s.Flags)
		e.specs = append(e.specs, k)
	}
	return e, nil
}

// writes reports whether a key specification with flags may change its
// keys: flagged RW, OW or RM (Redis's "read-write", "overwrite", "remove";
// RO is read only), or flagged with none of them, as the legacy key triples
// of module commands are (a module registers "readonly" or "write" for the
// whole command: decisions.go marks the modules' readonly commands) and the
// not_key channels (which name no key, so no cache holds them).
func writes(flags []string) bool {
	for _, f := range flags {
		switch f {
		case "RW", "OW", "RM":
			return true
		case "RO":
			return false
		}
	}
	return !slices.Contains(flags, "not_key")
}

// legacy is the key specification of a legacy (first key, last key, step)
// triple, as Redis derives it for a command without key specifications: the
// keys from first to last (negative: counted from the end) every step.
func legacy(first, last, step int) spec {
	s := spec{index: first, keyStep: step, lastKey: last, write: true}
	if last >= 0 {
		s.lastKey = last - first
	}
	return s
}

// write returns the Go source of table.go.
func (t table) write(families []*entry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./gen; DO NOT EDIT.\n\n" +
		"package commands\n\n" +
		"// table is every command, sorted by name, with the source of its facts.\n" +
		"var table = [...]Info{\n")
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range t {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		writeEntry(&b, t[name])
	}
	b.WriteString("}\n\n// families are the refused command families, by name prefix.\nvar families = [...]Info{\n")
	for _, e := range families {
		writeEntry(&b, e)
	}
	b.WriteString("}\n\n// index returns the position in table of the command name (lower case), or -1.\n" +
		"func index(name string) int {\n\tswitch name {\n")
	for i, name := range names {
		fmt.Fprintf(&b, "case %q:\nreturn %d\n", name, i)
	}
	b.WriteString("}\nreturn -1\n}\n")
	return format.Source(b.Bytes())
}

func writeEntry(b *bytes.Buffer, e *entry) {
	fmt.Fprintf(b, "{Name: %q, Arity: %d, Request: %s, Response: %s, ", e.name, e.arity, e.request, e.response)
	if e.refused != "" {
		fmt.Fprintf(b, "Refused: %q, ", e.refused)
	}
	if e.instead != "" {
		fmt.Fprintf(b, "Instead: %q, ", e.instead)
	}
	if e.oneServer {
		b.WriteString("OneServer: true, ")
	}
	fmt.Fprintf(b, "Source: %q", e.source)
	if e.sortLike {
		b.WriteString(", sortLike: true")
	}
	if len(e.specs) > 0 {
		b.WriteString(", specs: []keySpec{")
		for _, s := range e.specs {
			writeSpec(b, s)
		}
		b.WriteString("}")
	}
	if len(e.subs) > 0 {
		slices.SortFunc(e.subs, func(x, y *entry) int { return strings.Compare(x.name, y.name) })
		b.WriteString(", subs: []Info{\n")
		for _, s := range e.subs {
			writeEntry(b, s)
		}
		b.WriteString("}")
	}
	b.WriteString("},\n")
}

// writeSpec writes s as a keySpec literal with its non-zero fields.
func writeSpec(b *bytes.Buffer, s spec) {
	var fields []string
	add := func(name string, v any, zero bool) {
		if !zero {
			fields = append(fields, fmt.Sprintf("%s: %#v", name, v))
		}
	}
	add("index", s.index, s.index == 0)
	add("keyword", s.keyword, s.keyword == "")
	add("from", s.from, s.from == 0)
	add("unknown", s.unknown, !s.unknown)
	add("keynum", s.keynum, !s.keynum)
	add("lastKey", s.lastKey, s.lastKey == 0)
	add("keyStep", s.keyStep, s.keyStep == 0)
	add("limit", s.limit, s.limit == 0)
	add("keyNumIdx", s.keyNumIdx, s.keyNumIdx == 0)
	add("firstKey", s.firstKey, s.firstKey == 0)
	add("notKey", s.notKey, !s.notKey)
	add("write", s.write, !s.write)
	fmt.Fprintf(b, "{%s},", strings.Join(fields, ", "))
}
