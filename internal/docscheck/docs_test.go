package docscheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, two levels above this package.
const root = "../.."

// block is a fenced code block of a markdown file: its language, the
// 1-based line of its opening fence, and its lines.
type block struct {
	lang  string
	line  int
	lines []string
}

// blocks returns the fenced code blocks of the markdown file at path.
func blocks(t *testing.T, path string) []block {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if cur != nil {
		t.Errorf("%s:%d: a code block is not closed", path, cur.line)
	}
	return out
}

// markdown returns README.md and every docs/*.md, relative to root.
func markdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// normalize drops blank lines and reduces every run of white space to one
// space, without any at either end: indentation and gofmt's alignment of
// comments differ between a snippet and the function it is taken from.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// occurs reports whether the normalized lines of snippet occur, one after
// the other, among the normalized lines of src. An empty snippet does not.
func occurs(snippet, src []string) bool {
	s, c := normalize(snippet), normalize(src)
	if len(s) == 0 {
		return false
	}
	for i := 0; i+len(s) <= len(c); i++ {
		if slices.Equal(c[i:i+len(s)], s) {
			return true
		}
	}
	return false
}

// exampleSources returns the lines of every file a snippet may be taken
// from, by path: example*_test.go anywhere, and the Go files of examples/.
func exampleSources(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		example := strings.HasPrefix(d.Name(), "example") && strings.HasSuffix(d.Name(), "_test.go")
		program := strings.HasPrefix(rel, "examples"+string(filepath.Separator)) && strings.HasSuffix(rel, ".go")
		if example || program {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = strings.Split(string(data), "\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoBlocksAreExamples: every ```go block of README.md and docs/*.md
// is a copy of lines of an Example function or an examples/ program, so it
// compiles (and, where the Example has an Output, runs in go test).
func TestGoBlocksAreExamples(t *testing.T) {
	sources := exampleSources(t)
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range sources {
			if !yield(p) {
				return
			}
		}
	})
	n := 0
	for _, md := range markdown(t) {
		for _, b := range blocks(t, md) {
			if b.lang != "go" {
				continue
			}
			n++
			if !slices.ContainsFunc(paths, func(p string) bool { return occurs(b.lines, sources[p]) }) {
				t.Errorf("%s:%d: this go block occurs in no example file (example*_test.go, examples/): copy it from one, or add one", md, b.line)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d go blocks in README.md and docs/*.md; the check found fewer than the 10 it was written for", n)
	}
}

// TestOccurs: the matching rule, on fixed cases.
func TestOccurs(t *testing.T) {
	src := []string{
		"func Example() {",
		"\tx := 1 // one",
		"",
		"\ty := x +  2",
		"\tfmt.Println(x, y)",
		"}",
	}
	for _, c := range []struct {
		snippet []string
		want    bool
	}{
		{[]string{"x := 1 // one", "y := x + 2"}, true},             // indentation, a blank line and spacing differ
		{[]string{"x := 1    // one", "", "y := x + 2", ""}, true},  // comment alignment
		{[]string{"fmt.Println(x, y)", "}"}, true},                  // the function's end
		{[]string{"x := 1 // one", "fmt.Println(x, y)"}, false},     // not one after the other
		{[]string{"x := 2 // one"}, false},                          // changed
		{[]string{"y := x + 2", "x := 1 // one"}, false},            // out of order
		{[]string{"", "  "}, false},                                 // nothing to find
		{[]string{"func Example() {", "x := 1 // one", "y"}, false}, // a partial line
		{[]string{"}", "func Example2() {"}, false},                 // past the end
	} {
		if got := occurs(c.snippet, src); got != c.want {
			t.Errorf("occurs(%q) = %v, want %v", c.snippet, got, c.want)
		}
	}
}

// anchors returns the anchors GitHub gives the headings of the markdown
// file at path: lower case, punctuation dropped, spaces as hyphens.
func anchors(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, b := range headings(t, path) {
		var a strings.Builder
		for _, r := range strings.ToLower(b) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		out = append(out, a.String())
	}
	return out
}

// headings returns the text of the headings of the markdown file at path,
// outside code blocks.
func headings(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	code := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if h := strings.TrimLeft(line, "#"); !code && h != line && strings.HasPrefix(h, " ") {
			out = append(out, strings.TrimSpace(h))
		}
	}
	return out
}

// TestAnchors: GitHub's anchors, on fixed headings.
func TestAnchors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.md")
	text := "# A guide\n\n## Server-side moves (`MIGRATE`)\n\n```sh\n# not a heading\n```\n### The protocol's keys, on servers\n#hashtag\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"a-guide", "server-side-moves-migrate", "the-protocols-keys-on-servers"}
	if got := anchors(t, path); !slices.Equal(got, want) {
		t.Errorf("anchors = %q, want %q", got, want)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// TestLinks: every relative link of README.md and docs/*.md leads to a file
// or directory of the repository.
func TestLinks(t *testing.T) {
	n := 0
	for _, md := range markdown(t) {
		f, err := os.Open(md)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			for _, m := range linkRE.FindAllStringSubmatch(sc.Text(), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				path := filepath.Join(filepath.Dir(md), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", md, line, target, err)
					continue
				}
				if anchor := strings.TrimPrefix(m[2], "#"); anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), anchor) {
					t.Errorf("%s:%d: link to %s%s: no such heading there", md, line, target, m[2])
				}
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Error("no relative link found in README.md and docs/*.md")
	}
}

// TestReadmeCommandsInCI: the commands of the README's first code block
// are those CI runs: each `go run` of an example is in .ci/run, and the
// `go test` command's arguments are all on the go test line of .ci/run for
// the same packages (CI adds -count=1).
func TestReadmeCommandsInCI(t *testing.T) {
	bs := blocks(t, filepath.Join(root, "README.md"))
	if len(bs) == 0 || bs[0].lang != "sh" {
		t.Fatal("README.md does not start with a sh block of commands")
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ciLines := strings.Split(string(ci), "\n")
	var runs, tests int
	for _, l := range bs[0].lines {
		cmd := strings.Fields(strings.SplitN(l, "#", 2)[0])
		switch {
		case len(cmd) >= 3 && cmd[0] == "go" && cmd[1] == "run":
			runs++
			if !slices.ContainsFunc(ciLines, func(c string) bool {
				return slices.Equal(strings.Fields(c)[:min(3, len(strings.Fields(c)))], cmd[:3])
			}) {
				t.Errorf("README runs %q; .ci/run does not", strings.Join(cmd, " "))
			}
		case len(cmd) >= 2 && cmd[0] == "go" && cmd[1] == "test":
			tests++
			pkgs := cmd[len(cmd)-1]
			i := slices.IndexFunc(ciLines, func(c string) bool {
				f := strings.Fields(c)
				return len(f) > 2 && f[0] == "go" && f[1] == "test" && f[len(f)-1] == pkgs
			})
			if i < 0 {
				t.Errorf("README tests %q; .ci/run has no go test of %s", strings.Join(cmd, " "), pkgs)
				continue
			}
			for _, arg := range cmd {
				if !slices.Contains(strings.Fields(ciLines[i]), arg) {
					t.Errorf("README's %q has %s; .ci/run's %q does not", strings.Join(cmd, " "), arg, ciLines[i])
				}
			}
		}
	}
	if runs != 1 || tests != 1 {
		t.Errorf("README's first block has %d go run and %d go test commands, want 1 and 1", runs, tests)
	}
}
