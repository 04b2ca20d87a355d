package ring

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// KeyTag returns the part of key that Jedis hashes when key tags are on: the
// first match of the Java regular expression \{(.+?)\} (group 1), or key
// itself and false when there is none. The tag is at least one character
// long, ends at the first '}' after that character, and holds no line
// terminator (\n, \r, U+0085, U+2028, U+2029), which Java's '.' never
// matches. Bytes that are not valid UTF-8 count as ordinary characters.
// KeyTag allocates nothing: the tag is a substring of key.
func KeyTag(key string) (string, bool) {
	from := 0
	for {
		open := strings.IndexByte(key[from:], '{')
		if open < 0 {
			return key, false
		}
		start := from + open + 1
		end, stop := tagEnd(key, start)
		if end >= 0 {
			return key[start:end], true
		}
		if stop < 0 {
			// The rest of the key has no '}' at all: no later '{' can match.
			return key, false
		}
		// Every '{' before the line terminator at stop fails for the same
		// reason, and the terminator itself cannot start a tag.
		from = stop
	}
}

// tagEnd matches .+?\} at key[start:]. It returns the index of the closing
// '}' (end), or -1 and, when a line terminator ended the attempt, the index
// just past it (stop); stop is -1 when the key ran out.
func tagEnd(key string, start int) (end, stop int) {
	i := start
	first := true
	for i < len(key) {
		r, size := utf8.DecodeRuneInString(key[i:])
		if isLineTerminator(r) {
			return -1, i + size
		}
		if r == '}' && !first {
			return i, -1
		}
		first = false
		i += size
	}
	return -1, -1
}

// isLineTerminator reports whether Java's regex '.' (without DOTALL) refuses r.
func isLineTerminator(r rune) bool {
	switch r {
	case '\n', '\r', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// ClusterHashTag returns the part of key that Redis Cluster hashes into its
// slot: the text between the first '{' and the first '}' after it, when
// that text is not empty; else the whole key. It is twemproxy's hash_tag
// "{}" and go-redis Ring's rule too, and differs from Jedis's KeyTag at the
// edges ("{}}x": none here, "}" for Jedis). It allocates nothing.
func ClusterHashTag(key string) string { return clusterTags.pair(key) }

var clusterTags = tagRule{kind: tagPair, open: '{', close: '}'}

// tagRule is which part of a key a ring hashes.
type tagRule struct {
	kind        tagKind
	open, close byte   // tagPair
	spec        string // tagPair, as given to Twemproxy.HashTag
}

type tagKind uint8

const (
	tagNone  tagKind = iota
	tagJedis         // KeyTag: Jedis's \{(.+?)\}
	tagPair          // twemproxy's hash_tag, Redis Cluster's for "{}"
)

// pair returns the text between the first t.open and the first t.close
// after it, or key itself when either is missing or the text is empty
// (twemproxy's hash_tag, and Redis Cluster's hash tag for "{}").
func (t tagRule) pair(key string) string {
	if i := strings.IndexByte(key, t.open); i >= 0 {
		if j := strings.IndexByte(key[i+1:], t.close); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// pairBytes is pair for a byte slice.
func (t tagRule) pairBytes(key []byte) []byte {
	if i := bytes.IndexByte(key, t.open); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], t.close); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
