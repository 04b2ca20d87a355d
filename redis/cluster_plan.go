package redis

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardedcache/shardedcache/ring"
)

// ClusterPlan is what a move into a Redis Cluster would do (PlanClusterMove).
type ClusterPlan struct {
	// Nodes are the cluster's masters, by address, with the slots each
	// serves and the scanned keys that would land there.
	Nodes []ClusterNodePlan
	// Scanned is the number of keys scanned on the shards.
	Scanned int64
	// Groups are the key groups that would be split: keys that share a
	// Jedis key tag (ring.KeyTag), so one shard today and one multi-key
	// command possibly, and whose Redis Cluster hash slots differ (Slot):
	// a command using them together fails with a *CrossSlotError after
	// the move. At most 100, in tag order.
	Groups []KeyGroup
	// GroupsSplit counts every such group found.
	GroupsSplit int
}

// ClusterNodePlan is one master of a ClusterPlan.
type ClusterNodePlan struct {
	Addr  string
	Slots int      // the number of hash slots it serves, of 16384
	Keys  int64    // the scanned keys whose slot it serves
	Range []string // its slot ranges, as "0-5460"
	// Existing is the number of keys the master holds now (DBSIZE): all of
	// them are deleted by BeginClusterMove, which takes any key on the
	// cluster for a stale copy (see BeginClusterMove).
	Existing int64
}

// KeyGroup is keys with one Jedis key tag that Redis Cluster puts in
// several hash slots.
type KeyGroup struct {
	Tag   string
	Keys  []string // up to 5 of them, one per slot first
	Slots []int    // their slots, ascending
}

// String renders the plan: a line per node, then the split key groups.
func (p *ClusterPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d keys scanned; the cluster's masters:\n", p.Scanned)
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "  %-21s %5d slots (%s)  %d keys (%.1f%%)", n.Addr, n.Slots, strings.Join(n.Range, ","),
			n.Keys, 100*float64(n.Keys)/float64(max(p.Scanned, 1)))
		if n.Existing > 0 {
			fmt.Fprintf(&b, "; holds %d keys now, which BeginClusterMove deletes", n.Existing)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d key group(s) with one Jedis key tag would span several hash slots", p.GroupsSplit)
	for _, g := range p.Groups {
		fmt.Fprintf(&b, "\n  tag %q: %d slots, keys %q ...", g.Tag, len(g.Slots), g.Keys)
	}
	return b.String()
}

// PlanClusterMove reads the slot layout of the cluster opt names (CLUSTER
// SLOTS) and scans up to sample keys of every shard (0: every key; SCAN,
// COUNT 1000) to report, before BeginClusterMove, how the keys would spread
// over the cluster's masters and which key groups would be split across
// hash slots (see ClusterPlan), and how many keys each master holds now,
// which BeginClusterMove would delete. It creates and closes its own
// cluster client, and writes nothing. It returns ErrReshardingWindow inside a
// window, the cluster's error (unreachable, not a cluster) and a shard's
// *shardedclient.ShardError.
func (c *ShardedClient) PlanClusterMove(ctx context.Context, opt *goredis.ClusterOptions, sample int64) (*ClusterPlan, error) {
	o := *opt
	cc := goredis.NewClusterClient(&o)
	defer cc.Close()
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("shardedcache: reading the cluster's slots: %w", err)
	}
	var owner [16384]int // slot -> index in p.Nodes
	p := &ClusterPlan{}
	for _, s := range slots {
		addr := s.Nodes[0].Addr
		i := slices.IndexFunc(p.Nodes, func(n ClusterNodePlan) bool { return n.Addr == addr })
		if i < 0 {
			i = len(p.Nodes)
			p.Nodes = append(p.Nodes, ClusterNodePlan{Addr: addr})
		}
		p.Nodes[i].Slots += s.End - s.Start + 1
		p.Nodes[i].Range = append(p.Nodes[i].Range, fmt.Sprintf("%d-%d", s.Start, s.End))
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = i
		}
	}
	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
		n, err := master.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("master %s: DBSIZE: %w", master.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if i := slices.IndexFunc(p.Nodes, func(n ClusterNodePlan) bool { return n.Addr == master.Options().Addr }); i >= 0 {
			p.Nodes[i].Existing = n
		} else if n > 0 { // a master that serves no slot
			p.Nodes = append(p.Nodes, ClusterNodePlan{Addr: master.Options().Addr, Existing: n})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shardedcache: reading the cluster's keys: %w", err)
	}
	groups := map[string]map[int]string{} // tag -> slot -> a key
	v := c.shards.Pin()
	defer v.Unpin()
	if v.Moving() {
		return nil, ErrReshardingWindow
	}
	for i := range v.Len() {
		var n int64
		err := eachServer(ctx, v.Client(i), func(ctx context.Context, client *goredis.Client) error {
			for cursor, first := uint64(0), true; first || cursor != 0; first = false {
				keys, next, err := client.Scan(ctx, cursor, "", 1000).Result()
				if err != nil {
					return err
				}
				for _, k := range keys {
					slot := Slot(k)
					p.Nodes[owner[slot]].Keys++
					if tag, ok := ring.KeyTag(k); ok {
						if groups[tag] == nil {
							groups[tag] = map[int]string{}
						}
						groups[tag][slot] = cmp.Or(groups[tag][slot], k)
					}
				}
				if n += int64(len(keys)); sample > 0 && n >= sample {
					break
				}
				cursor = next
			}
			return nil
		})
		p.Scanned += n
		if err != nil {
			return nil, v.Err(i, fmt.Errorf("PlanClusterMove: SCAN: %w", err))
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(groups)) {
		if len(groups[tag]) < 2 {
			continue
		}
		if p.GroupsSplit++; len(p.Groups) < 100 {
			g := KeyGroup{Tag: tag, Slots: slices.Sorted(maps.Keys(groups[tag]))}
			for _, s := range g.Slots[:min(5, len(g.Slots))] {
				g.Keys = append(g.Keys, groups[tag][s])
			}
			p.Groups = append(p.Groups, g)
		}
	}
	return p, nil
}
