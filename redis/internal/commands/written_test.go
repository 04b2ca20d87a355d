package commands

import (
	"slices"
	"testing"
)

// TestWrittenKeys: the keys a command may write, by the flags of Redis's key
// specifications, the modules' registrations and SORT's STORE; Writes says
// whether there can be any.
func TestWrittenKeys(t *testing.T) {
	cases := []struct {
		args []any
		want []string
	}{
		{[]any{"get", "k"}, nil},
		{[]any{"mget", "a", "b"}, nil},
		{[]any{"exists", "a"}, nil},
		{[]any{"set", "k", "v", "get"}, []string{"k"}},
		{[]any{"mset", "a", 1, "b", 2}, []string{"a", "b"}},
		{[]any{"del", "a", "b"}, []string{"a", "b"}},
		{[]any{"getdel", "k"}, []string{"k"}},
		{[]any{"getex", "k", "ex", 1}, []string{"k"}},
		{[]any{"expire", "k", 1}, []string{"k"}},
		{[]any{"copy", "src", "dst"}, []string{"dst"}},
		{[]any{"rename", "a", "b"}, []string{"a", "b"}},
		{[]any{"lmove", "a", "b", "left", "right"}, []string{"a", "b"}},
		{[]any{"zunionstore", "dst", 2, "s1", "s2"}, []string{"dst"}},
		{[]any{"georadius", "g", 1, 2, 3, "km", "store", "dst"}, []string{"dst"}},
		{[]any{"sort", "k", "limit", 0, 10, "store", "dst"}, []string{"dst"}},
		{[]any{"sort", "k"}, nil},
		{[]any{"sort", "k", "by", "w_*", "get", "o_*", "store", "dst"}, []string{"dst"}}, // patterns: over one server only
		{[]any{"sort_ro", "k"}, nil},
		{[]any{"eval", "return 1", 2, "x", "y", "arg"}, []string{"x", "y"}},
		{[]any{"eval_ro", "return 1", 1, "x"}, nil},
		{[]any{"fcall", "f", 1, "x"}, []string{"x"}},
		{[]any{"fcall_ro", "f", 1, "x"}, nil},
		{[]any{"restore", "k", 0, "payload"}, []string{"k"}},
		{[]any{"migrate", "h", 6379, "", 0, 5000, "keys", "a", "b"}, []string{"", "a", "b"}},
		{[]any{"xreadgroup", "group", "g", "c", "streams", "s", ">"}, nil}, // Redis flags the stream RO
		{[]any{"publish", "chan", "msg"}, nil},
		{[]any{"json.set", "k", "$", "1"}, []string{"k"}},
		{[]any{"json.get", "k", "$"}, nil},
		{[]any{"json.mget", "a", "b", "$"}, nil},
		{[]any{"ts.add", "k", 1, 2}, []string{"k"}},
		{[]any{"ts.range", "k", 0, 1}, nil},
		{[]any{"vadd", "k", "values", 1, 1, "e"}, []string{"k"}},
		{[]any{"vsim", "k", "ele", "e"}, nil},
		{[]any{"hsetex", "h", "fields", 1, "f", "v"}, []string{"h"}},
		{[]any{"hget", "h", "f"}, nil},
	}
	for _, c := range cases {
		info, err := Lookup(c.args)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var got []string
		if err := info.WrittenKeys(c.args, func(pos int) {
			k, _ := Arg(c.args[pos])
			got = append(got, k)
		}); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("WrittenKeys %v = %q, want %q", c.args, got, c.want)
		}
		if len(got) > 0 && !info.Writes() {
			t.Errorf("%v: Writes() false, with written keys %q", c.args, got)
		}
	}
	for _, name := range []string{"get", "mget", "hgetall", "smembers", "zrange", "json.get", "ts.get", "sort_ro", "eval_ro", "xrange"} {
		if info, err := Lookup([]any{name}); err == nil && info.Writes() {
			t.Errorf("%s: Writes() true for a read-only command", name)
		}
	}
}
