package pubsub

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

func TestReadCommand(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n$0\r\n\r\n*1\r\n$4\r\nping\r\n"))
	got, err := readCommand(r)
	if err != nil || !slices.Equal(got, []string{"subscribe", "a", ""}) {
		t.Fatalf("readCommand = %q, %v", got, err)
	}
	if got, err := readCommand(r); err != nil || !slices.Equal(got, []string{"ping"}) {
		t.Fatalf("second readCommand = %q, %v", got, err)
	}
	for _, bad := range []string{"+OK\r\n", "*0\r\n", "*1\r\n$-1\r\n", "*1\r\n$2\r\nabc\r\n", "*x\r\n", "*1\r\n$99999999999\r\n"} {
		if _, err := readCommand(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readCommand(%q) accepted it", bad)
		}
	}
}

func TestAppend(t *testing.T) {
	got := string(appendArray(nil, "message", "ch", 3, int64(-1), nil))
	want := "*5\r\n$7\r\nmessage\r\n$2\r\nch\r\n:3\r\n:-1\r\n$-1\r\n"
	if got != want {
		t.Fatalf("appendArray = %q, want %q", got, want)
	}
	if got := string(appendError(nil, "ERR a\r\nb")); got != "-ERR a  b\r\n" {
		t.Fatalf("appendError = %q", got)
	}
}

func FuzzReadCommand(f *testing.F) {
	f.Add("*2\r\n$3\r\nget\r\n$1\r\nk\r\n")
	f.Add("*1\r\n$-5\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		args, err := readCommand(bufio.NewReader(strings.NewReader(in)))
		if err != nil {
			return
		}
		// What was read writes back to bytes that read as the same command.
		items := make([]any, len(args))
		for i, a := range args {
			items[i] = a
		}
		out := string(appendArray(nil, items...))
		again, err := readCommand(bufio.NewReader(strings.NewReader(out)))
		if err != nil || !slices.Equal(again, args) {
			t.Fatalf("read %q from %q; written as %q it reads as %q, %v", args, in, out, again, err)
		}
	})
}
