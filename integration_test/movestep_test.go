package integration_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// moveStep names the step of a key move that cmd is, as the client sends
// it (package fleet's protocol, one script per step): "dump" (the mark
// script: it marks the keys on their old owner and reads them), "restore",
// "del" (the finish script: it deletes them from their old owner), "abort"
// (the same script taking marks back), "settle"; any other command is its
// own name. keys are the keys it moves, the protocol's own left out (for
// another command, its first argument after the name, if any).
func moveStep(cmd goredis.Cmder) (step string, keys []string) {
	args := cmd.Args()
	if cmd.Name() != "eval" || len(args) < 3 {
		if len(args) > 1 {
			keys = []string{fmt.Sprint(args[1])}
		}
		return cmd.Name(), keys
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[2]))
	for _, k := range args[3:min(3+n, len(args))] {
		if k := fmt.Sprint(k); !strings.HasPrefix(k, "__shardedcache:") { // not the restore's token records
			keys = append(keys, k)
		}
	}
	switch script := fmt.Sprint(args[1]); {
	case strings.Contains(script, "'DUMP'"):
		return "dump", keys
	case strings.Contains(script, "'RESTORE'"):
		return "restore", keys
	case strings.Contains(script, "'abort'"):
		if fmt.Sprint(args[len(args)-1]) == "abort" {
			return "abort", keys
		}
		return "del", keys
	case strings.Contains(script, "return 'restored'"):
		return "settle", keys
	}
	return "eval", keys
}

// isStep reports whether cmd is the move step step (see moveStep).
func isStep(cmd goredis.Cmder, step string) bool {
	s, _ := moveStep(cmd)
	return s == step
}

// internalKeys matches the resharding protocol's own keys on a server (its
// fence, move marks and revoked tokens), which a server's content checks
// leave out.
const internalKeys = "__shardedcache:*"

// userDBSize is DBSIZE of server d without the protocol's keys.
func userDBSize(d *goredis.Client) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx)
	n, err := d.DBSize(ctx).Result()
	if err == nil {
		var internal []string
		internal, err = d.Keys(ctx, internalKeys).Result()
		n -= int64(len(internal))
	}
	cmd.SetVal(n)
	cmd.SetErr(err)
	return cmd
}

// userKeys is KEYS * on server d without the protocol's keys.
func userKeys(d *goredis.Client) *goredis.StringSliceCmd {
	cmd := goredis.NewStringSliceCmd(ctx)
	keys, err := d.Keys(ctx, "*").Result()
	cmd.SetVal(slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "__shardedcache:") }))
	cmd.SetErr(err)
	return cmd
}
