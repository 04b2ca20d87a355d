package commands

import (
	"errors"
	"fmt"
	"strings"
)

// ErrPatternKeys is returned for SORT BY/GET patterns: the keys they read are
// named by the sorted values, so no client can tell which shards they are on.
var ErrPatternKeys = errors.New("SORT BY/GET patterns read keys that may be on any shard")

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
