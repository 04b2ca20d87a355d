package shardedclient

import (
	"fmt"
	"slices"
	"testing"
)

// Groups carved from one array do not alias: appending to one group's Keys
// or Positions changes no other group.
func TestGroupKeysAppendDoesNotAlias(t *testing.T) {
	s, _ := newTest(t, nil)
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	v := s.Acquire()
	defer v.Release()
	groups := v.GroupKeys(keys)
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3", len(groups))
	}
	before := make([][]string, len(groups))
	beforePos := make([][]int, len(groups))
	for i, g := range groups {
		before[i], beforePos[i] = slices.Clone(g.Keys), slices.Clone(g.Positions)
	}
	for i := range groups {
		groups[i].Keys = append(groups[i].Keys, "extra")
		groups[i].Positions = append(groups[i].Positions, -1)
	}
	for i, g := range groups {
		if !slices.Equal(g.Keys[:len(g.Keys)-1], before[i]) || !slices.Equal(g.Positions[:len(g.Positions)-1], beforePos[i]) {
			t.Errorf("group %d changed by an append to another: %v %v, was %v %v", i, g.Keys, g.Positions, before[i], beforePos[i])
		}
	}
}
