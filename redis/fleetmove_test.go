package redis

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// The restoring script run twice with one token (a copy sent again, the
// first still in the server's buffers; go-redis does not resend it, see
// scriptCmd) restores once: the second copy, run after a write of the key,
// leaves the write. A revoked token restores nothing.
func TestRestoreScriptOncePerToken(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: redisServer(t)})
	defer c.Close()
	if err := c.Set(ctx, "k", "moved", 0).Err(); err != nil {
		t.Fatal(err)
	}
	dump, err := c.Dump(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	restore := func(token string) string {
		t.Helper()
		out, err := c.Eval(ctx, restoreScript, []string{restoredKey, revokedKey, "k"}, token, dump, -1).Text()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := c.Del(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	first := restore("t1")
	if err := c.Set(ctx, "k", "newer", 0).Err(); err != nil {
		t.Fatal(err)
	}
	again := restore("t1")
	got, err := c.Get(ctx, "k").Result()
	if first != "ok" || again != "ok" || err != nil || got != "newer" {
		t.Fatalf("restore, SET, the same restore: %q, %q, then k = %q (%v); want ok, ok, newer", first, again, got, err)
	}
	if err := c.Eval(ctx, settleScript, []string{restoredKey, revokedKey}, "t2").Err(); err != nil {
		t.Fatal(err)
	}
	if out := restore("t2"); out != "revoked" {
		t.Fatalf("a revoked token's restore: %q, want revoked", out)
	}
	if got, _ := c.Get(ctx, "k").Result(); got != "newer" {
		t.Fatalf("after a revoked restore k = %q, want newer", got)
	}
}
