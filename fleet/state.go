package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Step is where a fleet stands in a resharding (see the package
// documentation for what each step sends where).
type Step string

// The steps of a resharding, in order. A fleet outside a resharding is
// Stable; a resharding goes Stable(L) -> Preparing(L->T) -> Moving(L->T)
// -> Stable(T), one epoch each.
const (
	// Stable: every key is on its owner under Shards.
	Stable Step = "stable"
	// Preparing: the driver removes stale copies from the shards that gain
	// keys, then fences the sources; processes still route by Shards.
	Preparing Step = "preparing"
	// Moving: processes route by Target; a key whose owner changed is
	// moved off its old owner before its first command, and the
	// migration moves the rest.
	Moving Step = "moving"
)

// Shard is one shard of the fleet's list as the coordination store holds
// it: what places keys (Name, Weight) and what a process connects to (Addr,
// DB). Credentials and client options are never stored: each process has
// them in code.
//
// A shard with Cluster set is a Redis Cluster: Addr is then the seed
// addresses of its nodes, "host:port" separated by commas (Seeds), and DB
// is 0. A list with a cluster shard has no other shard: a fleet moves
// into a Redis Cluster whole (a resharding whose Target is the cluster
// alone), and never out of one (see the package documentation, "The move
// into a Redis Cluster").
type Shard struct {
	Name    string `json:"name"`
	Addr    string `json:"addr"`
	DB      int    `json:"db,omitempty"`
	Weight  int    `json:"weight,omitempty"` // 0 means 1
	Cluster bool   `json:"cluster,omitempty"`
}

// Seeds returns the seed addresses of a cluster shard (Addr split at
// commas, spaces trimmed), or nil for another shard.
func (sh Shard) Seeds() []string {
	if !sh.Cluster {
		return nil
	}
	seeds := strings.Split(sh.Addr, ",")
	for i := range seeds {
		seeds[i] = strings.TrimSpace(seeds[i])
	}
	return seeds
}

// IsCluster reports whether list is one Redis Cluster shard.
func IsCluster(list []Shard) bool { return len(list) == 1 && list[0].Cluster }

// State is the fleet's one record in the coordination store: the shard
// list in force and, during a resharding, the list it moves to.
type State struct {
	// Epoch is raised by one at every step (Stable 1 is the first). A
	// process names its connections with the epoch of the state it
	// applied, and a fenced server refuses connections of older epochs.
	Epoch uint64 `json:"epoch"`
	Step  Step   `json:"step"`
	// Change identifies the resharding in progress (random, 16 hex
	// digits); empty when Stable.
	Change string `json:"change,omitempty"`
	// Shards is the list in force: the one keys are on when Stable, the
	// one they leave while Preparing or Moving.
	Shards []Shard `json:"shards"`
	// Target is the list the resharding moves to; nil when Stable.
	Target []Shard `json:"target,omitempty"`
}

// MovingEpoch is the epoch of the Moving step of st's resharding, the epoch
// its sources are fenced at: connections named with an older epoch are
// refused there. It is meaningful while Preparing or Moving.
func (st State) MovingEpoch() uint64 {
	if st.Step == Preparing {
		return st.Epoch + 1
	}
	return st.Epoch
}

// ErrInvalidState is matched (errors.Is) by the error of State.Validate.
var ErrInvalidState = errors.New("fleet: invalid state")

// Validate checks that st is a state a store may hold: a known step, a
// non-empty Shards list (and Target outside Stable) of named shards with
// an address, weights >= 0, no name twice; a Change exactly outside
// Stable; a cluster shard (Shard.Cluster) alone in its list, with seeds
// and DB 0, and Shards a cluster only when Stable (keys never leave a
// cluster). The error matches ErrInvalidState and names the bad value.
func (st State) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidState, fmt.Sprintf(format, args...))
	}
	switch st.Step {
	case Stable:
		if st.Change != "" || st.Target != nil {
			return bad("a stable state has no change (%q) and no target (%d shards)", st.Change, len(st.Target))
		}
	case Preparing, Moving:
		if st.Change == "" {
			return bad("step %q without a change ID", st.Step)
		}
		if err := checkList("target", st.Target); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("unknown step %q", st.Step)
	}
	if st.Epoch == 0 {
		return bad("epoch 0 (the first state is epoch 1)")
	}
	if err := checkList("shards", st.Shards); err != nil {
		return bad("%v", err)
	}
	if st.Step != Stable && IsCluster(st.Shards) {
		return bad("step %q from a Redis Cluster shard (%q): keys never leave a cluster", st.Step, st.Shards[0].Name)
	}
	return nil
}

func checkList(field string, shards []Shard) error {
	if len(shards) == 0 {
		return fmt.Errorf("%s: empty shard list", field)
	}
	for i, sh := range shards {
		switch {
		case strings.TrimSpace(sh.Name) == "":
			return fmt.Errorf("%s[%d]: empty name", field, i)
		case strings.TrimSpace(sh.Addr) == "":
			return fmt.Errorf("%s[%d] (%q): empty address", field, i, sh.Name)
		case sh.Weight < 0:
			return fmt.Errorf("%s[%d] (%q): weight %d < 0", field, i, sh.Name, sh.Weight)
		case sh.DB < 0:
			return fmt.Errorf("%s[%d] (%q): DB %d < 0", field, i, sh.Name, sh.DB)
		case sh.Cluster && len(shards) > 1:
			return fmt.Errorf("%s[%d] (%q): a Redis Cluster shard in a list of %d shards (a cluster is the whole list)", field, i, sh.Name, len(shards))
		case sh.Cluster && sh.DB != 0:
			return fmt.Errorf("%s[%d] (%q): a Redis Cluster shard with DB %d (a cluster has DB 0 only)", field, i, sh.Name, sh.DB)
		case sh.Cluster && slices.Contains(sh.Seeds(), ""):
			return fmt.Errorf("%s[%d] (%q): an empty seed address in %q", field, i, sh.Name, sh.Addr)
		}
		if j := slices.IndexFunc(shards[:i], func(o Shard) bool { return o.Name == sh.Name }); j >= 0 {
			return fmt.Errorf("%s[%d] and [%d]: duplicate name %q", field, j, i, sh.Name)
		}
		if j := slices.IndexFunc(shards[:i], func(o Shard) bool { return o.Addr == sh.Addr && o.DB == sh.DB }); j >= 0 {
			return fmt.Errorf("%s[%d] (%q) and [%d] (%q): one server and DB, %s DB %d", field, j, shards[j].Name, i, sh.Name, sh.Addr, sh.DB)
		}
	}
	return nil
}

// next returns the state after st for a resharding to target (from
// Stable), or the next step of the one in progress; change is the new
// resharding's ID (used from Stable only).
func (st State) next(target []Shard, change string) State {
	n := State{Epoch: st.Epoch + 1, Shards: st.Shards}
	switch st.Step {
	case Stable:
		n.Step, n.Change, n.Target = Preparing, change, slices.Clone(target)
	case Preparing:
		n.Step, n.Change, n.Target = Moving, st.Change, st.Target
	case Moving:
		n.Step, n.Shards = Stable, st.Target
	}
	return n
}
