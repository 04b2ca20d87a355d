package commands

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func keysOf(t *testing.T, args ...any) ([]string, error) {
	t.Helper()
	info, err := Lookup(args)
	if err != nil {
		return nil, err
	}
	var keys []string
	err = info.KeyPositions(args, func(p int) {
		s, _ := Arg(args[p])
		keys = append(keys, s)
	})
	return keys, err
}

func TestKeyPositions(t *testing.T) {
	cases := []struct {
		args []any
		want []string
	}{
		{[]any{"get", "k"}, []string{"k"}},
		{[]any{"GET", "k"}, []string{"k"}},
		{[]any{"set", "k", "v", "ex", 10}, []string{"k"}},
		{[]any{"mget", "a", "b", "c"}, []string{"a", "b", "c"}},
		{[]any{"mset", "a", 1, "b", 2}, []string{"a", "b"}},
		{[]any{"del", "a"}, []string{"a"}},
		{[]any{"blpop", "a", "b", 0}, []string{"a", "b"}},
		{[]any{"eval", "return 1", 2, "x", "y", "arg"}, []string{"x", "y"}},
		{[]any{"eval", "return 1", 0}, nil},
		{[]any{"zunionstore", "dst", 2, "s1", "s2", "weights", 1, 2}, []string{"dst", "s1", "s2"}},
		{[]any{"xread", "count", 1, "streams", "s1", "s2", "0", "0"}, []string{"s1", "s2"}},
		{[]any{"object", "encoding", "k"}, []string{"k"}},
		{[]any{"xgroup", "create", "s", "g", "$"}, []string{"s"}},
		{[]any{"georadius", "g", 1, 2, 3, "km", "store", "dst"}, []string{"g", "dst"}},
		{[]any{"sort", "k", "limit", 0, 10, "store", "dst"}, []string{"k", "dst"}},
		{[]any{"sort", "k", "by", "nosort", "get", "#"}, []string{"k"}},
		{[]any{"lmove", "a", "b", "left", "right"}, []string{"a", "b"}},
		{[]any{"rename", "a", "b"}, []string{"a", "b"}},
		{[]any{"ping"}, nil},
		{[]any{"dbsize"}, nil},
		{[]any{[]byte("hget"), []byte("h"), "f"}, []string{"h"}},
		{[]any{"spublish", "chan", "msg"}, []string{"chan"}},
		{[]any{"lmpop", 2, "a", "b", "left"}, []string{"a", "b"}},
		{[]any{"migrate", "h", 6379, "", 0, 5000, "keys", "a", "b"}, []string{"", "a", "b"}},
	}
	for _, c := range cases {
		got, err := keysOf(t, c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: keys %q, want %q", c.args, got, c.want)
		}
	}
}

func TestKeyPositionsErrors(t *testing.T) {
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"nosuchcmd", "k"}, `unknown command "nosuchcmd"`},
		{[]any{"object", "nosuch", "k"}, `unknown subcommand "nosuch" of "object"`},
		{[]any{"object"}, `needs a subcommand`},
		{[]any{"get"}, `wrong number of arguments for "get"`},
		{[]any{"eval", "s", "x"}, `numkeys x is not a count`},
		{[]any{"eval", "s", 5, "a"}, `numkeys 5 exceeds the arguments`},
		{[]any{"sort_ro", "k", "store", "d"}, `does not take STORE`},
		{[]any{}, `empty command`},
		{[]any{3.5}, `unknown command "3.5"`},
		{[]any{struct{}{}}, `is not a string`},
	}
	for _, c := range cases {
		_, err := keysOf(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
	_, err := keysOf(t, "sort", "k", "by", "w_*")
	if !errors.Is(err, ErrPatternKeys) {
		t.Errorf("SORT BY pattern: %v, want ErrPatternKeys", err)
	}
}

func TestPolicies(t *testing.T) {
	cases := []struct {
		name string
		req  RequestPolicy
		resp ResponsePolicy
	}{
		{"mget", MultiShard, Default},
		{"mset", MultiShard, AllSucceeded},
		{"del", MultiShard, AggSum},
		{"msetnx", ByKeys, Default}, // our override
		{"dbsize", AllShards, AggSum},
		{"ping", AllShards, AllSucceeded},
		{"flushdb", AllShards, AllSucceeded},
		{"keys", AllShards, Default},
		{"scan", Special, Default},
		{"get", ByKeys, Default},
	}
	for _, c := range cases {
		info, err := Lookup([]any{c.name, "x"})
		if err != nil {
			t.Fatal(err)
		}
		if info.Request != c.req || info.Response != c.resp {
			t.Errorf("%s: policies %d/%d, want %d/%d", c.name, info.Request, info.Response, c.req, c.resp)
		}
	}
	if n := len(byName); n != 240 {
		t.Errorf("table has %d commands, want 240 (Redis 7.0.15)", n)
	}
}

func TestArgMatchesGoRedisWriter(t *testing.T) {
	s := "ptr"
	cases := []struct {
		in   any
		want string
	}{
		{float32(0.1), "0.10000000149011612"},
		{1e21, "1000000000000000000000"},
		{true, "1"}, {false, "0"}, {nil, ""}, {&s, "ptr"}, {(*string)(nil), ""},
		{uint8(7), "7"}, {int8(-7), "-7"}, {[]byte("b"), "b"},
	}
	for _, c := range cases {
		if got, ok := Arg(c.in); !ok || got != c.want {
			t.Errorf("Arg(%#v) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	if _, ok := Arg(struct{}{}); ok {
		t.Error("Arg accepted a struct")
	}
	if _, err := keysOf(t, "eval", "s", int64(1<<62), "a"); err == nil || !strings.Contains(err.Error(), "exceeds the arguments") {
		t.Errorf("huge numkeys: %v", err)
	}
}
