package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/ring"
)

func locateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "locate LIST KEY...",
		Short: "The shard that owns each key, and the key tag it is placed by",
		Long: `locate prints, for each key, the shard that owns it under the list's ring
and its key tag: the part of the key that is hashed when the preset has key
tags (Jedis key tags, twemproxy's hash_tag, go-redis Ring's Redis Cluster
tags), "-" when the whole key is. For a redis list it also prints the key's
Redis Cluster hash slot, which to-cluster places it by.`,
		Args: minArgs("LIST", "KEY"),
		RunE: func(c *cobra.Command, args []string) error {
			return withFleet(args[0], func(f *fleet) error {
				tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 0, 2, ' ', 0)
				head := "KEY\tSHARD\tTAG\t"
				if f.rdb != nil {
					head += "SLOT\t"
				}
				fmt.Fprintln(tw, head)
				for _, k := range args[1:] {
					tag, ok := keyTag(f.ring.Preset(), k)
					if !ok {
						tag = "-"
					}
					fmt.Fprintf(tw, "%q\t%v\t%s\t", k, f.shards[f.ring.Locate(k)], tag)
					if f.rdb != nil {
						fmt.Fprintf(tw, "%d\t", shardedredis.Slot(k))
					}
					fmt.Fprintln(tw)
				}
				return tw.Flush()
			})
		},
	}
}

// keyTag returns the part of key that preset p hashes when it is not the
// whole key (a quoted string), and false when the whole key is hashed.
func keyTag(p ring.Preset, key string) (string, bool) {
	var tag string
	switch p := p.(type) {
	case ring.Jedis:
		if !p.KeyTags {
			return "", false
		}
		t, ok := ring.KeyTag(key)
		if !ok {
			return "", false
		}
		tag = t
	case ring.GoRedisRing:
		tag = ring.ClusterHashTag(key)
	case ring.Twemproxy:
		// twemproxy's hash_tag: between the first opening character and
		// the next closing one, when that is not empty.
		if p.HashTag == "" {
			return "", false
		}
		i := strings.IndexByte(key, p.HashTag[0])
		if i < 0 {
			return "", false
		}
		j := strings.IndexByte(key[i+1:], p.HashTag[1])
		if j <= 0 {
			return "", false
		}
		tag = key[i+1 : i+1+j]
	default:
		return "", false
	}
	if tag == key {
		return "", false
	}
	return fmt.Sprintf("%q", tag), true
}
