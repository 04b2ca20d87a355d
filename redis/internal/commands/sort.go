package commands

import (
	"errors"
	"fmt"
	"strings"
)

// ErrPatternKeys is returned for SORT BY/GET patterns: the keys they read are
// named by the sorted values, so no client can tell which shards they are on.
var ErrPatternKeys = errors.New("SORT BY/GET patterns read keys that may be on any shard")

// applyOverrides records the decisions of ours that Redis's table does not
// make for a sharded client:
//
//   - MSETNX sets all keys or none. Redis 7.0 tips it multi_shard with
//     agg_min, but split across shards it can set some keys and not others,
//     so here it must have all its keys on one shard.
//   - PUBLISH has no key in Redis's table; its channel (argument 1) routes it,
//     as SPUBLISH's does, so that a message reaches the channel's shard,
//     where the sharded client subscribes to it.
//   - RANDOMKEY is tipped all_shards with no response policy: one shard's
//     random key, or nil from an empty shard while others hold keys, is not
//     the answer for the whole keyspace. It is Special: the client draws a
//     shard by DBSIZE (ShardedClient.RandomKey); elsewhere it is refused.
//   - SORT and SORT_RO have "unknown" key specifications (STORE may stand
//     anywhere; BY and GET name keys by pattern): keys are found by scanning
//     the arguments, and patterns that read other keys are refused.
func applyOverrides() {
	byName["msetnx"].Request = ByKeys
	byName["msetnx"].Response = Default
	byName["publish"].specs = []keySpec{{index: 1, keyStep: 1, notKey: true}}
	byName["randomkey"].Request = Special
	byName["sort"].sortLike = true
	byName["sort_ro"].sortLike = true
}

// sortKeys finds the keys of SORT key [BY pattern] [LIMIT offset count]
// [GET pattern ...] [ASC|DESC] [ALPHA] [STORE destination].
func sortKeys(c *Info, args []any, f func(pos int)) error {
	if len(args) < 2 {
		return fmt.Errorf("wrong number of arguments for %q: %d", c.Name, len(args)-1)
	}
	f(1)
	for i := 2; i < len(args); i++ {
		word, _ := Arg(args[i])
		switch strings.ToUpper(word) {
		case "LIMIT":
			i += 2
		case "BY", "GET", "STORE":
			if i+1 >= len(args) {
				return fmt.Errorf("%q: %s needs an argument", c.Name, word)
			}
			i++
			arg, _ := Arg(args[i])
			switch strings.ToUpper(word) {
			case "BY":
				if strings.Contains(arg, "*") {
					return fmt.Errorf("%q BY %q: %w", c.Name, arg, ErrPatternKeys)
				}
			case "GET":
				if arg != "#" {
					return fmt.Errorf("%q GET %q: %w", c.Name, arg, ErrPatternKeys)
				}
			default:
				if c.Name == "sort_ro" {
					return fmt.Errorf("%q does not take STORE", c.Name)
				}
				f(i)
			}
		}
	}
	return nil
}
