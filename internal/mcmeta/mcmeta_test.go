package mcmeta

import (
	"errors"
	"testing"
	"time"
)

// Expiration gives a moved item the TTL it had: none for -1, the seconds
// themselves up to 30 days, a Unix time beyond (memcached reads a larger
// exptime as one), and 1 for a TTL of 0 rather than 0, which means none.
func TestExpiration(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct{ ttl, want int32 }{
		{-1, 0},
		{0, 1},
		{1, 1},
		{2, 2},
		{maxRelative, maxRelative},
		{maxRelative + 1, 1_800_000_000 + maxRelative + 1},
		{40 * 24 * 3600, 1_800_000_000 + 40*24*3600},
	} {
		if got := Expiration(c.ttl, now); got != c.want {
			t.Errorf("Expiration(%d) = %d, want %d", c.ttl, got, c.want)
		}
	}
}

// Only memcached's refusal of an item as too large is ErrTooLarge.
func TestServerErrorTooLarge(t *testing.T) {
	for line, want := range map[string]bool{
		"SERVER_ERROR object too large for cache":   true,
		"SERVER_ERROR out of memory storing object": false,
		"NS": false,
	} {
		if got := errors.Is(&ServerError{Line: line}, ErrTooLarge); got != want {
			t.Errorf("errors.Is(%q, ErrTooLarge) = %v, want %v", line, got, want)
		}
	}
}
