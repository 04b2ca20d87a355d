// Package methods lists the commands that every method of redis.Cmdable
// (go-redis v9.23) builds, by calling each method on a go-redis client that
// sends nothing. The tests of package redis classify them, and the
// generator of redis's command methods (./gen) documents each method by
// them.
package methods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Recorder is a go-redis client that sends nothing: its hook keeps every
// command that a method builds, in Cmds, and fails it.
type Recorder struct {
	*goredis.Client
	Cmds []goredis.Cmder
}

var errRecorded = errors.New("recorded, not sent")

// NewRecorder returns a Recorder; Close it when done.
func NewRecorder() *Recorder {
	r := &Recorder{Client: goredis.NewClient(&goredis.Options{
		Addr:                     "recorder:0",
		Dialer:                   func(context.Context, string, string) (net.Conn, error) { return nil, errRecorded },
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})}
	r.AddHook(r)
	return r
}

func (r *Recorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *Recorder) ProcessHook(goredis.ProcessHook) goredis.ProcessHook {
	return func(_ context.Context, cmd goredis.Cmder) error {
		r.Cmds = append(r.Cmds, cmd)
		return errRecorded
	}
}

func (r *Recorder) ProcessPipelineHook(goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(_ context.Context, cmds []goredis.Cmder) error {
		r.Cmds = append(r.Cmds, cmds...)
		return errRecorded
	}
}

// Sent is one command that a method of redis.Cmdable built.
type Sent struct {
	Method string
	Cmd    goredis.Cmder
}

// SendsNothing are the methods of redis.Cmdable that send no command of their own: pipelines,
// whose commands are each classified, and the two that go-redis v9.23 has
// not implemented (they panic).
var SendsNothing = map[string]string{
	"Pipeline": "pipeline", "Pipelined": "pipeline", "TxPipeline": "pipeline", "TxPipelined": "pipeline",
	"Quit": "not implemented by go-redis", "JSONDebugMemory": "not implemented by go-redis",
}

// argsFor are the arguments of methods whose generated ones build no valid
// command: even counts, a STORE, a schema, keys in a struct, ...
var argsFor = map[string][]any{
	"ARGrep":                 {"k", "0", "9", &goredis.ARGrepArgs{Predicates: []goredis.ARGrepPredicate{{Type: goredis.ARGrepExact, Value: "v"}}}},
	"ARGrepWithValues":       {"k", "0", "9", &goredis.ARGrepArgs{Predicates: []goredis.ARGrepPredicate{{Type: goredis.ARGrepExact, Value: "v"}}}},
	"BitFieldRO":             {"k", "u8", 0},
	"CMSIncrBy":              {"k", "item", 1},
	"DelExArgs":              {"k", goredis.DelExArgs{Mode: "IFEQ", MatchValue: "v"}},
	"HMSet":                  {"k", "f", "v"},
	"HSet":                   {"k", "f", "v"},
	"HSetEX":                 {"k", "f", "v"},
	"HSetEXWithArgs":         {"k", &goredis.HSetEXOptions{}, "f", "v"},
	"MSet":                   {"k", "v"},
	"MSetNX":                 {"k", "v"},
	"MSetEX":                 {goredis.MSetEXArgs{}, "k", "v"},
	"TopKIncrBy":             {"k", "item", 1},
	"TSMAdd":                 {[][]any{{"k", 1, 2.5}}},
	"XAdd":                   {&goredis.XAddArgs{Stream: "k", Values: []string{"f", "v"}}},
	"XClaim":                 {&goredis.XClaimArgs{Stream: "k", Group: "g", Consumer: "c", Messages: []string{"1-0"}}},
	"XNack":                  {&goredis.XNackArgs{Stream: "k", Group: "g", Mode: goredis.XNackModeSilent, IDs: []string{"1-0"}}},
	"XRead":                  {&goredis.XReadArgs{Streams: []string{"k", "0"}}},
	"XReadGroup":             {&goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"k", ">"}}},
	"XReadStreams":           {"k", "0"},
	"ZAddArgs":               {"k", goredis.ZAddArgs{Members: []goredis.Z{{Score: 1, Member: "m"}}}},
	"ZAddArgsIncr":           {"k", goredis.ZAddArgs{Members: []goredis.Z{{Score: 1, Member: "m"}}}},
	"ZInter":                 {&goredis.ZStore{Keys: []string{"k"}}},
	"ZInterWithScores":       {&goredis.ZStore{Keys: []string{"k"}}},
	"ZInterStore":            {"k", &goredis.ZStore{Keys: []string{"k"}}},
	"ZRangeStore":            {"k", goredis.ZRangeArgs{Key: "k", Start: 0, Stop: 1}},
	"ZUnion":                 {goredis.ZStore{Keys: []string{"k"}}},
	"ZUnionWithScores":       {goredis.ZStore{Keys: []string{"k"}}},
	"ZUnionStore":            {"k", &goredis.ZStore{Keys: []string{"k"}}},
	"GeoRadiusStore":         {"k", 1.0, 2.0, &goredis.GeoRadiusQuery{Radius: 1, Unit: "km", Store: "k"}},
	"GeoRadiusByMemberStore": {"k", "m", &goredis.GeoRadiusQuery{Radius: 1, Unit: "km", Store: "k"}},
	"FTCreate":               {"idx", &goredis.FTCreateOptions{}, &goredis.FieldSchema{FieldName: "f", FieldType: goredis.SearchFieldTypeText}},
	"FTHybrid":               {"idx", "*", "v", &goredis.VectorFP32{Val: []byte{0, 0, 128, 63}}},
	"JSONSetMode":            {"k", "$", "1", "NX"},
	"JSONMSet":               {"k", "$", "1"},
}

// Commands calls every method of redis.Cmdable on a client that sends
// nothing, with arguments made from its signature (one key, "k", for every
// string) or taken from argsFor, and returns the number of methods and the
// commands they built, in method order. It fails for a method (other than
// SendsNothing) that builds no command.
func Commands() (methods int, out []Sent, err error) {
	rec := NewRecorder()
	defer rec.Close()
	ctx := context.Background()
	it := reflect.TypeFor[goredis.Cmdable]()
	for i := range it.NumMethod() {
		m := it.Method(i)
		if _, ok := SendsNothing[m.Name]; ok {
			continue
		}
		in := []reflect.Value{reflect.ValueOf(ctx)}
		if args, ok := argsFor[m.Name]; ok {
			for _, a := range args {
				in = append(in, reflect.ValueOf(a))
			}
		} else {
			for j := 1; j < m.Type.NumIn(); j++ {
				pt := m.Type.In(j)
				if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
					pt = pt.Elem()
				}
				in = append(in, sampleArg(pt))
			}
		}
		rec.Cmds = nil
		reflect.ValueOf(goredis.Cmdable(rec.Client)).MethodByName(m.Name).Call(in)
		if len(rec.Cmds) == 0 {
			err = errors.Join(err, fmt.Errorf("%s sent no command", m.Name))
		}
		for _, cmd := range rec.Cmds {
			out = append(out, Sent{m.Name, cmd})
		}
	}
	return it.NumMethod(), out, err
}

// sampleArg returns a value of type t for a method argument.
func sampleArg(t reflect.Type) reflect.Value {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return reflect.ValueOf(time.Second)
	case reflect.TypeFor[time.Time]():
		return reflect.ValueOf(time.Unix(1700000000, 0))
	case reflect.TypeFor[goredis.Vector]():
		return reflect.ValueOf(goredis.Vector(&goredis.VectorValues{Val: []float64{1}}))
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("k")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Interface:
		v.Set(reflect.ValueOf("v"))
	case reflect.Slice:
		v = reflect.Append(v, sampleArg(t.Elem()))
	case reflect.Map:
		v = reflect.MakeMap(t)
		v.SetMapIndex(sampleArg(t.Key()), sampleArg(t.Elem()))
	case reflect.Pointer:
		v = reflect.New(t.Elem())
	}
	return v
}
